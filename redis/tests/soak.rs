//! A bounded soak of the two-tier cache: two processes (two tiered caches with their own
//! connections and origin ids) share a private Redis; many threads read, write, invalidate
//! and bump at once, loads are slow, fail or outlast the hard timeout, and Redis is killed
//! and restarted empty in the middle. Every value read is checked against the versioned
//! origin (the model and the checks: core/tests/common/soak_model.rs), and memory must not
//! grow (L1 entries within capacity, no flight record left, RSS at the start and end of the
//! steady phase).
//!
//! Across processes a write reaches the other's L1 by notification, so the ordering check
//! (a read that starts after a write returned sees it) is made per process; the staleness
//! bound is checked for every read in both. While Redis is down a write fails and is not
//! counted as returned (its process drops its own L1 copy; the other's copy ages out within
//! the bound).
//!
//! Length: `HERDLESS_SOAK_SECONDS` (default 20 s, sized for CI), e.g.
//! `HERDLESS_SOAK_SECONDS=300 cargo test --release -p herdless-redis --test soak -- --nocapture`.

mod common;
#[path = "../../core/tests/common/soak_model.rs"]
mod model;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use herdless::Error;
use herdless_redis::{Json, RedisBackend, TieredCache};
use model::{LoadFailed, Origin, Rand, rss_bytes, soak_duration};

const KEYS: usize = 500;
const NS: usize = 50;
const CAPACITY: u64 = 300;
const PROCESSES: usize = 2;
const READERS: usize = 3; // per process
const TTL: Duration = Duration::from_millis(300);
const GRACE: Duration = Duration::from_millis(100);
const MAX_STALE: Duration = Duration::from_millis(1_000);
const HARD_TIMEOUT: Duration = Duration::from_millis(150);
const JITTER: f64 = 0.2;

fn key(k: usize) -> String {
    format!("ns{}:k{k}", k / NS)
}

/// ttl (1 + j/2) + max_stale + the load, plus 20 ms for Redis's millisecond clock and the
/// round trips between a load's end and its entry's creation.
fn bound() -> Duration {
    TTL.mul_f64(1.0 + JITTER / 2.0) + MAX_STALE + HARD_TIMEOUT + Duration::from_millis(20)
}

fn cache(url: &str, prefix: &str) -> TieredCache<u64, Json> {
    let b = RedisBackend::builder(url)
        .prefix(prefix)
        .op_timeout(Duration::from_millis(300))
        .connect_timeout(Duration::from_millis(200))
        .heartbeat(Duration::from_millis(200))
        .build()
        .expect("backend");
    TieredCache::builder(b, Json)
        .ttl(TTL)
        .grace(GRACE)
        .max_stale(MAX_STALE)
        .hard_timeout(HARD_TIMEOUT)
        .jitter(JITTER)
        .wait_timeout(Duration::from_millis(500))
        .lease(Duration::from_millis(500))
        .recheck(Duration::from_millis(50))
        .l1(|b| {
            b.capacity(CAPACITY)
                .failsafe_backoff(Duration::from_millis(50))
        })
        .build()
        .expect("cache")
}

#[derive(Default)]
struct Counts {
    ops: AtomicU64,
    load_errors: AtomicU64,
    timeouts: AtomicU64,
    backend_errors: AtomicU64,
    failed_writes: AtomicU64,
}

