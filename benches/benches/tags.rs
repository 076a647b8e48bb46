//! Tags (issue 19): the cost of a hit on an entry with 0 (untagged), 1 and 8 tags, side by
//! side in one run (each tag is two atomic loads on the read), and the cost of
//! `invalidate_tag` on a tag carried by 1,000, 10,000 and 100,000 entries: constant, since
//! it stamps the tag's record and touches no entry.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use herdless::Cache;
use herdless_benches::hit::N;
use herdless_benches::keys;

fn cache(capacity: usize) -> Cache<u64> {
    Cache::builder()
        .capacity(capacity as u64)
        .ttl(Duration::from_secs(3600))
        .build()
        .unwrap()
}

fn get_hit(c: &mut Criterion) {
    let keys = keys(N);
    let mut group = c.benchmark_group("tags_get_hit");
    for tags in [0usize, 1, 8] {
        let cache = cache(10 * N);
        let names: Vec<String> = (0..tags).map(|t| format!("tag:{t}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        for (i, k) in keys.iter().enumerate() {
            cache.set_tagged(k, i as u64, &names).unwrap();
        }
        let mut i = 0;
        group.bench_function(BenchmarkId::from_parameter(format!("{tags}_tags")), |b| {
            b.iter(|| {
                i = (i + 1) % N;
                cache.get(black_box(&keys[i]))
            })
        });
    }
    group.finish();
}

fn invalidate(c: &mut Criterion) {
    let mut group = c.benchmark_group("tags_invalidate_tag");
    for entries in [1_000usize, 10_000, 100_000] {
        let cache = cache(2 * entries);
        for (i, k) in keys(entries).iter().enumerate() {
            cache.set_tagged(k, i as u64, &["catalog"]).unwrap();
        }
        group.bench_function(
            BenchmarkId::from_parameter(format!("{entries}_entries")),
            |b| b.iter(|| cache.invalidate_tag(black_box("catalog"))),
        );
        // The invalidation dropped every entry (checked outside the timing).
        assert!(cache.get("bench:0").is_none());
    }
    group.finish();
}

criterion_group!(benches, get_hit, invalidate);
criterion_main!(benches);
