//! Attack: a flood of random keys that mostly do not exist. Negative caching
//! is on and a capacity bound is set; the attacker repeats keys (as a retrying client or a
//! botnet does), from several threads at once. The cache must keep
//!
//! - entries within the capacity and the weighted size (a weigher counts value bytes) within
//!   the same bound, at every sample, and no flight record behind once the flood ends;
//! - the origin at one call per unique key per negative TTL while the key's absence is
//!   held: the repeats of a key are answered by the cached absence or by coalescing onto
//!   the one load. When the flood has more unique keys than the capacity holds, SIEVE
//!   evicts absences (a fresh one-hit key may go soon after it came: that is how SIEVE
//!   keeps a hot set), and a repeat of an evicted key costs one more call; so the first
//!   test bounds the extra calls by the evictions, and the second, whose keys fit in the
//!   capacity, demands exactly one call per key.
//!
//! Size: 1,000,000 flood requests in release builds. Debug builds (plain `cargo test`, as
//! CI's `cargo test --workspace` runs it) make 200,000, which keeps the test to a few
//! seconds and is still 20 times the capacity; `HERDLESS_FLOOD_KEYS` overrides both
//! (e.g. `HERDLESS_FLOOD_KEYS=1000000 cargo test -p herdless --test flood`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use herdless::{Cache, DefaultRng, ManualClock};
use rand_core::{Rng, SeedableRng};

/// The bound, in weight units: bytes of value, 1 per absence. About 7,500 entries of the
/// flood's mix (26.5 units each on average).
const CAPACITY: u64 = 200_000;
/// Each key is asked for again within this many requests: far below what one shard holds
/// (about 900 entries with 8 shards), so eviction cannot explain a second origin call.
const WINDOW: usize = 64;

fn flood_size() -> usize {
    std::env::var("HERDLESS_FLOOD_KEYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) {
            200_000
        } else {
            1_000_000
        })
}

/// What the origin holds for an id: one id in ten exists, with a value of 1 to 512 bytes.
fn origin_value(id: u64) -> Option<Vec<u8>> {
    (id % 10 == 0).then(|| vec![0xab; 1 + (id >> 8) as usize % 512])
}

/// Counts the origin's calls per id.
#[derive(Default)]
struct Origin {
    calls: Mutex<HashMap<u64, u32>>,
    total: AtomicUsize,
}

impl Origin {
    fn load(&self, id: u64) -> Option<Vec<u8>> {
        self.total.fetch_add(1, Ordering::Relaxed);
        *self.calls.lock().unwrap().entry(id).or_default() += 1;
        origin_value(id)
    }

    fn worst(&self) -> (u64, u32) {
        let calls = self.calls.lock().unwrap();
        calls
            .iter()
            .map(|(&id, &n)| (id, n))
            .max_by_key(|&(_, n)| n)
            .unwrap_or_default()
    }
}

fn cache(clock: Option<ManualClock>, capacity: u64) -> Cache<Vec<u8>> {
    let b = Cache::<Vec<u8>>::builder()
        .capacity(capacity)
        .weigher(|_k, v: &Vec<u8>| v.len() as u64)
        .negative_ttl(Duration::from_secs(60))
        .ttl(Duration::from_secs(60))
        .max_flights(1_000)
        .rng(DefaultRng::seed_from_u64(7));
    match clock {
        Some(c) => b.clock(c),
        None => b,
    }
    .build()
    .unwrap()
}

fn key(id: u64) -> String {
    format!("users:v1:user:{id:016x}")
}

