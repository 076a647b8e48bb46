//! `herdless._native.Cache`: the engine with Python objects as values. The pure-Python
//! `herdless.Cache` subclasses it and adds the asyncio driver, the decorator and `warm`;
//! everything on the hit path (`get`, `get_or_load`, a decorated sync function) is native.

use std::sync::Arc;
use std::time::Duration;

use herdless::Lookup;
use herdless::backend::WriteOutcome;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::block::block_on;
use crate::errors::{config_error, map_error};
use crate::load::{Engine, Loader, get_or_load};
use crate::metrics::{redis_to_dict, snapshot_to_dict};
use crate::options::{Options, duration, namespace};
use crate::steps::{Lead, RetryToken, Wait};
use crate::tier::Tier;
use crate::value::{PyValue, absent, from_loader, to_caller};

/// Lookup step kinds returned by `Cache._lookup`.
const HIT: u8 = 0;
const LEAD: u8 = 1;
const WAIT: u8 = 2;

/// A stampede-proof cache of Python objects.
#[pyclass(subclass, frozen, module = "herdless._native", name = "Cache")]
pub(crate) struct Cache {
    pub(crate) engine: Engine,
    namespace: Option<String>,
    hard_timeout: Option<Duration>,
    origin_budget: Option<usize>,
}

impl Engine {
    /// Removes `key` here and, with Redis, in the whole fleet.
    pub(crate) fn invalidate(&self, py: Python<'_>, key: &str) -> PyResult<bool> {
        let here = self.l1.invalidate(key).map_err(|e| map_error(py, e))?;
        let Some(tier) = &self.tier else {
            return Ok(here);
        };
        tier.check_fork(py)?;
        let shared = {
            let mut inv = Box::pin(tier.fleet.invalidate(key));
            block_on(py, &mut inv)?
        };
        shared
            .map(|there| there || here)
            .map_err(|e| map_error(py, e))
    }
}

