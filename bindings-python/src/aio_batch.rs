//! `Cache.aget_or_load_many`: the call machine's batch ([`CallMany`]) driven on the asyncio
//! event loop, with no thread of its own and no executor.
//!
//! The machine decides everything (which keys to load, wait for or read from the shared
//! tier, loader calls of at most `max_batch` keys, the origin budget, the hard timeout of a
//! loader call, batched background refreshes). This is Python asyncio as a language of the
//! machine ([`Asyncio`], [`Loop`]): a loader is called on the loop's thread; a coroutine
//! (or any awaitable) it returns runs as a task of the loop, whose end wakes the batch; the
//! batch is polled on the loop by the bridge of [`crate::asyncio`]. Cancelling the awaiting
//! task drops the batch: its keys are handed over and its running loader task is
//! cancelled (the loader sees `CancelledError`). Background refreshes are batches of their
//! own on the loop; their failures are logged.

use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use herdless::Loaded;
use herdless_redis::call::{
    CallMany, Called, Failure, Job, KeyAnswers, Lang, Runtime as CallRuntime,
};
use herdless_redis::two_tier::Load;
use herdless_redis::{CodecError, Host, Warning};
use parking_lot::Mutex;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::asyncio::awaitable_with;
use crate::batch::{key_answers, to_values};
use crate::blocking::{Handle, log_failure};
use crate::codec::PyHost;
use crate::errors::map_error;
use crate::value::PyValue;

/// Python asyncio, as the call machine sees it (only batches: one-key calls are driven
/// step by step in herdless/_aio.py).
pub(crate) struct Asyncio;

/// No value: asyncio's one-key calls do not go through this machine.
pub(crate) enum Never {}

impl Lang<PyValue> for Asyncio {
    type Loader = Never;
    type ManyLoader = Arc<Py<PyAny>>;
    type Raise = PyErr;
    type Running = Never;
    type RunningMany = Running;
}

/// A batch loader call in progress: answered at once (a sync loader, or a loader that
/// raised when called), or a task of the loop awaiting its awaitable. Dropped unfinished,
/// the task is cancelled.
pub(crate) enum Running {
    /// The answer, taken once.
    Ready(Option<Called<KeyAnswers<PyValue>, PyErr>>),
    /// A task of the loop, and the waker its end wakes.
    Task(Py<PyAny>, Arc<Mutex<Option<Waker>>>, bool),
}

impl Drop for Running {
    fn drop(&mut self) {
        let Running::Task(task, ..) = self else {
            return;
        };
        if crate::shutdown::shutting_down() {
            return;
        }
        Python::attach(|py| {
            let task = task.bind(py);
            if !task
                .call_method0("done")
                .is_ok_and(|d| d.is_truthy().unwrap_or(true))
            {
                let _ = task.call_method0("cancel");
            }
        });
    }
}

/// Wakes a batch when its loader task ends: the task's done callback.
#[pyclass(frozen, module = "herdless._native", name = "_WakeBatch")]
pub(crate) struct WakeBatch(Arc<Mutex<Option<Waker>>>);

#[pymethods]
impl WakeBatch {
    /// The loader task is done: polls the batch again.
    fn __call__(&self, _task: Bound<'_, PyAny>) {
        if let Some(w) = self.0.lock().take() {
            w.wake();
        }
    }
}

/// What a loader's call, or its task's end, answers (a cancelled task is about this task,
/// not the load: its keys are handed over).
fn called(
    py: Python<'_>,
    r: PyResult<Bound<'_, PyAny>>,
    copy: bool,
) -> Called<KeyAnswers<PyValue>, PyErr> {
    crate::blocking::called(py, r.and_then(|found| key_answers(&found, copy)))
}

/// The event loop at work during one poll of a batch: the cache's codec, and the loop to
/// run loaders and refreshes on.
pub(crate) struct Loop<'a, 'py> {
    py: Python<'py>,
    handle: &'a Handle,
    host: PyHost<'a, 'py>,
}

impl<'a, 'py> Loop<'a, 'py> {
    fn new(py: Python<'py>, handle: &'a Handle) -> Self {
        Self {
            py,
            handle,
            host: PyHost::new(py, &handle.codec),
        }
    }
}

impl Host<PyValue> for Loop<'_, '_> {
    fn encode(&self, value: &PyValue) -> Result<Vec<u8>, CodecError> {
        self.host.encode(value)
    }
    fn decode(&self, bytes: &[u8]) -> Result<PyValue, CodecError> {
        self.host.decode(bytes)
    }
    fn warn(&self, warning: &Warning<'_>) {
        self.host.warn(warning)
    }
}

impl CallRuntime<PyValue, Asyncio> for Loop<'_, '_> {
    fn call(&self, loader: Never, _load: &Load<PyValue>) -> Never {
        match loader {}
    }

