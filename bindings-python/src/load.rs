//! The blocking driver of the engine's state machine for Python callers: `get_or_load`, the
//! decorator's sync path, and background refreshes on a Python thread.
//!
//! - Hit: serve the object. If the engine chose this caller to refresh the key
//!   (stale-while-revalidate or XFetch), the loader runs on a new daemon `threading.Thread`,
//!   so the current request never waits for it.
//! - Lead: with the Redis tier, ask the fleet first (another process's fresh entry ends the
//!   load; otherwise this process loads for the fleet, or alone when Redis fails). Then take
//!   the origin budget (waiting with the GIL released), call the loader on this thread, and
//!   complete the guard (publishing the entry to Redis). An `Exception` is the load's result
//!   and reaches every waiter; any other `BaseException` (KeyboardInterrupt, SystemExit) is
//!   about this thread, not the load: the load is abandoned (a waiter takes it over, here and
//!   in the fleet) and the exception re-raised.
//! - Wait: block with the GIL released until the leader's answer, a fail-safe value, a
//!   timeout, or a hand-over (then look up again).

use std::sync::Arc;
use std::time::{Duration, Instant};

use herdless::backend::WriteOutcome;
use herdless::{Error, LoadError, LoadGuard, Lookup, Waited};
use herdless_redis::{FleetLease, FleetOutcome};
use parking_lot::Mutex;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::block::block_on;
use crate::errors::{PyLoadError, map_error};
use crate::tier::Tier;
use crate::value::{PyValue, from_loader, to_caller};

/// The engine as the binding drives it: the in-memory table, and the Redis tier if any.
#[derive(Clone)]
pub(crate) struct Engine {
    pub(crate) l1: herdless::Cache<PyValue>,
    pub(crate) tier: Option<Arc<Tier>>,
}

/// What to call to load a value.
pub(crate) enum Loader {
    /// `loader()`.
    Call0(Py<PyAny>),
    /// `func(*args, **kwargs)` (the decorator: no closure is allocated per call).
    Call(Py<PyAny>, Py<PyTuple>, Option<Py<PyDict>>),
}

impl Loader {
    pub(crate) fn call<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let value = match self {
            Loader::Call0(f) => f.bind(py).call0(),
            Loader::Call(f, args, kwargs) => f
                .bind(py)
                .call(args.bind(py), kwargs.as_ref().map(|k| k.bind(py))),
        }?;
        // An async function given to the sync API: caching its coroutine object would hand
        // every caller the same never-awaited coroutine. Refused, and closed (no warning).
        if value.get_type().name()? == "coroutine" {
            let _ = value.call_method0("close");
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "the loader returned a coroutine: get_or_load and sync functions run sync \
                 loaders; use aget_or_load (or decorate the async function itself)",
            ));
        }
        Ok(value)
    }
}

/// A finished load's answer for this caller, as a Python object or exception.
pub(crate) fn settle(py: Python<'_>, r: Result<Option<PyValue>, Error>) -> PyResult<Py<PyAny>> {
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
    engine: &Engine,
    py: Python<'_>,
    key: &str,
    loader: impl FnOnce() -> Loader,
    ttl: Option<Duration>,
) -> PyResult<Py<PyAny>> {
    let mut loader = Some(loader);
    let mut step = engine.l1.lookup(key);
    loop {
        match step.map_err(|e| map_error(py, e))? {
            Lookup::Hit(hit) => {
                if let (Some(guard), Some(loader)) = (hit.refresh, loader.take()) {
                    let have = hit.value.as_ref().map_or(0, |v| v.version);
                    spawn_refresh(py, engine, guard, loader(), ttl, have);
                }
                return to_caller(py, hit.value);
            }
            Lookup::Wait(mut waiter) => match block_on(py, &mut waiter)? {
                Ok(Waited::Loaded(v)) => return to_caller(py, v),
                Ok(Waited::Stale(v)) => return to_caller(py, Some(v)),
                Ok(Waited::Retry(r)) => step = engine.l1.lookup_again(key, r),
                Err(e) => return Err(map_error(py, e)),
            },
            Lookup::Lead(guard) => {
                let loader = loader.take().expect("a caller leads at most once")();
                return lead(py, engine, guard, &loader, ttl, 0, false);
            }
        }
    }
}

