//! The SIEVE store on its own: list and table stay consistent through inserts, replacements,
//! removals and evictions; eviction spares visited entries once and takes dead ones; weights
//! add up; the admission filter credits the reads the hand finds.

use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;

use super::{Dropped, NIL, same_key};
use crate::admission::Sketch;
use crate::entry::Entry;
use crate::epoch::Namespaces;
use crate::expiry::{Lifetimes, Timing};

const SEC: u64 = 1_000_000_000;

/// Builds entries of namespace "ns", written at time 0.
struct Entries(Namespaces);

impl Entries {
    fn new() -> Self {
        Self(Namespaces::new(16, false))
    }

    fn fresh_for(&self, value: u32, secs: u64) -> Entry<u32> {
        let ns = self.0.get("ns");
        let epoch = ns.epoch();
        let timing = Timing::new(0, Duration::from_secs(secs));
        Entry::new(Some(value), (ns, epoch), timing, 0, 0, None)
    }
}

/// A deliberately poor hash: collisions are welcome, the table must compare keys.
fn hash(key: &str) -> u64 {
    key.bytes()
        .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)))
        % 4
}

/// [`hash`] as the store's hasher.
#[derive(Clone, Default)]
struct Poor;

impl core::hash::BuildHasher for Poor {
    type Hasher = PoorHasher;
    fn build_hasher(&self) -> PoorHasher {
        PoorHasher(Vec::new())
    }
}

struct PoorHasher(Vec<u8>);

impl core::hash::Hasher for PoorHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }
    fn finish(&self) -> u64 {
        // `str` hashes its bytes, then a 0xff terminator.
        let bytes = self.0.strip_suffix(&[0xff]).unwrap_or(&self.0);
        hash(core::str::from_utf8(bytes).expect("a key"))
    }
}

type Store<V> = super::Store<V, Poor>;

fn new_store(capacity: u64) -> Store<u32> {
    Store::new(capacity, Poor, Lifetimes::new(Duration::ZERO, None), None)
}

/// Inserts `key` (fresh for 60 s) at time `now`; answers the values replaced or evicted.
fn put(s: &mut Store<u32>, e: &Entries, key: &str, v: u32, weight: u64, now: u64) -> Vec<u32> {
    let mut out = Dropped::new();
    let stored = s.insert(
        hash(key),
        super::Key::new(key),
        e.fresh_for(v, 60),
        weight,
        now,
        &mut out,
        |_, _| {},
    );
    assert!(stored, "no admission filter: every insert is kept");
    check(s);
    out.into_iter().filter_map(|mut e| e.take_value()).collect()
}

fn get(s: &Store<u32>, key: &str) -> Option<u32> {
    s.get(hash(key), key).and_then(|n| n.entry.value().copied())
}

fn touch(s: &Store<u32>, key: &str) {
    s.get(hash(key), key).expect("present").touch(0);
}

/// The keys from the oldest to the newest, after checking every invariant: the list is
/// doubly linked end to end, holds exactly the table's entries, and the weight adds up.
fn check(s: &Store<u32>) -> Vec<String> {
    let (mut keys, mut weight) = (Vec::new(), 0);
    let (mut i, mut older) = (s.tail, NIL);
    while i != NIL {
        let n = s.node(i);
        assert_eq!(n.older, older, "links disagree");
        let found = s.get(hash(n.key()), n.key()).map(|m| m.key());
        assert_eq!(found, Some(n.key()), "a listed entry is not in the table");
        weight += u64::from(n.entry.weight);
        keys.push(String::from(n.key()));
        older = i;
        i = n.newer;
    }
    assert_eq!(older, s.head, "the list does not end at the head");
    assert_eq!(keys.len(), s.len(), "list and table hold different entries");
    assert_eq!(weight, s.weight(), "weight out of step");
    let used = s.nodes.iter().filter(|n| n.is_some()).count();
    assert_eq!(used + s.free.len(), s.nodes.len(), "a slot is lost");
    assert_eq!(used, s.len());
    if s.hand != NIL {
        assert!(
            s.nodes[s.hand as usize].is_some(),
            "the hand points at a free slot"
        );
    }
    keys
}