#[test]
fn a_flood_of_random_keys_keeps_memory_within_the_bound_and_one_origin_call_per_held_key() {
    let n = flood_size();
    let clock = ManualClock::new();
    let cache = cache(Some(clock.clone()), CAPACITY);
    let bound = cache.options().capacity;
    let origin = Arc::new(Origin::default());
    let mut r = DefaultRng::seed_from_u64(1);
    // Each id is requested three times: when drawn, then twice more within WINDOW requests.
    let mut recent: Vec<u64> = Vec::with_capacity(WINDOW);
    let (mut peak_entries, mut peak_weight, mut unique) = (0, 0, 0usize);
    let started = Instant::now();
    for i in 0..n {
        let id = if i % 3 == 0 || recent.is_empty() {
            unique += 1;
            let id = r.next_u64();
            if recent.len() == WINDOW {
                recent.remove(0);
            }
            recent.push(id);
            id
        } else {
            recent[(r.next_u64() % recent.len() as u64) as usize]
        };
        // 10 µs of virtual time a request: the whole flood is shorter than the negative TTL.
        clock.advance(Duration::from_micros(10));
        let o = origin.clone();
        let v = cache
            .get_or_load(&key(id), move || Ok::<_, std::io::Error>(o.load(id)))
            .unwrap();
        assert_eq!(v, origin_value(id));
        if i % 1_000 == 0 {
            let m = cache.metrics();
            peak_entries = peak_entries.max(m.entries);
            peak_weight = peak_weight.max(m.weight);
            assert!(m.weight <= bound, "weight {} > bound {bound}", m.weight);
            assert!(m.entries <= bound);
            assert!(herdless::driver::flights_in_progress(&cache) <= 1);
        }
    }
    let took = started.elapsed();
    let m = cache.metrics();
    let (worst_id, worst) = origin.worst();
    let calls = origin.total.load(Ordering::Relaxed);
    eprintln!(
        "flood: {n} requests, {unique} unique keys, {calls} origin calls, peak {peak_entries} \
         entries / {peak_weight} weight (bound {bound}), {} evictions, {took:?}",
        m.total().evictions
    );
    assert!(m.weight <= bound && m.entries <= bound);
    assert!(
        peak_weight > bound / 2,
        "the bound was reached: {peak_weight}"
    );
    assert_eq!(herdless::driver::flights_in_progress(&cache), 0);
    // Repeats come within WINDOW requests, so an extra call means the key was evicted.
    let extra = calls - unique;
    assert!(
        extra as u64 <= m.total().evictions,
        "{extra} origin calls beyond one per key, with {} evictions (worst: id {worst_id:x}, \
         {worst} calls)",
        m.total().evictions
    );
    assert!(
        extra <= unique / 100,
        "{extra} extra calls for {unique} keys"
    );
}

#[test]
fn the_same_flood_from_several_threads_coalesces_and_stays_bounded() {
    const THREADS: usize = 4;
    // Every thread asks for the same ids in the same order, in lock step (a barrier every
    // WINDOW keys), so each id is requested by all threads at about the same moment.
    let n = flood_size() / THREADS;
    // Room for every key's absence: here eviction cannot excuse a second call.
    let cache = cache(None, 2 * n as u64);
    let bound = cache.options().capacity;
    let origin = Arc::new(Origin::default());
    let barrier = Arc::new(Barrier::new(THREADS + 1));
    let peak_flights = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let (cache, origin, barrier) = (cache.clone(), origin.clone(), barrier.clone());
            let peak_flights = peak_flights.clone();
            std::thread::spawn(move || {
                let mut r = DefaultRng::seed_from_u64(2);
                for i in 0..n {
                    if i % WINDOW == 0 {
                        barrier.wait();
                    }
                    let id = r.next_u64() / 10 * 10 + 1; // absent
                    let o = origin.clone();
                    let v = cache
                        .get_or_load(&key(id), move || Ok::<_, std::io::Error>(o.load(id)))
                        .unwrap();
                    assert_eq!(v, origin_value(id));
                    peak_flights.fetch_max(
                        herdless::driver::flights_in_progress(&cache),
                        Ordering::Relaxed,
                    );
                }
            })
        })
        .collect();
    let (mut peak_entries, mut peak_weight) = (0, 0);
    for _ in (0..n).step_by(WINDOW) {
        barrier.wait();
        let m = cache.metrics();
        peak_entries = peak_entries.max(m.entries);
        peak_weight = peak_weight.max(m.weight);
        assert!(m.weight <= bound && m.entries <= bound, "{m:?}");
    }
    for t in threads {
        t.join().unwrap();
    }
    let took = started.elapsed();
    let calls = origin.total.load(Ordering::Relaxed);
    let (worst_id, worst) = origin.worst();
    eprintln!(
        "threaded flood: {THREADS} threads x {n} requests, {calls} origin calls for {n} unique \
         keys, peak {peak_entries} entries / {peak_weight} weight (bound {bound}), peak \
         {} flights, {took:?}",
        peak_flights.load(Ordering::Relaxed)
    );
    assert_eq!(worst, 1, "id {worst_id:x} cost {worst} origin calls");
    assert_eq!(calls, n);
    assert!(peak_flights.load(Ordering::Relaxed) <= THREADS);
    assert_eq!(herdless::driver::flights_in_progress(&cache), 0);
    let m = cache.metrics();
    assert!(m.weight <= bound && m.entries <= bound);
}

