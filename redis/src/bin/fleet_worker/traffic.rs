//! `HL_MODE=traffic`: one process of a fleet under open-loop Poisson traffic on one hot key,
//! the traffic of the simulator's fleet scenario, so the simulator's model of the fleet can
//! be checked against the real thing (redis/tests/sim_fleet.rs, redis/benches/sim_fleet.rs).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use herdless::DefaultRng;
use herdless_redis::{Json, RedisBackend, TieredCache, now_ms};
use rand_core::{Rng, SeedableRng};
use tokio::time::Instant;

use super::{env, num};

/// The traffic and the cache's options, from `HL_*` variables.
struct Plan {
    /// Requests per second sent to this process.
    rate: f64,
    duration: Duration,
    /// Unix ms at which the first request may arrive.
    start_at_ms: u64,
    loader: Duration,
    ttl: Duration,
    grace: Duration,
    beta: f64,
    seed: u64,
}

impl Plan {
    fn from_env() -> Self {
        let ms = |name: &str, default: u64| Duration::from_millis(num(name, default));
        Self {
            rate: float("HL_RATE", 100.0),
            duration: ms("HL_DURATION_MS", 10_000),
            start_at_ms: num("HL_START_AT_MS", now_ms()),
            loader: ms("HL_LOADER_MS", 200),
            ttl: ms("HL_TTL_MS", 1000),
            grace: ms("HL_GRACE_MS", 0),
            beta: float("HL_BETA", 0.0),
            seed: num("HL_SEED", 1),
        }
    }
}

fn float(name: &str, default: f64) -> f64 {
    env(name).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// What one request saw.
struct Answer {
    ok: Result<(), String>,
    latency: Duration,
    /// How late the request started against its scheduled arrival (the machine's load).
    late: Duration,
}

/// Sends the traffic, then prints `RESULT requests=.. ok=.. err=.. loader_calls=.. misses=..
/// late_p99_us=.. first_error=..` (`misses`: the L1's) and `LATENCY_US <one figure per
/// request>` (microseconds from the call to its answer).
pub(crate) fn run(backend: RedisBackend, key: String, lease: Duration, wait: Duration) {
    let plan = Plan::from_env();
    // Jitter off: the simulator's strategies under comparison have none, and the real
    // draws would differ from the simulated ones.
    let cache: TieredCache<String, Json> = TieredCache::builder(backend, Json)
        .ttl(plan.ttl)
        .grace(plan.grace)
        .beta(plan.beta)
        .jitter(0.0)
        .lease(lease)
        .wait_timeout(wait)
        .build()
        .expect("cache");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let calls = Arc::new(AtomicU64::new(0));
    let answers = rt.block_on(send(&cache, &key, &plan, &calls));
    // Background refreshes started by the last requests publish before this process goes:
    // a lock left behind would make the other processes wait for its lease.
    std::thread::sleep(plan.loader * 2 + Duration::from_millis(200));
    let misses = cache.metrics().0.total().misses;
    report(&answers, calls.load(Ordering::SeqCst), misses);
}

async fn send(
    cache: &TieredCache<String, Json>,
    key: &str,
    plan: &Plan,
    calls: &Arc<AtomicU64>,
) -> Vec<Answer> {
    // Connected before the traffic begins (the simulator's processes are up and warm); the
    // read changes nothing.
    let _ = cache.fleet().read(key).await;
    // No traffic at all (and no infinite gap to sleep on).
    if !(plan.rate > 0.0 && plan.rate.is_finite()) {
        return Vec::new();
    }
    let start = Instant::now() + Duration::from_millis(plan.start_at_ms.saturating_sub(now_ms()));
    let end = start + plan.duration;
    let mut rng = DefaultRng::seed_from_u64(plan.seed);
    let mut at = start;
    let mut tasks = Vec::new();
    loop {
        // Exponential gaps of mean 1 / rate: Poisson arrivals, as the simulator draws them.
        let unit = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        at += Duration::from_secs_f64(-(1.0 - unit).ln() / plan.rate);
        if at >= end {
            break;
        }
        tokio::time::sleep_until(at).await;
        let (cache, key, calls, loader) =
            (cache.clone(), key.to_owned(), calls.clone(), plan.loader);
        let scheduled = at;
        tasks.push(tokio::spawn(async move {
            let began = Instant::now();
            let r = cache
                .get_or_load_async(&key, move || async move {
                    calls.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(loader).await;
                    Ok::<_, herdless_redis::Error>(Some(format!(
                        "loaded by {}",
                        std::process::id()
                    )))
                })
                .await;
            Answer {
                ok: match r {
                    Ok(Some(_)) => Ok(()),
                    Ok(None) => Err("absent".into()),
                    Err(e) => Err(e.to_string()),
                },
                latency: began.elapsed(),
                late: began.saturating_duration_since(scheduled),
            }
        }));
    }
    let mut answers = Vec::with_capacity(tasks.len());
    for t in tasks {
        answers.push(t.await.expect("request task"));
    }
    answers
}

fn report(answers: &[Answer], loader_calls: u64, misses: u64) {
    let us = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    let mut late: Vec<u64> = answers.iter().map(|a| us(a.late)).collect();
    late.sort_unstable();
    let late_p99 = late
        .get(((late.len() as f64 * 0.99).ceil() as usize).saturating_sub(1))
        .copied()
        .unwrap_or(0);
    let errors: Vec<&String> = answers.iter().filter_map(|a| a.ok.as_ref().err()).collect();
    // Failed requests too, as the simulator counts them.
    let latencies: Vec<String> = answers.iter().map(|a| us(a.latency).to_string()).collect();
    println!(
        "RESULT requests={} ok={} err={} loader_calls={loader_calls} misses={misses} late_p99_us={late_p99} first_error={:?}",
        answers.len(),
        answers.len() - errors.len(),
        errors.len(),
        errors.first()
    );
    println!("LATENCY_US {}", latencies.join(" "));
}
