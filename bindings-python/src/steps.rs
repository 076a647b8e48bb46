//! The state machine's steps as Python objects, for the driver written in Python: asyncio's
//! `aget_or_load` (herdless/_aio.py) looks a key up with `Cache._lookup` and gets a hit, a
//! [`Lead`] (run the coroutine, then complete it) or a [`Wait`] (await the leader's answer,
//! bridged to asyncio through a tokio runtime, so the event loop never blocks).

use std::sync::Arc;
use std::time::{Duration, Instant};

use herdless::backend::WriteOutcome;
use herdless::{Error, LoadError, LoadGuard, Waited, Waiter};
use herdless_redis::{FleetLease, FleetOutcome};
use parking_lot::Mutex;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::block::block_on;
use crate::errors::{PyLoadError, map_error};
use crate::load::{Engine, log_unshareable, published_version, settle};
use crate::options::duration;
use crate::tier::Tier;
use crate::value::{PyValue, from_loader, to_caller};

/// An awaitable already resolved to `value`.
fn ready<'py>(py: Python<'py>, value: Py<PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let fut = py
        .import("asyncio")?
        .call_method0("get_running_loop")?
        .call_method0("create_future")?;
    fut.call_method1("set_result", (value,))?;
    Ok(fut)
}

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
            Ok(Waited::Retry(r)) => (RETRY, Py::new(py, RetryToken(r))?.into_any()),
            Err(e) => return Err(map_error(py, e)),
        };
        (kind, value).into_pyobject(py)
    }
}

/// A waiter's place in line after a hand-over: passed back to `Cache._lookup`, so the
/// caller's `wait_timeout` keeps counting from its first arrival.
#[pyclass(frozen, module = "herdless._native", name = "_Retry")]
pub(crate) struct RetryToken(pub(crate) herdless::Retry);

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
    /// Blocks (GIL released) until the wait ends: `(0, value)` or `(1, retry)` to look up
    /// again with `retry`; raises the load's error.
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

/// This caller loads the key: run the loader, then `complete` (or `publish` when leading
/// for the fleet), `fail`, `timeout` or `abandon`. Dropped unfinished, the load is handed
/// to a waiter (and the fleet lock released).
#[pyclass(frozen, module = "herdless._native", name = "_Lead")]
pub(crate) struct Lead {
    state: Arc<LeadState>,
    engine: Engine,
    hard_timeout: Option<Duration>,
    /// The version of the value a refresh replaces (0: a miss).
    have: u64,
    /// The per-call TTL of the value, if any.
    ttl: Option<Duration>,
}

/// What a lead holds while it runs, shared with its futures.
struct LeadState {
    guard: Mutex<Option<LoadGuard<PyValue>>>,
    /// The fleet lock, when this process loads for the fleet.
    lease: Mutex<Option<FleetLease>>,
    /// When the loader was started (for the shared entry's load duration).
    started: Mutex<Option<Instant>>,
}

impl LeadState {
    fn take(&self) -> PyResult<LoadGuard<PyValue>> {
        self.guard
            .lock()
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("this load was already finished"))
    }
}

impl Lead {
    pub(crate) fn new(
        guard: LoadGuard<PyValue>,
        engine: Engine,
        hard_timeout: Option<Duration>,
        have: u64,
        ttl: Option<Duration>,
    ) -> Self {
        Self {
            state: Arc::new(LeadState {
                guard: Mutex::new(Some(guard)),
                lease: Mutex::new(None),
                started: Mutex::new(None),
            }),
            engine,
            hard_timeout,
            have,
            ttl,
        }
    }

    fn take(&self) -> PyResult<LoadGuard<PyValue>> {
        // Finishing the load without publishing releases the fleet lock (in the background).
        drop(self.state.lease.lock().take());
        self.state.take()
    }

    fn remaining(&self, deadline: Option<Duration>) -> Option<f64> {
        let now = self.engine.l1.clock().now();
        deadline.map(|d| d.as_secs_f64() - now.as_secs_f64())
    }

