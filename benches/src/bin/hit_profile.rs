//! The hit path under callgrind (instructions, repeatable on a busy machine): `N` fresh hits
//! on a cache of 10,000 entries, through `get` or `get_or_load`, so a change to the miss
//! path can show it costs a hit nothing.
//!
//! ```sh
//! cargo build --release -p herdless-benches --bin hit_profile
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='hit_profile::run*' \
//!     target/release/hit_profile get   # or get_or_load, or get_tti; then `admission`
//! ```
//! `get_tti`: `get` on a cache whose entries have a time-to-idle (their reads keep an idle
//! clock), beside `get` on one whose entries have none. A second argument `admission`
//! builds the cache with `Admission::TinyLfu`, whose sketch a hit must never touch.
//! `quick_cache`: the same hits on quick_cache's `get`, the hit path's yardstick.
//! Instructions per hit = the total over `N`.

use std::convert::Infallible;
use std::hint::black_box;
use std::time::Duration;

use herdless::{Admission, Cache};
use herdless_benches::keys;

const CAPACITY: usize = 10_000;
const N: usize = 100_000;

#[inline(never)]
fn run(read: &dyn Fn(&str) -> Option<u64>, keys: &[String]) {
    for i in 0..N {
        black_box(read(&keys[i % keys.len()]));
    }
}

fn main() {
    let how = std::env::args().nth(1).unwrap_or_else(|| "get".into());
    let keys = keys(CAPACITY);
    let mut b = Cache::builder()
        .capacity(CAPACITY as u64 * 2)
        .ttl(Duration::from_secs(3600));
    if how == "get_tti" {
        b = b.tti(Duration::from_secs(3600));
    }
    match std::env::args().nth(2).as_deref() {
        None => {}
        Some("admission") => b = b.admission(Admission::TinyLfu),
        Some(other) => panic!("unknown option {other}: admission"),
    }
    let c: Cache<u64> = b.build().unwrap();
    for (i, k) in keys.iter().enumerate() {
        c.set(k, i as u64).unwrap();
    }
    if how == "quick_cache" {
        let q = quick_cache::sync::Cache::<String, u64>::new(CAPACITY * 2);
        for (i, k) in keys.iter().enumerate() {
            q.insert(k.clone(), i as u64);
        }
        run(&|k| q.get(k), &keys);
        eprintln!("{how}: {N} hits measured");
        return;
    }
    match how.as_str() {
        "get" | "get_tti" => run(&|k| c.get(k), &keys),
        "get_or_load" => run(
            &|k| c.get_or_load(k, || Ok::<_, Infallible>(Some(0))).unwrap(),
            &keys,
        ),
        other => panic!("unknown path {other}: get, get_or_load, get_tti or quick_cache"),
    }
    eprintln!("{how}: {N} hits measured");
}
