//! Bounded memory (negative caching must not turn a random-key flood into a memory leak):
//! an attacker asks for random ids that do not exist. Each absence is cached, but entries
//! stay within capacity (SIEVE evicts the one-hit wonders first), flight records return to
//! zero, and a small hot set stays resident through the flood.

mod common;

use common::{Origin, Sim, rng, secs};
use herdless::Cache;
use rand_core::Rng;

/// Keys in the flood. A million in release builds; in debug builds (the default `cargo
/// test`) a fifth of that keeps the test fast, and is still 20 times the capacity.
const FLOOD: usize = if cfg!(debug_assertions) {
    200_000
} else {
    1_000_000
};
const CAPACITY: u64 = 10_000;

#[test]
fn a_flood_of_random_absent_keys_stays_within_capacity() {
    let sim = Sim::new();
    let cache: Cache<u64> = sim
        .builder()
        .capacity(CAPACITY)
        .negative_ttl(secs(60))
        .build()
        .unwrap();
    let origin = Origin::new();
    let mut r = rng(1);
    for i in 0..FLOOD {
        let key = format!("users:v1:user:{:016x}", r.next_u64());
        assert_eq!(
            cache.get_or_load(&key, origin.instant(Ok(None))).unwrap(),
            None
        );
        if i % 10_000 == 0 {
            assert!(cache.metrics().entries <= CAPACITY);
        }
    }
    let m = cache.metrics();
    assert!(m.entries <= CAPACITY, "{} entries", m.entries);
    assert!(
        m.entries >= CAPACITY * 9 / 10,
        "the capacity is used: {}",
        m.entries
    );
    assert_eq!(m.weight, m.entries);
    assert_eq!(m.total().evictions, FLOOD as u64 - m.entries);
    assert_eq!(herdless::driver::flights_in_progress(&cache), 0);
    assert_eq!(origin.calls(), FLOOD);
}

#[test]
fn a_hot_set_stays_resident_under_a_scan_of_one_hit_wonders() {
    let sim = Sim::new();
    let cache: Cache<u64> = sim
        .builder()
        .capacity(1_000)
        .ttl(secs(3_600))
        .build()
        .unwrap();
    let origin = Origin::new();
    let hot: Vec<String> = (0..100).map(|i| format!("hot:v1:item:{i}")).collect();
    let (mut hot_reads, mut hot_misses) = (0, 0);
    for i in 0..100_000u64 {
        // One scan key (never read again) for every hot read.
        let scan = format!("scan:v1:item:{i}");
        cache
            .get_or_load(&scan, origin.instant(Ok(Some(i))))
            .unwrap();
        let key = &hot[i as usize % hot.len()];
        let before = origin.calls();
        cache.get_or_load(key, origin.instant(Ok(Some(0)))).unwrap();
        if i >= 1_000 {
            hot_reads += 1;
            hot_misses += origin.calls() - before;
        }
    }
    let hit_ratio = 1.0 - hot_misses as f64 / hot_reads as f64;
    assert!(hit_ratio > 0.99, "hot-set hit ratio {hit_ratio:.3}");
    assert!(cache.metrics().entries <= 1_000);
    let scan = cache.metrics().namespace("scan").unwrap().counters.clone();
    assert!(
        scan.evictions > 90_000,
        "the scan keys were the ones evicted"
    );
}

#[test]
fn capacity_bounds_the_whole_cache_even_with_many_shards() {
    // 100 entries over 64 shards: the shards' capacities must add up to 100, not more.
    let sim = Sim::new();
    let cache: Cache<u64> = sim.builder().capacity(100).shards(64).build().unwrap();
    for i in 0..10_000u64 {
        cache.set(&format!("k:{i}"), i).unwrap();
    }
    let m = cache.metrics();
    assert!(m.entries <= 100, "{} entries with capacity 100", m.entries);
    assert!(m.entries >= 50, "the capacity is used: {}", m.entries);
}

#[test]
fn flight_records_are_bounded_by_max_flights() {
    let sim = Sim::new();
    let cache: Cache<u64> = sim.builder().max_flights(3).build().unwrap();
    let guards: Vec<_> = (0..3)
        .map(|i| match cache.lookup(&format!("k:{i}")).unwrap() {
            herdless::Lookup::Lead(g) => g,
            _ => panic!("a new key leads"),
        })
        .collect();
    assert!(matches!(
        cache.lookup("k:3"),
        Err(herdless::Error::TooManyFlights { max: 3 })
    ));
    drop(guards);
    assert_eq!(herdless::driver::flights_in_progress(&cache), 0);
    assert!(matches!(cache.lookup("k:3"), Ok(herdless::Lookup::Lead(_))));
}

#[test]
fn a_byte_bound_charges_keys_absences_and_the_engines_own_bytes() {
    const BYTES: u64 = 1 << 20;
    let sim = Sim::new();
    let cache: Cache<Vec<u8>> = sim
        .builder()
        .max_bytes(BYTES, |v: &Vec<u8>| v.len() as u64)
        .negative_ttl(secs(60))
        .build()
        .unwrap();
    let origin = Origin::new();
    let mut r = rng(2);
    // Absences first: with a plain weigher they would weigh 1 each and a flood of them
    // would hold a million entries under a "1 MiB" bound.
    for _ in 0..50_000 {
        let key = format!("users:v1:user:{:016x}", r.next_u64());
        assert_eq!(
            cache.get_or_load(&key, origin.instant(Ok(None))).unwrap(),
            None
        );
    }
    let m = cache.metrics();
    let per_absence = herdless::ENTRY_OVERHEAD_BYTES + "users:v1:user:".len() as u64 + 16;
    assert!(m.weight <= BYTES, "{} > {BYTES}", m.weight);
    assert_eq!(m.weight, m.entries * per_absence);
    assert!(m.entries <= BYTES / per_absence);
    // Values weigh their bytes, their key and the overhead.
    cache.clear();
    cache.set("blobs:a", vec![0; 1000]).unwrap();
    let m = cache.metrics();
    assert_eq!(
        (m.entries, m.weight),
        (1, 1000 + 7 + herdless::ENTRY_OVERHEAD_BYTES)
    );
    // A value larger than a shard's share of the bound is refused, not stored.
    let err = cache
        .set("blobs:huge", vec![0; BYTES as usize])
        .unwrap_err();
    assert!(
        matches!(err, herdless::Error::ValueTooLarge { .. }),
        "{err}"
    );
}
