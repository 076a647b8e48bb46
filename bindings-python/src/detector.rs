//! The stampede detector's alerts and the hot-key tracker as plain Python data;
//! `herdless.Alert` and `herdless.HotKey` (pure Python) wrap them in dataclasses.

use herdless::{Alert, Evidence, HotKey};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// The evidence's figures, durations in seconds.
fn evidence<'py>(py: Python<'py>, e: &Evidence) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    match e {
        Evidence::MissRate {
            per_second,
            steady_per_second,
            expired_share,
            top_key_share,
        } => {
            d.set_item("misses_per_second", per_second)?;
            d.set_item("steady_misses_per_second", steady_per_second)?;
            d.set_item("expired_share", expired_share)?;
            d.set_item("top_key_share", top_key_share)?;
        }
        Evidence::Latency { p50, p99, loads } => {
            d.set_item("load_p50", p50.as_secs_f64())?;
            d.set_item("load_p99", p99.as_secs_f64())?;
            d.set_item("loads", loads)?;
        }
        Evidence::LockWait {
            wait_p99,
            rebuild_p99,
            waits,
        } => {
            d.set_item("wait_p99", wait_p99.as_secs_f64())?;
            d.set_item("rebuild_p99", rebuild_p99.as_secs_f64())?;
            d.set_item("waits", waits)?;
        }
        Evidence::Periodic {
            period,
            spikes,
            ttl,
        } => {
            d.set_item("period", period.as_secs_f64())?;
            d.set_item("spikes", spikes)?;
            d.set_item("ttl", ttl.map(|t| t.as_secs_f64()))?;
        }
        _ => {}
    }
    Ok(d)
}

/// Each alert as a dict of snake_case fields (times and durations in seconds), with
/// `message`, the engine's one-line rendering.
pub(crate) fn alerts<'py>(py: Python<'py>, alerts: &[Alert]) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for a in alerts {
        let d = PyDict::new(py);
        d.set_item("kind", a.kind.name())?;
        d.set_item("cause", a.cause.name())?;
        d.set_item("namespace", &a.namespace)?;
        d.set_item("key", a.key.as_deref())?;
        d.set_item("since", a.since.as_secs_f64())?;
        d.set_item("last_seen", a.last_seen.as_secs_f64())?;
        d.set_item("active", a.active)?;
        d.set_item("evidence", evidence(py, &a.evidence)?)?;
        let cures: Vec<&str> = a.cures.iter().map(|c| c.name()).collect();
        d.set_item("cures", cures)?;
        d.set_item("message", a.to_string())?;
        out.append(d)?;
    }
    Ok(out)
}

/// Hot keys as `(key, count, misses)` tuples.
pub(crate) fn hot_keys(keys: Vec<HotKey>) -> Vec<(String, u64, u64)> {
    keys.into_iter()
        .map(|k| (k.key, k.count, k.misses))
        .collect()
}
