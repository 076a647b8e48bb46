//! A bounded soak of the in-memory cache: many threads read, write, invalidate and bump at
//! once, on the real clock, with loads that are slow, fail, or outlast the hard timeout.
//! Every value read is checked against the versioned origin (the model and the exact
//! checks are in `common/soak_model.rs`: staleness bound, ordering after a write, origin
//! truth), and memory must not grow: entries stay within capacity, no flight record is left
//! behind, and the resident set size at the end of the steady phase is compared with its
//! start.
//!
//! Length: `HERDLESS_SOAK_SECONDS` (default 20 s, sized for CI), e.g.
//! `HERDLESS_SOAK_SECONDS=300 cargo test --release -p herdless --test soak -- --nocapture`.

#[path = "common/soak_model.rs"]
mod model;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use herdless::{Cache, Error};
use model::{Origin, Rand, rss_bytes, soak_duration};

const KEYS: usize = 2_000;
/// Keys per namespace (`ns{k / NS}:k`), so a bump drops a slice of the key space.
const NS: usize = 100;
const CAPACITY: u64 = 1_000;
const READERS: usize = 8;
const WRITERS: usize = 2;

const TTL: Duration = Duration::from_millis(200);
const GRACE: Duration = Duration::from_millis(100);
const MAX_STALE: Duration = Duration::from_millis(1_000);
const HARD_TIMEOUT: Duration = Duration::from_millis(150);
const JITTER: f64 = 0.2;

fn key(k: usize) -> String {
    format!("ns{}:k{k}", k / NS)
}

/// How old a served version may be (see the model): ttl (1 + j/2) + max_stale + the load.
fn bound() -> Duration {
    TTL.mul_f64(1.0 + JITTER / 2.0) + MAX_STALE + HARD_TIMEOUT
}

#[test]
fn mixed_traffic_never_serves_wrong_or_too_old_data_and_memory_stays_flat() {
    let duration = soak_duration(20);
    let cache: Cache<u64> = Cache::builder()
        .capacity(CAPACITY)
        .ttl(TTL)
        .grace(GRACE)
        .max_stale(MAX_STALE)
        .failsafe_backoff(Duration::from_millis(50))
        .hard_timeout(HARD_TIMEOUT)
        .wait_timeout(Duration::from_millis(300))
        .jitter(JITTER)
        .build()
        .unwrap();
    let origin = Arc::new(Origin::new(KEYS, 1));
    let stop = Arc::new(AtomicBool::new(false));
    let (ops, errors, timeouts) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let mut threads = Vec::new();
    for t in 0..READERS {
        let (cache, origin, stop) = (cache.clone(), origin.clone(), stop.clone());
        let (ops, errors, timeouts) = (ops.clone(), errors.clone(), timeouts.clone());
        threads.push(std::thread::spawn(move || {
            let mut r = Rand(0x9e37_79b9 + t as u64);
            while !stop.load(Ordering::Relaxed) {
                let k = r.skewed(KEYS);
                let (floor, t0) = (origin.floor(0, k), origin.now());
                let roll = r.below(100);
                match cache.get_or_load(&key(k), model::loader(origin.clone(), k, roll)) {
                    Ok(Some(v)) => origin.check(k, v, t0, floor, bound()),
                    Ok(None) => panic!("the origin never answers absent"),
                    Err(Error::LoadTimeout { .. } | Error::WaitTimeout { .. }) => {
                        timeouts.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(Error::Load(_)) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => panic!("unexpected error: {e}"),
                }
                ops.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for t in 0..WRITERS {
        let (cache, origin, stop, ops) = (cache.clone(), origin.clone(), stop.clone(), ops.clone());
        threads.push(std::thread::spawn(move || {
            let mut r = Rand(0x5151_7a7a + t as u64);
            while !stop.load(Ordering::Relaxed) {
                let k = r.skewed(KEYS);
                match r.below(20) {
                    0 => {
                        let ns = k / NS;
                        let keys: Vec<usize> = (ns * NS..(ns + 1) * NS).collect();
                        origin.write_all(0, &keys, || {
                            cache.bump(&format!("ns{ns}"));
                            true
                        });
                    }
                    1..5 => origin.write(0, k, |_| cache.invalidate(&key(k)).is_ok()),
                    5..10 => origin.write(0, k, |v| cache.set(&key(k), v).is_ok()),
                    // The origin changes behind the cache's back: only expiry bounds how
                    // long the old version is served.
                    _ => origin.write(0, k, |_| false),
                }
                ops.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_micros(200));
            }
        }));
    }

    // Warm up for a fifth of the run, then sample at the start and end of the steady phase.
    let started = Instant::now();
    std::thread::sleep(duration / 5);
    let (rss_start, entries_start) = (rss_bytes(), cache.metrics().entries);
    let mut peak_entries = entries_start;
    while started.elapsed() < duration {
        std::thread::sleep(Duration::from_millis(100));
        let m = cache.metrics();
        peak_entries = peak_entries.max(m.entries);
        assert!(m.entries <= CAPACITY, "{} entries", m.entries);
    }
    let (rss_end, entries_end) = (rss_bytes(), cache.metrics().entries);
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    // Every load has ended: no flight record is left, wait past the hard timeout to be
    // sure abandoned ones were settled by a lookup.
    std::thread::sleep(HARD_TIMEOUT * 2);
    for k in 0..KEYS {
        let _ = cache.get(&key(k));
    }
    let m = cache.metrics();
    let checked = origin.reads_checked.load(Ordering::Relaxed);
    let violations = origin.violations.load(Ordering::Relaxed);
    eprintln!(
        "memory soak: {:?}, {} ops ({} reads checked, {} origin loads, {} load errors, {} \
         timeouts), {violations} violations, {} unverifiable; entries start {entries_start} \
         end {entries_end} peak {peak_entries} (capacity {CAPACITY}); RSS start {} KiB end \
         {} KiB; loads in flight at the end {}",
        started.elapsed(),
        ops.load(Ordering::Relaxed),
        checked,
        origin.loads.load(Ordering::Relaxed),
        errors.load(Ordering::Relaxed),
        timeouts.load(Ordering::Relaxed),
        origin.unverifiable.load(Ordering::Relaxed),
        rss_start / 1024,
        rss_end / 1024,
        m.loads_in_flight,
    );
    assert_eq!(violations, 0, "first: {:?}", origin.first_violation());
    assert_eq!(origin.unverifiable.load(Ordering::Relaxed), 0);
    assert!(checked > 1_000, "the soak read little: {checked}");
    assert!(m.entries <= CAPACITY);
    assert_eq!(
        herdless::driver::flights_in_progress(&cache),
        0,
        "flight records left behind"
    );
    // Flat memory: the steady phase may not grow the process by more than a quarter plus
    // 16 MiB (allocator slack; a leak of one record per operation would be far larger).
    assert!(
        rss_end <= rss_start + rss_start / 4 + (16 << 20),
        "RSS grew from {rss_start} to {rss_end} bytes"
    );
}
