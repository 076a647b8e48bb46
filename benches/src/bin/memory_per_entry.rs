//! Memory per entry beyond the key and the value: each contender, built with room for N
//! entries, is filled with N keys (`"bench:0"`...) holding `u64` values, and the heap bytes
//! it holds are counted by a counting global allocator (requested sizes, so malloc's own
//! rounding and headers are not included). Reported: live bytes per entry, minus the key's
//! bytes and the 8-byte value. Each contender is measured from an empty heap delta and
//! dropped before the next.
//!
//! `cargo run --release -p herdless-benches --bin memory_per_entry`

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use herdless::Cache;
use herdless_benches::keys;

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; only a counter is kept.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: forwarded as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

type Filled = (Box<dyn std::any::Any>, usize);

/// Bytes held per entry beyond key and value, after filling a cache with `n` keys; `fill`
/// answers the cache and how many entries it holds (a sharded cache may hold a few less).
fn measure(n: usize, keys: &[String], fill: impl FnOnce(&[String]) -> Filled) -> (f64, usize) {
    let keys = &keys[..n];
    let mean_payload = keys.iter().map(|k| k.len() + 8).sum::<usize>() as f64 / n as f64;
    let before = live();
    let (cache, entries) = fill(keys);
    let held = live() - before;
    drop(cache);
    (held as f64 / entries as f64 - mean_payload, entries)
}

fn main() {
    let all = keys(1_000_000);
    println!("| keys inserted | contender | bytes per entry beyond key and value | entries held |");
    println!("|---:|---|---:|---:|");
    for n in [10_000, 100_000, 1_000_000] {
        let h = measure(n, &all, |keys| {
            // Twice the room (herdless allocates nothing up front), so no shard evicts.
            let c: Cache<u64> = Cache::builder()
                .capacity(2 * keys.len() as u64)
                .ttl(Duration::from_secs(3600))
                .build()
                .unwrap();
            for (i, k) in keys.iter().enumerate() {
                c.set(k, i as u64).unwrap();
            }
            let n = c.metrics().entries as usize;
            (Box::new(c), n)
        });
        println!("| {n} | herdless | {:.1} | {} |", h.0, h.1);
        let q = measure(n, &all, |keys| {
            let c = quick_cache::sync::Cache::<String, u64>::new(keys.len());
            for (i, k) in keys.iter().enumerate() {
                c.insert(k.clone(), i as u64);
            }
            let n = c.len();
            (Box::new(c), n)
        });
        println!("| {n} | quick_cache | {:.1} | {} |", q.0, q.1);
        let m = measure(n, &all, |keys| {
            let c = moka::sync::Cache::<String, u64>::new(keys.len() as u64);
            for (i, k) in keys.iter().enumerate() {
                c.insert(k.clone(), i as u64);
            }
            c.run_pending_tasks();
            let n = c.entry_count() as usize;
            (Box::new(c), n)
        });
        println!("| {n} | moka | {:.1} | {} |", m.0, m.1);
        let r = measure(n, &all, |keys| {
            let mut map = hashbrown::HashMap::<String, u64>::with_capacity(keys.len());
            for (i, k) in keys.iter().enumerate() {
                map.insert(k.clone(), i as u64);
            }
            let n = map.len();
            (Box::new(parking_lot::RwLock::new(map)), n)
        });
        println!(
            "| {n} | RwLock<HashMap> (presized) | {:.1} | {} |",
            r.0, r.1
        );
    }
}
