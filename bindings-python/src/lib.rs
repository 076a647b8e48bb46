//! `herdless._native`: the Python binding of the herdless engine (private; the public API is
//! the pure-Python package `herdless`, which re-exports what users need).
//!
//! One module per concept: [`value`] (Python objects as values, `ABSENT`), [`options`]
//! (`Cache(...)` keywords), [`cache`] (the cache), [`cached`] (the decorated function),
//! [`load`] (the blocking driver), [`steps`] (the state machine's steps for the asyncio
//! driver), [`block`] (waiting with the GIL released), [`tier`] (Redis: the fleet protocol
//! and codecs), [`keys`] (canonical keys), [`metrics`], [`errors`].

mod block;
mod cache;
mod cached;
mod detector;
mod errors;
mod keys;
mod load;
mod metrics;
mod options;
mod steps;
mod tier;
mod value;

use pyo3::prelude::*;

/// Threads of the tokio runtime that bridges asyncio waiters: they only poll waiters and
/// hand results to the event loop, so a few are plenty (the machine may have 2 cores).
const TOKIO_WORKERS: usize = 1;
const TOKIO_BLOCKING: usize = 4;

#[pymodule(gil_used = true)]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    rt.worker_threads(TOKIO_WORKERS)
        .max_blocking_threads(TOKIO_BLOCKING)
        .thread_name("herdless-asyncio-bridge")
        .enable_all();
    pyo3_async_runtimes::tokio::init(rt);

    m.add_class::<cache::Cache>()?;
    m.add_class::<cached::CachedFunction>()?;
    m.add_class::<cached::BoundCachedFunction>()?;
    m.add_class::<keys::KeyBuilder>()?;
    m.add_class::<keys::Keyer>()?;
    m.add_class::<value::Absent>()?;
    m.add_class::<steps::Lead>()?;
    m.add_class::<steps::Wait>()?;
    m.add_class::<steps::RetryToken>()?;
    m.add_class::<load::Refresh>()?;
    m.add_function(wrap_pyfunction!(options::check_seconds, m)?)?;
    m.add_function(wrap_pyfunction!(options::check_namespace, m)?)?;
    m.add("ABSENT", cache::absent_object(m.py())?)?;
    m.add("BUCKETS", metrics::buckets().to_vec())?;
    m.add("COUNTERS", metrics::counter_fields())?;
    Ok(())
}