#[test]
fn insert_replace_and_remove_keep_list_and_table_consistent() {
    let e = Entries::new();
    let mut s = new_store(100);
    for (i, k) in ["a", "b", "c", "d", "e"].iter().enumerate() {
        assert!(put(&mut s, &e, k, i as u32, 1, 0).is_empty());
    }
    assert_eq!(check(&s), ["a", "b", "c", "d", "e"]);
    // Replacing moves the key to the head and hands back the old value.
    assert_eq!(put(&mut s, &e, "b", 10, 1, 0), [1]);
    assert_eq!(check(&s), ["a", "c", "d", "e", "b"]);
    assert_eq!(get(&s, "b"), Some(10));
    // Removing the tail, the head and a middle entry.
    for (k, v) in [("a", 0), ("b", 10), ("d", 3)] {
        assert_eq!(
            s.remove(hash(k), k).and_then(|mut x| x.take_value()),
            Some(v)
        );
        check(&s);
    }
    assert_eq!(check(&s), ["c", "e"]);
    assert!(s.remove(hash("a"), "a").is_none());
    // Freed slots are reused.
    let slots = s.nodes.len();
    put(&mut s, &e, "f", 5, 1, 0);
    put(&mut s, &e, "g", 6, 1, 0);
    assert_eq!(s.nodes.len(), slots);
    assert_eq!(check(&s), ["c", "e", "f", "g"]);
    for k in ["c", "e", "f", "g"] {
        s.remove(hash(k), k);
    }
    assert_eq!((s.len(), s.weight(), s.head, s.tail), (0, 0, NIL, NIL));
}

#[test]
fn eviction_spares_visited_entries_once() {
    let e = Entries::new();
    let mut s = new_store(3);
    for k in ["a", "b", "c"] {
        put(&mut s, &e, k, 0, 1, 0);
    }
    touch(&s, "a");
    touch(&s, "b");
    // The hand starts at the oldest: a and b were visited, so c goes.
    put(&mut s, &e, "d", 0, 1, 0);
    assert_eq!(check(&s), ["a", "b", "d"]);
    // The hand passed a and b and cleared their bits: now a goes, then b.
    put(&mut s, &e, "e", 0, 1, 0);
    assert_eq!(check(&s), ["b", "d", "e"]);
    touch(&s, "e");
    put(&mut s, &e, "f", 0, 1, 0);
    assert_eq!(check(&s), ["d", "e", "f"]);
    // Everything visited: one full sweep clears the bits, then the oldest goes.
    for k in ["d", "e", "f"] {
        touch(&s, k);
    }
    put(&mut s, &e, "g", 0, 1, 0);
    assert_eq!(check(&s).len(), 3);
    assert_eq!(get(&s, "g"), Some(0));
}

#[test]
fn a_one_hit_wonder_scan_does_not_flush_visited_entries() {
    let e = Entries::new();
    let mut s = new_store(10);
    for i in 0..5 {
        put(&mut s, &e, &alloc::format!("hot{i}"), 0, 1, 0);
    }
    for i in 0..1_000 {
        for h in 0..5 {
            touch(&s, &alloc::format!("hot{h}"));
        }
        put(&mut s, &e, &alloc::format!("scan{i}"), 0, 1, 0);
    }
    for h in 0..5 {
        assert_eq!(
            get(&s, &alloc::format!("hot{h}")),
            Some(0),
            "hot{h} was evicted"
        );
    }
}

#[test]
fn dead_entries_are_evicted_even_when_visited() {
    let e = Entries::new();
    let mut s = new_store(3);
    let mut out = Dropped::new();
    let stored = s.insert(
        hash("short"),
        super::Key::new("short"),
        e.fresh_for(1, 1),
        1,
        0,
        &mut out,
        |_, _| {},
    );
    assert!(stored);
    put(&mut s, &e, "b", 2, 1, 0);
    put(&mut s, &e, "c", 3, 1, 0);
    for k in ["short", "b", "c"] {
        touch(&s, k);
    }
    // At 2 s "short" is dead: it goes although visited, and b and c keep their bits.
    assert_eq!(put(&mut s, &e, "d", 4, 1, 2 * SEC), [1]);
    assert!(
        s.get(hash("b"), "b")
            .unwrap()
            .entry
            .visited
            .load(super::Ordering::Relaxed)
    );
    // Entries of a bumped namespace are dead too.
    e.0.bump("ns");
    touch(&s, "b");
    assert_eq!(put(&mut s, &e, "f", 5, 1, 2 * SEC).len(), 1);
}

