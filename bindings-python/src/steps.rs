//! The state machine's steps as Python objects, for the driver written in Python: asyncio's
//! `aget_or_load` (herdless/_aio.py) looks a key up with `Cache._lookup` and gets a hit, a
//! [`Lead`] (run the coroutine, then complete it) or a [`Wait`] (await the leader's answer,
//! bridged to asyncio through a tokio runtime, so the event loop never blocks).

use std::sync::Arc;
use std::time::Duration;

use herdless::{Error, LoadError, LoadGuard, Waited, Waiter};
use parking_lot::Mutex;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::block::block_on;
use crate::errors::{PyLoadError, map_error};
use crate::load::settle;
use crate::options::duration;
use crate::value::{PyValue, from_loader, to_caller};

/// Outcome kinds of a wait, as `(kind, value)` tuples.
const VALUE: u8 = 0;
const RETRY: u8 = 1;

/// A waiter's answer, converted to Python (with the GIL) only when it is delivered.
struct WaitAnswer(Result<Waited<PyValue>, Error>);

impl<'py> IntoPyObject<'py> for WaitAnswer {
    type Target = PyTuple;
    type Output = Bound<'py, PyTuple>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let (kind, value) = match self.0 {
            Ok(Waited::Loaded(v)) => (VALUE, to_caller(py, v)?),
            Ok(Waited::Stale(v)) => (VALUE, to_caller(py, Some(v))?),
            Ok(Waited::Retry) => (RETRY, py.None()),
            Err(e) => return Err(map_error(py, e)),
        };
        (kind, value).into_pyobject(py)
    }
}

/// Another caller is loading the key: wait for its answer.
#[pyclass(frozen, module = "herdless._native", name = "_Wait")]
pub(crate) struct Wait {
    waiter: Mutex<Option<Waiter<PyValue>>>,
}

impl Wait {
    pub(crate) fn new(waiter: Waiter<PyValue>) -> Self {
        Self {
            waiter: Mutex::new(Some(waiter)),
        }
    }

    fn take(&self) -> PyResult<Waiter<PyValue>> {
        self.waiter
            .lock()
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("this wait was already used"))
    }
}

#[pymethods]
impl Wait {
    /// Blocks (GIL released) until the wait ends: `(0, value)` or `(1, None)` to look up
    /// again; raises the load's error.
    fn wait<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let mut waiter = self.take()?;
        let answer = block_on(py, &mut waiter)?;
        WaitAnswer(answer).into_pyobject(py)
    }

    /// An asyncio awaitable of the same answer. Cancelling it removes only this waiter.
    fn future<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let waiter = self.take()?;
        pyo3_async_runtimes::tokio::future_into_py(py, async move { Ok(WaitAnswer(waiter.await)) })
    }
}

/// This caller loads the key: run the loader, then `complete`, `fail`, `timeout` or
/// `abandon`. Dropped unfinished, the load is handed to a waiter.
#[pyclass(frozen, module = "herdless._native", name = "_Lead")]
pub(crate) struct Lead {
    guard: Arc<Mutex<Option<LoadGuard<PyValue>>>>,
    cache: herdless::Cache<PyValue>,
    hard_timeout: Option<Duration>,
}

impl Lead {
    pub(crate) fn new(
        guard: LoadGuard<PyValue>,
        cache: herdless::Cache<PyValue>,
        hard_timeout: Option<Duration>,
    ) -> Self {
        Self {
            guard: Arc::new(Mutex::new(Some(guard))),
            cache,
            hard_timeout,
        }
    }

    fn take(&self) -> PyResult<LoadGuard<PyValue>> {
        self.guard
            .lock()
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("this load was already finished"))
    }

    fn remaining(&self, deadline: Option<Duration>) -> Option<f64> {
        let now = self.cache.clock().now();
        deadline.map(|d| d.as_secs_f64() - now.as_secs_f64())
    }
}

