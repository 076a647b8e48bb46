//! Throughput of each contender replaying a fixed-seed Zipf trace (alpha 0.8 and 1.0, over
//! 100,000 keys) at capacities of 1% and 10% of the key space: each read finds the key or
//! loads it (trivial loader) and stores it. The hit ratios of the same runs come from
//! `cargo run --release -p herdless-benches --bin zipf_hit_ratio`.

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use herdless_benches::zipf::{ALPHAS, CAPACITY_PERCENTS, KEY_SPACE, SEED, contenders};
use herdless_benches::{keys, zipf_trace};

const TRACE: usize = 1 << 20;

fn zipf(c: &mut Criterion) {
    let keys = keys(KEY_SPACE);
    for alpha in ALPHAS {
        let trace = zipf_trace(KEY_SPACE, alpha, TRACE, SEED);
        for pct in CAPACITY_PERCENTS {
            let mut group = c.benchmark_group(format!("zipf/alpha_{alpha}/capacity_{pct}pct"));
            group.throughput(Throughput::Elements(1));
            for (name, mut read) in contenders(KEY_SPACE * pct / 100) {
                let mut i = 0;
                group.bench_function(BenchmarkId::from_parameter(name), |b| {
                    b.iter(|| {
                        i = (i + 1) % TRACE;
                        let k = trace[i];
                        read(&keys[k as usize], u64::from(k))
                    })
                });
            }
            group.finish();
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500));
    targets = zipf
}
criterion_main!(benches);
