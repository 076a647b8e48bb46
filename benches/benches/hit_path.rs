//! The hit path, side by side in one run: herdless (`get` and `lookup`, freshness and XFetch
//! checks included) against quick_cache, moka and a parking_lot `RwLock<HashMap>`, on one and
//! two threads. Ratios matter, not absolute figures: the machine is shared and noisy.
//! `hit_path_cpu/1_thread` repeats the one-thread group measuring the thread's CPU time
//! instead of wall time, which does not count the time other processes hold the CPU.

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::measurement::Measurement;
use criterion::{Criterion, criterion_group, criterion_main};
use herdless_benches::hit::{Get, N, contenders};
use herdless_benches::{ThreadCpuTime, keys};

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

fn one_thread<M: Measurement>(c: &mut Criterion<M>, group: &str) {
    let mut group = c.benchmark_group(group);
    for (name, get) in contenders() {
        let keys = keys(N);
        let mut i = 0;
        group.bench_function(name, |b| {
            b.iter(|| {
                i = (i + 1) % N;
                get(black_box(&keys[i]))
            })
        });
    }
    group.finish();
}

fn hit_path_cpu(c: &mut Criterion<ThreadCpuTime>) {
    one_thread(c, "hit_path_cpu/1_thread");
}

fn hit_path(c: &mut Criterion) {
    for threads in [1, 2] {
        if threads == 1 {
            one_thread(c, "hit_path/1_thread");
            continue;
        }
        let mut group = c.benchmark_group(format!("hit_path/{threads}_thread"));
        for (name, get) in contenders() {
            {
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
criterion_group! {
    name = cpu;
    config = Criterion::default().with_measurement(ThreadCpuTime).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = hit_path_cpu
}
criterion_main!(benches, cpu);