#[test]
fn two_processes_and_a_redis_restart_never_serve_wrong_or_too_old_data() {
    if !common::redis_available() {
        return;
    }
    let duration = soak_duration(20);
    let mut srv = common::Server::start();
    let prefix = common::unique("soak");
    let caches: Vec<_> = (0..PROCESSES).map(|_| cache(&srv.url(), &prefix)).collect();
    let origin = Arc::new(Origin::new(KEYS, PROCESSES));
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counts::default());
    let mut threads = Vec::new();
    for (p, c) in caches.iter().enumerate() {
        for t in 0..READERS {
            let (cache, origin, stop, n) =
                (c.clone(), origin.clone(), stop.clone(), counts.clone());
            threads.push(std::thread::spawn(move || {
                let mut r = Rand(0x9e37_79b9 + (p * 100 + t) as u64);
                while !stop.load(Ordering::Relaxed) {
                    let k = r.skewed(KEYS);
                    let (floor, t0) = (origin.floor(p, k), origin.now());
                    let roll = r.below(100);
                    match cache.get_or_load(&key(k), model::loader(origin.clone(), k, roll)) {
                        Ok(Some(v)) => origin.check(k, v, t0, floor, bound()),
                        Ok(None) => panic!("the origin never answers absent"),
                        Err(Error::LoadTimeout { .. } | Error::WaitTimeout { .. }) => {
                            n.timeouts.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(Error::Load(_)) => {
                            n.load_errors.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(Error::Backend(_)) => {
                            n.backend_errors.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => panic!("unexpected error: {e}"),
                    }
                    n.ops.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        let (cache, origin, stop, n) = (c.clone(), origin.clone(), stop.clone(), counts.clone());
        threads.push(std::thread::spawn(move || {
            let mut r = Rand(0x5151_7a7a + p as u64);
            while !stop.load(Ordering::Relaxed) {
                let k = r.skewed(KEYS);
                let ok = |done: bool| {
                    if !done {
                        n.failed_writes.fetch_add(1, Ordering::Relaxed);
                    }
                    done
                };
                match r.below(20) {
                    0 => {
                        let ns = k / NS;
                        let keys: Vec<usize> = (ns * NS..(ns + 1) * NS).collect();
                        origin.write_all(p, &keys, || ok(cache.bump(&format!("ns{ns}")).is_ok()));
                    }
                    1..5 => origin.write(p, k, |_| ok(cache.invalidate(&key(k)).is_ok())),
                    5..10 => origin.write(p, k, |v| ok(cache.set(&key(k), v).is_ok())),
                    _ => origin.write(p, k, |_| false),
                }
                n.ops.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
            }
        }));
    }

    let started = Instant::now();
    std::thread::sleep(duration / 5);
    let rss_start = rss_bytes();
    let entries = |cs: &[TieredCache<u64, Json>]| -> Vec<u64> {
        cs.iter().map(|c| c.l1().metrics().entries).collect()
    };
    let entries_start = entries(&caches);
    let mut restarted = None;
    while started.elapsed() < duration {
        std::thread::sleep(Duration::from_millis(100));
        if restarted.is_none() && started.elapsed() >= duration / 2 {
            srv.restart(); // SIGKILL, then an empty server on the same port
            restarted = Some(started.elapsed());
        }
        for e in entries(&caches) {
            assert!(e <= CAPACITY, "{e} L1 entries");
        }
    }
    let (rss_end, entries_end) = (rss_bytes(), entries(&caches));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    std::thread::sleep(HARD_TIMEOUT * 2);
    for c in &caches {
        for k in 0..KEYS {
            let _ = c.l1().get(&key(k));
        }
    }
    let checked = origin.reads_checked.load(Ordering::Relaxed);
    let violations = origin.violations.load(Ordering::Relaxed);
    let l2: Vec<_> = caches.iter().map(|c| c.metrics().1).collect();
    eprintln!(
        "redis soak: {:?} (Redis restarted at {restarted:?}), {} ops ({checked} reads \
         checked, {} origin loads, {} load errors, {} timeouts, {} backend errors, {} failed \
         writes), {violations} violations, {} unverifiable; L1 entries start \
         {entries_start:?} end {entries_end:?} (capacity {CAPACITY} each); RSS start {} KiB \
         end {} KiB; L2 hits {} commits {} backend errors {}",
        started.elapsed(),
        counts.ops.load(Ordering::Relaxed),
        origin.loads.load(Ordering::Relaxed),
        counts.load_errors.load(Ordering::Relaxed),
        counts.timeouts.load(Ordering::Relaxed),
        counts.backend_errors.load(Ordering::Relaxed),
        counts.failed_writes.load(Ordering::Relaxed),
        origin.unverifiable.load(Ordering::Relaxed),
        rss_start / 1024,
        rss_end / 1024,
        l2.iter().map(|m| m.l2_hits).sum::<u64>(),
        l2.iter().map(|m| m.commits).sum::<u64>(),
        l2.iter().map(|m| m.backend_errors).sum::<u64>(),
    );
    assert!(restarted.is_some());
    assert_eq!(violations, 0, "first: {:?}", origin.first_violation());
    assert_eq!(origin.unverifiable.load(Ordering::Relaxed), 0);
    assert!(checked > 1_000, "the soak read little: {checked}");
    for c in &caches {
        assert_eq!(
            herdless::driver::flights_in_progress(c.l1()),
            0,
            "flight records left behind"
        );
        assert!(c.l1().metrics().entries <= CAPACITY);
    }
    // Reads after the restart went through Redis again: the caches recovered by themselves.
    let k = key(0);
    caches[0].set(&k, 7).unwrap();
    assert_eq!(
        caches[1]
            .get_or_load(&k, || Ok::<_, LoadFailed>(Some(8)))
            .unwrap(),
        Some(7)
    );
    assert!(
        rss_end <= rss_start + rss_start / 4 + (16 << 20),
        "RSS grew from {rss_start} to {rss_end} bytes"
    );
}
