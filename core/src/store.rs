//! The bounded in-memory store of one shard, evicting with SIEVE (Zhang et al.,
//! NSDI 2024): a FIFO queue with one "visited" bit per entry and a hand that sweeps from the
//! oldest entry, sparing visited ones once. A hit only sets a bit (no list surgery, so reads
//! share the shard's read lock), and one-hit wonders, such as a flood of random keys, leave
//! first. Dead entries (expired past retention, or of a bumped epoch) are evicted when the
//! hand reaches them, visited or not. With an admission sketch (`crate::admission`), a new
//! key may be refused instead of evicting the entry the hand stops at.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};

pub(crate) use self::key::Key;
use crate::admission::Sketch;
use crate::entry::Entry;
use crate::expiry::{Lifetimes, Phase};
use crate::sync::Ordering;

mod key;
#[cfg(test)]
mod tests;

const NIL: u32 = u32::MAX;

/// Key equality, inline for keys of 4 to 16 bytes (two overlapping word compares) instead of
/// a call to `memcmp`, which was a fifth of a hit's time in profiles; longer keys use it.
#[inline(always)]
fn same_key(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word = |s: &[u8], i: usize| u64::from_ne_bytes(s[i..i + 8].try_into().unwrap());
    let half = |s: &[u8], i: usize| u32::from_ne_bytes(s[i..i + 4].try_into().unwrap());
    match n {
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        4..=7 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        _ => a == b,
    }
}

/// One entry in the shard: 72 bytes with a `u64` value (the key a thin pointer, the
/// entry's weight and SIEVE bit in the entry's own padding). Its hash is not kept (the
/// table's hasher makes it again when the table grows or the entry is evicted): a hit reads
/// the node, and a smaller node spans fewer cache lines.
pub(crate) struct Node<V> {
    key: Key,
    pub(crate) entry: Entry<V>,
    /// Towards the head (newer entries).
    newer: u32,
    /// Towards the tail (older entries).
    older: u32,
}

impl<V> Node<V> {
    /// Marks the entry as used, for SIEVE (a load first: no cache-line write when already
    /// set), and read at `now` for its idle clock. True when a second tier is due to hear
    /// of the read (see [`IdleReads`](crate::IdleReads)).
    #[inline]
    pub(crate) fn touch(&self, now: u64) -> bool {
        let visited = &self.entry.visited;
        if !visited.load(Ordering::Relaxed) {
            visited.store(true, Ordering::Relaxed);
        }
        self.entry.idle().is_some_and(|i| i.read(now))
    }

    /// The entry's key.
    #[inline]
    pub(crate) fn key(&self) -> &str {
        self.key.as_str()
    }
}

/// What a store replaced or evicted, dropped by the caller outside the shard's lock:
/// usually one entry (a miss in a full cache evicts one), kept inline so that a miss does
/// not allocate a list for it.
pub(crate) type Dropped<V> = smallvec::SmallVec<[Entry<V>; 2]>;

/// The entries of one shard. Every `hash` a caller passes is `hasher`'s hash of the key.
pub(crate) struct Store<V, S = DefaultHashBuilder> {
    hasher: S,
    table: HashTable<u32>,
    nodes: Vec<Option<Node<V>>>,
    free: Vec<u32>,
    head: u32,
    tail: u32,
    hand: u32,
    weight: u64,
    capacity: u64,
    /// The cache's lifetimes, for the phase of an entry the hand reaches.
    life: Lifetimes,
    /// The admission filter's frequencies ([`Admission::TinyLfu`](crate::admission::Admission)),
    /// when on: read and written by `insert` only, never by a hit.
    sketch: Option<Sketch>,
}

/// The most one entry may weigh: weights are kept in 32 bits.
pub(crate) const MAX_WEIGHT: u64 = u32::MAX as u64;

impl<V, S: BuildHasher + Clone> Store<V, S> {
    pub(crate) fn new(capacity: u64, hasher: S, life: Lifetimes, sketch: Option<Sketch>) -> Self {
        Self {
            hasher,
            life,
            sketch,
            table: HashTable::new(),
            nodes: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            hand: NIL,
            weight: 0,
            capacity,
        }
    }

    /// Empties the store, returning its old contents to be dropped outside the lock. The
    /// sketch stays (allocated once, and the keys' popularity outlives the entries).
    pub(crate) fn take(&mut self) -> Self {
        let sketch = self.sketch.take();
        core::mem::replace(
            self,
            Self::new(self.capacity, self.hasher.clone(), self.life, sketch),
        )
    }

    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    pub(crate) fn weight(&self) -> u64 {
        self.weight
    }

    fn node(&self, i: u32) -> &Node<V> {
        self.nodes[i as usize]
            .as_ref()
            .expect("herdless: SIEVE list points at a free slot")
    }

