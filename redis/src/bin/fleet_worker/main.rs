//! One process of a test fleet (used by the fleet and chaos tests, and handy for trying the
//! protocol by hand). Configured by environment variables:
//!
//! - `HL_URL` (one server) or `HL_CLUSTER` (comma-separated nodes), `HL_PREFIX`, `HL_KEY`.
//! - `HL_MODE=stampede`: at `HL_START_AT_MS` (Unix ms), `HL_CALLERS` concurrent callers call
//!   `get_or_load_async` on the key; the loader sleeps `HL_LOADER_MS` and counts itself
//!   with INCR on `HL_COUNTER`. Prints `RESULT loader_calls=.. ok=.. err=.. p50_us=..
//!   p99_us=.. max_us=..` (latency from the start instant to the answer).
//! - `HL_MODE=hold`: takes the fleet lock of the key, prints `LOCKED`, and sleeps (its lease
//!   keeps being extended) until killed.
//! - `HL_MODE=traffic`: from `HL_START_AT_MS`, Poisson arrivals at `HL_RATE` requests/s for
//!   `HL_DURATION_MS` (seeded by `HL_SEED`), each a `get_or_load_async` of the key through a
//!   tiered cache with `HL_TTL_MS`, `HL_GRACE_MS`, `HL_BETA` and no jitter, whose loader
//!   sleeps `HL_LOADER_MS`. Prints `RESULT requests=.. ok=.. err=.. loader_calls=..
//!   misses=.. late_p99_us=..` and `LATENCY_US ..` (see `traffic.rs`): the real side of the
//!   simulator's fleet comparison.
//!
//! - `HL_MODE=batch`: concurrent batch loads of overlapping keys (see `batch.rs`).
//!
//! `HL_LEASE_MS`, `HL_WAIT_MS` set the lease and wait timeout.

mod batch;
mod traffic;

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use herdless_redis::{FleetOptions, FleetOutcome, Json, RedisBackend, TieredCache, now_ms};

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

fn num(name: &str, default: u64) -> u64 {
    env(name).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let prefix = env("HL_PREFIX").unwrap_or_else(|| "hl".into());
    let builder = match (env("HL_URL"), env("HL_CLUSTER")) {
        (_, Some(nodes)) => RedisBackend::cluster(nodes.split(',').map(str::to_owned)),
        (Some(url), None) => RedisBackend::builder(url),
        (None, None) => panic!("set HL_URL or HL_CLUSTER"),
    };
    let backend = builder.prefix(prefix).build().expect("backend");
    let key = env("HL_KEY").expect("HL_KEY");
    let lease = Duration::from_millis(num("HL_LEASE_MS", 5000));
    let wait = Duration::from_millis(num("HL_WAIT_MS", 5000));
    match env("HL_MODE").as_deref().unwrap_or("stampede") {
        "hold" => hold(&backend, &key, lease, wait),
        "traffic" => traffic::run(backend, key, lease, wait),
        "batch" => batch::run(backend, key, lease, wait),
        _ => stampede(backend, key, lease, wait),
    }
}

fn hold(backend: &RedisBackend, key: &str, lease: Duration, wait: Duration) {
    let fleet = backend.fleet(FleetOptions {
        lease,
        wait_timeout: wait,
        ..FleetOptions::default()
    });
    match fleet.lead_blocking(key, 0).expect("lead") {
        FleetOutcome::Lead(lease) => {
            println!("LOCKED");
            std::io::stdout().flush().expect("flush");
            std::thread::sleep(Duration::from_secs(3600));
            drop(lease);
        }
        other => panic!("expected the lock, got {other:?}"),
    }
}

/// The cache every timed mode uses (ttl 60 s, the given lease and wait) and a runtime for
/// its callers.
fn setup(
    backend: &RedisBackend,
    lease: Duration,
    wait: Duration,
) -> (TieredCache<String, Json>, tokio::runtime::Runtime) {
    let cache = TieredCache::builder(backend.clone(), Json)
        .ttl(Duration::from_secs(60))
        .lease(lease)
        .wait_timeout(wait)
        .build()
        .expect("cache");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    (cache, rt)
}

fn stampede(backend: RedisBackend, key: String, lease: Duration, wait: Duration) {
    let callers = num("HL_CALLERS", 500) as usize;
    let loader_ms = num("HL_LOADER_MS", 200);
    let start_at = num("HL_START_AT_MS", now_ms());
    let counter = env("HL_COUNTER");
    let (cache, rt) = setup(&backend, lease, wait);
    let calls = Arc::new(AtomicU64::new(0));
    let results = rt.block_on(async {
        std::thread::sleep(Duration::from_millis(start_at.saturating_sub(now_ms())));
        let tasks: Vec<_> = (0..callers)
            .map(|_| {
                let (cache, key, calls, counter, backend) = (
                    cache.clone(),
                    key.clone(),
                    calls.clone(),
                    counter.clone(),
                    backend.clone(),
                );
                tokio::spawn(async move {
                    let r = cache
                        .get_or_load_async(&key, move || async move {
                            calls.fetch_add(1, Ordering::SeqCst);
                            if let Some(c) = counter {
                                let mut incr = redis::cmd("INCR");
                                incr.arg(c);
                                backend.query::<i64>(incr).await?;
                            }
                            tokio::time::sleep(Duration::from_millis(loader_ms)).await;
                            Ok::<_, herdless_redis::Error>(Some(format!(
                                "loaded by {}",
                                std::process::id()
                            )))
                        })
                        .await;
                    (r, now_us().saturating_sub(start_at * 1000))
                })
            })
            .collect();
        let mut out = Vec::with_capacity(callers);
        for t in tasks {
            out.push(t.await.expect("caller task"));
        }
        out
    });
    let mut lat: Vec<u64> = Vec::new();
    let mut errors = Vec::new();
    for (r, ms) in &results {
        match r {
            Ok(Some(_)) => lat.push(*ms),
            Ok(None) => errors.push("absent".to_string()),
            Err(e) => errors.push(e.to_string()),
        }
    }
    lat.sort_unstable();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 * p).ceil() as usize).saturating_sub(1))
            .copied()
            .unwrap_or(0)
    };
    println!(
        "RESULT loader_calls={} ok={} err={} p50_us={} p99_us={} max_us={} first_error={:?}",
        calls.load(Ordering::SeqCst),
        lat.len(),
        errors.len(),
        pct(0.50),
        pct(0.99),
        lat.last().copied().unwrap_or(0),
        errors.first()
    );
}
