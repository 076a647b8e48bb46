//! `Cache(...)` keyword options in Python's idiom, each checked with a clear exception:
//! durations are seconds (int or float), counts are ints, `None` keeps the engine's default.

use std::time::Duration;

use herdless::{Builder, KeyBuilder};
use herdless_redis::{TierAddress, TierOptions};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::codec::Codec;
use crate::errors::{config_error, config_type_error};
use crate::value::Held;

/// Checks that `v` is a number of seconds and returns it as a float.
fn seconds(py: Python<'_>, name: &str, v: &Bound<'_, PyAny>) -> PyResult<f64> {
    if v.is_instance_of::<PyBool>()
        || !(v.is_instance_of::<PyInt>() || v.is_instance_of::<PyFloat>())
    {
        let ty = v.get_type().qualname()?;
        return Err(config_type_error(
            py,
            format!("`{name}` must be a number of seconds (int or float), got {ty}"),
        ));
    }
    v.extract::<f64>()
        .map_err(|_| config_error(py, format!("`{name}` is out of range")))
}

/// A duration option in seconds. `positive`: zero is refused.
pub(crate) fn duration(
    py: Python<'_>,
    name: &str,
    v: &Bound<'_, PyAny>,
    positive: bool,
) -> PyResult<Duration> {
    let s = seconds(py, name, v)?;
    if !s.is_finite() {
        return Err(config_error(
            py,
            format!("`{name}` must be finite, got {s}"),
        ));
    }
    if s < 0.0 || (positive && s == 0.0) {
        let bound = if positive { "positive" } else { "at least 0" };
        return Err(config_error(
            py,
            format!("`{name}` must be {bound} (seconds), got {s}"),
        ));
    }
    let d = Duration::try_from_secs_f64(s).map_err(|_| {
        config_error(
            py,
            format!("`{name}` is too large: {s} seconds does not fit a duration"),
        )
    })?;
    if positive && d.is_zero() {
        return Err(config_error(
            py,
            format!("`{name}` must be at least one nanosecond, got {s}"),
        ));
    }
    Ok(d)
}

/// The largest count accepted: far beyond any real cache, small enough for every integer type.
const MAX_COUNT: i128 = 1 << 62;

/// A count option (an int >= `min`).
fn count(py: Python<'_>, name: &str, v: &Bound<'_, PyAny>, min: u64) -> PyResult<u64> {
    if v.is_instance_of::<PyBool>() || !v.is_instance_of::<PyInt>() {
        let ty = v.get_type().qualname()?;
        return Err(config_type_error(
            py,
            format!("`{name}` must be an int, got {ty}"),
        ));
    }
    match v.extract::<i128>() {
        Ok(n) if n >= i128::from(min) && n <= MAX_COUNT => Ok(n as u64),
        Ok(n) if n < i128::from(min) => Err(config_error(
            py,
            format!("`{name}` must be at least {min}, got {n}"),
        )),
        _ => Err(config_error(py, format!("`{name}` is too large"))),
    }
}

/// A float option (jitter, beta).
fn float(py: Python<'_>, name: &str, v: &Bound<'_, PyAny>) -> PyResult<f64> {
    if v.is_instance_of::<PyBool>()
        || !(v.is_instance_of::<PyInt>() || v.is_instance_of::<PyFloat>())
    {
        let ty = v.get_type().qualname()?;
        return Err(config_type_error(
            py,
            format!("`{name}` must be a number, got {ty}"),
        ));
    }
    v.extract::<f64>()
        .map_err(|_| config_error(py, format!("`{name}` is out of range")))
}

/// Checks a namespace: non-empty, no reserved character (the key builder's rule).
pub(crate) fn namespace(py: Python<'_>, name: &str, v: &Bound<'_, PyAny>) -> PyResult<String> {
    let s = v.cast::<PyString>().map_err(|_| {
        let ty = v
            .get_type()
            .qualname()
            .map(|q| q.to_string())
            .unwrap_or_default();
        config_type_error(py, format!("`{name}` must be a str, got {ty}"))
    })?;
    let s = s.to_str()?;
    KeyBuilder::new(s)
        .entity("probe")
        .build()
        .map_err(|e| config_error(py, format!("`{name}`: {e}")))?;
    Ok(s.to_owned())
}

