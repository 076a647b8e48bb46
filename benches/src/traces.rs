//! Access traces beyond Zipf, shaped after the classic ones eviction papers use (LIRS's loop
//! and scan traces, ARC's mixed database/web traces), generated from a fixed seed so every
//! contender replays the same reads and nothing is downloaded at test time.
//!
//! Each trace is a list of key indices; the key space is [`KEY_SPACE`] keys and the cache
//! capacity of a run is given separately, so a trace is described relative to it.

use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::zipf_trace;

/// Keys in the key space of every trace.
pub const KEY_SPACE: usize = 100_000;
/// Reads in every trace.
pub const READS: usize = 1_000_000;
/// The seed of every trace.
pub const SEED: u64 = 7;

/// One named trace, generated for a cache of `capacity` entries.
pub struct Trace {
    /// Its name in the tables.
    pub name: &'static str,
    /// What it models.
    pub about: &'static str,
    /// The reads, as key indices below [`KEY_SPACE`].
    pub reads: Vec<u32>,
}

/// Every trace, generated for a cache of `capacity` entries (loops and working sets are
/// sized from it, as the papers size them from the cache).
pub fn all(capacity: usize) -> Vec<Trace> {
    vec![
        Trace {
            name: "zipf-0.9",
            about: "Zipf 0.9 over the whole key space (the shape most web caches see)",
            reads: zipf_trace(KEY_SPACE, 0.9, READS, SEED),
        },
        Trace {
            name: "loop-1.2x",
            about: "one sequential loop over 1.2x the capacity (LIRS's loop: LRU gets nothing)",
            reads: looping(capacity * 6 / 5),
        },
        Trace {
            name: "zipf+scans",
            about: "Zipf 0.9, every 20,000 reads a scan of 2x the capacity of keys never read again",
            reads: zipf_with_scans(capacity * 2, 20_000),
        },
        Trace {
            name: "loop+zipf",
            about: "half the reads a loop over 1.5x the capacity, half Zipf 0.9 (LIRS's multi)",
            reads: loop_and_zipf(capacity * 3 / 2),
        },
        Trace {
            name: "shifting",
            about: "Zipf 1.0 whose popular keys move to a new region every 100,000 reads (ARC's phases)",
            reads: shifting(100_000),
        },
    ]
}

/// `0, 1, ..., len - 1, 0, 1, ...` for [`READS`] reads.
fn looping(len: usize) -> Vec<u32> {
    (0..READS).map(|i| (i % len.max(1)) as u32).collect()
}

/// Zipf 0.9 over the key space's first half, broken every `every` reads by a scan of `scan`
/// keys from the second half that are never read again (the scans wrap around if the
/// trace needs more keys than there are).
fn zipf_with_scans(scan: usize, every: usize) -> Vec<u32> {
    let half = KEY_SPACE / 2;
    let hot = zipf_trace(half, 0.9, READS, SEED);
    let mut out = Vec::with_capacity(READS);
    let mut next_cold = 0usize;
    for (i, k) in hot.into_iter().enumerate() {
        if out.len() >= READS {
            break;
        }
        if i > 0 && i % every == 0 {
            for _ in 0..scan.min(READS - out.len()) {
                out.push((half + next_cold % half) as u32);
                next_cold += 1;
            }
        }
        out.push(k);
    }
    out.truncate(READS);
    out
}

/// Reads alternating at random between a loop over `len` keys (the key space's second
/// half) and Zipf 0.9 over its first half.
fn loop_and_zipf(len: usize) -> Vec<u32> {
    let half = KEY_SPACE / 2;
    let zipf = zipf_trace(half, 0.9, READS, SEED);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(SEED ^ 0x5EED);
    let mut at = 0usize;
    zipf.into_iter()
        .map(|k| {
            if rng.random_bool(0.5) {
                at += 1;
                (half + at % len.clamp(1, half)) as u32
            } else {
                k
            }
        })
        .collect()
}

/// Zipf 1.0 over 10,000 keys whose ranks map to a new region of the key space every
/// `phase` reads: yesterday's hot keys go cold at once.
fn shifting(phase: usize) -> Vec<u32> {
    const REGION: usize = 10_000;
    let regions = KEY_SPACE / REGION;
    zipf_trace(REGION, 1.0, READS, SEED)
        .into_iter()
        .enumerate()
        .map(|(i, k)| ((i / phase % regions) * REGION + k as usize) as u32)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_trace_has_its_length_and_stays_in_the_key_space() {
        for t in all(1_000) {
            assert_eq!(t.reads.len(), READS, "{}", t.name);
            assert!(
                t.reads.iter().all(|&k| (k as usize) < KEY_SPACE),
                "{}",
                t.name
            );
        }
    }

    #[test]
    fn a_loop_repeats_its_keys_in_order() {
        let l = looping(3);
        assert_eq!(&l[..7], &[0, 1, 2, 0, 1, 2, 0]);
    }
}