/// A per-call TTL in seconds, or None for the cache's.
pub(crate) fn call_ttl(
    py: Python<'_>,
    ttl: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<Duration>> {
    ttl.filter(|t| !t.is_none())
        .map(|t| duration(py, "ttl", t, true))
        .transpose()
}

#[pymethods]
impl Cache {
    #[new]
    #[pyo3(signature = (
        *, ttl=None, grace=None, jitter=None, beta=None, negative_ttl=None, wait_timeout=None,
        max_stale=None, failsafe_backoff=None, soft_timeout=None, hard_timeout=None,
        capacity=None, origin_budget=None, max_flights=None, max_key_len=None, namespace=None,
        redis=None, redis_prefix=None, codec=None, lease=None, detector_tick=None,
        detector=None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new<'py>(
        py: Python<'py>,
        ttl: Option<Bound<'py, PyAny>>,
        grace: Option<Bound<'py, PyAny>>,
        jitter: Option<Bound<'py, PyAny>>,
        beta: Option<Bound<'py, PyAny>>,
        negative_ttl: Option<Bound<'py, PyAny>>,
        wait_timeout: Option<Bound<'py, PyAny>>,
        max_stale: Option<Bound<'py, PyAny>>,
        failsafe_backoff: Option<Bound<'py, PyAny>>,
        soft_timeout: Option<Bound<'py, PyAny>>,
        hard_timeout: Option<Bound<'py, PyAny>>,
        capacity: Option<Bound<'py, PyAny>>,
        origin_budget: Option<Bound<'py, PyAny>>,
        max_flights: Option<Bound<'py, PyAny>>,
        max_key_len: Option<Bound<'py, PyAny>>,
        namespace: Option<Bound<'py, PyAny>>,
        redis: Option<Bound<'py, PyAny>>,
        redis_prefix: Option<Bound<'py, PyAny>>,
        codec: Option<Bound<'py, PyAny>>,
        lease: Option<Bound<'py, PyAny>>,
        detector_tick: Option<Bound<'py, PyAny>>,
        detector: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Self> {
        let checked = Options {
            ttl,
            grace,
            jitter,
            beta,
            negative_ttl,
            wait_timeout,
            max_stale,
            failsafe_backoff,
            soft_timeout,
            hard_timeout,
            capacity,
            origin_budget,
            max_flights,
            max_key_len,
            namespace,
            redis,
            redis_prefix,
            codec,
            lease,
            detector_tick,
            detector,
        }
        .check(py)?;
        let tier = match checked.redis {
            Some(r) => {
                let l1 = &checked.cache;
                let tier = py.detach(|| {
                    Tier::connect(&r.url, r.prefix.as_deref(), r.fleet, r.codec, r.life, l1)
                });
                Some(Arc::new(
                    tier.map_err(|e| config_error(py, format!("`redis`: {e}")))?,
                ))
            }
            None => None,
        };
        Ok(Self {
            engine: Engine {
                l1: checked.cache,
                tier,
            },
            namespace: checked.namespace,
            hard_timeout: checked.hard_timeout,
            origin_budget: checked.origin_budget,
        })
    }

    /// The default namespace of keys made by the decorator, if one was given.
    #[getter]
    fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The origin budget (most loader calls at once), if one was given.
    #[getter]
    fn origin_budget(&self) -> Option<usize> {
        self.origin_budget
    }

    /// The value of `key` if fresh or within grace, else `default`; never loads. With
    /// Redis: from memory, else from Redis (one round trip; Redis failing reads as a miss).
    #[pyo3(signature = (key, default=None))]
    fn get(&self, py: Python<'_>, key: &str, default: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
        if let Some(v) = self.engine.l1.get(key) {
            return Ok(v.bind(py).unbind());
        }
        let default = default.unwrap_or_else(|| py.None());
        let Some(tier) = &self.engine.tier else {
            return Ok(default);
        };
        tier.check_fork(py)?;
        let read = {
            let mut read = Box::pin(tier.fleet.read(key));
            block_on(py, &mut read)?
        };
        let Ok(Some(e)) = read else {
            return Ok(default);
        };
        match tier.decode(py, &e) {
            Ok(Some(v)) => {
                let fresh = Tier::fresh_for(&e);
                if !fresh.is_zero() {
                    let _ = self.engine.l1.set_with_ttl(key, v.clone(), fresh);
                }
                Ok(v.bind(py).unbind())
            }
            Ok(None) | Err(_) => Ok(default),
        }
    }

    /// Stores `value` under `key` (`ABSENT`: caches an absence for `negative_ttl`). With
    /// Redis: for the whole fleet (a load running anywhere will not overwrite it, and other
    /// processes drop their copies).
    #[pyo3(signature = (key, value, *, ttl=None))]
    fn set(
        &self,
        py: Python<'_>,
        key: &str,
        value: Bound<'_, PyAny>,
        ttl: Option<Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let ttl = call_ttl(py, ttl.as_ref())?;
        let value = from_loader(value)?;
        if value.is_none() && ttl.is_some() {
            return Err(config_error(
                py,
                "`ttl` does not apply to ABSENT: absences last `negative_ttl`".into(),
            ));
        }
        let l1 = &self.engine.l1;
        let Some(tier) = &self.engine.tier else {
            let r = match (value, ttl) {
                (Some(v), Some(ttl)) => l1.set_with_ttl(key, v, ttl),
                (Some(v), None) => l1.set(key, v),
                (None, _) => l1.set_absent(key),
            };
            return r.map_err(|e| map_error(py, e));
        };
        tier.check_fork(py)?;
        // Checked here too: a bad key must not reach Redis.
        l1.invalidate(key).map_err(|e| map_error(py, e))?;
        let bytes = match &value {
            Some(v) => Some(tier.codec.encode(py, &v.bind(py))?),
            None => None,
        };
        let (entry, fresh) = tier.entry(bytes, Duration::ZERO, 0, ttl);
        let written = {
            let mut set = Box::pin(tier.fleet.set(key, entry));
            block_on(py, &mut set)?
        };
        match (written.map_err(|e| map_error(py, e))?, value) {
            (WriteOutcome::Written { version, .. }, Some(v)) => l1
                .set_with_ttl(key, v.with_version(version), fresh)
                .map_err(|e| map_error(py, e)),
            (WriteOutcome::Written { .. }, None) => {
                l1.set_absent(key).map_err(|e| map_error(py, e))
            }
            (WriteOutcome::Superseded, _) => Ok(()),
        }
    }

    /// Removes `key` (with Redis: in the whole fleet); a load of it already running will
    /// not write its older result back. Returns whether an entry was removed.
    fn invalidate(&self, py: Python<'_>, key: &str) -> PyResult<bool> {
        self.engine.invalidate(py, key)
    }

    /// Invalidates every key of `namespace` at once, in O(1) (with Redis: in the whole
    /// fleet); returns the new epoch.
    fn bump(&self, py: Python<'_>, namespace: Bound<'_, PyAny>) -> PyResult<u64> {
        let ns = self::namespace(py, "namespace", &namespace)?;
        // Longer than any key: it holds no key, and Redis gets no epoch key of that name.
        if ns.len() > self.engine.l1.options().max_key_len {
            return Ok(0);
        }
        let here = self.engine.l1.bump(&ns);
        let Some(tier) = &self.engine.tier else {
            return Ok(here);
        };
        tier.check_fork(py)?;
        let shared = {
            let mut bump = Box::pin(tier.fleet.bump(&ns));
            block_on(py, &mut bump)?
        };
        shared.map_err(|e| map_error(py, e))
    }

    /// The value of `key`, calling `loader()` when it must be loaded; concurrent callers of
    /// one key share one call. See the README for the full contract.
    #[pyo3(signature = (key, loader, *, ttl=None))]
    fn get_or_load(
        &self,
        py: Python<'_>,
        key: &str,
        loader: Py<PyAny>,
        ttl: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let ttl = call_ttl(py, ttl.as_ref())?;
        get_or_load(&self.engine, py, key, || Loader::Call0(loader), ttl)
    }

    /// One step of the state machine, for the asyncio driver: `(0, value)` a hit,
    /// `(0, value, lead)` a hit whose refresh this caller runs in the background,
    /// `(1, lead)` load it, `(2, wait)` wait for the caller who does.
    /// `ttl` (seconds) is the TTL a load started here stores its value with; `retry` is
    /// what a wait answered with when its leader went away.
    #[pyo3(signature = (key, ttl=None, retry=None))]
    fn _lookup<'py>(
        &self,
        py: Python<'py>,
        key: &str,
        ttl: Option<Bound<'py, PyAny>>,
        retry: Option<PyRef<'py, RetryToken>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let ttl = call_ttl(py, ttl.as_ref())?;
        let with_ttl = |mut guard: herdless::LoadGuard<PyValue>| {
            if let Some(ttl) = ttl {
                guard.set_ttl(ttl);
            }
            guard
        };
        let step = match retry {
            None => self.engine.l1.lookup(key),
            Some(r) => self.engine.l1.lookup_again(key, r.0),
        };
        match step.map_err(|e| map_error(py, e))? {
            Lookup::Hit(hit) => {
                let have = hit.value.as_ref().map_or(0, |v| v.version);
                let value = to_caller(py, hit.value)?;
                // A busy origin skips the refresh (the guard is handed back) rather than
                // queueing it behind requests that need an answer.
                match hit.refresh.map(with_ttl) {
                    Some(mut guard) => {
                        if guard.try_begin() {
                            let lead =
                                Lead::new(guard, self.engine.clone(), self.hard_timeout, have, ttl);
                            (HIT, value, lead).into_pyobject(py)
                        } else {
                            (HIT, value).into_pyobject(py)
                        }
                    }
                    None => (HIT, value).into_pyobject(py),
                }
            }
            Lookup::Lead(guard) => {
                let lead = Lead::new(
                    with_ttl(guard),
                    self.engine.clone(),
                    self.hard_timeout,
                    0,
                    ttl,
                );
                (LEAD, lead).into_pyobject(py)
            }
            Lookup::Wait(waiter) => (WAIT, Wait::new(waiter)).into_pyobject(py),
        }
    }

    /// Counters, histograms and sizes as plain data (see `herdless.Metrics`).
    fn _metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = snapshot_to_dict(py, &self.engine.l1.metrics())?;
        if let Some(tier) = &self.engine.tier {
            d.set_item("redis", redis_to_dict(py, &tier.backend.metrics())?)?;
        }
        Ok(d)
    }

    /// Metrics in Prometheus text exposition format.
    fn prometheus(&self) -> String {
        let mut text = self.engine.l1.prometheus();
        if let Some(tier) = &self.engine.tier {
            text.push_str(&tier.backend.metrics().to_prometheus());
        }
        text
    }

    /// Keys loading now (flight records); for tests and leak checks.
    fn _flights_in_progress(&self) -> usize {
        self.engine.l1.flights_in_progress()
    }

    /// The stampede detector's findings as plain data (see `herdless.Alert`).
    fn _alerts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyList>> {
        crate::detector::alerts(py, &self.engine.l1.alerts())
    }

    /// The `n` most accessed keys as `(key, count, misses)` (see `herdless.HotKey`).
    fn _hot_keys(&self, n: usize) -> Vec<(String, u64, u64)> {
        crate::detector::hot_keys(self.engine.l1.hot_keys(n))
    }

    /// The `n` hottest keys as JSON, for `import_hot_keys` in the next instance.
    #[pyo3(signature = (n=1000))]
    fn export_hot_keys(&self, n: usize) -> String {
        self.engine.l1.export_hot_keys(n)
    }

    /// Reads an export into the tracker; the keys as `(key, count, misses)`, hottest first.
    fn _import_hot_keys(&self, py: Python<'_>, json: &str) -> PyResult<Vec<(String, u64, u64)>> {
        match self.engine.l1.import_hot_keys(json) {
            Ok(keys) => Ok(crate::detector::hot_keys(keys)),
            Err(e) => Err(crate::errors::herdless_err(
                py,
                "HotKeysFormatError",
                e.to_string(),
                &[],
            )),
        }
    }
}

/// `herdless.ABSENT`, for module setup.
pub(crate) fn absent_object(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    Ok(absent(py)?.clone().into_any())
}