/// Checks a positive duration option given in seconds (for options checked in Python, e.g.
/// the decorator's `ttl`); returns it as a float.
#[pyfunction]
pub(crate) fn check_seconds(py: Python<'_>, name: &str, value: &Bound<'_, PyAny>) -> PyResult<f64> {
    duration(py, name, value, true).map(|d| d.as_secs_f64())
}

/// Checks a namespace option (e.g. the decorator's `namespace`).
#[pyfunction]
pub(crate) fn check_namespace(
    py: Python<'_>,
    name: &str,
    value: &Bound<'_, PyAny>,
) -> PyResult<String> {
    namespace(py, name, value)
}

/// The options of `Cache(...)`, as given (each `None` keeps the engine's default).
pub(crate) struct Options<'py> {
    pub(crate) ttl: Option<Bound<'py, PyAny>>,
    pub(crate) tti: Option<Bound<'py, PyAny>>,
    pub(crate) grace: Option<Bound<'py, PyAny>>,
    pub(crate) jitter: Option<Bound<'py, PyAny>>,
    pub(crate) beta: Option<Bound<'py, PyAny>>,
    pub(crate) negative_ttl: Option<Bound<'py, PyAny>>,
    pub(crate) wait_timeout: Option<Bound<'py, PyAny>>,
    pub(crate) max_stale: Option<Bound<'py, PyAny>>,
    pub(crate) failsafe_backoff: Option<Bound<'py, PyAny>>,
    pub(crate) soft_timeout: Option<Bound<'py, PyAny>>,
    pub(crate) hard_timeout: Option<Bound<'py, PyAny>>,
    pub(crate) capacity: Option<Bound<'py, PyAny>>,
    pub(crate) origin_budget: Option<Bound<'py, PyAny>>,
    pub(crate) max_flights: Option<Bound<'py, PyAny>>,
    pub(crate) max_batch: Option<Bound<'py, PyAny>>,
    pub(crate) max_key_len: Option<Bound<'py, PyAny>>,
    pub(crate) max_namespaces: Option<Bound<'py, PyAny>>,
    pub(crate) namespace: Option<Bound<'py, PyAny>>,
    pub(crate) redis: Option<Bound<'py, PyAny>>,
    pub(crate) redis_prefix: Option<Bound<'py, PyAny>>,
    pub(crate) codec: Option<Bound<'py, PyAny>>,
    pub(crate) lease: Option<Bound<'py, PyAny>>,
    pub(crate) detector_tick: Option<Bound<'py, PyAny>>,
    pub(crate) detector: Option<Bound<'py, PyAny>>,
    pub(crate) copy_values: Option<Bound<'py, PyAny>>,
    pub(crate) admission: Option<Bound<'py, PyAny>>,
    pub(crate) memcached: Option<Bound<'py, PyAny>>,
}

/// A bool option (`copy_values`, `admission`): a bool or nothing, never a truthy object.
fn flag(py: Python<'_>, name: &str, v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<bool>> {
    match v {
        Some(v) if v.is_instance_of::<PyBool>() => Ok(Some(v.extract::<bool>()?)),
        Some(v) => {
            let ty = v.get_type().qualname()?;
            Err(config_type_error(
                py,
                format!("`{name}` must be a bool, got {ty}"),
            ))
        }
        None => Ok(None),
    }
}

/// The `detector` option: `False` (off), `True` (the defaults) or a `DetectorOptions` (any
/// object with its attributes; durations in seconds). `detector_tick`, if given, sets the
/// tick either way.
fn detector(
    py: Python<'_>,
    v: Option<&Bound<'_, PyAny>>,
    tick: Option<Duration>,
) -> PyResult<Option<herdless::DetectorOptions>> {
    let mut o = herdless::DetectorOptions::default();
    match v {
        None if tick.is_none() => return Ok(None),
        None => {}
        Some(v) if v.is_instance_of::<PyBool>() => {
            let on = v.extract::<bool>()?;
            if !on {
                return Ok(Some(herdless::DetectorOptions::off()));
            }
        }
        Some(v) => {
            let field = |name: &str| {
                v.getattr(name).map_err(|_| {
                    let ty = v
                        .get_type()
                        .qualname()
                        .map(|q| q.to_string())
                        .unwrap_or_default();
                    config_type_error(
                        py,
                        format!(
                            "`detector` must be a bool or a herdless.DetectorOptions, got {ty} \
                             (no attribute `{name}`)"
                        ),
                    )
                })
            };
            o.tick = duration(py, "detector.tick", &field("tick")?, true)?;
            o.spike_factor = float(py, "detector.spike_factor", &field("spike_factor")?)?;
            o.min_spike_misses = count(
                py,
                "detector.min_spike_misses",
                &field("min_spike_misses")?,
                1,
            )?;
            o.latency_factor = float(py, "detector.latency_factor", &field("latency_factor")?)?;
            o.latency_window = duration(
                py,
                "detector.latency_window",
                &field("latency_window")?,
                true,
            )?;
            o.min_samples = count(py, "detector.min_samples", &field("min_samples")?, 1)?;
            o.key_share = float(py, "detector.key_share", &field("key_share")?)?;
            o.hold = duration(py, "detector.hold", &field("hold")?, false)?;
        }
    }
    if let Some(t) = tick {
        o.tick = t;
    }
    Ok(Some(o))
}