    fn node_mut(&mut self, i: u32) -> &mut Node<V> {
        self.nodes[i as usize]
            .as_mut()
            .expect("herdless: SIEVE list points at a free slot")
    }

    #[inline]
    pub(crate) fn get(&self, hash: u64, key: &str) -> Option<&Node<V>> {
        let nodes = &self.nodes;
        let i = *self.table.find(hash, |&i| {
            nodes[i as usize]
                .as_ref()
                .is_some_and(|n| same_key(n.key(), key))
        })?;
        self.nodes[i as usize].as_ref()
    }

    pub(crate) fn get_mut(&mut self, hash: u64, key: &str) -> Option<&mut Node<V>> {
        let nodes = &self.nodes;
        let i = *self.table.find(hash, |&i| {
            nodes[i as usize]
                .as_ref()
                .is_some_and(|n| same_key(n.key(), key))
        })?;
        self.nodes[i as usize].as_mut()
    }

    /// [`insert_into`](Self::insert_into) of a key that may be stored already (the tests').
    #[cfg(test)]
    #[allow(clippy::too_many_arguments)]
    #[must_use]
    pub(crate) fn insert(
        &mut self,
        hash: u64,
        key: Key,
        entry: Entry<V>,
        weight: u64,
        now: u64,
        evicted: &mut Dropped<V>,
        on_evict: impl FnMut(&str, &Entry<V>),
    ) -> bool {
        self.insert_into(hash, key, entry, weight, now, evicted, on_evict, false)
    }

