//! Eviction policies as models, for the hit-ratio tables only: one SIEVE queue (what each
//! of herdless's shards runs, without the sharding) and the same queue behind a TinyLFU
//! admission filter (fed by every read, or by misses only), the change proposed for the traces SIEVE loses (issue 32 goal 6).
//! References from a registry (`caches`: W-TinyLFU, LRU) and an ARC model ([`Arc`]) are here too, so
//! every contender is a [`Read`] like the real caches of [`crate::zipf`].

use std::hash::BuildHasher;
use std::sync::atomic::Ordering;

use caches::Cache as _;

mod arc;
pub use arc::Arc;

use crate::zipf::{LOADS, Read};

/// One SIEVE queue of `capacity` entries (Zhang et al., NSDI '24): new entries go in at
/// the head; a hit sets the entry's visited bit; to make room the hand walks from where it
/// stopped toward the head (wrapping to the tail), clearing visited bits, and evicts the
/// first entry it finds unvisited. A doubly linked list over a slab of nodes.
pub struct Sieve {
    nodes: Vec<Node>,
    index: hashbrown::HashMap<u32, usize>,
    /// Newest and oldest node.
    head: Option<usize>,
    tail: Option<usize>,
    hand: Option<usize>,
    capacity: usize,
    admission: Option<Admission>,
    /// The key the last [`access`](Sieve::access) evicted, if it evicted one.
    evicted: Option<u32>,
}

struct Node {
    key: u32,
    visited: bool,
    /// Toward the head (newer) and toward the tail (older).
    newer: Option<usize>,
    older: Option<usize>,
}

/// The admission filter in front of a [`Sieve`]: a frequency sketch, fed by every read or,
/// to leave the hit path as it is, by misses only.
struct Admission {
    sketch: Sketch,
    count_hits: bool,
}

impl Sieve {
    /// Plain SIEVE of `capacity` entries.
    pub fn new(capacity: usize) -> Self {
        Self {
            nodes: Vec::with_capacity(capacity),
            index: hashbrown::HashMap::with_capacity(capacity),
            head: None,
            tail: None,
            hand: None,
            capacity: capacity.max(1),
            admission: None,
            evicted: None,
        }
    }

    /// SIEVE behind a TinyLFU admission filter: when the cache is full, a new key is
    /// admitted only if the sketch has seen it more often than the victim the hand chose;
    /// otherwise the victim stays (its visited bit already cleared by the walk).
    /// `count_hits: false` feeds the sketch on misses only, so a hit costs what it costs
    /// plain SIEVE (one bit set).
    pub fn with_admission(capacity: usize, count_hits: bool) -> Self {
        Self {
            admission: Some(Admission {
                sketch: Sketch::new(capacity),
                count_hits,
            }),
            ..Self::new(capacity)
        }
    }

    /// Reads `key`: `true` on a hit.
    pub fn access(&mut self, key: u32) -> bool {
        self.evicted = None;
        if let Some(&at) = self.index.get(&key) {
            self.nodes[at].visited = true;
            if let Some(a) = &mut self.admission
                && a.count_hits
            {
                a.sketch.record(key);
            }
            return true;
        }
        if let Some(a) = &mut self.admission {
            a.sketch.record(key);
        }
        if self.nodes.len() < self.capacity {
            let at = self.nodes.len();
            self.nodes.push(Node {
                key,
                visited: false,
                newer: None,
                older: None,
            });
            self.push_head(at, key);
            return false;
        }
        let victim = self.victim();
        if let Some(a) = &self.admission
            && a.sketch.estimate(key) <= a.sketch.estimate(self.nodes[victim].key)
        {
            self.hand = Some(victim);
            return false;
        }
        self.hand = self.nodes[victim].newer;
        self.unlink(victim);
        self.index.remove(&self.nodes[victim].key);
        self.evicted = Some(self.nodes[victim].key);
        self.nodes[victim].visited = false;
        self.push_head(victim, key);
        false
    }

    /// The key the last [`access`](Self::access) evicted to make room, if any.
    pub fn evicted(&self) -> Option<u32> {
        self.evicted
    }

    fn victim(&mut self) -> usize {
        let mut at = self.hand.or(self.tail).expect("a full queue has a tail");
        while std::mem::replace(&mut self.nodes[at].visited, false) {
            at = self.nodes[at]
                .newer
                .or(self.tail)
                .expect("a full queue has a tail");
        }
        at
    }

    fn push_head(&mut self, at: usize, key: u32) {
        let n = &mut self.nodes[at];
        n.key = key;
        n.newer = None;
        n.older = self.head;
        if let Some(h) = self.head {
            self.nodes[h].newer = Some(at);
        }
        self.head = Some(at);
        if self.tail.is_none() {
            self.tail = Some(at);
        }
        self.index.insert(key, at);
    }

