//! The cost of entry tags on the Redis tier, against a private redis-server on loopback:
//! an L2 hit (tiered `get`, the L1 copy dropped first) of an entry with 0, 1 and 8 tags,
//! interleaved call by call, with its tags' stamps known (within `tag_check`: no extra
//! round trip) and unknown (`tag_check` 0: one `MGET` of the stamps per read); and
//! `invalidate_tag` of a tag carried by 1,000, 10,000 and 100,000 entries.
//!
//! `cargo bench -p herdless-redis --bench tags` (needs redis-server on PATH).

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use herdless::Loaded;
use herdless_redis::{Json, RedisBackend, TieredCache};

type Cache = TieredCache<String, Json>;

fn cache(url: &str, prefix: &str, tag_check: Duration) -> Cache {
    let b = RedisBackend::builder(url).prefix(prefix).build().unwrap();
    TieredCache::builder(b, Json)
        .ttl(Duration::from_secs(3600))
        .tag_check(tag_check)
        .build()
        .unwrap()
}

fn tags(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("tag:{i}")).collect()
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 * p).ceil() as usize).saturating_sub(1)]
}

/// p50 and p99 of an L2 hit of entries with 0, 1 and 8 tags, interleaved.
fn reads(c: &Cache, rounds: usize) -> Vec<(usize, Duration, Duration)> {
    let counts = [0, 1, 8];
    for n in counts {
        let page = Loaded::value("x".repeat(100)).tags(tags(n));
        c.set_with(&format!("bench:{n}"), page).unwrap();
    }
    let mut lat = vec![Vec::with_capacity(rounds); counts.len()];
    for _ in 0..rounds {
        for (i, n) in counts.iter().enumerate() {
            let key = format!("bench:{n}");
            let _ = c.l1().invalidate(&key);
            let t = Instant::now();
            assert!(c.get(&key).unwrap().is_some());
            lat[i].push(t.elapsed());
        }
    }
    counts
        .iter()
        .zip(lat.iter_mut())
        .map(|(n, l)| (*n, pct(l, 0.5), pct(l, 0.99)))
        .collect()
}

fn main() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let url = srv.url();
    for (label, check) in [
        ("stamps known (tag_check 60 s)", Duration::from_secs(60)),
        ("stamps read each time (tag_check 0)", Duration::ZERO),
    ] {
        let c = cache(&url, &common::unique("tb"), check);
        let fetches = c.metrics().1.tag_fetches;
        for (n, p50, p99) in reads(&c, 3000) {
            println!(
                "l2_hit tiered get, {n} tags, {label}, x3000 interleaved: p50 {p50:?} p99 {p99:?}"
            );
        }
        let fetches = c.metrics().1.tag_fetches - fetches;
        println!("  tag_fetches during those 9000 reads: {fetches}");
    }
    let c = cache(&url, &common::unique("ti"), Duration::from_secs(60));
    let mut written = 0;
    for n in [1_000, 10_000, 100_000] {
        let tag = format!("shared:{n}");
        while written < n {
            let page = Loaded::value("p".to_owned()).tags([tag.as_str()]);
            c.set_with(&format!("page:{n}:{written}"), page).unwrap();
            written += 1;
        }
        written = 0;
        let t = Instant::now();
        c.invalidate_tag(&tag).unwrap();
        let took = t.elapsed();
        let probe = format!("page:{n}:{}", n / 2);
        let _ = c.l1().invalidate(&probe);
        assert!(c.get(&probe).unwrap().is_none());
        println!("invalidate_tag of a tag carried by {n} entries (L1 + Redis): {took:?}");
    }
}