    fn tier(&self, py: Python<'_>) -> PyResult<Arc<Tier>> {
        let tier = self
            .engine
            .tier
            .clone()
            .ok_or_else(|| PyRuntimeError::new_err("this cache has no Redis tier"))?;
        tier.check_fork(py)?;
        Ok(tier)
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

/// Fleet step kinds returned by `Lead.fleet()`.
const ADOPTED: u8 = 0;
const LOAD_FOR_FLEET: u8 = 1;
const LOAD_HERE: u8 = 2;

/// The answer of `Lead.fleet()`, applied with the GIL when delivered (decoding runs the
/// codec). If the awaiting task was cancelled meanwhile, it is dropped unapplied: a lease
/// in it is released, and the task's own handler abandons the load.
struct FleetAnswer {
    state: Arc<LeadState>,
    tier: Arc<Tier>,
    outcome: Result<FleetOutcome, Error>,
}

impl<'py> IntoPyObject<'py> for FleetAnswer {
    type Target = PyTuple;
    type Output = Bound<'py, PyTuple>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        match self.outcome {
            Ok(FleetOutcome::Fresh(e) | FleetOutcome::Stale(e)) => match self.tier.decode(py, &e) {
                Ok(v) => {
                    let guard = self.state.take()?;
                    let r = guard.adopt(v, Tier::fresh_for(&e), e.load_duration);
                    (ADOPTED, settle(py, r)?).into_pyobject(py)
                }
                // Bytes another codec wrote: load here, leave Redis alone.
                Err(_) => (LOAD_HERE, py.None()).into_pyobject(py),
            },
            Ok(FleetOutcome::Lead(lease)) => {
                *self.state.lease.lock() = Some(lease);
                *self.state.started.lock() = Some(Instant::now());
                (LOAD_FOR_FLEET, py.None()).into_pyobject(py)
            }
            Err(e @ Error::WaitTimeout { .. }) => {
                let guard = self.state.take()?;
                (ADOPTED, settle(py, guard.fail(e))?).into_pyobject(py)
            }
            // Redis failing: load for this process only.
            Err(_) => (LOAD_HERE, py.None()).into_pyobject(py),
        }
    }
}

/// The answer of `Lead.publish()`: completes the load with the version Redis gave it.
struct PublishAnswer {
    state: Arc<LeadState>,
    engine: Engine,
    value: Option<PyValue>,
    published: Result<WriteOutcome, Error>,
}

impl<'py> IntoPyObject<'py> for PublishAnswer {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let guard = self.state.take()?;
        let version = published_version(&self.engine, guard.key(), self.published);
        let v = self.value.map(|v| v.with_version(version));
        Ok(settle(py, guard.complete(Ok(v)))?.into_bound(py))
    }
}

#[pymethods]
impl Lead {
    /// The key being loaded.
    #[getter]
    fn key(&self) -> PyResult<String> {
        let g = self.state.guard.lock();
        let g = g
            .as_ref()
            .ok_or_else(|| PyRuntimeError::new_err("this load was already finished"))?;
        Ok(g.key().to_owned())
    }

    /// Whether the cache has a Redis tier (then `fleet()` comes first).
    #[getter]
    fn shared(&self) -> bool {
        self.engine.tier.is_some()
    }

    /// Whether this process holds the fleet lock (then `publish()` finishes the load).
    #[getter]
    fn leased(&self) -> bool {
        self.state.lease.lock().is_some()
    }

