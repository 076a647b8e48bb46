//! Python threads as a language of the call machine ([`herdless_redis::call`]):
//! `get_or_load`, the decorator's sync path and `get_or_load_many` are calls of the machine
//! ([`Call`], [`CallMany`]) driven on the calling thread ([`Threads`], [`Blocking`]).
//!
//! The machine decides everything; this is only Python's way of doing it: a loader is
//! called on the calling thread with the GIL (an `Exception` is the load's result and
//! reaches every waiter; any other `BaseException` is about this thread, not the load: the
//! load is handed over and the exception re-raised); waits park with the GIL released
//! ([`crate::driver::block::drive`]); background jobs (refreshes) get a daemon `threading.Thread`,
//! and their failures are logged.

use std::cell::RefCell;
use std::sync::Arc;
use std::task::{Context, Poll};

use herdless::{Error, Hit, Loaded, Lookup};
use herdless_redis::CodecError;
use herdless_redis::call::{
    Call, CallMany, CallOptions, Called, Failure, Job, KeyAnswers, Lang, Runtime,
};
use herdless_redis::two_tier::Load;
use parking_lot::Mutex;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::block::drive;
use super::{Handle, called, loaded, log_failure};
use crate::codec::PyHost;
use crate::errors::map_error;
use crate::loader::Loader;
use crate::shutdown::Busy;
use crate::value::{Held, PyValue, to_caller};

/// Python threads, as the call machine sees them: a loader answers when called.
pub(crate) struct Threads;

impl Lang<PyValue> for Threads {
    type Loader = Loader;
    type ManyLoader = Arc<Py<PyAny>>;
    type Raise = PyErr;
    type Running = Option<Called<Loaded<PyValue>, PyErr>>;
    type RunningMany = Option<Called<KeyAnswers<PyValue>, PyErr>>;
}

/// The calling thread at work during a call, with the GIL: the cache's codec, and where a
/// background job's `BaseException` waits to be re-raised by its thread.
pub(crate) struct Blocking<'a, 'py> {
    py: Python<'py>,
    handle: &'a Handle,
    host: PyHost<'a, 'py>,
    raised: RefCell<Option<PyErr>>,
}

impl<'a, 'py> Blocking<'a, 'py> {
    fn new(py: Python<'py>, handle: &'a Handle) -> Self {
        Self {
            py,
            handle,
            host: PyHost::new(py, &handle.codec),
            raised: RefCell::new(None),
        }
    }

    /// Drives `poll` to its end on this thread. A codec's interruption ends it with that
    /// exception (the caller drops what it drives, handing its load over).
    fn run<T>(&self, mut poll: impl FnMut(&mut Context<'_>, &Self) -> Poll<T>) -> PyResult<T> {
        // The whole call runs Python code now and then (codecs, the loader, errors): the
        // exit waits for all of it, or this thread would be ended by the interpreter inside
        // herdless frames (see `shutdown`). Once it exits, a hit is still answered; loads
        // and waits are refused where they start.
        let _busy = Busy::enter().ok();
        drive(self.py, |cx| {
            let r = poll(cx, self);
            match self.host.take_interrupt() {
                Some(err) => Poll::Ready(Err(err)),
                None => r.map(Ok),
            }
        })?
    }
}

host_via_field!(Blocking<'_, '_>);

impl Runtime<PyValue, Threads> for Blocking<'_, '_> {
    fn call(&self, loader: Loader, load: &Load<PyValue>) -> Option<Called<Loaded<PyValue>, PyErr>> {
        let py = self.py;
        // Not the load's fault (a context or observer that failed, the exit): hand it over.
        let (loader, ctx) = match self.handle.prepare(py, loader, load) {
            Ok(l) => l,
            Err(e) => return Some(Called::Interrupted(e)),
        };
        // The exit waits for a loader running on a daemon thread: see `shutdown`.
        let busy = match Busy::enter() {
            Ok(b) => b,
            Err(e) => return Some(Called::Interrupted(e)),
        };
        let copy = self.handle.codec.copy_values;
        let r = loader.call(py).and_then(|v| loaded(v, ctx.as_ref(), copy));
        if let Some(ctx) = &ctx {
            ctx.get().finish();
        }
        drop(busy);
        Some(called(py, r))
    }

    fn poll_loader(
        &self,
        running: &mut Option<Called<Loaded<PyValue>, PyErr>>,
        _cx: &mut Context<'_>,
    ) -> Poll<Called<Loaded<PyValue>, PyErr>> {
        Poll::Ready(
            running
                .take()
                .expect("a sync loader's answer is taken once"),
        )
    }

    fn call_many(
        &self,
        loader: &Arc<Py<PyAny>>,
        keys: Vec<String>,
    ) -> Option<Called<KeyAnswers<PyValue>, PyErr>> {
        let busy = match Busy::enter() {
            Ok(b) => b,
            Err(e) => return Some(Called::Interrupted(e)),
        };
        let r = crate::driver::batch::call(self.py, loader, keys, self.handle.codec.copy_values);
        drop(busy);
        Some(called(self.py, r))
    }

