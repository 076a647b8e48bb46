//! Benchmarks of the Redis tier against a private redis-server on loopback:
//! L2 hit (our one-round-trip read, the read-or-lock script, and the tiered L1-miss path)
//! against a raw redis-rs GET in the same run, the L1 hit, lock + unlock, and how long a
//! waiter in another process takes to get a value after its leader publishes it.
//!
//! `cargo bench -p herdless-redis --bench redis` (needs redis-server on PATH).

#[path = "../tests/common/mod.rs"]
mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;
use herdless::backend::{AcquireRequest, Acquired, Backend, StoredEntry};
use herdless_redis::{
    FleetOptions, FleetOutcome, Json, RedisBackend, TieredCache, block_on, now_ms,
};

fn entry(value: &[u8]) -> StoredEntry {
    let now = now_ms();
    StoredEntry {
        value: Some(value.to_vec()),
        fresh_until_ms: now + 3_600_000,
        stale_until_ms: now + 3_600_000,
        retain_until_ms: now + 3_600_000,
        load_duration: Duration::from_millis(5),
        version: 0,
        epoch: 0,
        ttl: None,
        tti: None,
        meta: None,
        tags: Vec::new(),
        tag_marks: Vec::new(),
    }
}

fn benches(c: &mut Criterion, url: &str) {
    let value = vec![b'x'; 100];
    let b = RedisBackend::builder(url).prefix("bench").build().unwrap();
    block_on(b.commit("bench:hit", entry(&value), None))
        .unwrap()
        .unwrap();
    // Raw redis-rs: a multiplexed connection on a one-worker runtime, driven from this thread.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut raw = rt
        .block_on(
            redis::Client::open(url)
                .unwrap()
                .get_multiplexed_async_connection(),
        )
        .unwrap();
    let _: () = rt
        .block_on(
            redis::cmd("SET")
                .arg("raw:hit")
                .arg(&value)
                .query_async(&mut raw),
        )
        .unwrap();

    let mut g = c.benchmark_group("l2_hit");
    g.bench_function("raw redis-rs GET", |bch| {
        bch.iter(|| {
            let v: Vec<u8> = rt
                .block_on(redis::cmd("GET").arg("raw:hit").query_async(&mut raw))
                .unwrap();
            black_box(v)
        })
    });
    g.bench_function("herdless read (MGET value+epoch, decode)", |bch| {
        bch.iter(|| black_box(block_on(b.read("bench:hit", now_ms())).unwrap().unwrap()))
    });
    g.bench_function("herdless acquire (EVALSHA read-or-lock) on a hit", |bch| {
        bch.iter(|| {
            let r = block_on(b.acquire(
                "bench:hit",
                AcquireRequest {
                    now_ms: now_ms(),
                    lease: Duration::from_secs(5),
                    secret: [1; 16],
                    have_version: 0,
                },
            ));
            black_box(r.unwrap().unwrap())
        })
    });
    let cache: TieredCache<String, Json> = TieredCache::builder(b.clone(), Json).build().unwrap();
    cache.set("bench:tiered", "x".repeat(100)).unwrap();
    g.bench_function("tiered get_or_load: L1 miss, L2 hit", |bch| {
        bch.iter(|| {
            let _ = cache.l1().invalidate("bench:tiered");
            let v = cache.get_or_load("bench:tiered", || Ok::<_, std::io::Error>(None));
            black_box(v.unwrap().unwrap())
        })
    });
    g.finish();

    c.bench_function("l1_hit/tiered get_or_load", |bch| {
        let _ = cache.get_or_load("bench:tiered", || Ok::<_, std::io::Error>(None));
        bch.iter(|| {
            black_box(
                cache
                    .get_or_load("bench:tiered", || Ok::<_, std::io::Error>(None))
                    .unwrap(),
            )
        })
    });

    c.bench_function("lock_unlock/acquire + release", |bch| {
        bch.iter(|| {
            let a = block_on(b.acquire(
                "bench:lock",
                AcquireRequest {
                    now_ms: now_ms(),
                    lease: Duration::from_secs(5),
                    secret: [2; 16],
                    have_version: 0,
                },
            ))
            .unwrap()
            .unwrap();
            let Acquired::Locked { token, .. } = a else {
                panic!("lock held: {a:?}")
            };
            assert!(block_on(b.release("bench:lock", &token)).unwrap().unwrap());
        })
    });
}

/// A leader publishes while a waiter of another "process" (its own backend, connections and
/// subscription) waits with re-checks disabled: the waiter's latency from the publish call
/// to its answer is the wake-up cost beyond the loader's time.
fn wakeup(url: &str, rounds: usize) -> Vec<Duration> {
    let mk = || RedisBackend::builder(url).prefix("wake").build().unwrap();
    let (a, b) = (mk(), mk());
    let opts = FleetOptions {
        recheck: Duration::from_secs(30),
        ..FleetOptions::default()
    };
    let (fa, fb) = (a.fleet(opts), b.fleet(opts));
    let mut out = Vec::with_capacity(rounds);
    for i in 0..rounds {
        let key = format!("w:{i}");
        let FleetOutcome::Lead(lease) = fa.lead_blocking(&key, 0).unwrap() else {
            panic!("lead")
        };
        let fb = fb.clone();
        let k = key.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            tx.send(()).unwrap();
            let r = fb.lead_blocking(&k, 0);
            (r, Instant::now())
        });
        rx.recv().unwrap();
        // Let the waiter find the lock taken and go to sleep on its watch.
        std::thread::sleep(Duration::from_millis(20));
        let published = Instant::now();
        lease.publish_blocking(entry(b"\"v\"")).unwrap();
        let (r, woke) = waiter.join().unwrap();
        assert!(matches!(r.unwrap(), FleetOutcome::Fresh(_)));
        out.push(woke - published);
    }
    let m = b.metrics();
    assert_eq!(m.fleet_wait_rechecks, 0, "woken by notifications only");
    out
}