/// The answer of `Lead.begin()`: began, or ended (fail-safe value or error) while waiting.
struct BeginAnswer(Option<Result<Option<PyValue>, Error>>);

impl<'py> IntoPyObject<'py> for BeginAnswer {
    type Target = PyTuple;
    type Output = Bound<'py, PyTuple>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        match self.0 {
            None => (true, py.None()).into_pyobject(py),
            Some(r) => (false, settle(py, r)?).into_pyobject(py),
        }
    }
}

#[pymethods]
impl Lead {
    /// The key being loaded.
    #[getter]
    fn key(&self) -> PyResult<String> {
        let g = self.guard.lock();
        let g = g
            .as_ref()
            .ok_or_else(|| PyRuntimeError::new_err("this load was already finished"))?;
        Ok(g.key().to_owned())
    }

    /// Stores the loaded value with this TTL (seconds) instead of the cache's.
    fn set_ttl(&self, py: Python<'_>, ttl: &Bound<'_, PyAny>) -> PyResult<()> {
        let ttl = duration(py, "ttl", ttl, true)?;
        if let Some(g) = self.guard.lock().as_mut() {
            g.set_ttl(ttl);
        }
        Ok(())
    }

    /// Takes a share of the origin budget if one is free now.
    fn try_begin(&self) -> PyResult<bool> {
        let mut g = self.guard.lock();
        let g = g
            .as_mut()
            .ok_or_else(|| PyRuntimeError::new_err("this load was already finished"))?;
        Ok(g.try_begin())
    }

    /// Awaits a share of the origin budget: `(True, None)` once begun, or `(False, value)`
    /// when `wait_timeout` passed first and a fail-safe value answers (else it raises
    /// `WaitTimeout`); the load is then finished.
    fn begin<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let mut guard = self.take()?;
        let slot = self.guard.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            let began = guard.begin().await;
            Ok(BeginAnswer(match began {
                Ok(()) => {
                    *slot.lock() = Some(guard);
                    None
                }
                Err(e) => Some(guard.fail(e)),
            }))
        })
    }

    /// Finishes the load with the loader's value (`ABSENT`: cached absence); returns it.
    fn complete(&self, py: Python<'_>, value: Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let guard = self.take()?;
        settle(py, guard.complete(Ok(from_loader(value)?)))
    }

    /// Finishes the load with the loader's exception: every waiter raises that exception;
    /// this call returns the fail-safe value if there is one, else raises it too.
    fn fail(&self, py: Python<'_>, exc: Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let guard = self.take()?;
        let err = LoadError::new(PyLoadError::from_exception(exc));
        settle(py, guard.complete(Err(err)))
    }

    /// Finishes the load as timed out (`hard_timeout`): fail-safe value, or `LoadTimeout`.
    fn timeout(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let guard = self.take()?;
        let after = self.hard_timeout.unwrap_or_default();
        settle(py, guard.fail(Error::LoadTimeout { after }))
    }

    /// Gives the load up without an answer: a waiter looks up again and loads. A no-op on
    /// a finished load.
    fn abandon(&self) {
        if let Some(g) = self.guard.lock().take() {
            g.abandon();
        }
    }

    /// `(True, value)` when a fail-safe value would answer a failure, else `(False, None)`.
    #[getter]
    fn fallback<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let g = self.guard.lock();
        match g.as_ref().and_then(|g| g.fallback()) {
            Some(v) => (true, v.bind(py)).into_pyobject(py),
            None => (false, py.None()).into_pyobject(py),
        }
    }

    /// Seconds until the soft timeout (negative when past), or None without one.
    fn soft_remaining(&self) -> Option<f64> {
        let deadline = self.guard.lock().as_ref().and_then(|g| g.soft_deadline());
        self.remaining(deadline)
    }

    /// Seconds until the hard timeout (negative when past), or None without one.
    fn hard_remaining(&self) -> Option<f64> {
        let deadline = self.guard.lock().as_ref().and_then(|g| g.hard_deadline());
        self.remaining(deadline)
    }
}