    /// Asks the fleet (Redis tier) who loads: `(0, value)` another process's entry answers
    /// (the load is finished), `(1, None)` load for the fleet then `publish`, `(2, None)`
    /// load for this process only (Redis failing). Raises `WaitTimeout` (or answers a
    /// fail-safe value) when another process's load took longer than `wait_timeout`.
    fn fleet<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let tier = self.tier(py)?;
        let key = self.key()?;
        let (state, have) = (self.state.clone(), self.have);
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            let outcome = tier.fleet.lead(&key, have).await;
            Ok(FleetAnswer {
                state,
                tier,
                outcome,
            })
        })
    }

    /// Finishes a load for the fleet: encodes the value, writes it to Redis (unless the
    /// lease was lost or the namespace bumped), and completes the load; awaitable, resolves
    /// to the value. A value the codec cannot encode is served here only (logged).
    fn publish<'py>(
        &self,
        py: Python<'py>,
        value: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let tier = self.tier(py)?;
        let value = from_loader(value)?;
        let lease = self.state.lease.lock().take();
        let Some(lease) = lease else {
            return Err(PyRuntimeError::new_err(
                "this load does not hold the fleet lock",
            ));
        };
        let took = self
            .state
            .started
            .lock()
            .map_or(Duration::ZERO, |t| t.elapsed());
        let bytes = match &value {
            None => None,
            Some(v) => match tier.codec.encode(py, &v.bind(py)) {
                Ok(b) => Some(b),
                Err(err) => {
                    drop(lease);
                    let guard = self.state.take()?;
                    log_unshareable(py, guard.key(), err)?;
                    let v = settle(py, guard.complete(Ok(value)))?;
                    return ready(py, v);
                }
            },
        };
        let (entry, fresh) = tier.entry(bytes, took, lease.epoch(), self.ttl);
        if let Some(g) = self.state.guard.lock().as_mut() {
            g.set_ttl(fresh);
        }
        let (state, engine) = (self.state.clone(), self.engine.clone());
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            let published = lease.publish(entry).await;
            Ok(PublishAnswer {
                state,
                engine,
                value,
                published,
            })
        })
    }

    /// Stores the loaded value with this TTL (seconds) instead of the cache's.
    fn set_ttl(&self, py: Python<'_>, ttl: &Bound<'_, PyAny>) -> PyResult<()> {
        let ttl = duration(py, "ttl", ttl, true)?;
        if let Some(g) = self.state.guard.lock().as_mut() {
            g.set_ttl(ttl);
        }
        Ok(())
    }

    /// Takes a share of the origin budget if one is free now.
    fn try_begin(&self) -> PyResult<bool> {
        let mut g = self.state.guard.lock();
        let g = g
            .as_mut()
            .ok_or_else(|| PyRuntimeError::new_err("this load was already finished"))?;
        Ok(g.try_begin())
    }

    /// Awaits a share of the origin budget: `(True, None)` once begun, or `(False, value)`
    /// when `wait_timeout` passed first and a fail-safe value answers (else it raises
    /// `WaitTimeout`); the load is then finished.
    fn begin<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let mut guard = self.state.take()?;
        let state = self.state.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            let began = guard.begin().await;
            Ok(BeginAnswer(match began {
                Ok(()) => {
                    *state.guard.lock() = Some(guard);
                    None
                }
                Err(e) => {
                    drop(state.lease.lock().take());
                    Some(guard.fail(e))
                }
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
        drop(self.state.lease.lock().take());
        if let Some(g) = self.state.guard.lock().take() {
            g.abandon();
        }
    }

    /// `(True, value)` when a fail-safe value would answer a failure, else `(False, None)`.
    #[getter]
    fn fallback<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let g = self.state.guard.lock();
        match g.as_ref().and_then(|g| g.fallback()) {
            Some(v) => (true, v.bind(py)).into_pyobject(py),
            None => (false, py.None()).into_pyobject(py),
        }
    }

    /// Seconds until the soft timeout (negative when past), or None without one.
    fn soft_remaining(&self) -> Option<f64> {
        let deadline = self
            .state
            .guard
            .lock()
            .as_ref()
            .and_then(|g| g.soft_deadline());
        self.remaining(deadline)
    }

    /// Seconds until the hard timeout (negative when past), or None without one.
    fn hard_remaining(&self) -> Option<f64> {
        let deadline = self
            .state
            .guard
            .lock()
            .as_ref()
            .and_then(|g| g.hard_deadline());
        self.remaining(deadline)
    }
}
