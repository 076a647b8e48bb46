//! `Cache.aget_or_load`, async decorated functions and `Cache.aget_or_load_many`: calls of
//! the call machine ([`Call`], [`CallMany`]) driven on the asyncio event loop, with no
//! thread of its own and no executor. A one-key call's first step, and the herds of
//! callers that wait for one load together, are `group`'s.
//!
//! The machine decides everything (hits and their refreshes, waits, the shared tier, the
//! soft and hard timeouts of a running loader, loader calls of at most `max_batch` keys,
//! background jobs). This is Python asyncio as a language of the machine ([`Asyncio`],
//! [`Loop`]): a loader is called on the loop's thread; a coroutine (or any awaitable) it
//! returns runs as a task of the loop, whose end wakes the call; the call is polled on the
//! loop by the bridge of [`crate::asyncio`]. Cancelling the awaiting task drops the call:
//! its load is handed over (a waiter takes it) and its loader task is cancelled (the loader
//! sees `CancelledError`), as the hard timeout cancels it. Background jobs (refreshes, a
//! load answered at its soft timeout) are calls of their own on the loop; their failures
//! are logged.

use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use herdless::Loaded;
use herdless_redis::CodecError;
use herdless_redis::call::{
    CallMany, Called, Failure, Job, KeyAnswers, Lang, Runtime as CallRuntime,
};
use herdless_redis::two_tier::Load;
use parking_lot::Mutex;
use pyo3::exceptions::PyRuntimeError;
use pyo3::exceptions::asyncio::CancelledError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyList;

use crate::asyncio::{bridge, create_future, get_running_loop};
use crate::codec::PyHost;
use crate::driver::batch::{key_answers, to_values};
use crate::driver::{Handle, called, loaded, log_failure};
use crate::errors::map_error;
use crate::loader::Loader;
use crate::value::PyValue;

/// Python asyncio, as the call machine sees it.
pub(crate) struct Asyncio;

impl Lang<PyValue> for Asyncio {
    type Loader = Loader;
    type ManyLoader = Arc<Py<PyAny>>;
    type Raise = PyErr;
    type Running = Running<Loaded<PyValue>>;
    type RunningMany = Running<KeyAnswers<PyValue>>;
}

/// Reads a loader's answer (what it returned or its task ended with, or its exception).
type Read<T> = Box<dyn for<'py> Fn(PyResult<Bound<'py, PyAny>>) -> PyResult<T> + Send>;

/// A loader call in progress: answered at once (a sync loader, or a loader that raised when
/// called), or a task of the loop awaiting its awaitable. Dropped unfinished, the task is
/// cancelled.
pub(crate) enum Running<T> {
    /// The answer, taken once.
    Ready(Option<Called<T, PyErr>>),
    /// A task of the loop, the waker its end wakes, and how its result is read.
    Task(Py<PyAny>, Arc<Mutex<Option<Waker>>>, Read<T>),
}

impl<T> Running<T> {
    /// A loader's call `r`: its answer, or a task of the loop for the awaitable it returned,
    /// made in `context` (the caller's: the task sees the caller's context variables, a
    /// request's, a span's, even when a later poll, on a callback of the loop, made it).
    fn of<'py>(
        py: Python<'py>,
        r: PyResult<Bound<'py, PyAny>>,
        context: &Bound<'py, PyAny>,
        read: Read<T>,
    ) -> Self {
        let found = match r {
            Ok(f) if f.hasattr("__await__").unwrap_or(false) => f,
            r => return Running::Ready(Some(called(py, read(r)))),
        };
        let slot = Arc::new(Mutex::new(None));
        let task = py
            .import("asyncio")
            .and_then(|a| context.call_method1("run", (a.getattr("ensure_future")?, found)))
            .and_then(|task| {
                let wake = Py::new(py, WakeCall(slot.clone()))?;
                task.call_method1("add_done_callback", (wake,))?;
                Ok(task)
            });
        match task {
            Ok(task) => Running::Task(task.unbind(), slot, read),
            Err(e) => Running::Ready(Some(called(py, read(Err(e))))),
        }
    }

    /// The call's end, once its task is done (woken by [`WakeCall`]).
    fn poll(&mut self, py: Python<'_>, cx: &mut Context<'_>) -> Poll<Called<T, PyErr>> {
        match self {
            Running::Ready(answer) => Poll::Ready(answer.take().expect("polled once ready")),
            Running::Task(task, slot, read) => {
                let task = task.bind(py);
                // The waker first: a task that ends between the check and it still wakes.
                *slot.lock() = Some(cx.waker().clone());
                match task
                    .call_method0(intern!(py, "done"))
                    .and_then(|d| d.is_truthy())
                {
                    Ok(false) => Poll::Pending,
                    Ok(true) => {
                        Poll::Ready(called(py, read(task.call_method0(intern!(py, "result")))))
                    }
                    Err(e) => Poll::Ready(called(py, Err(e))),
                }
            }
        }
    }
}

