//! The memcached tier against the Redis tier, side by side in one run, each on a private
//! server on loopback: a shared-tier read (`Backend::read`: one round trip on both), the
//! lock cycle of a miss (acquire, then release), a write (`set`), and what a caller of a
//! two-tier cache pays for a hit (Redis: the L1; memcached: a round trip, since it keeps
//! no L1 copies).
//!
//! `cargo bench -p herdless-redis --bench memcached` (needs memcached and redis-server on
//! PATH).

#[path = "../tests/common/mod.rs"]
mod common;

use std::hint::black_box;
use std::time::Duration;

use criterion::Criterion;
use herdless::backend::{AcquireRequest, Acquired, Backend, LockToken};
use herdless_redis::memcached::MemcachedBackend;
use herdless_redis::{Json, RedisBackend, SharedTier, TieredCache, block_on, now_ms};

fn request(secret: [u8; 16]) -> AcquireRequest {
    AcquireRequest {
        now_ms: now_ms(),
        lease: Duration::from_secs(5),
        secret,
        have_version: 0,
    }
}

/// The four figures of one tier, named `<what>/<tier>`.
fn tier(c: &mut Criterion, name: &str, shared: SharedTier, backend: &dyn Backend) {
    let cache: TieredCache<String, Json> = TieredCache::builder(shared, Json)
        .ttl(Duration::from_secs(3600))
        .build()
        .unwrap();
    cache.set("bench:hit", "x".repeat(100)).unwrap();
    c.bench_function(&format!("read/{name}"), |b| {
        b.iter(|| {
            black_box(
                block_on(backend.read("bench:hit", now_ms()))
                    .unwrap()
                    .unwrap(),
            )
        })
    });
    let mut n = 0u64;
    c.bench_function(&format!("acquire+release/{name}"), |b| {
        b.iter(|| {
            n += 1;
            let mut secret = [0u8; 16];
            secret[..8].copy_from_slice(&n.to_be_bytes());
            let key = "bench:cold";
            let got = block_on(backend.acquire(key, request(secret)))
                .unwrap()
                .unwrap();
            let Acquired::Locked { token, .. } = got else {
                panic!("bench:cold is cold: {got:?}")
            };
            let token: LockToken = token;
            black_box(block_on(backend.release(key, &token)).unwrap().unwrap());
        })
    });
    c.bench_function(&format!("set/{name}"), |b| {
        b.iter(|| cache.set("bench:w", "y".repeat(100)).unwrap())
    });
    c.bench_function(&format!("get_or_load hit/{name}"), |b| {
        b.iter(|| {
            black_box(
                cache
                    .get_or_load("bench:hit", || Ok::<_, std::io::Error>(None))
                    .unwrap(),
            )
        })
    });
}

fn main() {
    let mut c = Criterion::default()
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
        .configure_from_args();
    let Some(mc) = common::memcached::Memcached::start() else {
        return;
    };
    if !common::redis_available() {
        return;
    }
    let redis = common::Server::start();
    // Alternated, so that the machine's noise falls on both alike.
    for _round in 0..2 {
        let m = MemcachedBackend::builder([mc.addr()])
            .prefix("bench")
            .build()
            .unwrap();
        tier(&mut c, "memcached", m.clone().into(), &m);
        let r = RedisBackend::builder(redis.url())
            .prefix("bench")
            .build()
            .unwrap();
        tier(&mut c, "redis", r.clone().into(), &r);
    }
    c.final_summary();
}
