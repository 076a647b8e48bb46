//! Peak RSS under a flood of 1,000,000 random keys, with a memory bound configured.
//!
//! Each configuration runs in its own process (this binary re-runs itself with arguments),
//! so one measurement does not inherit the heap of the last. A child reads its resident set
//! (`VmRSS`) before building the cache, floods it (each key read and loaded once, values of
//! a fixed size), and reports the growth of its peak resident set (`VmHWM`) against the
//! configured bound. The bound is in bytes, given to each cache's weigher:
//! `naive` weighs key and value bytes only, as most users would; `charged` adds a fixed
//! per-entry charge (herdless's measured overhead, see `memory_per_entry`); for herdless,
//! `charged` is `Builder::max_bytes`, which adds `herdless::ENTRY_OVERHEAD_BYTES` (the same
//! 128 bytes) and the key's length to every entry itself.
//!
//! `cargo run --release -p herdless-benches --bin rss_flood` (all configurations), or
//! `... --bin rss_flood -- <herdless|quick_cache|moka> <value bytes> <naive|charged>`.

use std::convert::Infallible;
use std::process::Command;
use std::time::{Duration, Instant};

use herdless::Cache;
use herdless_benches::{peak_rss, rss};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const FLOOD: usize = 1_000_000;
const BOUND: u64 = 64 << 20;
/// Charged per entry by the `charged` weigher: about herdless's own per-entry bytes beyond
/// key and value, plus malloc's headers on the key and value allocations.
const CHARGE: u64 = herdless::ENTRY_OVERHEAD_BYTES;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        parent();
    } else {
        child(&args[0], args[1].parse().unwrap(), &args[2]);
    }
}

fn parent() {
    let me = std::env::current_exe().unwrap();
    println!(
        "| contender | value bytes | weigher | entries held | peak RSS growth | bound | growth / bound | flood time |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|---:|");
    for (value, weigher) in [(1024, "naive"), (64, "naive"), (64, "charged")] {
        for contender in ["herdless", "quick_cache", "moka"] {
            let out = Command::new(&me)
                .args([contender, &value.to_string(), weigher])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            print!("{}", String::from_utf8_lossy(&out.stdout));
        }
    }
}

fn child(contender: &str, value_len: usize, weigher: &str) {
    let charge = match weigher {
        "naive" => 0,
        "charged" => CHARGE,
        other => panic!("unknown weigher {other}"),
    };
    let weigh = move |k: &str, v: &Vec<u8>| k.len() as u64 + v.len() as u64 + charge;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    let value = vec![7u8; value_len];
    let base = rss().unwrap();
    let began = Instant::now();
    let held = match contender {
        "herdless" => {
            let b = Cache::builder().ttl(Duration::from_secs(3600));
            let b = if charge > 0 {
                b.max_bytes(BOUND, |v: &Vec<u8>| v.len() as u64)
            } else {
                b.capacity(BOUND)
                    .weigher(move |k: &str, v: &Vec<u8>| weigh(k, v))
            };
            let c: Cache<Vec<u8>> = b.build().unwrap();
            for _ in 0..FLOOD {
                let key = format!("flood:{:016x}", rng.next_u64());
                let v = value.clone();
                c.get_or_load(&key, move || Ok::<_, Infallible>(Some(v)))
                    .unwrap();
            }
            c.metrics().entries
        }
        "quick_cache" => {
            #[derive(Clone)]
            struct W(u64);
            impl quick_cache::Weighter<String, Vec<u8>> for W {
                fn weight(&self, k: &String, v: &Vec<u8>) -> u64 {
                    k.len() as u64 + v.len() as u64 + self.0
                }
            }
            let estimated = (BOUND / (22 + value_len as u64 + charge)) as usize;
            let c = quick_cache::sync::Cache::with_weighter(estimated, BOUND, W(charge));
            for _ in 0..FLOOD {
                let key = format!("flood:{:016x}", rng.next_u64());
                c.get_or_insert_with(&key, || Ok::<_, Infallible>(value.clone()))
                    .unwrap();
            }
            c.len() as u64
        }
        "moka" => {
            let c = moka::sync::Cache::<String, Vec<u8>>::builder()
                .max_capacity(BOUND)
                .weigher(move |k: &String, v: &Vec<u8>| {
                    u32::try_from(weigh(k, v)).unwrap_or(u32::MAX)
                })
                .build();
            for _ in 0..FLOOD {
                let key = format!("flood:{:016x}", rng.next_u64());
                c.get_with_by_ref(key.as_str(), || value.clone());
            }
            c.run_pending_tasks();
            c.entry_count()
        }
        other => panic!("unknown contender {other}"),
    };
    let took = began.elapsed();
    let growth = peak_rss().unwrap().saturating_sub(base);
    println!(
        "| {contender} | {value_len} | {weigher} | {held} | {:.1} MiB | {} MiB | {:.2} | {:.1} s |",
        growth as f64 / (1 << 20) as f64,
        BOUND >> 20,
        growth as f64 / BOUND as f64,
        took.as_secs_f64()
    );
}
