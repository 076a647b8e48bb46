//! Why SIEVE trails LRU on the `shifting` trace (issue 32 goal 6), counted: each eviction
//! of a key of the region the trace reads now, and how many keys of past regions (never
//! read again) were resident at that moment. LRU evicts the past first; SIEVE spares every
//! past key its hand finds visited for one more pass, and in that pass the hand reaches the
//! keys the new region brought in after the shift, unvisited yet, and evicts them. Replays
//! the one-queue SIEVE model of `herdless_benches::policies` (what each herdless shard
//! runs) and the `caches` crate's LRU. Counts, not timings.
//!
//! `cargo run --release -p herdless-benches --bin sieve_on_shifts`

use caches::Cache as _;
use herdless_benches::policies::Sieve;
use herdless_benches::traces::{self, KEY_SPACE};

/// The trace's phase length and region size (`traces::shifting`).
const PHASE: usize = 100_000;
const REGION: usize = 10_000;

/// A cache policy replayed here: `access` answers hit or miss and the key it evicted.
trait Policy {
    fn access(&mut self, key: u32) -> (bool, Option<u32>);
}

impl Policy for Sieve {
    fn access(&mut self, key: u32) -> (bool, Option<u32>) {
        let hit = Sieve::access(self, key);
        (hit, self.evicted())
    }
}

/// The LRU of the `caches` crate (the tables' "LRU (caches)").
impl Policy for caches::RawLRU<u32, ()> {
    fn access(&mut self, key: u32) -> (bool, Option<u32>) {
        if self.get(&key).is_some() {
            return (true, None);
        }
        match self.put(key, ()) {
            caches::PutResult::Evicted { key, .. } => (false, Some(key)),
            _ => (false, None),
        }
    }
}

/// What one replay counted.
#[derive(Default)]
struct Anatomy {
    hits: usize,
    /// Evictions of a key of the region read now.
    current_evicted: usize,
    /// Of those, keys read again before the phase ended (each costs a miss).
    current_evicted_regretted: usize,
    /// Summed over those evictions: keys of past regions resident at that moment.
    past_resident_sum: usize,
}

fn replay(reads: &[u32], mut policy: impl Policy) -> Anatomy {
    let regions = KEY_SPACE / REGION;
    let mut resident = vec![0usize; regions];
    let mut out = Anatomy::default();
    // The next read of each key at or after a position: to tell a regretted eviction.
    let mut next = vec![usize::MAX; reads.len()];
    let mut seen = vec![usize::MAX; KEY_SPACE];
    for (i, &k) in reads.iter().enumerate().rev() {
        next[i] = seen[k as usize];
        seen[k as usize] = i;
    }
    let mut last_read = vec![0usize; KEY_SPACE];
    for (i, &k) in reads.iter().enumerate() {
        last_read[k as usize] = i;
        let now = i / PHASE % regions;
        let (hit, evicted) = policy.access(k);
        if hit {
            out.hits += 1;
            continue;
        }
        resident[k as usize / REGION] += 1;
        if let Some(e) = evicted {
            resident[e as usize / REGION] -= 1;
            if e as usize / REGION == now {
                out.current_evicted += 1;
                let again = next[last_read[e as usize]];
                if again != usize::MAX && again / PHASE == i / PHASE {
                    out.current_evicted_regretted += 1;
                }
                out.past_resident_sum += resident.iter().sum::<usize>() - resident[now];
            }
        }
    }
    out
}

fn main() {
    println!(
        "| capacity | policy | hit ratio | evictions of the current region | of those read again in the phase | past-region keys resident at each (mean) |"
    );
    println!("|---|---|---:|---:|---:|---:|");
    for pct in [1, 10] {
        let capacity = KEY_SPACE * pct / 100;
        let trace = traces::all(capacity)
            .into_iter()
            .find(|t| t.name == "shifting")
            .expect("the shifting trace");
        let lru = caches::RawLRU::<u32, ()>::new(capacity).expect("capacity > 0");
        for (name, a) in [
            (
                "SIEVE (one queue)",
                replay(&trace.reads, Sieve::new(capacity)),
            ),
            ("LRU", replay(&trace.reads, lru)),
        ] {
            let mean = if a.current_evicted == 0 {
                0.0
            } else {
                a.past_resident_sum as f64 / a.current_evicted as f64
            };
            println!(
                "| {pct}% ({capacity}) | {name} | {:.1}% | {} | {} | {mean:.0} |",
                100.0 * a.hits as f64 / trace.reads.len() as f64,
                a.current_evicted,
                a.current_evicted_regretted,
            );
        }
    }
}