/// The checked options: the engine is built from them (`TwoTier::build`).
pub(crate) struct Checked {
    pub(crate) builder: Builder<Held>,
    pub(crate) namespace: Option<String>,
    pub(crate) origin_budget: Option<usize>,
    pub(crate) codec: Codec,
    pub(crate) redis: Option<TierOptions>,
}

impl Options<'_> {
    /// Checks every option, then lets the engine check how they combine.
    pub(crate) fn check(self, py: Python<'_>) -> PyResult<Checked> {
        let mut b = Builder::<Held>::default();
        let dur = |name: &str, v: &Option<Bound<'_, PyAny>>, positive: bool| {
            v.as_ref()
                .map(|v| duration(py, name, v, positive))
                .transpose()
        };
        let ttl = dur("ttl", &self.ttl, true)?;
        if let Some(d) = ttl {
            b = b.ttl(d);
        }
        if let Some(d) = dur("tti", &self.tti, true)? {
            b = b.tti(d);
        }
        let grace = dur("grace", &self.grace, false)?;
        if let Some(d) = grace {
            b = b.grace(d);
        }
        let negative_ttl = dur("negative_ttl", &self.negative_ttl, true)?;
        if let Some(d) = negative_ttl {
            b = b.negative_ttl(d);
        }
        let wait_timeout = dur("wait_timeout", &self.wait_timeout, true)?;
        if let Some(d) = wait_timeout {
            b = b.wait_timeout(d);
        }
        let max_stale = dur("max_stale", &self.max_stale, true)?;
        if let Some(d) = max_stale {
            b = b.max_stale(d);
        }
        if let Some(d) = dur("failsafe_backoff", &self.failsafe_backoff, false)? {
            b = b.failsafe_backoff(d);
        }
        if let Some(d) = dur("soft_timeout", &self.soft_timeout, true)? {
            b = b.soft_timeout(d);
        }
        let hard_timeout = dur("hard_timeout", &self.hard_timeout, true)?;
        if let Some(d) = hard_timeout {
            b = b.hard_timeout(d);
        }
        let jitter = match &self.jitter {
            Some(v) => Some(float(py, "jitter", v)?),
            None => None,
        };
        if let Some(j) = jitter {
            b = b.jitter(j);
        }
        if let Some(v) = &self.beta {
            b = b.beta(float(py, "beta", v)?);
        }
        if let Some(v) = &self.capacity {
            b = b.capacity(count(py, "capacity", v, 1)?);
        }
        let origin_budget = match &self.origin_budget {
            Some(v) => Some(count(py, "origin_budget", v, 1)? as usize),
            None => None,
        };
        if let Some(n) = origin_budget {
            b = b.origin_budget(n);
        }
        if let Some(v) = &self.max_flights {
            b = b.max_flights(count(py, "max_flights", v, 1)? as usize);
        }
        if let Some(v) = &self.max_batch {
            b = b.max_batch(count(py, "max_batch", v, 1)? as usize);
        }
        if let Some(v) = &self.max_key_len {
            b = b.max_key_len(count(py, "max_key_len", v, 1)? as usize);
        }
        if let Some(v) = &self.max_namespaces {
            b = b.max_namespaces(count(py, "max_namespaces", v, 1)? as usize);
        }
        let tick = dur("detector_tick", &self.detector_tick, true)?;
        if let Some(o) = detector(py, self.detector.as_ref(), tick)? {
            b = b.detector(o);
        }
        let namespace = match &self.namespace {
            Some(v) => Some(namespace(py, "namespace", v)?),
            None => None,
        };
        let redis = match &self.redis {
            Some(v) if !v.is_none() => Some(redis_address(py, v)?),
            _ => None,
        };
        let memcached = match &self.memcached {
            Some(v) if !v.is_none() => Some(memcached_address(py, v)?),
            _ => None,
        };
        let redis =
            TierAddress::one_of(redis, memcached).map_err(|e| config_error(py, e.to_string()))?;
        let redis_prefix = match &self.redis_prefix {
            Some(v) => Some(prefix(py, v)?),
            None => None,
        };
        let lease = dur("lease", &self.lease, true)?;
        // `redis_prefix`, `codec` and `lease` are checked even without `redis=` (so that
        // `redis=os.environ.get(...)` configurations fail early), and used only with it.
        let copy_values = flag(py, "copy_values", self.copy_values.as_ref())?
            .unwrap_or(herdless::DEFAULT_COPY_VALUES);
        // `True`: TinyLFU admission in front of SIEVE (the core's `Admission::TinyLfu`).
        if flag(py, "admission", self.admission.as_ref())? == Some(true) {
            b = b.admission(herdless::Admission::TinyLfu);
        }
        let codec = Codec::from_option(py, self.codec.as_ref(), copy_values)?;
        let redis = redis.map(|address| TierOptions {
            address,
            prefix: redis_prefix,
            lease,
        });
        Ok(Checked {
            builder: b,
            namespace,
            origin_budget,
            codec,
            redis,
        })
    }
}