#[test]
fn weights_are_accounted_and_bound_the_store() {
    let e = Entries::new();
    let mut s = new_store(10);
    put(&mut s, &e, "a", 1, 3, 0);
    put(&mut s, &e, "b", 2, 3, 0);
    put(&mut s, &e, "c", 3, 3, 0);
    assert_eq!(s.weight(), 9);
    // Weight 4 does not fit beside 9: the oldest unvisited entry makes room.
    assert_eq!(put(&mut s, &e, "d", 4, 4, 0), [1]);
    assert_eq!(s.weight(), 10);
    // Replacing an entry with a lighter one gives its weight back.
    assert_eq!(put(&mut s, &e, "d", 5, 1, 0), [4]);
    assert_eq!(s.weight(), 7);
    // A heavy entry evicts as many as it needs.
    let evicted = put(&mut s, &e, "e", 6, 9, 0);
    assert_eq!(evicted.len(), 2);
    assert!(s.weight() <= 10);
    s.remove(hash("e"), "e");
    assert_eq!(s.weight(), s.len() as u64);
}

#[test]
fn same_key_agrees_with_string_equality_at_every_length() {
    let base = "abcdefghijklmnopqrstuvwxyz0123456789";
    for n in 0..=base.len() {
        let a = &base[..n];
        assert!(same_key(a, a));
        for i in 0..n {
            // One byte different, at every position.
            let mut b = a.as_bytes().to_vec();
            b[i] = b'#';
            let b = core::str::from_utf8(&b).unwrap();
            assert!(!same_key(a, b), "{a} {b}");
        }
        if n > 0 {
            assert!(!same_key(a, &base[..n - 1]));
        }
    }
}

/// A node of a `u64` cache is 72 bytes (128 before issue 17): the figure the memory per
/// entry rests on (BENCHMARKS.md, "Memory per entry"). Loom's atomics are larger.
#[cfg(not(herdless_loom))]
#[test]
fn a_node_of_a_small_value_is_72_bytes() {
    assert_eq!(core::mem::size_of::<Entry<u64>>(), 56);
    assert_eq!(core::mem::size_of::<Option<super::Node<u64>>>(), 72);
    // A value with a niche costs no more than its own size either.
    assert_eq!(
        core::mem::size_of::<Option<super::Node<alloc::sync::Arc<u8>>>>(),
        72
    );
}

#[test]
fn a_cached_absence_holds_no_value_and_a_value_is_dropped_once() {
    let e = Entries::new();
    let ns = e.0.get("ns");
    let timing = Timing::new(0, Duration::from_secs(1));
    let absent: Entry<alloc::sync::Arc<u8>> = Entry::new(None, (ns.clone(), 0), timing, 0, 0, None);
    assert!(absent.value().is_none() && !absent.has_value());
    let v = alloc::sync::Arc::new(7u8);
    let mut held = Entry::new(Some(v.clone()), (ns, 0), timing, 0, 0, None);
    assert_eq!(alloc::sync::Arc::strong_count(&v), 2);
    let out = held.take_value();
    assert!(held.value().is_none());
    drop(held);
    assert_eq!(alloc::sync::Arc::strong_count(&v), 2, "taken, not dropped");
    drop(out);
    assert_eq!(alloc::sync::Arc::strong_count(&v), 1);
}

/// Offers `key` (weight 1, at time 0) to a store; true when it was kept.
fn offer(s: &mut Store<u32>, e: &Entries, key: &str) -> bool {
    let mut out = Dropped::new();
    let kept = s.insert(
        hash(key),
        super::Key::new(key),
        e.fresh_for(0, 60),
        1,
        0,
        &mut out,
        |_, _| {},
    );
    check(s);
    kept
}

#[test]
fn the_filter_credits_each_read_the_hand_clears_so_read_residents_outrank_a_reloaded_key() {
    // a, b and c have distinct (poor) hashes: their sketch counters never collide.
    for read in [false, true] {
        let e = Entries::new();
        let life = Lifetimes::new(Duration::ZERO, None);
        let mut s = Store::new(2, Poor, life, Some(Sketch::new(2)));
        assert!(
            offer(&mut s, &e, "a") && offer(&mut s, &e, "b"),
            "room for both"
        );
        if read {
            touch(&s, "a");
            touch(&s, "b");
        }
        // Stored once, c is no more frequent than a (stored once, read or not): refused.
        assert!(!offer(&mut s, &e, "c"));
        assert_eq!(s.len(), 2);
        // Stored twice, c outranks a stored once and never read, but not a read since:
        // the hand that cleared a's bit counted that read.
        assert_eq!(offer(&mut s, &e, "c"), !read, "read: {read}");
        assert_eq!(get(&s, "a").is_some(), read);
        assert_eq!((s.len(), s.weight()), (2, 2));
    }
}