    fn unlink(&mut self, at: usize) {
        let (newer, older) = (self.nodes[at].newer, self.nodes[at].older);
        match newer {
            Some(n) => self.nodes[n].older = older,
            None => self.head = older,
        }
        match older {
            Some(o) => self.nodes[o].newer = newer,
            None => self.tail = newer,
        }
    }
}

/// A count-min sketch of 4-bit counters (4 rows), halved every `10 x capacity` records so
/// old popularity fades: TinyLFU's frequency estimate (Einziger et al., 2017).
struct Sketch {
    rows: [Vec<u8>; 4],
    mask: usize,
    hasher: hashbrown::DefaultHashBuilder,
    records: usize,
    period: usize,
}

impl Sketch {
    fn new(capacity: usize) -> Self {
        let width = (capacity * 4).next_power_of_two().max(64);
        Self {
            rows: std::array::from_fn(|_| vec![0; width]),
            mask: width - 1,
            hasher: hashbrown::DefaultHashBuilder::default(),
            records: 0,
            period: capacity.max(1) * 10,
        }
    }

    fn slots(&self, key: u32) -> [usize; 4] {
        let h = self.hasher.hash_one(key);
        std::array::from_fn(|row| (h.rotate_left(16 * row as u32) as usize) & self.mask)
    }

    fn record(&mut self, key: u32) {
        for (row, at) in self.slots(key).into_iter().enumerate() {
            let c = &mut self.rows[row][at];
            *c = (*c + 1).min(15);
        }
        self.records += 1;
        if self.records == self.period {
            self.records = 0;
            self.rows.iter_mut().flatten().for_each(|c| *c /= 2);
        }
    }

    fn estimate(&self, key: u32) -> u8 {
        let slots = self.slots(key);
        (0..4)
            .map(|row| self.rows[row][slots[row]])
            .min()
            .unwrap_or(0)
    }
}

/// A model or a registry cache keyed by the key's index, as a [`Read`] counting misses
/// in [`LOADS`].
fn read_of(mut hit: impl FnMut(u32) -> bool + 'static) -> Read {
    Box::new(move |_, v| {
        if !hit(v as u32) {
            LOADS.fetch_add(1, Ordering::Relaxed);
        }
        v
    })
}

/// The models and the registry references, each with room for `capacity` entries.
pub fn references(capacity: usize) -> Vec<(&'static str, Read)> {
    let mut sieve = Sieve::new(capacity);
    let mut admitted = Sieve::with_admission(capacity, true);
    let mut admitted_on_misses = Sieve::with_admission(capacity, false);
    let mut lru = caches::RawLRU::<u32, ()>::new(capacity).expect("capacity > 0");
    let mut arc = Arc::new(capacity);
    // Caffeine's shape: a 1% window, the main space 80% protected, 20% probationary.
    let window = (capacity / 100).max(1);
    let main = capacity - window;
    let mut wtinylfu = caches::WTinyLFUCache::<u32, ()>::with_sizes(
        window,
        main * 4 / 5,
        main - main * 4 / 5,
        capacity * 10,
    )
    .expect("valid sizes");
    vec![
        ("SIEVE (one queue)", read_of(move |k| sieve.access(k))),
        (
            "SIEVE + TinyLFU admission",
            read_of(move |k| admitted.access(k)),
        ),
        (
            "SIEVE + admission counting misses",
            read_of(move |k| admitted_on_misses.access(k)),
        ),
        (
            "LRU (caches)",
            read_of(move |k| {
                let hit = lru.get(&k).is_some();
                if !hit {
                    lru.put(k, ());
                }
                hit
            }),
        ),
        ("ARC (model)", read_of(move |k| arc.access(k))),
        (
            "W-TinyLFU (caches)",
            read_of(move |k| {
                let hit = wtinylfu.get(&k).is_some();
                if !hit {
                    wtinylfu.put(k, ());
                }
                hit
            }),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sieve_keeps_a_visited_entry_over_an_unvisited_one() {
        let mut s = Sieve::new(2);
        assert!(!s.access(1));
        assert!(!s.access(2));
        assert!(s.access(1)); // 1 visited
        assert!(!s.access(3)); // evicts 2, the first unvisited from the hand
        assert!(s.access(1));
        assert!(!s.access(2));
    }

    #[test]
    fn the_filter_refuses_a_key_seen_less_often_than_its_victim() {
        let mut s = Sieve::with_admission(1, true);
        for _ in 0..5 {
            s.access(1);
        }
        assert!(!s.access(2)); // seen once, the victim five times: refused
        assert!(s.access(1));
    }
}