    fn poll_many_loader(
        &self,
        running: &mut Option<Called<KeyAnswers<PyValue>, PyErr>>,
        _cx: &mut Context<'_>,
    ) -> Poll<Called<KeyAnswers<PyValue>, PyErr>> {
        Poll::Ready(
            running
                .take()
                .expect("a sync loader's answer is taken once"),
        )
    }

    fn spawn(&self, job: Job<PyValue, Threads>) {
        // No thread (at interpreter shutdown): the job is dropped, which hands its load
        // over; the caller is still served.
        let job = Refresh(Mutex::new(Some((self.handle.clone(), job))));
        let _ = start_refresh_thread(self.py, job);
    }

    fn report(&self, key: &str, failure: Failure<PyErr>) {
        let err = match failure {
            Failure::Error(e) => map_error(self.py, e),
            Failure::Raise(e) => e,
        };
        if err.is_instance_of::<PyException>(self.py) {
            log_failure(self.py, key, err);
        } else {
            // About the job's thread (SystemExit...): its thread re-raises it.
            *self.raised.borrow_mut() = Some(err);
        }
    }

    fn raise(&self, interrupted: CodecError) -> PyErr {
        self.host.raise(interrupted)
    }
}

/// The value of `key`, loading it when needed; see the module docs.
///
/// `loader` makes the loader only when one is needed (not for a plain hit).
pub(crate) fn get_or_load(
    handle: &Handle,
    py: Python<'_>,
    key: &str,
    loader: impl FnOnce() -> Loader,
    options: CallOptions,
) -> PyResult<Py<PyAny>> {
    let first = handle.tt.l1().lookup(key);
    get_or_load_from(handle, py, key, first, loader, options)
}

/// [`get_or_load`] from the first lookup's answer, `first`.
pub(crate) fn get_or_load_from(
    handle: &Handle,
    py: Python<'_>,
    key: &str,
    first: Result<Lookup<Held>, Error>,
    loader: impl FnOnce() -> Loader,
    options: CallOptions,
) -> PyResult<Py<PyAny>> {
    let first = match first {
        // A plain hit makes no call.
        Ok(Lookup::Hit(Hit {
            value,
            refresh: None,
            ..
        })) => return to_caller(py, value.map(|v| v.value)),
        first => first,
    };
    let mut call = Call::<PyValue, Threads>::new(&handle.tt, key, first, loader(), options);
    match Blocking::new(py, handle).run(|cx, rt| call.poll_call(cx, rt))? {
        Ok(v) => to_caller(py, v),
        Err(Failure::Error(e)) => Err(map_error(py, e)),
        Err(Failure::Raise(err)) => Err(err),
    }
}

/// The values of `keys` in their order; see `Cache.get_or_load_many` (python/herdless).
/// Any key that failed raises one `BatchError` carrying every key's answer.
pub(crate) fn get_or_load_many(
    handle: &Handle,
    py: Python<'_>,
    keys: Vec<String>,
    loader: Py<PyAny>,
) -> PyResult<Py<PyList>> {
    let mut many = CallMany::<PyValue, Threads>::new(&handle.tt, &keys, Arc::new(loader));
    let answers = Blocking::new(py, handle).run(|cx, rt| many.poll_many(cx, rt))??;
    crate::driver::batch::to_values(py, &keys, answers)
}

/// A background job handed to a daemon thread: the thread's `target`.
#[pyclass(frozen, module = "herdless._native", name = "_Refresh")]
pub(crate) struct Refresh(Mutex<Option<(Handle, Job<PyValue, Threads>)>>);

#[pymethods]
impl Refresh {
    /// Runs the job; an `Exception` it fails with is logged (there is no caller to raise it
    /// to), any other `BaseException` ends the thread with it.
    fn __call__(&self, py: Python<'_>) -> PyResult<()> {
        let Some((handle, mut job)) = self.0.lock().take() else {
            return Ok(());
        };
        let rt = Blocking::new(py, &handle);
        match rt.run(|cx, rt| job.poll_job(cx, rt)) {
            // Refused at exit: the job is dropped, its load handed over.
            Err(_) if crate::shutdown::shutting_down() => Ok(()),
            Err(err) => Err(err),
            Ok(()) => rt.raised.take().map_or(Ok(()), Err),
        }
    }
}

/// Starts a daemon thread named `herdless-refresh` that runs `job`.
fn start_refresh_thread(py: Python<'_>, job: Refresh) -> PyResult<()> {
    let job = Py::new(py, job)?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("target", job)?;
    kwargs.set_item("name", "herdless-refresh")?;
    kwargs.set_item("daemon", true)?;
    py.import("threading")?
        .getattr("Thread")?
        .call((), Some(&kwargs))?
        .call_method0("start")?;
    Ok(())
}