/// Raw GET and our read, interleaved call by call so both see the same machine load;
/// returns (raw, ours) latencies.
fn interleaved(url: &str, rounds: usize) -> (Vec<Duration>, Vec<Duration>) {
    let b = RedisBackend::builder(url).prefix("inter").build().unwrap();
    let value = vec![b'x'; 100];
    block_on(b.commit("i:hit", entry(&value), None))
        .unwrap()
        .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut raw = rt
        .block_on(
            redis::Client::open(url)
                .unwrap()
                .get_multiplexed_async_connection(),
        )
        .unwrap();
    let _: () = rt
        .block_on(
            redis::cmd("SET")
                .arg("raw:i")
                .arg(&value)
                .query_async(&mut raw),
        )
        .unwrap();
    let (mut r, mut o) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for _ in 0..rounds {
        let t = Instant::now();
        let v: Vec<u8> = rt
            .block_on(redis::cmd("GET").arg("raw:i").query_async(&mut raw))
            .unwrap();
        r.push(t.elapsed());
        black_box(v);
        let t = Instant::now();
        black_box(block_on(b.read("i:hit", now_ms())).unwrap().unwrap());
        o.push(t.elapsed());
    }
    r.sort();
    o.sort();
    (r, o)
}

/// An L1 hit through the tiered cache against the core engine's `get` and `get_or_load`
/// hits, batches alternated so all see the same machine: per-call medians of (tiered
/// get_or_load, core get_or_load, core get, tiered get, the core `get` of the tiered
/// cache's own L1). A `u64` value: no allocation in any of them.
fn l1_interleaved(url: &str, rounds: usize, batch: u32) -> [Duration; 5] {
    let backend = RedisBackend::builder(url).prefix("l1").build().unwrap();
    let tiered: TieredCache<u64, Json> = TieredCache::builder(backend, Json).build().unwrap();
    let core: herdless::Cache<u64> = herdless::Cache::new();
    let load = || Ok::<_, std::io::Error>(Some(7u64));
    tiered.get_or_load("bench:l1", load).unwrap();
    core.get_or_load("bench:l1", load).unwrap();
    let mut runs: [Vec<Duration>; 5] = Default::default();
    let mut time = |i: usize, f: &dyn Fn() -> u64| {
        let s = Instant::now();
        for _ in 0..batch {
            black_box(f());
        }
        runs[i].push(s.elapsed() / batch);
    };
    for _ in 0..rounds {
        time(0, &|| {
            tiered
                .get_or_load(black_box("bench:l1"), load)
                .unwrap()
                .unwrap()
        });
        time(1, &|| {
            core.get_or_load(black_box("bench:l1"), load)
                .unwrap()
                .unwrap()
        });
        time(2, &|| core.get(black_box("bench:l1")).unwrap());
        time(3, &|| tiered.get(black_box("bench:l1")).unwrap().unwrap());
        time(4, &|| tiered.l1().get(black_box("bench:l1")).unwrap().value);
    }
    runs.map(|mut r| {
        r.sort();
        pct(&r, 0.5)
    })
}

fn pct(v: &[Duration], p: f64) -> Duration {
    v[((v.len() as f64 * p).ceil() as usize).saturating_sub(1)]
}

fn main() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let url = srv.url();
    let (raw, ours) = interleaved(&url, 5000);
    println!(
        "l2_hit interleaved x5000: raw GET p50 {:?} p99 {:?} | herdless read p50 {:?} p99 {:?} | ratio p50 {:.2}",
        pct(&raw, 0.5),
        pct(&raw, 0.99),
        pct(&ours, 0.5),
        pct(&ours, 0.99),
        pct(&ours, 0.5).as_secs_f64() / pct(&raw, 0.5).as_secs_f64()
    );
    let [tiered, core, get, tiered_get, l1_get] = l1_interleaved(&url, 41, 20_000);
    println!(
        "l1_hit interleaved (41 rounds x 20,000, u64): tiered get_or_load {tiered:?} | core get_or_load {core:?} | core get {get:?} | tiered get {tiered_get:?} | its L1's core get {l1_get:?} | tiered/core get_or_load {:.2}, tiered get_or_load/core get {:.2}, tiered/core get {:.2}, tiered get/its L1's get {:.2}",
        tiered.as_secs_f64() / core.as_secs_f64(),
        tiered.as_secs_f64() / get.as_secs_f64(),
        tiered_get.as_secs_f64() / get.as_secs_f64(),
        tiered_get.as_secs_f64() / l1_get.as_secs_f64()
    );
    let mut lat = wakeup(&url, 300);
    lat.sort();
    println!(
        "waiter_wakeup (publish -> other process answered, {} rounds): p50 {:?}, p99 {:?}, max {:?}",
        lat.len(),
        pct(&lat, 0.5),
        pct(&lat, 0.99),
        lat[lat.len() - 1]
    );
    let mut c = Criterion::default()
        .configure_from_args()
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    benches(&mut c, &url);
    c.final_summary();
}
