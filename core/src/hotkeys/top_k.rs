//! A bounded top-K of accessed keys (Space-Saving, Metwally, Agrawal, El Abbadi 2005),
//! striped by key hash so stripes hold disjoint keys and merge exactly.

use alloc::string::String;
use alloc::vec::Vec;

use hashbrown::HashTable;

use crate::key::namespace_of;
use crate::sync::Mutex;

const STRIPES: usize = 8;

/// One key of the top-K, as counted by the tracker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HotKey {
    /// The key.
    pub key: String,
    /// Estimated accesses (sampled hits are weighted by the sample rate, a sampled entry into
    /// a full tracker by 8; Space-Saving may overestimate a key by what the key it replaced
    /// had counted).
    pub count: u64,
    /// Misses recorded for this key while tracked.
    pub misses: u64,
}

struct Slot {
    key: String,
    hash: u64,
    count: u64,
    misses: u64,
    /// Misses since the detector's last tick, and in the tick before (for attribution).
    window_misses: u64,
    last_window_misses: u64,
}

#[derive(Default)]
struct Summary {
    slots: Vec<Slot>,
    index: HashTable<usize>,
    /// Slot indices as a binary min-heap on `count`, and each slot's place in it: Space-Saving
    /// replaces the least counted slot on every miss of an untracked key, and a full scan
    /// for it was a tenth of a miss's time (a flood of new keys misses on every call).
    heap: Vec<u32>,
    place: Vec<u32>,
    /// Admission draws made (untracked accesses while full), for [`ADMIT_BITS`]' sampling.
    draws: u64,
}

/// When the summary is full, an access of a key it does not track takes a slot (the least
/// counted one) on one draw in `1 << ADMIT_BITS`, weighted by that: a flood of new keys, each
/// missing once, then costs a miss a lookup instead of a replacement with its heap repair
/// (about a tenth of a miss's instructions), and a key that keeps missing still gets in
/// within a few of its accesses.
const ADMIT_BITS: u32 = 3;

impl Summary {
    /// The slot tracking `key`, if any.
    #[inline]
    fn find(&self, key: &str, hash: u64) -> Option<usize> {
        let slots = &self.slots;
        self.index
            .find(hash, |&i| slots[i].hash == hash && slots[i].key == key)
            .copied()
    }

    /// Adds `weight` accesses (one a miss, if `miss`) to the tracked slot `i`.
    fn bump(&mut self, i: usize, weight: u64, miss: bool) {
        let s = &mut self.slots[i];
        s.count = s.count.saturating_add(weight);
        if miss {
            s.misses += 1;
            s.window_misses += 1;
        }
        self.sift_down(self.place[i] as usize);
    }

    fn record(&mut self, cap: usize, key: &str, hash: u64, weight: u64, miss: bool) {
        match self.find(key, hash) {
            Some(i) => self.bump(i, weight, miss),
            None => self.insert(cap, key, hash, weight, miss),
        }
    }

    /// [`record`](Self::record) of one slow-path access, with the sampled admission of an
    /// untracked key into a full summary (see [`ADMIT_BITS`]).
    fn record_access(&mut self, cap: usize, key: &str, hash: u64, miss: bool) {
        if let Some(i) = self.find(key, hash) {
            return self.bump(i, 1, miss);
        }
        if self.slots.len() >= cap {
            // The draw mixes the key's hash into a counter, so keys read in a fixed cycle do
            // not alias with the period (one multiply).
            self.draws = self.draws.wrapping_add(1);
            let draw = (self.draws ^ hash).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            if draw >> (64 - ADMIT_BITS) != 0 {
                return;
            }
        }
        let weight = if self.slots.len() >= cap {
            1 << ADMIT_BITS
        } else {
            1
        };
        self.insert(cap, key, hash, weight, miss);
    }

