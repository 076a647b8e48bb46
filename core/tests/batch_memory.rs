//! A batch of N keys needs memory linear in N: its loader calls (`max_batch` keys each) are
//! split off the keys without each call keeping the capacity of all the keys after it (that
//! made one batch N^2 / max_batch: 554 MB for 30,000 keys). Peak heap counted by a global
//! allocator, so this file holds one test (the tests of a file share the allocator).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::time::Duration;

use herdless::Cache;

#[path = "common/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::{Counting, LIVE, PEAK};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The most heap one batch of `n` distinct keys held beyond what was live before it (the
/// cache that ends up holding the `n` values included).
fn peak_of_a_batch(n: usize) -> usize {
    let cache = Cache::<u64>::builder()
        .capacity(2 * n as u64)
        .ttl(Duration::from_secs(600))
        .build()
        .unwrap();
    let keys: Vec<String> = (0..n).map(|i| format!("p:{i}")).collect();
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let answers = cache.get_or_load_many(&keys, |batch: &[String]| {
        Ok::<_, Infallible>(
            batch
                .iter()
                .map(|k| (k.clone(), Some(k.len() as u64)))
                .collect::<HashMap<_, _>>(),
        )
    });
    let peak = PEAK.load(Ordering::Relaxed) - before;
    assert_eq!(answers.len(), n);
    assert!(answers.iter().all(|a| matches!(a, Ok(Some(_)))));
    peak
}

#[test]
fn one_batch_of_n_keys_needs_memory_linear_in_n() {
    let small = peak_of_a_batch(10_000);
    let large = peak_of_a_batch(40_000);
    let per_key = large / 40_000;
    eprintln!("peak heap: 10,000 keys {small} B, 40,000 keys {large} B ({per_key} B per key)");
    // Linear: four times the keys, about four times the memory (quadratic would be 16x).
    assert!(
        large < 5 * small,
        "40,000 keys took {large} B, 10,000 took {small} B: not linear"
    );
    // A cached entry and its share of the batch's bookkeeping are a few hundred bytes.
    assert!(per_key < 2_048, "{per_key} B per key");
}
