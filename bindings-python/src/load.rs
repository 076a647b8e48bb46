//! The blocking driver of the engine's state machine for Python callers: `get_or_load`, the
//! decorator's sync path, and background refreshes on a Python thread.
//!
//! - Hit: serve the object. If the engine chose this caller to refresh the key
//!   (stale-while-revalidate or XFetch), the loader runs on a new daemon `threading.Thread`,
//!   so the current request never waits for it.
//! - Lead: take the origin budget (waiting with the GIL released), call the loader on this
//!   thread, complete the guard. An `Exception` is the load's result and reaches every waiter;
//!   any other `BaseException` (KeyboardInterrupt, SystemExit) is about this thread, not the
//!   load: the guard is abandoned (a waiter takes the load over) and the exception re-raised.
//! - Wait: block with the GIL released until the leader's answer, a fail-safe value, a
//!   timeout, or a hand-over (then look up again).

use std::time::Duration;

use herdless::{Error, LoadError, LoadGuard, Lookup, Waited};
use parking_lot::Mutex;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::block::block_on;
use crate::errors::{PyLoadError, map_error};
use crate::value::{PyValue, from_loader, to_caller};

/// What to call to load a value.
pub(crate) enum Loader {
    /// `loader()`.
    Call0(Py<PyAny>),
    /// `func(*args, **kwargs)` (the decorator: no closure is allocated per call).
    Call(Py<PyAny>, Py<PyTuple>, Option<Py<PyDict>>),
}

impl Loader {
    pub(crate) fn call<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Loader::Call0(f) => f.bind(py).call0(),
            Loader::Call(f, args, kwargs) => f
                .bind(py)
                .call(args.bind(py), kwargs.as_ref().map(|k| k.bind(py))),
        }
    }
}

/// A finished load's answer for this caller, as a Python object or exception.
pub(crate) fn settle(py: Python<'_>, r: Result<Option<PyValue>, Error>) -> PyResult<Py<PyAny>> {
    match r {
        Ok(v) => to_caller(py, v),
        Err(e) => Err(map_error(py, e)),
    }
}

/// The value of `key`, loading it with `loader` when needed; see the module docs.
///
/// `loader` makes the loader only when one is needed (a lead or a refresh), so a hit
/// allocates nothing for it.
pub(crate) fn get_or_load(
    cache: &herdless::Cache<PyValue>,
    py: Python<'_>,
    key: &str,
    loader: impl FnOnce() -> Loader,
    ttl: Option<Duration>,
) -> PyResult<Py<PyAny>> {
    let mut loader = Some(loader);
    loop {
        match cache.lookup(key).map_err(|e| map_error(py, e))? {
            Lookup::Hit(hit) => {
                if let (Some(guard), Some(loader)) = (hit.refresh, loader.take()) {
                    spawn_refresh(py, guard, loader(), ttl);
                }
                return to_caller(py, hit.value);
            }
            Lookup::Wait(mut waiter) => match block_on(py, &mut waiter)? {
                Ok(Waited::Loaded(v)) => return to_caller(py, v),
                Ok(Waited::Stale(v)) => return to_caller(py, Some(v)),
                Ok(Waited::Retry) => continue,
                Err(e) => return Err(map_error(py, e)),
            },
            Lookup::Lead(mut guard) => {
                let loader = loader.take().expect("a caller leads at most once")();
                if let Some(ttl) = ttl {
                    guard.set_ttl(ttl);
                }
                if !guard.try_begin() {
                    // A KeyboardInterrupt here drops the guard: the load is handed over.
                    let began = {
                        let mut begin = guard.begin();
                        block_on(py, &mut begin)?
                    };
                    if let Err(e) = began {
                        return settle(py, guard.fail(e));
                    }
                }
                return run(py, guard, &loader);
            }
        }
    }
}

/// Calls the loader for a begun guard and completes it.
fn run(py: Python<'_>, guard: LoadGuard<PyValue>, loader: &Loader) -> PyResult<Py<PyAny>> {
    match loader.call(py) {
        Ok(v) => {
            let v = from_loader(v)?;
            settle(py, guard.complete(Ok(v)))
        }
        Err(err) if err.is_instance_of::<PyException>(py) => {
            let err = LoadError::new(PyLoadError::new(py, err));
            settle(py, guard.complete(Err(err)))
        }
        Err(err) => {
            guard.abandon();
            Err(err)
        }
    }
}

/// A refresh handed to a background thread: the thread's `target`.
#[pyclass(frozen, module = "herdless._native", name = "_Refresh")]
pub(crate) struct Refresh {
    job: Mutex<Option<(LoadGuard<PyValue>, Loader)>>,
}

#[pymethods]
impl Refresh {
    /// Runs the load; a failure is logged (there is no caller to raise it to) and counted.
    fn __call__(&self, py: Python<'_>) -> PyResult<()> {
        let Some((guard, loader)) = self.job.lock().take() else {
            return Ok(());
        };
        let key = guard.key().to_owned();
        if let Err(err) = run(py, guard, &loader) {
            if !err.is_instance_of::<PyException>(py) {
                return Err(err);
            }
            log_refresh_failure(py, &key, err)?;
        }
        Ok(())
    }
}

fn log_refresh_failure(py: Python<'_>, key: &str, err: PyErr) -> PyResult<()> {
    let kwargs = PyDict::new(py);
    kwargs.set_item("exc_info", err.into_value(py))?;
    py.import("logging")?
        .call_method1("getLogger", ("herdless",))?
        .call_method(
            "warning",
            ("background refresh of %r failed", key),
            Some(&kwargs),
        )?;
    Ok(())
}

/// Runs a refresh on a new daemon thread, if the origin budget has room now (a busy origin
/// skips refreshes rather than queueing them; the guard is then handed back).
pub(crate) fn spawn_refresh(
    py: Python<'_>,
    mut guard: LoadGuard<PyValue>,
    loader: Loader,
    ttl: Option<Duration>,
) {
    if let Some(ttl) = ttl {
        guard.set_ttl(ttl);
    }
    if !guard.try_begin() {
        return;
    }
    let start = || -> PyResult<()> {
        let job = Py::new(
            py,
            Refresh {
                job: Mutex::new(Some((guard, loader))),
            },
        )?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("target", job)?;
        kwargs.set_item("name", "herdless-refresh")?;
        kwargs.set_item("daemon", true)?;
        py.import("threading")?
            .getattr("Thread")?
            .call((), Some(&kwargs))?
            .call_method0("start")?;
        Ok(())
    };
    // No thread (e.g. at interpreter shutdown): the job and its guard are dropped, which
    // hands the refresh over; this caller is still served its hit.
    let _ = start();
}