/// Checks the Redis key prefix (non-empty, no `{` or `}`: they delimit hash tags).
fn prefix(py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<String> {
    let s = v
        .cast::<PyString>()
        .map_err(|_| config_type_error(py, "`redis_prefix` must be a str".into()))?
        .to_str()?;
    if s.is_empty() || s.contains(['{', '}']) {
        return Err(config_error(
            py,
            format!("`redis_prefix` must be non-empty, without `{{` or `}}`, got {s:?}"),
        ));
    }
    Ok(s.to_owned())
}

/// The strings of a list or tuple `v` (`None`: `v` is neither); anything else in it is
/// refused with `wrong`.
fn str_list(py: Python<'_>, v: &Bound<'_, PyAny>, wrong: &str) -> PyResult<Option<Vec<String>>> {
    if !(v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>()) {
        return Ok(None);
    }
    v.extract()
        .map(Some)
        .map_err(|_| config_type_error(py, wrong.into()))
}

/// The `memcached=` option: `"host:port"` (servers separated by commas) or a list of them.
/// The fleet engine parses it.
fn memcached_address(py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<TierAddress> {
    let refused = |e: herdless_redis::Error| config_error(py, format!("`memcached`: {e}"));
    let servers: Vec<String> = if let Ok(s) = v.cast::<PyString>() {
        vec![s.to_str()?.to_owned()]
    } else if let Some(servers) = str_list(
        py,
        v,
        "`memcached` as a list must hold \"host:port\" strings",
    )? {
        servers
    } else {
        return Err(config_type_error(
            py,
            "`memcached` must be \"host:port\" (comma-separated servers) or a list of them".into(),
        ));
    };
    TierAddress::memcached(&servers).map_err(refused)
}

/// The `redis=` option: a URL (`redis://`, `unix://`,
/// `redis+cluster://host:port,...`, `memory://name`) or a list of Redis Cluster node URLs.
/// The fleet engine parses it (one parser for every language).
fn redis_address(py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<TierAddress> {
    let refused = |e: herdless_redis::Error| config_error(py, format!("`redis`: {e}"));
    if let Ok(s) = v.cast::<PyString>() {
        return TierAddress::parse(s.to_str()?).map_err(refused);
    }
    let nodes: Vec<String> = if let Some(nodes) =
        str_list(py, v, "`redis` as a list must hold node URL strings")?
    {
        nodes
    } else {
        return Err(config_type_error(
            py,
            "`redis` must be a URL string such as \"redis://127.0.0.1:6379/0\" or a list of Redis Cluster node URLs".into(),
        ));
    };
    TierAddress::nodes(&nodes).map_err(refused)
}
