//! The miss path, side by side in one run:
//!
//! - `miss_load`: a miss that runs a trivial loader and stores its value, in a full bounded
//!   cache (every read is of a key not seen for a million reads, so every store evicts):
//!   herdless `get_or_load` against quick_cache `get_or_insert_with`, moka `get_with_by_ref`
//!   and a parking_lot `RwLock<HashMap>` kept bounded by a FIFO queue.
//! - `waiters`: N callers ask for one key that was just dropped (as an expired entry with no
//!   grace is), the loader takes 1 ms, and the time is from the start of the round until all N
//!   have the value. With blocking threads (`sync_threads`, threads parked on a barrier
//!   between rounds) and with tokio tasks on a two-worker runtime (`async_tasks`, spawned each
//!   round). `floor` is the same round with no cache: one caller sleeps the 1 ms, the others
//!   return at once; what a contender adds over it is the cost of coalescing N callers.

use std::convert::Infallible;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, SamplingMode, criterion_group, criterion_main};
use herdless::Cache;
use herdless_benches::keys;
use herdless_benches::waiters::async_contenders;

const CAPACITY: usize = 10_000;
const POOL: usize = 1 << 20;

fn miss_load(c: &mut Criterion) {
    let keys = keys(POOL);
    let mut group = c.benchmark_group("miss_load");

    let herdless: Cache<u64> = Cache::builder()
        .capacity(CAPACITY as u64)
        .ttl(Duration::from_secs(3600))
        .build()
        .unwrap();
    let mut i = 0;
    group.bench_function("herdless_get_or_load", |b| {
        b.iter(|| {
            i = (i + 1) % POOL;
            herdless
                .get_or_load(&keys[i], move || Ok::<_, Infallible>(Some(i as u64)))
                .unwrap()
        })
    });
    drop(herdless);

    let quick = quick_cache::sync::Cache::<String, u64>::new(CAPACITY);
    group.bench_function("quick_cache_get_or_insert_with", |b| {
        b.iter(|| {
            i = (i + 1) % POOL;
            quick
                .get_or_insert_with(keys[i].as_str(), || Ok::<_, Infallible>(i as u64))
                .unwrap()
        })
    });
    drop(quick);

    let moka = moka::sync::Cache::<String, u64>::new(CAPACITY as u64);
    group.bench_function("moka_get_with_by_ref", |b| {
        b.iter(|| {
            i = (i + 1) % POOL;
            moka.get_with_by_ref(keys[i].as_str(), || i as u64)
        })
    });
    drop(moka);

    let map = parking_lot::RwLock::new((
        hashbrown::HashMap::<String, u64>::new(),
        std::collections::VecDeque::<String>::new(),
    ));
    group.bench_function("rwlock_hashmap_fifo", |b| {
        b.iter(|| {
            i = (i + 1) % POOL;
            let key = &keys[i];
            if let Some(v) = map.read().0.get(key.as_str()) {
                return *v;
            }
            let v = i as u64;
            let mut m = map.write();
            let (table, fifo) = &mut *m;
            if table.insert(key.clone(), v).is_none() {
                fifo.push_back(key.clone());
                if fifo.len() > CAPACITY {
                    let old = fifo.pop_front().unwrap();
                    table.remove(&old);
                }
            }
            v
        })
    });
    group.finish();
}

const KEY: &str = "hot:key";
const LOAD: Duration = Duration::from_millis(1);

/// One round's work for one caller; `leader` marks the caller that sleeps in `floor`.
type Call = Arc<dyn Fn(bool) -> u64 + Send + Sync>;
/// Drops the key before a round.
type Reset = Arc<dyn Fn() + Send + Sync>;

fn sync_contenders() -> Vec<(&'static str, Call, Reset)> {
    let herdless: Cache<u64> = Cache::builder()
        .ttl(Duration::from_secs(3600))
        .build()
        .unwrap();
    let quick = Arc::new(quick_cache::sync::Cache::<String, u64>::new(CAPACITY));
    let moka = moka::sync::Cache::<String, u64>::new(CAPACITY as u64);
    let (h1, q1, m1) = (herdless.clone(), quick.clone(), moka.clone());
    vec![
        (
            "floor",
            Arc::new(|leader| {
                if leader {
                    std::thread::sleep(LOAD);
                }
                1
            }),
            Arc::new(|| {}),
        ),
        (
            "herdless_get_or_load",
            Arc::new(move |_| {
                herdless
                    .get_or_load(KEY, || {
                        std::thread::sleep(LOAD);
                        Ok::<_, Infallible>(Some(1))
                    })
                    .unwrap()
                    .unwrap()
            }),
            Arc::new(move || {
                h1.invalidate(KEY).unwrap();
            }),
        ),
        (
            "quick_cache_get_or_insert_with",
            Arc::new(move |_| {
                quick
                    .get_or_insert_with(KEY, || {
                        std::thread::sleep(LOAD);
                        Ok::<_, Infallible>(1)
                    })
                    .unwrap()
            }),
            Arc::new(move || {
                q1.remove(KEY);
            }),
        ),
        (
            "moka_get_with",
            Arc::new(move |_| {
                moka.get_with_by_ref(KEY, || {
                    std::thread::sleep(LOAD);
                    1
                })
            }),
            Arc::new(move || m1.invalidate(KEY)),
        ),
    ]
}

/// N threads that run `call` once per round, parked on a barrier in between.
struct Pool {
    start: Arc<Barrier>,
    done: Arc<Barrier>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Pool {
    fn new(n: usize, call: Call) -> Self {
        let start = Arc::new(Barrier::new(n + 1));
        let done = Arc::new(Barrier::new(n + 1));
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..n)
            .map(|t| {
                let (start, done, stop, call) =
                    (start.clone(), done.clone(), stop.clone(), call.clone());
                std::thread::Builder::new()
                    .stack_size(128 * 1024)
                    .spawn(move || {
                        loop {
                            start.wait();
                            if stop.load(Ordering::Relaxed) {
                                return;
                            }
                            black_box(call(t == 0));
                            done.wait();
                        }
                    })
                    .unwrap()
            })
            .collect();
        Self {
            start,
            done,
            stop,
            threads,
        }
    }

    fn round(&self, reset: &Reset) -> Duration {
        reset();
        let began = Instant::now();
        self.start.wait();
        self.done.wait();
        began.elapsed()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.start.wait();
        self.threads.drain(..).for_each(|t| t.join().unwrap());
    }
}

fn waiters_sync(c: &mut Criterion) {
    let mut group = c.benchmark_group("waiters/sync_threads");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for n in [1, 100, 5_000] {
        for (name, call, reset) in sync_contenders() {
            let pool = Pool::new(n, call);
            group.bench_function(BenchmarkId::new(name, n), |b| {
                b.iter_custom(|iters| (0..iters).map(|_| pool.round(&reset)).sum())
            });
        }
    }
    group.finish();
}

fn waiters_async(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("waiters/async_tasks");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for n in [1, 100, 5_000] {
        let contenders = {
            let _in_runtime = rt.enter();
            async_contenders(KEY, LOAD, CAPACITY)
        };
        for (name, call, reset) in contenders {
            group.bench_function(BenchmarkId::new(name, n), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        rt.block_on(reset());
                        let began = Instant::now();
                        rt.block_on(async {
                            let tasks: Vec<_> =
                                (0..n).map(|t| tokio::spawn(call(t == 0))).collect();
                            for t in tasks {
                                black_box(t.await.unwrap());
                            }
                        });
                        total += began.elapsed();
                    }
                    total
                })
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500));
    targets = miss_load, waiters_sync, waiters_async
}
criterion_main!(benches);
