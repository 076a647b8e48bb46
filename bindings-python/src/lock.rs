//! `herdless._native.FleetLock`: the engine's lock on a key (`TwoTier::lock`), driven from
//! Python threads. Lease, extension, release by token and what a failure answers are the
//! engine's (PROTOCOL.md, "Locks held outside a load"); this only waits with the GIL
//! released and keeps the held lock, threading.Lock-style (any thread may release it).
//!
//! One object is a lock of its own too: it is held from its `acquire` to its `release`,
//! whatever happens to the fleet's lock meanwhile. dogpile shares one mutex object between
//! the threads of a process and writes the key while it holds the lock; the write breaks
//! the fleet's lock, and without this a second thread could take the fleet's lock through
//! the same object before the first released it.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use herdless_redis::FleetLock as Held;
use herdless_redis::two_tier::TwoTier;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use crate::cache::Cache;
use crate::driver::block::block_on;
use crate::errors::map_error;
use crate::options::duration;
use crate::value::PyValue;

/// A lock on one key of a cache: with Redis, for every process sharing it (the very lock a
/// load of the key takes); without, for this cache's callers. Not reentrant.
#[pyclass(frozen, weakref, module = "herdless._native", name = "FleetLock")]
pub(crate) struct FleetLock {
    tt: TwoTier<PyValue>,
    key: String,
    timeout: Option<Duration>,
    state: Mutex<State>,
    freed: Condvar,
}

/// Where one object stands.
enum State {
    Free,
    /// A thread took the object and is asking for the fleet's lock.
    Acquiring,
    Held(Box<Held>),
}

/// How often a thread waiting for the object looks for pending signals (Ctrl-C).
const SIGNAL_SLICE: Duration = Duration::from_millis(20);

impl FleetLock {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn held(&self) -> Option<bool> {
        match &*self.state() {
            State::Held(h) => Some(!h.is_lost()),
            _ => None,
        }
    }

    /// Takes the object (Free -> Acquiring), waiting with the GIL released until `until`.
    fn take(&self, py: Python<'_>, until: Option<Instant>) -> PyResult<bool> {
        loop {
            {
                let mut s = self.state();
                if matches!(*s, State::Free) {
                    *s = State::Acquiring;
                    return Ok(true);
                }
            }
            let now = Instant::now();
            let slice = match until {
                Some(u) if u <= now => return Ok(false),
                Some(u) => SIGNAL_SLICE.min(u - now),
                None => SIGNAL_SLICE,
            };
            py.detach(|| {
                let s = self.state();
                if !matches!(*s, State::Free) {
                    drop(self.freed.wait_timeout(s, slice));
                }
            });
            py.check_signals()?;
        }
    }

    /// Gives the object back (to `Free`), waking a thread waiting for it.
    fn give_back(&self) -> Option<Held> {
        let old = std::mem::replace(&mut *self.state(), State::Free);
        self.freed.notify_one();
        match old {
            State::Held(h) => Some(*h),
            _ => None,
        }
    }
}

/// A wait in seconds: `None` or a negative number (threading's -1) is no limit.
fn wait_limit(py: Python<'_>, v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Duration>> {
    match v.filter(|v| !v.is_none()) {
        None => Ok(None),
        Some(v) if v.extract::<f64>().is_ok_and(|s| s < 0.0) => Ok(None),
        Some(v) => duration(py, "timeout", v, false).map(Some),
    }
}

#[pymethods]
impl FleetLock {
    #[new]
    #[pyo3(signature = (cache, key, *, timeout=None))]
    fn new(
        py: Python<'_>,
        cache: PyRef<'_, Cache>,
        key: String,
        timeout: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        Ok(Self {
            tt: cache.handle.tt.clone(),
            key,
            timeout: wait_limit(py, timeout.as_ref())?,
            state: Mutex::new(State::Free),
            freed: Condvar::new(),
        })
    }

    /// The key.
    #[getter]
    fn key(&self) -> &str {
        &self.key
    }

    /// Takes the lock: at once or not at all with `blocking=False`; else waiting for its
    /// holder at most `timeout` seconds (default: the lock's own `timeout`; `None` or -1:
    /// no limit). True once held.
    #[pyo3(signature = (blocking=true, timeout=None))]
    fn acquire(
        &self,
        py: Python<'_>,
        blocking: bool,
        timeout: Option<Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let given = timeout.as_ref().filter(|t| !t.is_none());
        if !blocking && given.is_some() {
            return Err(PyValueError::new_err(
                "can't specify a timeout for a non-blocking call",
            ));
        }
        let wait = match (blocking, given) {
            (false, _) => Some(Duration::ZERO),
            (true, Some(t)) => wait_limit(py, Some(t))?,
            (true, None) => self.timeout,
        };
        let until = wait.map(|w| Instant::now() + w);
        if !self.take(py, until)? {
            return Ok(false);
        }
        let mut pending = self.tt.lock(&self.key, until);
        let answer = block_on(py, &mut pending).and_then(|r| r.map_err(|e| map_error(py, e)));
        match answer {
            Ok(Some(held)) => {
                *self.state() = State::Held(Box::new(held));
                Ok(true)
            }
            Ok(None) => {
                self.give_back();
                Ok(false)
            }
            Err(e) => {
                self.give_back();
                Err(e)
            }
        }
    }

    /// Gives the lock back (waking the waiters of every process). True if it was still
    /// this lock's; False if it had been lost (ran out, or a `set`/`invalidate` of the key
    /// broke it). Raises RuntimeError when not held, `BackendError` when Redis cannot be
    /// reached (the lock then runs out by itself within one lease).
    fn release(&self, py: Python<'_>) -> PyResult<bool> {
        if !matches!(*self.state(), State::Held(_)) {
            return Err(PyRuntimeError::new_err("release of an unheld FleetLock"));
        }
        let held = self
            .give_back()
            .ok_or_else(|| PyRuntimeError::new_err("release of an unheld FleetLock"))?;
        py.detach(|| held.release_blocking())
            .map_err(|e| map_error(py, e))
    }

    /// Whether the lock is held: by this object, or by anyone else (asked of the tier
    /// without keeping it: a free lock is taken and given back at once).
    fn locked(&self, py: Python<'_>) -> PyResult<bool> {
        if self.held() == Some(true) {
            return Ok(true);
        }
        let mut pending = self.tt.is_locked(&self.key);
        block_on(py, &mut pending)?.map_err(|e| map_error(py, e))
    }

    /// Whether this object holds the lock (and no extension found it lost).
    fn owned(&self) -> bool {
        self.held() == Some(true)
    }

    /// Whether the lock this object holds was lost (see `release`).
    #[getter]
    fn lost(&self) -> bool {
        self.held() == Some(false)
    }

    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        let py = slf.py();
        if !slf.get().acquire(py, true, None)? {
            let waited = slf.get().timeout.unwrap_or_default().as_secs_f64();
            return Err(crate::errors::herdless_err(
                py,
                "LockTimeout",
                format!(
                    "the lock on {:?} was still held after {waited} s",
                    slf.get().key
                ),
                &[("waited", waited.into_pyobject(py)?.into_any())],
            ));
        }
        Ok(slf)
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<()> {
        self.release(py).map(drop)
    }

    fn __repr__(&self) -> String {
        let state = if self.owned() { "held" } else { "not held" };
        format!("<herdless.FleetLock {:?} {state}>", self.key)
    }
}
