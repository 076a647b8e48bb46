//! Admission: whether a new key may take the place of the entry SIEVE chose to evict.
//!
//! SIEVE alone keeps every new key, so a loop over a little more than the capacity evicts
//! each key just before its next read and hits nothing (BENCHMARKS.md, "Eviction policy on
//! loop, scan, mixed and shifting traces"). [`Admission::TinyLfu`] puts a TinyLFU filter
//! (Einziger et al., 2017) in front: a count-min [`Sketch`] of how often each key was
//! stored, and a full shard keeps a new key only if the sketch has seen it more often than
//! the victim. The sketch is fed where the shard is already written, never by a hit (the
//! hit path is the same with the filter on or off): by each store (a load's result or a
//! `set`), and by each read SIEVE's hand finds while looking for the victim (an entry's
//! visited bit, set by a hit, cleared by the hand: counted as two stores). Without the
//! second, an entry read on every pass of a loop ranked below a key loaded on every pass.

use alloc::vec;
use alloc::vec::Vec;

/// Which new keys a full cache keeps ([`Builder::admission`](crate::Builder::admission)).
///
/// ```
/// use herdless::{Admission, Cache};
/// let cache: Cache<u64> = Cache::builder()
///     .capacity(1_000)
///     .admission(Admission::TinyLfu)
///     .build()?;
/// # drop(cache);
/// # Ok::<(), herdless::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Admission {
    /// Every new key is kept and SIEVE evicts to make room (the default): best when the
    /// popular keys move (phase changes), worst on loops and long scans.
    #[default]
    Always,
    /// When the shard is full, a new key is kept only if it was seen more often than the
    /// entry SIEVE would evict; otherwise it is refused and that entry stays. "Seen": a
    /// TinyLFU frequency sketch counts each store (a miss's load, a `set`) and each entry
    /// SIEVE's hand finds read since it last passed (its visited bit, cleared while the
    /// hand looks for the victim; counted as two stores), never a hit itself. Measured
    /// (BENCHMARKS.md, goal 6, capacities of 1% and 10% of the keys): a loop over 1.2x
    /// the capacity goes from 0% of hits to 80-82% (moka 69-83%, quick_cache 68-69%), a
    /// loop mixed with Zipf from 24% / 34% to 45% / 54%, Zipf and scans gain ~1 point
    /// (within 1 point of the best contender on 7-8 of the 10 rows, never on the shifts),
    /// but a shift of the popular keys at 10% capacity drops from 84% to 80% (LRU: 91%):
    /// it adapts more slowly when they move. A hit costs the same, on or off.
    ///
    /// A refused value still answers its load's caller and waiters (single-flight is
    /// unchanged) and a refused `set` still returns `Ok(())`: it is not kept, as an insert
    /// into moka may be rejected by its admission policy. Refusals are counted in
    /// `admission_rejections` and never weigh against the capacity. A key that already has
    /// an entry (expired or not) is always kept: it was admitted before.
    ///
    /// Memory: a sketch per shard, allocated when the cache is built, of 4 rows of 4-bit
    /// counters, 4 per entry the shard can hold rounded up to a power of two: 8-16 bytes
    /// per entry of capacity. Under [`max_bytes`](crate::Builder::max_bytes) an entry is
    /// taken to weigh at least [`ENTRY_OVERHEAD_BYTES`](crate::ENTRY_OVERHEAD_BYTES); a
    /// shard's sketch is at most 2 MiB whatever the capacity (a cache of a custom weigher
    /// with a large capacity hits that bound).
    TinyLfu,
}

/// Rows of the sketch: a key's estimate is the least of its 4 counters.
const ROWS: usize = 4;
/// Per row, the least and most counters of one shard's sketch.
const MIN_WIDTH: usize = 64;
const MAX_WIDTH: usize = 1 << 20;
/// Records (stores, and reads counted by [`Sketch::record_read`]) per entry between two
/// halvings: 7, where TinyLFU's paper uses 10 counting every read, since a read the hand
/// finds counts double here (the shift of popular keys at 10% capacity: ~78% of hits at 10,
/// ~80% at 7, in a model of the traces; loops lose nothing).
const PERIOD: usize = 7;
/// What a read the hand found adds to its key's counters ([`Sketch::record_read`]).
const READ_WEIGHT: u8 = 2;
/// Odd multipliers, one per row: the row's slot is the top bits of `hash * M` (all 64 bits
/// of the hash mix into them, where masking low bits would reuse the bits that pick the
/// shard, the same for every key of a shard).
const MIX: [u64; ROWS] = [
    0x9E37_79B9_7F4A_7C15,
    0xC2B2_AE3D_27D4_EB4F,
    0x1656_67B1_9E37_79F9,
    0xD6E8_FEB8_6659_FD93,
];

