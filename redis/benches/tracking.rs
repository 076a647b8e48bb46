//! What following writes from outside herdless costs (PROTOCOL.md section 4, "Writes from
//! outside herdless"): two fleets on one private redis-server, each a writer and four
//! listening processes (backends of their own, `isolated`, subscribed), one with key
//! tracking (the default) and one with `outside_writes(false)` (herdless's notices only).
//! Side by side in one run, alternated:
//!
//! - an L2 hit (`Backend::read`, one round trip): tracking remembers no reads, so it should
//!   cost nothing here;
//! - a `set` with four listeners: wall time of the write, and CPU per write of this process
//!   (the writer and the listeners' push handling) and of redis-server (the pushes it
//!   sends), from `/proc`.
//!
//! `cargo bench -p herdless-redis --bench tracking` (needs redis-server on PATH).

#[path = "../tests/common/mod.rs"]
mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;
use herdless::backend::Backend;
use herdless_redis::{Json, RedisBackend, TieredCache, block_on, now_ms};

const LISTENERS: usize = 4;

/// A writer and its listeners over `prefix`.
struct Fleet {
    writer: TieredCache<String, Json>,
    reader: RedisBackend,
    _listeners: Vec<TieredCache<String, Json>>,
}

fn cache(url: &str, prefix: &str, track: bool) -> TieredCache<String, Json> {
    let backend = RedisBackend::builder(url)
        .prefix(prefix)
        .isolated()
        .outside_writes(track)
        .build()
        .unwrap();
    TieredCache::builder(backend, Json)
        .ttl(Duration::from_secs(3600))
        .build()
        .unwrap()
}

fn fleet(url: &str, prefix: &str, track: bool) -> Fleet {
    let writer = cache(url, prefix, track);
    writer.set("w:hit", "x".repeat(100)).unwrap();
    let listeners: Vec<_> = (0..LISTENERS)
        .map(|_| {
            let l = cache(url, prefix, track);
            // A read subscribes it (and asks for tracking).
            assert!(l.get("w:hit").unwrap().is_some());
            l
        })
        .collect();
    let reader = RedisBackend::builder(url)
        .prefix(prefix)
        .isolated()
        .outside_writes(track)
        .build()
        .unwrap();
    Fleet {
        writer,
        reader,
        _listeners: listeners,
    }
}

/// CPU time (user + system) of process `pid` so far.
fn cpu(pid: &str) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces): utime is the 12th, stime 13th.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    // USER_HZ is 100 on Linux.
    Duration::from_millis(ticks * 10)
}

/// Rounds of `n` sets on each fleet in turn: (wall, own CPU, server CPU) per set.
fn cpu_per_set(fleets: &[(&str, &Fleet)], server: i32, rounds: usize, n: usize) {
    let server = server.to_string();
    let mut sum = vec![(Duration::ZERO, Duration::ZERO, Duration::ZERO); fleets.len()];
    for round in 0..rounds {
        for (i, (_, f)) in fleets.iter().enumerate() {
            // Let the last round's pushes be handled before the clocks are read.
            std::thread::sleep(Duration::from_millis(50));
            let (t, me, srv) = (Instant::now(), cpu("self"), cpu(&server));
            for k in 0..n {
                f.writer
                    .set(&format!("w:{}", k % 1000), format!("v{round}"))
                    .unwrap();
            }
            std::thread::sleep(Duration::from_millis(50));
            let wall = t.elapsed() - Duration::from_millis(50);
            sum[i].0 += wall;
            sum[i].1 += cpu("self") - me;
            sum[i].2 += cpu(&server) - srv;
        }
    }
    let per = |d: Duration| d.as_secs_f64() * 1e6 / (rounds * n) as f64;
    for ((name, _), (wall, me, srv)) in fleets.iter().zip(&sum) {
        println!(
            "set with {LISTENERS} listeners, {name}: wall {:.1} us, this process's CPU {:.1} us, redis-server's CPU {:.1} us per set ({rounds} alternated rounds x {n})",
            per(*wall),
            per(*me),
            per(*srv)
        );
    }
}

fn main() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let url = srv.url();
    let on = fleet(&url, "on", true);
    let off = fleet(&url, "off", false);
    // Which connections the server tracks keys for: the "on" fleet's subscriptions only.
    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut srv.client())
        .unwrap();
    let tracking = clients
        .lines()
        .filter(|l| {
            l.split(' ')
                .any(|f| f.starts_with("flags=") && f.contains('t'))
        })
        .count();
    println!("connections with key tracking on: {tracking} (the tracking fleet's subscriptions)");
    cpu_per_set(
        &[("tracking on", &on), ("notices only", &off)],
        srv.pid(),
        6,
        5_000,
    );
    let mut c = Criterion::default()
        .configure_from_args()
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    {
        let mut g = c.benchmark_group("tracking/l2_hit");
        for (name, f) in [("tracking on", &on), ("notices only", &off)] {
            g.bench_function(name, |b| {
                b.iter(|| black_box(block_on(f.reader.read("w:hit", now_ms())).unwrap()))
            });
        }
    }
    {
        let mut g = c.benchmark_group(format!("tracking/set with {LISTENERS} listeners"));
        for (name, f) in [("tracking on", &on), ("notices only", &off)] {
            let mut i = 0u64;
            g.bench_function(name, |b| {
                b.iter(|| {
                    i += 1;
                    f.writer
                        .set(&format!("w:{}", i % 1000), "v".into())
                        .unwrap()
                })
            });
        }
    }
    c.final_summary();
}
