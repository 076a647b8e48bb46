//! The one-thread hit path again, measured to survive a busy machine: the contenders take
//! turns in short batches (20,000 gets, ~0.5 ms), round after round, in a rotating order, so
//! they see the same machine load; a batch interrupted by another process is slow, so the
//! figures are each contender's lowest and median batch time, and the median over rounds of
//! the ratio herdless / quick_cache within a round.
//!
//! `cargo run --release -p herdless-benches --bin hit_interleaved [rounds]`

use std::hint::black_box;
use std::time::Instant;

use herdless_benches::hit::{N, contenders};
use herdless_benches::keys;

const BATCH: usize = 20_000;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map_or(400, |a| a.parse().expect("rounds"));
    let keys = keys(N);
    let contenders = contenders();
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); contenders.len()];
    let quick = contenders
        .iter()
        .position(|(n, _)| *n == "quick_cache_get")
        .unwrap();
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); contenders.len()];
    let mut i = 0;
    for round in 0..rounds + 20 {
        let mut this = vec![0.0; contenders.len()];
        for j in 0..contenders.len() {
            let c = (j + round) % contenders.len();
            let get = &contenders[c].1;
            let began = Instant::now();
            for _ in 0..BATCH {
                i = (i + 1) % N;
                black_box(get(black_box(&keys[i])));
            }
            this[c] = began.elapsed().as_nanos() as f64 / BATCH as f64;
        }
        // The first rounds warm caches and branch predictors up.
        if round >= 20 {
            for c in 0..contenders.len() {
                times[c].push(this[c]);
                ratios[c].push(this[c] / this[quick]);
            }
        }
    }
    println!("| contender | lowest batch | median batch | median ratio to quick_cache |");
    println!("|---|---:|---:|---:|");
    for (c, (name, _)) in contenders.iter().enumerate() {
        let low = times[c].iter().copied().fold(f64::INFINITY, f64::min);
        println!(
            "| {name} | {low:.1} ns | {:.1} ns | {:.2}x |",
            median(&mut times[c]),
            median(&mut ratios[c])
        );
    }
}