/// Takes the origin budget for a load (a background refresh took it already). `Err`: the
/// wait for it timed out.
fn begin(
    py: Python<'_>,
    guard: &mut LoadGuard<PyValue>,
    background: bool,
) -> PyResult<Result<(), Error>> {
    if background || guard.try_begin() {
        return Ok(Ok(()));
    }
    // A KeyboardInterrupt here drops the guard (by the caller's `?`): the load is handed over.
    let mut begin = guard.begin();
    block_on(py, &mut begin)
}

/// The local leader's part. `have`: the version of the value a refresh replaces.
fn lead(
    py: Python<'_>,
    engine: &Engine,
    mut guard: LoadGuard<PyValue>,
    loader: &Loader,
    ttl: Option<Duration>,
    have: u64,
    background: bool,
) -> PyResult<Py<PyAny>> {
    if let Some(ttl) = ttl {
        guard.set_ttl(ttl);
    }
    let Some(tier) = &engine.tier else {
        return load_here(py, guard, loader, background);
    };
    tier.check_fork(py)?;
    let key = guard.key().to_owned();
    let outcome = {
        let mut ask = Box::pin(tier.fleet.lead(&key, have));
        block_on(py, &mut ask)?
    };
    match outcome {
        Ok(FleetOutcome::Fresh(e) | FleetOutcome::Stale(e)) => match tier.decode(py, &e) {
            Ok(v) => settle(py, guard.adopt(v, Tier::fresh_for(&e), e.load_duration)),
            // Bytes another codec wrote: serve a local load, leave Redis alone.
            Err(_) => load_here(py, guard, loader, background),
        },
        Ok(FleetOutcome::Lead(lease)) => {
            load_for_fleet(py, engine, tier, guard, lease, loader, ttl, background)
        }
        Err(e @ Error::WaitTimeout { .. }) => settle(py, guard.fail(e)),
        // Redis failing: load for this process only (served, not written).
        Err(_) => load_here(py, guard, loader, background),
    }
}

/// Loads for this process only.
fn load_here(
    py: Python<'_>,
    mut guard: LoadGuard<PyValue>,
    loader: &Loader,
    background: bool,
) -> PyResult<Py<PyAny>> {
    if let Err(e) = begin(py, &mut guard, background)? {
        return settle(py, guard.fail(e));
    }
    match call(py, loader) {
        Called::Value(v) => settle(py, guard.complete(Ok(v))),
        Called::Failed(e) => settle(py, guard.complete(Err(e))),
        Called::Interrupted(err) => {
            guard.abandon();
            Err(err)
        }
    }
}

/// A loader call's outcome.
enum Called {
    Value(Option<PyValue>),
    /// An `Exception`: the load's result.
    Failed(LoadError),
    /// Any other `BaseException`: about this thread, not the load.
    Interrupted(PyErr),
}

fn call(py: Python<'_>, loader: &Loader) -> Called {
    match loader.call(py).and_then(from_loader) {
        Ok(v) => Called::Value(v),
        Err(err) if err.is_instance_of::<PyException>(py) => {
            Called::Failed(LoadError::new(PyLoadError::new(py, err)))
        }
        Err(err) => Called::Interrupted(err),
    }
}

