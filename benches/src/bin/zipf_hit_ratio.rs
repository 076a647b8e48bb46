//! Hit ratio of each contender on fixed-seed Zipf traces (alpha 0.8 and 1.0 over 100,000
//! keys, 2,000,000 reads, capacities of 1% and 10% of the key space), as a Markdown table.
//! A miss is a loader call; the ratio counts every read, the cold start included.
//!
//! `cargo run --release -p herdless-benches --bin zipf_hit_ratio`

use std::sync::atomic::Ordering;
use std::time::Instant;

use herdless_benches::zipf::{ALPHAS, CAPACITY_PERCENTS, KEY_SPACE, LOADS, SEED, contenders};
use herdless_benches::{keys, zipf_trace};

const READS: usize = 2_000_000;

fn main() {
    let keys = keys(KEY_SPACE);
    println!("| alpha | capacity | contender | hit ratio | reads/s (one thread) |");
    println!("|---:|---:|---|---:|---:|");
    for alpha in ALPHAS {
        let trace = zipf_trace(KEY_SPACE, alpha, READS, SEED);
        for pct in CAPACITY_PERCENTS {
            let capacity = KEY_SPACE * pct / 100;
            for (name, mut read) in contenders(capacity) {
                LOADS.store(0, Ordering::Relaxed);
                let began = Instant::now();
                for &k in &trace {
                    std::hint::black_box(read(&keys[k as usize], u64::from(k)));
                }
                let took = began.elapsed();
                let loads = LOADS.load(Ordering::Relaxed);
                let ratio = 1.0 - loads as f64 / READS as f64;
                let rate = READS as f64 / took.as_secs_f64();
                println!(
                    "| {alpha} | {capacity} ({pct}%) | {name} | {:.2}% | {:.1} M |",
                    100.0 * ratio,
                    rate / 1e6
                );
            }
        }
    }
}
