//! The miss path under callgrind (instructions, repeatable on a busy machine): `N` misses
//! that each load and store a value in a full cache of 10,000 entries, for one contender.
//!
//! ```sh
//! cargo build --release -p herdless-benches --bin miss_profile
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='miss_profile::run*' \
//!     target/release/miss_profile herdless   # or quick_cache, or herdless_admission
//! ```
//! `herdless_admission`: herdless with `Admission::TinyLfu`, where each of these keys, new
//! and seen once, is refused (its value answered, not stored: the refusal path, no eviction).
//! Instructions per miss = the total over `N`; `callgrind_annotate` says where they go.

use std::convert::Infallible;
use std::hint::black_box;
use std::time::Duration;

use herdless::{Admission, Cache};
use herdless_benches::keys;
use herdless_benches::zipf::Read;

const CAPACITY: usize = 10_000;
const N: usize = 100_000;

#[inline(never)]
fn run(read: &mut dyn FnMut(&str, u64) -> u64, keys: &[String]) {
    for (i, k) in keys.iter().enumerate() {
        black_box(read(k, i as u64));
    }
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or_else(|| "herdless".into());
    let all = keys(CAPACITY + N);
    let (fill, misses) = all.split_at(CAPACITY);
    let mut read: Read = match which.as_str() {
        "herdless" | "herdless_admission" => {
            let admission = match which.as_str() {
                "herdless" => Admission::Always,
                _ => Admission::TinyLfu,
            };
            let c: Cache<u64> = Cache::builder()
                .capacity(CAPACITY as u64)
                .ttl(Duration::from_secs(3600))
                .admission(admission)
                .build()
                .unwrap();
            Box::new(move |k, v| {
                c.get_or_load(k, move || Ok::<_, Infallible>(Some(v)))
                    .unwrap()
                    .unwrap()
            })
        }
        "quick_cache" => {
            let c = quick_cache::sync::Cache::<String, u64>::new(CAPACITY);
            Box::new(move |k, v| c.get_or_insert_with(k, || Ok::<_, Infallible>(v)).unwrap())
        }
        other => panic!("unknown contender {other}: herdless, herdless_admission or quick_cache"),
    };
    // Filled first, outside the measured part: every measured read is a miss that evicts.
    for (i, k) in fill.iter().enumerate() {
        black_box(read(k, i as u64));
    }
    run(&mut read, misses);
    eprintln!("{which}: {N} misses measured");
}