    /// Tracks the untracked `key`: in a free slot, or (Space-Saving) in the least counted
    /// one, inheriting its count.
    #[inline]
    fn insert(&mut self, cap: usize, key: &str, hash: u64, weight: u64, miss: bool) {
        let slots = &mut self.slots;
        let miss = u64::from(miss);
        if slots.len() < cap {
            let i = slots.len();
            self.index.insert_unique(hash, i, |&i| slots[i].hash);
            slots.push(Slot {
                key: key.into(),
                hash,
                count: weight,
                misses: miss,
                window_misses: miss,
                last_window_misses: 0,
            });
            self.heap.push(i as u32);
            self.place.push((self.heap.len() - 1) as u32);
            self.sift_up(self.heap.len() - 1);
            return;
        }
        // Space-Saving: the new key takes the least counted slot and inherits its count.
        let Some(&top) = self.heap.first() else {
            return;
        };
        let i = top as usize;
        let old = slots[i].hash;
        if let Ok(e) = self.index.find_entry(old, |&j| j == i) {
            e.remove();
        }
        let s = &mut slots[i];
        s.key.clear();
        s.key.push_str(key); // reuses the slot's buffer
        s.hash = hash;
        s.count = s.count.saturating_add(weight);
        s.misses = miss;
        s.window_misses = miss;
        s.last_window_misses = 0;
        self.index.insert_unique(hash, i, |&j| slots[j].hash);
        self.sift_down(0);
    }

    fn count_at(&self, at: usize) -> u64 {
        self.slots[self.heap[at] as usize].count
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.place[self.heap[a] as usize] = a as u32;
        self.place[self.heap[b] as usize] = b as u32;
    }

    /// Restores the heap after the count at `at` fell (a new slot).
    fn sift_up(&mut self, mut at: usize) {
        while at > 0 {
            let parent = (at - 1) / 2;
            if self.count_at(parent) <= self.count_at(at) {
                break;
            }
            self.swap(parent, at);
            at = parent;
        }
    }

    /// Restores the heap after the count at `at` grew (counts only grow).
    fn sift_down(&mut self, mut at: usize) {
        loop {
            let (l, r) = (2 * at + 1, 2 * at + 2);
            let mut least = at;
            if l < self.heap.len() && self.count_at(l) < self.count_at(least) {
                least = l;
            }
            if r < self.heap.len() && self.count_at(r) < self.count_at(least) {
                least = r;
            }
            if least == at {
                break;
            }
            self.swap(at, least);
            at = least;
        }
    }
}

/// The striped Space-Saving summary.
pub(crate) struct HotKeys {
    stripes: [Mutex<Summary>; STRIPES],
    per_stripe: usize,
    /// Hits are sampled when `counter & mask == 0`; their weight is `mask + 1`.
    mask: u64,
}

impl HotKeys {
    /// A tracker of about `capacity` keys sampling one hit in `sample` (a power of two).
    pub(crate) fn new(capacity: usize, sample: u64) -> Self {
        Self {
            stripes: Default::default(),
            per_stripe: capacity.div_ceil(STRIPES).max(1),
            mask: sample.max(1).next_power_of_two() - 1,
        }
    }

    #[inline]
    fn stripe(&self, hash: u64) -> &Mutex<Summary> {
        &self.stripes[(hash as usize) % STRIPES]
    }

    /// A fresh hit whose striped counter was `counter` before it was incremented.
    #[inline]
    pub(crate) fn hit(&self, counter: u64, key: &str, hash: u64) {
        // Scrambled, so traffic that reads keys in a fixed order does not alias with the
        // sampling period (one multiply).
        if (counter.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) & self.mask == 0 {
            self.sample_hit(key, hash);
        }
    }

    #[cold]
    fn sample_hit(&self, key: &str, hash: u64) {
        if let Some(mut s) = self.stripe(hash).try_lock() {
            s.record(self.per_stripe, key, hash, self.mask + 1, false);
        }
    }

    /// An access on a slow path (a miss, a stale hit, a refresh): recorded for a tracked key
    /// or while the stripe has room; otherwise the key gets in on one draw in 8, weighted 8.
    pub(crate) fn access(&self, key: &str, hash: u64, miss: bool) {
        self.stripe(hash)
            .lock()
            .record_access(self.per_stripe, key, hash, miss);
    }

