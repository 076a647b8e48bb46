//! The Zipf workloads shared by the `zipf` bench (throughput) and the `zipf_hit_ratio` bin:
//! each contender replays a fixed-seed trace, reading each key and loading it (a trivial
//! loader) on a miss, at the same capacity.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use herdless::{Admission, Cache};

/// Keys in the key space of every Zipf workload.
pub const KEY_SPACE: usize = 100_000;
/// The Zipf exponents measured.
pub const ALPHAS: [f64; 2] = [0.8, 1.0];
/// Capacities measured, in percent of the key space.
pub const CAPACITY_PERCENTS: [usize; 2] = [1, 10];
/// The trace's seed.
pub const SEED: u64 = 42;

/// Loader calls of every contender, to be reset between runs: a static, so herdless's
/// `'static` loader needs no handle cloned per read.
pub static LOADS: AtomicU64 = AtomicU64::new(0);

/// One read of a key, loading the given value on a miss; answers the value read.
pub type Read = Box<dyn FnMut(&str, u64) -> u64>;

/// herdless with room for `capacity` entries and the given admission policy, as a [`Read`]
/// counting loader calls in [`LOADS`].
pub fn herdless(capacity: usize, admission: Admission) -> Read {
    let cache: Cache<u64> = Cache::builder()
        .capacity(capacity as u64)
        .ttl(Duration::from_secs(3600))
        .admission(admission)
        .build()
        .unwrap();
    Box::new(move |k, v| {
        cache
            .get_or_load(k, move || {
                LOADS.fetch_add(1, Ordering::Relaxed);
                Ok::<_, Infallible>(Some(v))
            })
            .unwrap()
            .unwrap()
    })
}

/// The contenders, each with room for `capacity` entries, counting loader calls in [`LOADS`].
pub fn contenders(capacity: usize) -> Vec<(&'static str, Read)> {
    let quick = quick_cache::sync::Cache::<String, u64>::new(capacity);
    let moka = moka::sync::Cache::<String, u64>::new(capacity as u64);
    vec![
        ("herdless", herdless(capacity, Admission::Always)),
        (
            "quick_cache",
            Box::new(move |k, v| {
                quick
                    .get_or_insert_with(k, || {
                        LOADS.fetch_add(1, Ordering::Relaxed);
                        Ok::<_, Infallible>(v)
                    })
                    .unwrap()
            }),
        ),
        (
            "moka",
            Box::new(move |k, v| {
                moka.get_with_by_ref(k, || {
                    LOADS.fetch_add(1, Ordering::Relaxed);
                    v
                })
            }),
        ),
    ]
}