/// Loads for the whole fleet and publishes the entry. A failed or interrupted load releases
/// the fleet lock (dropping the lease does, in the background): another process leads.
#[allow(clippy::too_many_arguments)]
fn load_for_fleet(
    py: Python<'_>,
    engine: &Engine,
    tier: &Tier,
    mut guard: LoadGuard<PyValue>,
    lease: FleetLease,
    loader: &Loader,
    ttl: Option<Duration>,
    background: bool,
) -> PyResult<Py<PyAny>> {
    if let Err(e) = begin(py, &mut guard, background)? {
        drop(lease);
        return settle(py, guard.fail(e));
    }
    let started = Instant::now();
    let value = match call(py, loader) {
        Called::Value(v) => v,
        Called::Failed(e) => {
            drop(lease);
            return settle(py, guard.complete(Err(e)));
        }
        Called::Interrupted(err) => {
            drop(lease);
            guard.abandon();
            return Err(err);
        }
    };
    let took = started.elapsed();
    let bytes = match value.as_ref().map(|v| tier.codec.encode(py, &v.bind(py))) {
        None => None,
        Some(Ok(b)) => Some(b),
        Some(Err(err)) => {
            // Unshareable: serve it here, let another process try.
            drop(lease);
            log_unshareable(py, guard.key(), err)?;
            return settle(py, guard.complete(Ok(value)));
        }
    };
    let (entry, fresh) = tier.entry(bytes, took, lease.epoch(), ttl);
    guard.set_ttl(fresh);
    let published = {
        let mut publish = Box::pin(lease.publish(entry));
        block_on(py, &mut publish)?
    };
    let version = published_version(engine, guard.key(), published);
    settle(
        py,
        guard.complete(Ok(value.map(|v| v.with_version(version)))),
    )
}

/// The version a publish gave the entry (0: not shared). A superseded publish (newer data
/// in Redis, a bump, a lost lease) answers its callers but keeps the value out of the L1.
pub(crate) fn published_version(
    engine: &Engine,
    key: &str,
    published: Result<WriteOutcome, Error>,
) -> u64 {
    match published {
        Ok(WriteOutcome::Written { version, .. }) => version,
        Ok(WriteOutcome::Superseded) => {
            // Invalidating supersedes the running flight: its completion is not stored.
            let _ = engine.l1.invalidate(key);
            0
        }
        Err(_) => 0,
    }
}

/// Logs a value the codec cannot encode (served in this process only).
pub(crate) fn log_unshareable(py: Python<'_>, key: &str, err: PyErr) -> PyResult<()> {
    log(
        py,
        "value of %r cannot be encoded by the cache's codec; served in this process only, not shared through Redis",
        key,
        err,
    )
}

fn log(py: Python<'_>, message: &str, key: &str, err: PyErr) -> PyResult<()> {
    let kwargs = PyDict::new(py);
    kwargs.set_item("exc_info", err.into_value(py))?;
    py.import("logging")?
        .call_method1("getLogger", ("herdless",))?
        .call_method("warning", (message, key), Some(&kwargs))?;
    Ok(())
}

/// A refresh handed to a background thread: the thread's `target`.
#[pyclass(frozen, module = "herdless._native", name = "_Refresh")]
pub(crate) struct Refresh {
    job: Mutex<Option<RefreshJob>>,
}

struct RefreshJob {
    engine: Engine,
    guard: LoadGuard<PyValue>,
    loader: Loader,
    ttl: Option<Duration>,
    have: u64,
}

#[pymethods]
impl Refresh {
    /// Runs the load; a failure is logged (there is no caller to raise it to) and counted.
    fn __call__(&self, py: Python<'_>) -> PyResult<()> {
        let Some(job) = self.job.lock().take() else {
            return Ok(());
        };
        let key = job.guard.key().to_owned();
        let result = lead(
            py,
            &job.engine,
            job.guard,
            &job.loader,
            job.ttl,
            job.have,
            true,
        );
        if let Err(err) = result {
            if !err.is_instance_of::<PyException>(py) {
                return Err(err);
            }
            log(py, "background refresh of %r failed", &key, err)?;
        }
        Ok(())
    }
}

/// Runs a refresh on a new daemon thread, if the origin budget has room now (a busy origin
/// skips refreshes rather than queueing them; the guard is then handed back).
pub(crate) fn spawn_refresh(
    py: Python<'_>,
    engine: &Engine,
    mut guard: LoadGuard<PyValue>,
    loader: Loader,
    ttl: Option<Duration>,
    have: u64,
) {
    if !guard.try_begin() {
        return;
    }
    let job = RefreshJob {
        engine: engine.clone(),
        guard,
        loader,
        ttl,
        have,
    };
    let start = || -> PyResult<()> {
        let job = Py::new(
            py,
            Refresh {
                job: Mutex::new(Some(job)),
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