    /// Adds `count` accesses to `key` (import).
    pub(crate) fn add(&self, key: &str, hash: u64, count: u64) {
        self.stripe(hash)
            .lock()
            .record(self.per_stripe, key, hash, count, false);
    }

    /// The `n` most accessed keys, most first.
    pub(crate) fn top(&self, n: usize) -> Vec<HotKey> {
        let mut all = Vec::new();
        for s in &self.stripes {
            let s = s.lock();
            all.extend(s.slots.iter().map(|s| HotKey {
                key: s.key.clone(),
                count: s.count,
                misses: s.misses,
            }));
        }
        all.sort_unstable_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
        all.truncate(n);
        all
    }

    /// Closes the detector's window: the misses of the tick just ended become "last".
    pub(crate) fn roll(&self) {
        for s in &self.stripes {
            for slot in s.lock().slots.iter_mut() {
                slot.last_window_misses = core::mem::take(&mut slot.window_misses);
            }
        }
    }

    /// The key of `namespace` with the most misses in the last closed window, and them.
    pub(crate) fn top_misser(&self, namespace: &str) -> Option<(String, u64)> {
        let mut best: Option<(String, u64)> = None;
        for s in &self.stripes {
            for slot in s.lock().slots.iter() {
                let m = slot.last_window_misses;
                if m > 0
                    && namespace_of(&slot.key) == namespace
                    && best.as_ref().is_none_or(|(_, b)| m > *b)
                {
                    best = Some((slot.key.clone(), m));
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replaced_slot_is_always_a_least_counted_one() {
        let mut s = Summary::default();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for step in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Skewed keys and weights: a few hot keys, many cold ones, sampled hits (x64).
            let k = if x % 4 == 0 { x % 8 } else { x % 5000 };
            let key = alloc::format!("k:{k}");
            let weight = if x % 16 == 0 { 64 } else { 1 };
            let least = s.slots.iter().map(|s| s.count).min();
            let tracked = s.slots.iter().any(|s| s.key == key);
            let before: Vec<(String, u64)> =
                s.slots.iter().map(|s| (s.key.clone(), s.count)).collect();
            s.record(32, &key, k, weight, x % 3 == 0);
            if !tracked && before.len() == 32 {
                // The slot now holding `key` held a least counted key before.
                let i = s.slots.iter().position(|s| s.key == key).unwrap();
                assert_eq!(Some(before[i].1), least, "step {step}");
                assert_eq!(s.slots[i].count, before[i].1 + weight);
            }
            for (at, &i) in s.heap.iter().enumerate() {
                assert_eq!(s.place[i as usize] as usize, at);
                if at > 0 {
                    assert!(s.count_at((at - 1) / 2) <= s.count_at(at), "step {step}");
                }
            }
        }
        assert_eq!(s.heap.len(), 32);
    }

    #[test]
    fn a_key_that_keeps_missing_gets_in_through_a_flood_of_new_ones() {
        let hk = HotKeys::new(16, 1);
        for round in 0..2000u64 {
            // Every stripe full of keys seen once, a new one per round.
            hk.access(&alloc::format!("flood:{round}"), round, true);
            if round >= 1000 {
                hk.access("users:42", 5, true);
            }
        }
        let top = hk.top(1);
        assert_eq!(top[0].key, "users:42", "{top:?}");
        // Admitted within a few of its 1,000 misses, then every one counted.
        assert!(top[0].misses > 900, "{top:?}");
    }

    #[test]
    fn space_saving_keeps_the_heavy_keys() {
        let hk = HotKeys::new(16, 1);
        for round in 0..200u64 {
            hk.access("hot:a", 1, false);
            hk.access("hot:b", 2, false);
            let cold = alloc::format!("cold:{round}");
            hk.access(&cold, 1000 + round, false);
        }
        let top = hk.top(2);
        assert_eq!(top[0].key, "hot:a");
        assert_eq!(top[1].key, "hot:b");
        assert!(top[0].count >= 200);
    }
}