impl<T> Drop for Running<T> {
    fn drop(&mut self) {
        let Running::Task(task, ..) = self else {
            return;
        };
        // Dropped on any thread (the runtime's too): counted, and skipped at exit.
        crate::shutdown::attach(|py| {
            let task = task.bind(py);
            if !task
                .call_method0(intern!(py, "done"))
                .is_ok_and(|d| d.is_truthy().unwrap_or(true))
            {
                let _ = task.call_method0(intern!(py, "cancel"));
            }
        });
    }
}

/// Wakes a call when its loader task ends: the task's done callback.
#[pyclass(frozen, module = "herdless._native", name = "_WakeCall")]
pub(crate) struct WakeCall(Arc<Mutex<Option<Waker>>>);

#[pymethods]
impl WakeCall {
    /// The loader task is done: polls the call again.
    fn __call__(&self, task: Bound<'_, PyAny>) {
        // On the loop's thread with the GIL: the call's bridge is scheduled from here, not
        // handed to the waking thread (which would wait for this thread to let the GIL go,
        // then write to the loop's self-pipe: 0.1-0.2 ms more per load, measured).
        let _attached = crate::wake::Attached::enter(task.py());
        // Taken out first: the wake-up runs the loop's (Python) `call_soon`, no lock held.
        let waker = self.0.lock().take();
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// The event loop at work during one poll of a call: the cache's codec, and the loop to
/// run loaders and background jobs on, in the caller's `contextvars.Context`.
pub(crate) struct Loop<'a, 'py> {
    py: Python<'py>,
    handle: &'a Handle,
    host: PyHost<'a, 'py>,
    context: &'a Py<PyAny>,
}

impl<'a, 'py> Loop<'a, 'py> {
    /// A poll's view of the loop, for a call of `handle` made in the caller's `context`.
    pub(super) fn new(py: Python<'py>, handle: &'a Handle, context: &'a Py<PyAny>) -> Self {
        Self {
            py,
            handle,
            host: PyHost::new(py, &handle.codec),
            context,
        }
    }
}

impl Loop<'_, '_> {
    /// The exception a codec interrupted the poll with, if it did.
    pub(super) fn take_interrupt(&self) -> Option<PyErr> {
        self.host.take_interrupt()
    }
}

host_via_field!(Loop<'_, '_>);

impl CallRuntime<PyValue, Asyncio> for Loop<'_, '_> {
    fn call(&self, loader: Loader, load: &Load<PyValue>) -> Running<Loaded<PyValue>> {
        let py = self.py;
        // Not the load's fault (a context or observer that failed): hand it over.
        let (loader, ctx) = match self.handle.prepare(py, loader, load) {
            Ok(l) => l,
            Err(e) => return Running::Ready(Some(Called::Interrupted(e))),
        };
        let copy = self.handle.codec.copy_values;
        let read: Read<Loaded<PyValue>> = Box::new(move |r| {
            let answer = r.and_then(|v| loaded(v, ctx.as_ref(), copy));
            if let Some(ctx) = &ctx {
                ctx.get().finish();
            }
            answer
        });
        let context = self.context.bind(py);
        Running::of(py, loader.call_in(py, context), context, read)
    }

    fn poll_loader(
        &self,
        running: &mut Running<Loaded<PyValue>>,
        cx: &mut Context<'_>,
    ) -> Poll<Called<Loaded<PyValue>, PyErr>> {
        running.poll(self.py, cx)
    }

    fn call_many(
        &self,
        loader: &Arc<Py<PyAny>>,
        keys: Vec<String>,
    ) -> Running<KeyAnswers<PyValue>> {
        let py = self.py;
        let copy = self.handle.codec.copy_values;
        let read: Read<KeyAnswers<PyValue>> =
            Box::new(move |r| r.and_then(|found| key_answers(&found, copy)));
        let context = self.context.bind(py);
        let r = PyList::new(py, keys)
            .and_then(|keys| context.call_method1("run", (loader.bind(py), keys)));
        Running::of(py, r, context, read)
    }

    fn poll_many_loader(
        &self,
        running: &mut Running<KeyAnswers<PyValue>>,
        cx: &mut Context<'_>,
    ) -> Poll<Called<KeyAnswers<PyValue>, PyErr>> {
        running.poll(self.py, cx)
    }

    fn spawn(&self, job: Job<PyValue, Asyncio>) {
        // No loop to run it on (it is closing): the job is dropped, its load handed over.
        let _ = self
            .context
            .bind(self.py)
            .call_method0("copy")
            .and_then(|context| spawn(self.py, self.handle, context.unbind(), job));
    }

    fn report(&self, key: &str, failure: Failure<PyErr>) {
        let err = match failure {
            Failure::Error(e) => map_error(self.py, e),
            Failure::Raise(e) => e,
        };
        // A job whose loader task was cancelled (its loop is closing) did not fail.
        if !err.is_instance_of::<CancelledError>(self.py) {
            log_failure(self.py, key, err);
        }
    }

    fn raise(&self, interrupted: CodecError) -> PyErr {
        self.host.raise(interrupted)
    }
}

/// An asyncio future of what `what` (a call, a batch, a job) ends with: `poll` drives it on
/// the running loop with a [`Loop`] for `handle`, `deliver` makes the answer a Python
/// object (see [`drive`]).
fn on_loop<'py, S, T>(
    py: Python<'py>,
    handle: &Handle,
    context: Py<PyAny>,
    what: S,
    poll: impl FnMut(&mut S, &mut Context<'_>, &Loop<'_, '_>) -> Poll<T> + Send + 'static,
    deliver: impl FnOnce(Python<'_>, PyResult<T>) -> PyResult<Py<PyAny>> + Send + 'static,
) -> PyResult<Bound<'py, PyAny>>
where
    S: Send + 'static,
    T: Send + 'static,
{
    let event_loop = get_running_loop(py)?;
    let future = create_future(&event_loop)?;
    drive(&event_loop, &future, handle, context, what, poll, deliver)?;
    Ok(future)
}

/// Makes `future` (of `event_loop`, running in this thread) end with what `what` ends with:
/// `poll` drives it with a [`Loop`] for `handle` and the caller's `context`, `deliver`
/// makes the answer a Python object. `what` is dropped once it ended, or once a codec
/// interrupted it (the future then ends with that exception; dropped, it hands its load
/// over).
pub(super) fn drive<'py, S, T>(
    event_loop: &Bound<'py, PyAny>,
    future: &Bound<'py, PyAny>,
    handle: &Handle,
    context: Py<PyAny>,
    what: S,
    mut poll: impl FnMut(&mut S, &mut Context<'_>, &Loop<'_, '_>) -> Poll<T> + Send + 'static,
    deliver: impl FnOnce(Python<'_>, PyResult<T>) -> PyResult<Py<PyAny>> + Send + 'static,
) -> PyResult<()>
where
    S: Send + 'static,
    T: Send + 'static,
{
    let mut what = Some(what);
    let handle = handle.clone();
    let poll = move |py: Python<'_>, cx: &mut Context<'_>| {
        let Some(w) = what.as_mut() else {
            return Poll::Ready(Err(PyRuntimeError::new_err(
                "herdless: call polled after its end",
            )));
        };
        let rt = Loop::new(py, &handle, &context);
        let r = poll(w, cx, &rt);
        if let Some(err) = rt.take_interrupt() {
            what = None;
            return Poll::Ready(Err(err));
        }
        let v = std::task::ready!(r);
        what = None;
        Poll::Ready(Ok(v))
    };
    bridge(event_loop, future, poll, deliver)
}

/// Runs a background job on the running loop, awaited by nobody, its loaders called in
/// `context`.
fn spawn(
    py: Python<'_>,
    handle: &Handle,
    context: Py<PyAny>,
    job: Job<PyValue, Asyncio>,
) -> PyResult<()> {
    let poll = |job: &mut Job<PyValue, Asyncio>, cx: &mut Context<'_>, rt: &Loop<'_, '_>| {
        job.poll_job(cx, rt)
    };
    let deliver = |py: Python<'_>, r: PyResult<()>| {
        // Its own failures are reported by the job; this is a codec's interruption.
        if let Err(err) = r {
            log_failure(py, "", err);
        }
        Ok(py.None())
    };
    on_loop(py, handle, context, job, poll, deliver).map(drop)
}

/// `contextvars.copy_context`.
static COPY_CONTEXT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// A copy of the caller's `contextvars.Context`, to call its loaders in.
pub(super) fn caller_context(py: Python<'_>) -> PyResult<Py<PyAny>> {
    let copy = COPY_CONTEXT.get_or_try_init(py, || {
        py.import("contextvars")?
            .getattr("copy_context")
            .map(Bound::unbind)
    })?;
    Ok(copy.bind(py).call0()?.unbind())
}

/// An asyncio future of the values of `keys`, in their order (see
/// `herdless.Cache.aget_or_load_many`): a list, or `BatchError`.
pub(crate) fn aget_or_load_many<'py>(
    py: Python<'py>,
    handle: &Handle,
    keys: Vec<String>,
    loader: Py<PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let many = CallMany::<PyValue, Asyncio>::new(&handle.tt, &keys, Arc::new(loader));
    let poll = |many: &mut CallMany<PyValue, Asyncio>, cx: &mut Context<'_>, rt: &Loop<'_, '_>| {
        many.poll_many(cx, rt)
    };
    on_loop(py, handle, caller_context(py)?, many, poll, move |py, r| {
        to_values(py, &keys, r??).map(Py::into_any)
    })
}
