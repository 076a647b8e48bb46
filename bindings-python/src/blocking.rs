//! The blocking driver of the fleet engine for Python callers: `get_or_load`, the
//! decorator's sync path, and background refreshes on a Python thread.
//!
//! It only does what the engine's steps say, in Python's way: the loader runs on the
//! calling thread (an `Exception` is the load's result and reaches every waiter; any other
//! `BaseException` is about this thread, not the load: the load is handed over and the
//! exception re-raised); waits block with the GIL released ([`block_on`]); a refresh gets a
//! daemon `threading.Thread`.

use std::time::Duration;

use herdless::{Error, LoadError, Lookup, Waited};
use herdless_redis::two_tier::{Step, TwoTier};
use parking_lot::Mutex;
use pyo3::exceptions::{PyException, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::block::block_on;
use crate::codec::{Codec, PyHost};
use crate::context::{LoadContext, takes_context, to_loaded};
use crate::errors::{PyLoadError, map_error};
use crate::loader::Loader;
use crate::observe::Observer;
use crate::shutdown::Busy;
use crate::value::{Held, PyValue, to_caller};

/// What the binding holds of a cache: the fleet engine over its L1, and the codec of its
/// shared tier (JSON when there is none: it is then never used).
#[derive(Clone)]
pub(crate) struct Handle {
    pub(crate) tt: TwoTier<PyValue>,
    pub(crate) codec: std::sync::Arc<Codec>,
    /// Sees each loader call (spans), when set.
    pub(crate) observer: Observer,
}

impl Handle {
    /// Removes `key` here and, with a shared tier, in the whole fleet.
    pub(crate) fn invalidate(&self, py: Python<'_>, key: &str) -> PyResult<bool> {
        let mut pending = self.tt.invalidate(key).map_err(|e| map_error(py, e))?;
        block_on(py, &mut pending)?.map_err(|e| map_error(py, e))
    }
}

/// `loader` ready to call: a `loader(ctx)` gets its context (made by `context`) bound as
/// its argument, before any observer wraps it; the context is returned to read the answer.
pub(crate) fn with_context(
    py: Python<'_>,
    loader: Loader,
    context: impl FnOnce() -> herdless::LoadContext<PyValue>,
) -> PyResult<(Loader, Option<Py<LoadContext>>)> {
    match loader {
        Loader::Call0(f) if takes_context(f.bind(py))? => {
            let ctx = Py::new(py, LoadContext::new(context()))?;
            let args = PyTuple::new(py, [ctx.clone_ref(py).into_any()])?.unbind();
            Ok((Loader::Call(f, args, None), Some(ctx)))
        }
        loader => Ok((loader, None)),
    }
}

/// A finished load's answer for this caller, as a Python object or exception.
pub(crate) fn answer(py: Python<'_>, r: Result<Option<PyValue>, Error>) -> PyResult<Py<PyAny>> {
    match r {
        Ok(v) => to_caller(py, v),
        Err(e) => Err(map_error(py, e)),
    }
}

/// The value of `key`, loading it when needed; see the module docs.
///
/// `loader` makes the loader only when one is needed (a lead or a refresh), so a hit
/// allocates nothing for it.
pub(crate) fn get_or_load(
    handle: &Handle,
    py: Python<'_>,
    key: &str,
    loader: impl FnOnce() -> Loader,
    ttl: Option<Duration>,
) -> PyResult<Py<PyAny>> {
    let step = handle.tt.l1().lookup(key);
    get_or_load_from(handle, py, key, step, loader, ttl)
}

/// [`get_or_load`] from the first lookup's answer, `step`.
pub(crate) fn get_or_load_from(
    handle: &Handle,
    py: Python<'_>,
    key: &str,
    mut step: Result<Lookup<Held>, Error>,
    loader: impl FnOnce() -> Loader,
    ttl: Option<Duration>,
) -> PyResult<Py<PyAny>> {
    let l1 = handle.tt.l1();
    loop {
        match step.map_err(|e| map_error(py, e))? {
            Lookup::Hit(hit) => {
                if let Some(guard) = hit.refresh {
                    let have = hit.value.as_ref().map_or(0, |v| v.version);
                    if let Some(first) = handle.tt.refresh(guard, have, ttl) {
                        spawn(py, handle, key, first, loader());
                    }
                }
                return to_caller(py, hit.value.map(|v| v.value));
            }
            Lookup::Wait(mut waiter) => match block_on(py, &mut waiter)? {
                Ok(Waited::Loaded(v)) => return to_caller(py, v.map(|v| v.value)),
                Ok(Waited::Stale(v)) => return to_caller(py, Some(v.value)),
                Ok(Waited::Retry(r)) => step = l1.lookup_again(key, r),
                Err(e) => return Err(map_error(py, e)),
            },
            Lookup::Lead(guard) => {
                let first = handle.tt.lead(guard, ttl);
                return drive(py, handle, key, first, loader());
            }
        }
    }
}

/// A loader call's outcome.
enum Called {
    Value(herdless::Loaded<PyValue>),
    /// An `Exception`: the load's result.
    Failed(LoadError),
    /// Any other `BaseException`: about this thread, not the load.
    Interrupted(PyErr),
}

fn call(py: Python<'_>, loader: &Loader, ctx: Option<&Py<LoadContext>>, copy: bool) -> Called {
    let answer = loader.call(py).and_then(|v| match ctx {
        Some(ctx) => ctx.get().answer(v, copy),
        None => to_loaded(v, copy),
    });
    if let Some(ctx) = ctx {
        ctx.get().finish();
    }
    match answer {
        Ok(v) => Called::Value(v),
        Err(err) if err.is_instance_of::<PyException>(py) => {
            Called::Failed(LoadError::new(PyLoadError::new(py, err)))
        }
        Err(err) => Called::Interrupted(err),
    }
}

/// Drives `step` to this caller's answer (a background refresh's answer is dropped).
pub(crate) fn drive(
    py: Python<'_>,
    handle: &Handle,
    key: &str,
    mut step: Step<PyValue>,
    loader: Loader,
) -> PyResult<Py<PyAny>> {
    // The whole drive runs Python code now and then (codecs, the loader, errors): the exit
    // waits for all of it, not only for the loader and the waits, or this thread would be
    // ended by the interpreter inside herdless frames (see `shutdown`).
    let _busy = Busy::enter()?;
    let mut loader = Some(loader);
    loop {
        step = match step {
            Step::Done(r) => return answer(py, r),
            Step::Tier(mut pending) => {
                // A KeyboardInterrupt here drops the pending step, which hands the load over.
                let reply = block_on(py, &mut pending)?;
                let host = PyHost::new(py, &handle.codec);
                let next = reply.next(&host);
                if let Some(err) = host.take_interrupt() {
                    return Err(err);
                }
                next
            }
            Step::Stale(value, refresh) => {
                if let (Some(load), Some(loader)) = (refresh, loader.take()) {
                    spawn(py, handle, key, Step::Load(load), loader);
                }
                return to_caller(py, Some(value));
            }
            Step::Interrupted(e) => {
                return Err(PyRuntimeError::new_err(format!("herdless: {e}")));
            }
            Step::Load(load) => {
                let loader = loader.take().expect("a load runs its loader once");
                let (loader, ctx) = match with_context(py, loader, || load.context()) {
                    Ok(l) => l,
                    Err(e) => {
                        load.abandon();
                        return Err(e);
                    }
                };
                let loader = match handle.observer.wrap(py, key, load.is_background(), loader) {
                    Ok(l) => l,
                    Err(e) => {
                        load.abandon();
                        return Err(e);
                    }
                };
                // The exit waits for a loader running on a daemon thread: see `shutdown`.
                let busy = match Busy::enter() {
                    Ok(b) => b,
                    Err(e) => {
                        load.abandon();
                        return Err(e);
                    }
                };
                let called = call(py, &loader, ctx.as_ref(), handle.codec.copy_values);
                drop(busy);
                let host = PyHost::new(py, &handle.codec);
                let next = match called {
                    Called::Value(v) => load.loaded_with(Ok(v), &host),
                    Called::Failed(e) => load.loaded_with(Err(e), &host),
                    Called::Interrupted(err) => {
                        load.abandon();
                        return Err(err);
                    }
                };
                if let Some(err) = host.take_interrupt() {
                    return Err(err);
                }
                next
            }
        }
    }
}

/// A refresh handed to a background thread: the thread's `target`.
#[pyclass(frozen, module = "herdless._native", name = "_Refresh")]
pub(crate) struct Refresh {
    job: Mutex<Option<RefreshJob>>,
}

/// What a refresh thread runs: the step of `key`'s load, with its loader.
type RefreshJob = (Handle, String, Step<PyValue>, Loader);

#[pymethods]
impl Refresh {
    /// Runs the load; a failure is logged (there is no caller to raise it to) and counted.
    fn __call__(&self, py: Python<'_>) -> PyResult<()> {
        let Some((handle, key, step, loader)) = self.job.lock().take() else {
            return Ok(());
        };
        if let Err(err) = drive(py, &handle, &key, step, loader) {
            // At exit nobody is left to read the warning, and logging takes locks (which
            // may release the GIL inside this call: see `shutdown`).
            if crate::shutdown::shutting_down() {
                return Ok(());
            }
            if !err.is_instance_of::<PyException>(py) {
                return Err(err);
            }
            let kwargs = PyDict::new(py);
            kwargs.set_item("exc_info", err.into_value(py))?;
            py.import("logging")?
                .call_method1("getLogger", ("herdless",))?
                .call_method(
                    "warning",
                    ("background refresh of %r failed", key),
                    Some(&kwargs),
                )?;
        }
        Ok(())
    }
}

/// Runs a background step on a new daemon thread. No thread (at interpreter shutdown): the
/// step is dropped, which hands the load over; the caller is still served.
fn spawn(py: Python<'_>, handle: &Handle, key: &str, step: Step<PyValue>, loader: Loader) {
    let job = Refresh {
        job: Mutex::new(Some((handle.clone(), key.to_owned(), step, loader))),
    };
    let _ = start_refresh_thread(py, job);
}

/// Starts a daemon thread named `herdless-refresh` that calls `job` (a callable pyclass).
pub(crate) fn start_refresh_thread<T: pyo3::PyClass + Into<pyo3::PyClassInitializer<T>>>(
    py: Python<'_>,
    job: T,
) -> PyResult<()> {
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