    fn poll_loader(
        &self,
        running: &mut Never,
        _cx: &mut Context<'_>,
    ) -> Poll<Called<Loaded<PyValue>, PyErr>> {
        match *running {}
    }

    fn call_many(&self, loader: &Arc<Py<PyAny>>, keys: Vec<String>) -> Running {
        let py = self.py;
        let copy = self.handle.codec.copy_values;
        let keys = match PyList::new(py, keys) {
            Ok(k) => k,
            Err(e) => return Running::Ready(Some(called(py, Err(e), copy))),
        };
        let found = match loader.bind(py).call1((keys,)) {
            Ok(f) => f,
            Err(e) => return Running::Ready(Some(called(py, Err(e), copy))),
        };
        if !found.hasattr("__await__").unwrap_or(false) {
            return Running::Ready(Some(called(py, Ok(found), copy)));
        }
        let slot = Arc::new(Mutex::new(None));
        let task = py
            .import("asyncio")
            .and_then(|a| a.call_method1("ensure_future", (found,)))
            .and_then(|task| {
                let wake = Py::new(py, WakeBatch(slot.clone()))?;
                task.call_method1("add_done_callback", (wake,))?;
                Ok(task)
            });
        match task {
            Ok(task) => Running::Task(task.unbind(), slot, copy),
            Err(e) => Running::Ready(Some(called(py, Err(e), copy))),
        }
    }

    fn poll_many_loader(
        &self,
        running: &mut Running,
        cx: &mut Context<'_>,
    ) -> Poll<Called<KeyAnswers<PyValue>, PyErr>> {
        let py = self.py;
        match running {
            Running::Ready(answer) => Poll::Ready(answer.take().expect("polled once ready")),
            Running::Task(task, slot, copy) => {
                let task = task.bind(py);
                // The waker first: a task that ends between the check and it still wakes.
                *slot.lock() = Some(cx.waker().clone());
                match task.call_method0("done").and_then(|d| d.is_truthy()) {
                    Ok(false) => Poll::Pending,
                    Ok(true) => Poll::Ready(called(py, task.call_method0("result"), *copy)),
                    Err(e) => Poll::Ready(called(py, Err(e), *copy)),
                }
            }
        }
    }

    fn spawn(&self, job: Job<PyValue, Asyncio>) {
        // No loop to run it on (it is closing): the job is dropped, its keys handed over.
        let _ = spawn(self.py, self.handle.clone(), job);
    }

    fn report(&self, key: &str, failure: Failure<PyErr>) {
        let err = match failure {
            Failure::Error(e) => map_error(self.py, e),
            Failure::Raise(e) => e,
        };
        log_failure(self.py, key, err);
    }

    fn raise(&self, interrupted: CodecError) -> PyErr {
        self.host
            .take_interrupt()
            .unwrap_or_else(|| PyRuntimeError::new_err(format!("herdless: {interrupted}")))
    }
}

/// Runs a background job (a batch's refreshes) on the running loop, awaited by nobody.
fn spawn(py: Python<'_>, handle: Handle, mut job: Job<PyValue, Asyncio>) -> PyResult<()> {
    let poll = move |py: Python<'_>, cx: &mut Context<'_>| {
        let rt = Loop::new(py, &handle);
        let r = job.poll_job(cx, &rt);
        if let Some(err) = rt.host.take_interrupt() {
            rt.report("", Failure::Raise(err));
            return Poll::Ready(());
        }
        r
    };
    awaitable_with(py, poll, |py, ()| Ok(py.None())).map(drop)
}

/// An asyncio future of the values of `keys`, in their order (see
/// `herdless.Cache.aget_or_load_many`): a list, or `BatchError`.
pub(crate) fn aget_or_load_many<'py>(
    py: Python<'py>,
    handle: &Handle,
    keys: Vec<String>,
    loader: Py<PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut call = Some(CallMany::<PyValue, Asyncio>::new(
        &handle.tt,
        &keys,
        Arc::new(loader),
    ));
    let handle = handle.clone();
    let poll = move |py: Python<'_>, cx: &mut Context<'_>| {
        let Some(many) = call.as_mut() else {
            return Poll::Ready(Err(PyRuntimeError::new_err(
                "herdless: batch polled after its end",
            )));
        };
        let rt = Loop::new(py, &handle);
        let r = many.poll_many(cx, &rt);
        if let Some(err) = rt.host.take_interrupt() {
            // The codec was interrupted: the batch is dropped (its keys handed over).
            call = None;
            return Poll::Ready(Err(err));
        }
        match r {
            Poll::Pending => Poll::Pending,
            Poll::Ready(r) => {
                call = None;
                Poll::Ready(r)
            }
        }
    };
    awaitable_with(py, poll, move |py, r| match r {
        Ok(answers) => to_values(py, &keys, answers).map(Py::into_any),
        Err(err) => Err(err),
    })
}
