//! Hit ratio of each contender on the traces of `herdless_benches::traces` (loop, scan,
//! mixed and shifting shapes besides Zipf), at capacities of 1% and 10% of the key space, as
//! a Markdown table: the real caches (herdless, herdless with `Admission::TinyLfu`,
//! quick_cache, moka), then the models and the
//! registry references of `herdless_benches::policies` (one SIEVE queue, SIEVE behind a
//! TinyLFU admission filter, LRU, ARC, W-TinyLFU). A miss is a loader call; the ratio
//! counts every read, the cold start included. Counts, not timings: the machine's load does
//! not move them (herdless's shards hash with a per-process seed, so its figure moves by
//! ~0.1 point between runs).
//!
//! `cargo run --release -p herdless-benches --bin trace_hit_ratio`

use std::sync::atomic::Ordering;

use herdless::Admission;
use herdless_benches::keys;
use herdless_benches::policies::references;
use herdless_benches::traces::{self, KEY_SPACE, READS};
use herdless_benches::zipf::{LOADS, contenders, herdless};

const CAPACITY_PERCENTS: [usize; 2] = [1, 10];

fn main() {
    let keys = keys(KEY_SPACE);
    for pct in CAPACITY_PERCENTS {
        let capacity = KEY_SPACE * pct / 100;
        let traces = traces::all(capacity);
        let mut names = Vec::new();
        let mut rows: Vec<Vec<f64>> = Vec::new();
        for trace in &traces {
            let mut row = Vec::new();
            let mut all = contenders(capacity);
            all.insert(
                1,
                (
                    "herdless + TinyLfu admission",
                    herdless(capacity, Admission::TinyLfu),
                ),
            );
            all.extend(references(capacity));
            for (name, mut read) in all {
                if names.len() < row.len() + 1 {
                    names.push(name);
                }
                LOADS.store(0, Ordering::Relaxed);
                for &k in &trace.reads {
                    std::hint::black_box(read(&keys[k as usize], u64::from(k)));
                }
                let loads = LOADS.load(Ordering::Relaxed);
                row.push(100.0 * (1.0 - loads as f64 / READS as f64));
            }
            rows.push(row);
        }
        println!("\ncapacity {capacity} ({pct}% of {KEY_SPACE} keys), {READS} reads per trace\n");
        println!("| trace | {} | best |", names.join(" | "));
        println!("|---|{}---|", "---:|".repeat(names.len()));
        for (trace, row) in traces.iter().zip(&rows) {
            let best = row.iter().cloned().fold(f64::MIN, f64::max);
            let cells: Vec<String> = row.iter().map(|r| format!("{r:.1}%")).collect();
            println!("| {} | {} | {best:.1}% |", trace.name, cells.join(" | "));
        }
        for trace in &traces {
            println!("- {}: {}", trace.name, trace.about);
        }
    }
}