#[test]
fn bumps_of_huge_or_many_namespaces_do_not_grow_memory() {
    let cache = cache(Some(ManualClock::new()), CAPACITY);
    let max = cache.options().max_key_len;
    let huge = "n".repeat(10 << 20);
    for i in 0..2_000 {
        // A namespace longer than any key holds no key: nothing to bump, nothing kept.
        assert_eq!(cache.bump(&huge[..max + 1 + i]), 0);
    }
    // Namespaces nobody used hold nothing: a bump registers nothing for them.
    for i in 0..5_000 {
        assert_eq!(cache.bump(&format!("ns{i}")), 0);
    }
    assert!(cache.metrics().namespaces.is_empty());
    // Used ones: tracked up to `max_namespaces`, then the least recently used is retired.
    let max = cache.options().max_namespaces;
    for i in 0..max + 5_000 {
        cache.set(&format!("used{i}:k"), vec![1]).unwrap();
    }
    let m = cache.metrics();
    assert!(
        m.namespaces.len() <= max + 1,
        "{} namespaces tracked",
        m.namespaces.len()
    );
    assert_eq!(m.total().retired_namespaces, 5_000);
}

/// A bump invalidates exactly its namespace, with thousands of namespaces in use and past
/// the table's bound; a retired namespace's entries are misses, never stale hits, and a
/// bump of a namespace nobody uses clears nothing.
#[test]
fn a_bump_invalidates_exactly_its_namespace() {
    let cache: Cache<u32> = Cache::builder().capacity(100_000).build().unwrap();
    for i in 0..2_000 {
        cache.set(&format!("t{i}:k"), i).unwrap();
    }
    cache.bump("t1500");
    let hits = (0..2_000)
        .filter(|i| cache.get(&format!("t{i}:k")).is_some())
        .count();
    assert_eq!(hits, 1_999, "only t1500's key is gone");
    assert_eq!(cache.get("t1500:k"), None);
    assert_eq!(cache.bump("never-used"), 0);
    assert_eq!(cache.get("t7:k"), Some(7));

    let small: Cache<u32> = Cache::builder().max_namespaces(4).build().unwrap();
    for ns in ["a", "b", "c", "d"] {
        small.set(&format!("{ns}:k"), 1).unwrap();
    }
    small.set("e:k", 2).unwrap(); // retires the least recently used: `a`
    assert_eq!(
        small.get("a:k"),
        None,
        "a retired namespace's entry is a miss"
    );
    small.set("a:k", 3).unwrap(); // a new record for `a` (retires another)
    assert_eq!(small.get("a:k"), Some(3));
    small.bump("e");
    assert_eq!((small.get("e:k"), small.get("a:k")), (None, Some(3)));
    assert_eq!(small.metrics().total().retired_namespaces, 2);
}
