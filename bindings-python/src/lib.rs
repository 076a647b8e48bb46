//! `herdless._native`: the Python binding of the herdless engine (private; the public API is
//! the pure-Python package `herdless`, which re-exports what users need).
//!
//! One module per concept: [`value`] (Python objects as values, `ABSENT`), [`options`]
//! (`Cache(...)` keywords), [`cache`] (the cache), [`observe`] (loader calls seen by an
//! observer: spans), [`cached`] (the decorated function; [`vectorcall`], its calling convention), [`hit`]
//! (`herdless.Cache.get`'s own calling convention),
//! [`driver`] (Python threads and asyncio as runtimes of the engine's call machine, waiting
//! with the GIL released, batch loaders' answers), [`asyncio`] (the bridge to asyncio
//! futures), [`ops`] (the shared tier's operations, sync and async), [`codec`] (values across
//! the shared tier), [`shutdown`] (exiting while herdless is busy), [`tags`] (tags from
//! Python), [`testing`] (the in-memory tier's faults), [`keys`] (canonical
//! keys), [`lock`] (the engine's lock on a key), [`http`] (the engine's HTTP rules),
//! [`metrics`], [`errors`].

mod asyncio;
mod cache;
mod cached;
mod codec;
mod context;
mod detector;
mod driver;
mod errors;
mod hit;
mod http;
mod keys;
mod loader;
mod lock;
mod metrics;
mod observe;
mod ops;
mod options;
mod shutdown;
mod tags;
mod testing;
mod value;
mod vectorcall;
mod wake;
mod warm;

use pyo3::prelude::*;

#[pymodule(gil_used = true)]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Exiting while herdless runs loaders or waits on other threads: see `shutdown`.
    let drain = wrap_pyfunction!(shutdown::_drain_at_exit, m)?;
    m.py()
        .import("atexit")?
        .call_method1("register", (drain,))?;

    m.add_class::<cache::Cache>()?;
    m.add_class::<cached::CachedFunction>()?;
    m.add_class::<cached::BoundCachedFunction>()?;
    m.add_class::<lock::FleetLock>()?;
    m.add_class::<keys::KeyBuilder>()?;
    m.add_class::<keys::Keyer>()?;
    m.add_class::<value::Absent>()?;
    m.add_class::<context::LoadContext>()?;
    m.add_class::<context::Loaded>()?;
    m.add_class::<context::Previous>()?;
    m.add_class::<asyncio::Bridge>()?;
    m.add_class::<asyncio::Due>()?;
    m.add_class::<driver::threads::Refresh>()?;
    m.add_class::<driver::event_loop::WakeCall>()?;
    m.add_class::<driver::group::Done>()?;
    m.add_class::<driver::group::PendingCall>()?;
    m.add_class::<testing::MemoryStore>()?;
    m.add_function(wrap_pyfunction!(options::check_seconds, m)?)?;
    m.add_function(wrap_pyfunction!(options::check_namespace, m)?)?;
    m.add_function(wrap_pyfunction!(http::http_request_key, m)?)?;
    m.add_function(wrap_pyfunction!(http::http_canonical_query, m)?)?;
    m.add_function(wrap_pyfunction!(http::http_keeps, m)?)?;
    m.add_function(wrap_pyfunction!(warm::warm_workers, m)?)?;
    m.add_function(wrap_pyfunction!(hit::_install_get, m)?)?;
    m.add("ABSENT", cache::absent_object(m.py())?)?;
    m.add("BUCKETS", metrics::buckets().to_vec())?;
    m.add("COUNTERS", metrics::counter_fields())?;
    Ok(())
}
