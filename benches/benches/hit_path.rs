//! The hit path, side by side in one run: herdless (`get` and `lookup`, freshness and XFetch
//! checks included) against quick_cache, moka and a parking_lot `RwLock<HashMap>`, on one and
//! two threads. Ratios matter, not absolute figures: the machine is shared and noisy.

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use herdless::{Cache, Lookup};
use herdless_benches::keys;

const N: usize = 1_000;

type Get = Arc<dyn Fn(&str) -> Option<u64> + Send + Sync>;

fn contenders() -> Vec<(&'static str, Get)> {
    let keys = keys(N);
    let herdless: Cache<u64> = Cache::builder()
        .capacity(10 * N as u64)
        .ttl(Duration::from_secs(3600))
        .build()
        .unwrap();
    let quick = quick_cache::sync::Cache::<String, u64>::new(10 * N);
    let moka = moka::sync::Cache::<String, u64>::new(10 * N as u64);
    // The same cache without the stampede detector and the hot-key tracker: their cost on
    // the hit path is the difference with `herdless_get`.
    let bare: Cache<u64> = Cache::builder()
        .capacity(10 * N as u64)
        .ttl(Duration::from_secs(3600))
        .detector(herdless::DetectorOptions::off())
        .hot_keys(0)
        .build()
        .unwrap();
    let mut map = hashbrown::HashMap::new();
    for (i, k) in keys.iter().enumerate() {
        bare.set(k, i as u64).unwrap();
        herdless.set(k, i as u64).unwrap();
        quick.insert(k.clone(), i as u64);
        moka.insert(k.clone(), i as u64);
        map.insert(k.clone(), i as u64);
    }
    let rw = Arc::new(parking_lot::RwLock::new(map));
    let lookup = herdless.clone();
    vec![
        ("herdless_get", Arc::new(move |k: &str| herdless.get(k))),
        (
            "herdless_get_no_detector",
            Arc::new(move |k: &str| bare.get(k)),
        ),
        (
            "herdless_lookup",
            Arc::new(move |k: &str| match lookup.lookup(k) {
                Ok(Lookup::Hit(h)) => h.value,
                _ => None,
            }),
        ),
        ("quick_cache_get", Arc::new(move |k: &str| quick.get(k))),
        ("moka_get", Arc::new(move |k: &str| moka.get(k))),
        (
            "rwlock_hashmap_get",
            Arc::new(move |k: &str| rw.read().get(k).copied()),
        ),
    ]
}

/// Runs `iters` gets on each of `threads` threads at once; the time is the wall time of the
/// slowest thread divided by nothing: criterion divides by `iters`, giving time per get per
/// thread.
fn run(get: &Get, threads: usize, iters: u64) -> Duration {
    let keys = Arc::new(keys(N));
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (get, keys, barrier) = (get.clone(), keys.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let start = Instant::now();
                let mut i = t * 7919;
                for _ in 0..iters {
                    i = (i + 1) % N;
                    black_box(get(black_box(&keys[i])));
                }
                start.elapsed()
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .max()
        .unwrap()
}

fn hit_path(c: &mut Criterion) {
    for threads in [1, 2] {
        let mut group = c.benchmark_group(format!("hit_path/{threads}_thread"));
        for (name, get) in contenders() {
            if threads == 1 {
                let keys = keys(N);
                let mut i = 0;
                group.bench_function(name, |b| {
                    b.iter(|| {
                        i = (i + 1) % N;
                        get(black_box(&keys[i]))
                    })
                });
            } else {
                group.bench_function(name, |b| b.iter_custom(|iters| run(&get, threads, iters)));
            }
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = hit_path
}
criterion_main!(benches);