/// A count-min sketch of 4-bit counters, two to a byte, halved every `PERIOD x entries`
/// records so that old popularity fades (TinyLFU's reset).
pub(crate) struct Sketch {
    /// `ROWS` rows of `width` counters, one after the other.
    counters: Vec<u8>,
    /// log2 of the counters per row.
    bits: u32,
    records: usize,
    period: usize,
}

impl Sketch {
    /// A sketch for a shard that holds at most `entries` entries.
    pub(crate) fn new(entries: u64) -> Self {
        let entries = usize::try_from(entries).unwrap_or(usize::MAX).max(1);
        let width = entries
            .saturating_mul(4)
            .clamp(MIN_WIDTH, MAX_WIDTH)
            .next_power_of_two();
        Self {
            counters: vec![0; ROWS * width / 2],
            bits: width.trailing_zeros(),
            records: 0,
            period: entries.min(MAX_WIDTH).saturating_mul(PERIOD),
        }
    }

    /// Counter `row`'s index (in counters, not bytes) for `hash`.
    #[inline]
    fn slot(&self, row: usize, hash: u64) -> usize {
        let at = (hash.wrapping_mul(MIX[row]) >> (64 - self.bits)) as usize;
        (row << self.bits) + at
    }

    #[inline]
    fn get(&self, i: usize) -> u8 {
        (self.counters[i / 2] >> (4 * (i & 1))) & 0xF
    }

    /// Counts one more store of the key of `hash`.
    pub(crate) fn record(&mut self, hash: u64) {
        self.add::<1>(hash);
    }

    /// Counts a read of the key of `hash` that the hand found (its SIEVE bit set): as two
    /// stores, since the bit stands for at least one read and often many (a loop over
    /// 1.2x the capacity: ~80% of hits counting one, ~83% counting two, in a model of the
    /// traces; BENCHMARKS.md, goal 6).
    pub(crate) fn record_read(&mut self, hash: u64) {
        self.add::<READ_WEIGHT>(hash);
    }

    /// Adds `BY` to the key's counters (each saturating at 15) and to the records towards
    /// the next halving. An add into the nibble, not a mask and an or: a store's record
    /// (`BY` = 1) costs what it did before reads were counted (`miss_profile`).
    #[inline]
    fn add<const BY: u8>(&mut self, hash: u64) {
        for row in 0..ROWS {
            let i = self.slot(row, hash);
            let step = BY.min(15 - self.get(i));
            self.counters[i / 2] += step << (4 * (i & 1));
        }
        self.records += usize::from(BY);
        if self.records >= self.period {
            self.records = 0;
            // Both nibbles of each byte halved at once: shift, then drop what crossed from
            // the high nibble into the low one.
            self.counters.iter_mut().for_each(|b| *b = (*b >> 1) & 0x77);
        }
    }

    /// How often the key of `hash` was recorded (an overestimate at worst; at most 15).
    pub(crate) fn estimate(&self, hash: u64) -> u8 {
        (0..ROWS)
            .map(|row| self.get(self.slot(row, hash)))
            .min()
            .unwrap_or(0)
    }

    /// Bytes held.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.counters.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_saturate_at_15_and_halve_every_period() {
        let mut s = Sketch::new(10);
        let (a, b) = (0x1234_5678_9ABC_DEF0, 0x0FED_CBA9_8765_4321);
        for _ in 0..20 {
            s.record(a);
        }
        assert_eq!(s.estimate(a), 15);
        assert_eq!(s.estimate(b), 0);
        // 7 x 10 records per period: 20 made, 50 more end it.
        for _ in 0..49 {
            s.record(b);
        }
        assert_eq!((s.estimate(a), s.estimate(b)), (15, 15));
        s.record(b);
        assert_eq!((s.estimate(a), s.estimate(b)), (7, 7));
    }

    #[test]
    fn a_read_counts_as_two_stores_towards_the_estimate_and_the_period() {
        let mut s = Sketch::new(10);
        let (a, b) = (0x1234_5678_9ABC_DEF0, 0x0FED_CBA9_8765_4321);
        s.record_read(a);
        s.record(b);
        assert_eq!((s.estimate(a), s.estimate(b)), (2, 1));
        for _ in 0..7 {
            s.record_read(a);
        }
        assert_eq!(s.estimate(a), 15, "saturates");
        // 2 x 8 + 1 = 17 records made; 53 more end the period of 70.
        for _ in 0..52 {
            s.record(b);
        }
        assert_eq!(s.estimate(b), 15);
        s.record(b);
        assert_eq!((s.estimate(a), s.estimate(b)), (7, 7));
    }

    #[test]
    fn memory_is_bounded_by_entries_and_by_a_ceiling() {
        assert_eq!(Sketch::new(1).bytes(), ROWS * MIN_WIDTH / 2);
        assert_eq!(Sketch::new(1000).bytes(), ROWS * 4096 / 2);
        assert_eq!(Sketch::new(u64::MAX).bytes(), ROWS * MAX_WIDTH / 2);
    }
}
