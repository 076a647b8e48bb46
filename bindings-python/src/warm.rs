//! How many keys a warm-up loads at once: the engine's rule
//! (`herdless_redis::call::warm_workers`), for `Cache.warm` / `Cache.awarm`, which drive their
//! warm-ups with Python's threads and tasks.

use pyo3::prelude::*;

/// `concurrency` (None: the engine's default), at least 1, never more than the origin
/// budget nor than the keys.
#[pyfunction]
#[pyo3(signature = (concurrency, origin_budget, keys))]
pub(crate) fn warm_workers(
    concurrency: Option<usize>,
    origin_budget: Option<usize>,
    keys: usize,
) -> usize {
    herdless_redis::call::warm_workers(concurrency, origin_budget, keys)
}
