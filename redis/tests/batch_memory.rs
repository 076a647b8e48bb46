//! A batch of N keys on the fleet tier needs process memory linear in N (each loader call
//! split off the keys used to keep the capacity of every key after it: N^2 / max_batch).
//! Peak heap counted by a global allocator, so this file holds one test per tier, run one
//! after the other under a lock (the tests of a file share the allocator).

mod common;

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::Duration;

use herdless_redis::memory::MemoryStore;
use herdless_redis::{Json, RedisBackend, SharedTier, TieredCache};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[path = "../../core/tests/common/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::{Counting, LIVE, PEAK};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The most heap one batch of `n` distinct keys held beyond what was live before it.
fn peak_of_a_batch(tier: impl Into<SharedTier>, n: usize) -> usize {
    let cache: TieredCache<u64, Json> = TieredCache::builder(tier, Json)
        .ttl(Duration::from_secs(600))
        .l1(move |b| b.capacity(2 * n as u64))
        .build()
        .expect("cache");
    let keys: Vec<String> = (0..n).map(|i| format!("p:{i}")).collect();
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let answers = cache.get_or_load_many(&keys, |batch: &[String]| {
        Ok::<_, std::io::Error>(
            batch
                .iter()
                .map(|k| (k.clone(), Some(k.len() as u64)))
                .collect::<HashMap<_, _>>(),
        )
    });
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(before);
    assert_eq!(answers.len(), n);
    assert!(answers.iter().all(|a| matches!(a, Ok(Some(_)))));
    peak
}

/// Four times the keys take about four times the memory (quadratic would be 16x).
fn assert_linear(tier: &str, small: usize, large: usize) {
    eprintln!("{tier}: peak heap 10,000 keys {small} B, 40,000 keys {large} B");
    assert!(
        large < 5 * small,
        "{tier}: 40,000 keys took {large} B, 10,000 took {small} B: not linear"
    );
    let per_key = large / 40_000;
    assert!(per_key < 2_048, "{tier}: {per_key} B per key");
}

#[test]
fn on_the_memory_tier_one_batch_needs_memory_linear_in_n() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let small = peak_of_a_batch(MemoryStore::new().backend().build().unwrap(), 10_000);
    let large = peak_of_a_batch(MemoryStore::new().backend().build().unwrap(), 40_000);
    assert_linear("memory", small, large);
}

#[test]
fn on_redis_one_batch_needs_memory_linear_in_n() {
    if !common::redis_available() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let srv = common::Server::start();
    let backend = |p: &str| {
        RedisBackend::builder(srv.url())
            .prefix(common::unique(p))
            .build()
            .expect("backend")
    };
    let small = peak_of_a_batch(backend("mem-small"), 10_000);
    let large = peak_of_a_batch(backend("mem-large"), 40_000);
    assert_linear("redis", small, large);
}
