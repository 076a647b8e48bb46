//! A 100-key request with 10% misses (issue 18): herdless `get_or_load_many` (ONE loader call
//! for the 10 misses) against 100 herdless `get_or_load` calls and against moka's nearest
//! equivalent, `get_with_by_ref` in a loop (both make 10 loader calls). Before each request
//! (untimed) its 10 miss keys are dropped from every cache, so every request has exactly 10
//! misses; the loaders are trivial, so this is the caches' own cost, not the origin's (the
//! origin sees 1 call per request from the batch, 10 from the others).

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use herdless::Cache;
use herdless_benches::keys;

const KEYS: usize = 100_000;
const REQUEST: usize = 100;
const MISSES: usize = 10;

/// The `r`-th request: 100 consecutive keys; its first 10 are the misses.
fn request(all: &[String], r: usize) -> (Vec<String>, Vec<String>) {
    let start = (r * REQUEST) % (KEYS - REQUEST);
    let keys: Vec<String> = all[start..start + REQUEST].to_vec();
    let misses = keys[..MISSES].to_vec();
    (keys, misses)
}

fn batch(c: &mut Criterion) {
    let all = keys(KEYS);
    let mut group = c.benchmark_group("batch_100_keys_10pct_misses");
    let herdless: Cache<u64> = Cache::builder()
        .capacity(KEYS as u64 * 2)
        .ttl(Duration::from_secs(3600))
        .build()
        .unwrap();
    for (i, k) in all.iter().enumerate() {
        herdless.set(k, i as u64).unwrap();
    }
    let mut r = 0;
    group.bench_function("herdless_get_or_load_many", |b| {
        b.iter_batched(
            || {
                r += 1;
                let (keys, misses) = request(&all, r);
                for m in &misses {
                    herdless.invalidate(m).unwrap();
                }
                keys
            },
            |keys| {
                herdless.get_or_load_many(&keys, |misses: &[String]| {
                    Ok::<_, Infallible>(
                        misses
                            .iter()
                            .map(|k| (k.clone(), Some(k.len() as u64)))
                            .collect::<HashMap<_, _>>(),
                    )
                })
            },
            BatchSize::SmallInput,
        )
    });
    group.bench_function("herdless_get_or_load_x100", |b| {
        b.iter_batched(
            || {
                r += 1;
                let (keys, misses) = request(&all, r);
                for m in &misses {
                    herdless.invalidate(m).unwrap();
                }
                keys
            },
            |keys| {
                keys.iter()
                    .map(|k| {
                        let n = k.len() as u64;
                        herdless.get_or_load(k, move || Ok::<_, Infallible>(Some(n)))
                    })
                    .collect::<Vec<_>>()
            },
            BatchSize::SmallInput,
        )
    });
    drop(herdless);

    let moka = moka::sync::Cache::<String, u64>::new(KEYS as u64 * 2);
    for (i, k) in all.iter().enumerate() {
        moka.insert(k.clone(), i as u64);
    }
    group.bench_function("moka_get_with_by_ref_x100", |b| {
        b.iter_batched(
            || {
                r += 1;
                let (keys, misses) = request(&all, r);
                for m in &misses {
                    moka.invalidate(m.as_str());
                }
                keys
            },
            |keys| {
                keys.iter()
                    .map(|k| moka.get_with_by_ref(k.as_str(), || k.len() as u64))
                    .collect::<Vec<_>>()
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, batch);
criterion_main!(benches);