    /// Stores `entry` under `key`, replacing any previous one, then evicts until the shard
    /// fits its capacity. What was replaced or evicted goes to `evicted`, to be dropped by
    /// the caller outside the lock. `weight` is at most [`MAX_WEIGHT`]. `vacant`: the
    /// caller knows the store holds no entry of `key` (see `Flight::vacant`), so none is
    /// searched for (checked in debug builds).
    ///
    /// With an admission sketch, a new key that needs room is first weighed against the
    /// entry SIEVE would evict: `false` when it is refused (the entry then goes to
    /// `evicted` too, and nothing else changed but visited bits the hand cleared).
    #[allow(clippy::too_many_arguments)]
    #[must_use]
    pub(crate) fn insert_into(
        &mut self,
        hash: u64,
        key: Key,
        mut entry: Entry<V>,
        weight: u64,
        now: u64,
        evicted: &mut Dropped<V>,
        mut on_evict: impl FnMut(&str, &Entry<V>),
        vacant: bool,
    ) -> bool {
        let weight = weight.min(MAX_WEIGHT);
        debug_assert!(
            !vacant || self.get(hash, &key).is_none(),
            "herdless: a store told vacant holds the key"
        );
        let old = if vacant {
            None
        } else {
            self.remove(hash, &key)
        };
        let new = match old {
            Some(old) => {
                evicted.push(old);
                false
            }
            None => true,
        };
        // Without a sketch (the default) the filter is this one test of an `Option` (a miss
        // costs +0.5% in all; BENCHMARKS.md, goal 6); a hit never comes here.
        if let Some(sketch) = &mut self.sketch {
            sketch.record(hash);
            if new && self.weight + weight > self.capacity && !self.admits(hash, now) {
                evicted.push(entry);
                return false;
            }
        }
        while self.weight + weight > self.capacity && self.len() > 0 {
            match self.evict_one(now, &mut on_evict) {
                Some(e) => evicted.push(e),
                None => break,
            }
        }
        entry.weight = weight as u32;
        let node = Node {
            key,
            entry,
            newer: NIL,
            older: self.head,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = Some(node);
                i
            }
            None => {
                self.nodes.push(Some(node));
                (self.nodes.len() - 1) as u32
            }
        };
        if self.head != NIL {
            let head = self.head;
            self.node_mut(head).newer = i;
        }
        self.head = i;
        if self.tail == NIL {
            self.tail = i;
        }
        self.weight += weight;
        let (nodes, hasher) = (&self.nodes, &self.hasher);
        self.table.insert_unique(hash, i, |&j| {
            nodes[j as usize]
                .as_ref()
                .map_or(0, |n| hasher.hash_one(n.key()))
        });
        true
    }

    /// TinyLFU's test: whether the key of `hash` was seen more often than the entry the
    /// hand stops at (its visited bits cleared on the way, as an eviction would, each one
    /// counted in the sketch: see [`victim`](Self::victim)). A dead
    /// victim is no contest. Always true without a sketch. The hand is left on the victim,
    /// so a refusal keeps it there and an admission evicts it first.
    fn admits(&mut self, hash: u64, now: u64) -> bool {
        let Some(sketch) = &self.sketch else {
            return true;
        };
        let candidate = sketch.estimate(hash);
        let Some(victim) = self.victim::<true>(now) else {
            return true;
        };
        self.hand = victim;
        let node = self.node(victim);
        if node.entry.phase(now, &self.life) == Phase::Dead {
            return true;
        }
        let theirs = self.hasher.hash_one(node.key());
        self.sketch
            .as_ref()
            .is_none_or(|s| candidate > s.estimate(theirs))
    }

    /// The entry [`evict_one`](Self::evict_one) would take, found the same way (clearing
    /// visited bits), but not taken. Inlined: it was `evict_one`'s own loop, and a call
    /// per eviction cost the miss path ~1.5% (callgrind, `miss_profile`).
    ///
    /// With `CREDIT` (the admission test only), each visited bit cleared also records its
    /// entry in the sketch (as two stores, [`Sketch::record_read`]): the bit says the entry
    /// was read since the hand last passed, and the sketch, never fed by a hit, would
    /// otherwise rank a resident read on every loop below an outsider loaded on every loop
    /// (a loop over 1.2x the capacity: 59-71% of hits without it, 80-82% with it;
    /// BENCHMARKS.md, goal 6). Each credit follows a hit that set the bit, so the walk
    /// stays O(1) amortised. `false` compiles to the walk eviction without a filter has
    /// always made; the further evictions an admitted heavy entry may need (`max_bytes`)
    /// take it too and credit nothing: rare, and the eviction loop stays as it was.
    #[inline(always)]
    fn victim<const CREDIT: bool>(&mut self, now: u64) -> Option<u32> {
        // Two sweeps at most: the first clears every visited bit it passes.
        let mut i = if self.hand == NIL {
            self.tail
        } else {
            self.hand
        };
        for _ in 0..2 * self.len() + 1 {
            if i == NIL {
                i = self.tail;
                continue;
            }
            let node = self.node(i);
            let dead = node.entry.phase(now, &self.life) == Phase::Dead;
            if dead || !node.entry.visited.load(Ordering::Relaxed) {
                return Some(i);
            }
            node.entry.visited.store(false, Ordering::Relaxed);
            let newer = node.newer;
            if CREDIT {
                let read = self.hasher.hash_one(node.key());
                if let Some(sketch) = &mut self.sketch {
                    sketch.record_read(read);
                }
            }
            i = newer;
        }
        None
    }

    /// Removes every entry whose value (`None`: a cached absence) `keep` refuses; returns
    /// them, to be dropped outside the lock.
    pub(crate) fn retain(&mut self, keep: impl Fn(Option<&V>) -> bool) -> Vec<Entry<V>> {
        let doomed: Vec<(u64, Box<str>)> = self
            .nodes
            .iter()
            .flatten()
            .filter(|n| !keep(n.entry.value()))
            .map(|n| (self.hasher.hash_one(n.key()), n.key().into()))
            .collect();
        doomed
            .into_iter()
            .filter_map(|(hash, key)| self.remove(hash, &key))
            .collect()
    }

    /// Removes `key`'s entry.
    pub(crate) fn remove(&mut self, hash: u64, key: &str) -> Option<Entry<V>> {
        let nodes = &self.nodes;
        let found = self
            .table
            .find_entry(hash, |&i| {
                nodes[i as usize]
                    .as_ref()
                    .is_some_and(|n| same_key(n.key(), key))
            })
            .ok()?;
        let (i, _) = found.remove();
        Some(self.unlink(i))
    }

    fn unlink(&mut self, i: u32) -> Entry<V> {
        let node = self.nodes[i as usize]
            .take()
            .expect("herdless: unlinking a free slot");
        if self.hand == i {
            self.hand = node.newer;
        }
        match node.newer {
            NIL => self.head = node.older,
            n => self.node_mut(n).older = node.older,
        }
        match node.older {
            NIL => self.tail = node.newer,
            o => self.node_mut(o).newer = node.newer,
        }
        self.weight -= u64::from(node.entry.weight);
        self.free.push(i);
        node.entry
    }

    /// One step of SIEVE: evicts the first unvisited (or dead) entry from the hand on.
    fn evict_one(&mut self, now: u64, on_evict: impl FnOnce(&str, &Entry<V>)) -> Option<Entry<V>> {
        let i = self.victim::<false>(now)?;
        let node = self.node(i);
        let hash = self.hasher.hash_one(node.key());
        self.hand = node.newer;
        if let Ok(e) = self.table.find_entry(hash, |&j| j == i) {
            e.remove();
        }
        let node = self.node(i);
        on_evict(node.key(), &node.entry);
        Some(self.unlink(i))
    }
}
