//! The engine's metrics snapshot as plain Python data; `herdless.Metrics` (pure Python)
//! wraps it in dataclasses.

use herdless::HistogramSnapshot;
use herdless::MetricsSnapshot;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

fn histogram<'py>(py: Python<'py>, h: &HistogramSnapshot) -> PyResult<Bound<'py, PyTuple>> {
    let counts = PyTuple::new(py, h.counts.iter())?;
    (counts, h.sum.as_secs_f64()).into_pyobject(py)
}

/// `{"entries", "weight", "loads_in_flight", "tags", "tag_invalidations",
/// "tag_expirations", "retired_tags", "namespaces": {name: {"counters": {...},
/// "load_duration": (counts, sum_seconds), "lock_wait": (counts, sum_seconds)}}}`.
pub(crate) fn snapshot_to_dict<'py>(
    py: Python<'py>,
    m: &MetricsSnapshot,
) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("entries", m.entries)?;
    out.set_item("weight", m.weight)?;
    out.set_item("loads_in_flight", m.loads_in_flight)?;
    out.set_item("tags", m.tags)?;
    out.set_item("tag_invalidations", m.tag_invalidations)?;
    out.set_item("tag_expirations", m.tag_expirations)?;
    out.set_item("retired_tags", m.retired_tags)?;
    let namespaces = PyDict::new(py);
    for ns in &m.namespaces {
        let counters = PyDict::new(py);
        for (name, _help, value) in ns.counters.fields() {
            counters.set_item(name, value)?;
        }
        let d = PyDict::new(py);
        d.set_item("counters", counters)?;
        d.set_item("load_duration", histogram(py, &ns.load_duration)?)?;
        d.set_item("lock_wait", histogram(py, &ns.lock_wait)?)?;
        namespaces.set_item(&ns.namespace, d)?;
    }
    out.set_item("namespaces", namespaces)?;
    Ok(out)
}

/// The Redis tier's counters, `{name: value}`.
pub(crate) fn redis_to_dict<'py>(
    py: Python<'py>,
    m: &herdless_redis::RedisMetrics,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, _help, value) in m.fields() {
        d.set_item(name, value)?;
    }
    Ok(d)
}

/// Upper bounds of the histogram buckets, in seconds (a last, +Inf bucket is implicit).
pub(crate) fn buckets() -> &'static [f64] {
    &HistogramSnapshot::BUCKETS
}

/// Every counter's (name, help), in the engine's order.
pub(crate) fn counter_fields() -> Vec<(&'static str, &'static str)> {
    herdless::CounterSnapshot::default()
        .fields()
        .iter()
        .map(|(name, help, _)| (*name, *help))
        .collect()
}
