//! Epoch invalidation: `bump(namespace)` adds one to the namespace's epoch, O(1).
//! Every entry remembers the epoch it was written under; an entry of an older epoch is a miss
//! and the first to be evicted. No scan, ever. A load that began under an older epoch is not
//! stored.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;

use hashbrown::HashMap;

use crate::metrics::{Counters, NamespaceMetrics, NsMetrics};
use crate::sync::{Arc, AtomicBool, AtomicU64, Ordering, RwLock};

/// One namespace: its epoch and its metrics.
pub(crate) struct Namespace {
    pub(crate) name: Box<str>,
    epoch: AtomicU64,
    /// Looked up since the clock hand last passed (second-chance eviction of records).
    used: AtomicBool,
    pub(crate) metrics: NsMetrics,
}

impl Namespace {
    fn new(name: &str) -> Self {
        Self {
            name: name.into(),
            epoch: AtomicU64::new(0),
            used: AtomicBool::new(true),
            metrics: NsMetrics::default(),
        }
    }

    #[inline]
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// The namespace's counters.
    #[inline]
    pub(crate) fn counters(&self) -> &Counters {
        &self.metrics.counters
    }
}

/// The registry of namespaces. Bounded (keys are user input): past `max` distinct
/// namespaces, the record least recently looked up (second chance, a clock hand over the
/// records) is retired to make room. Retiring bumps it, so every entry and load of it
/// becomes a miss for good (they hold the retired record, whose epoch never comes back),
/// and a later use of the name starts a new record: a bump always invalidates exactly its
/// own namespace, and a forgotten namespace can never resurrect old entries. Retirements
/// are counted, and the retired records' counters are kept under [`RETIRED`], so totals
/// never go down.
pub(crate) struct Namespaces {
    inner: RwLock<Table>,
    /// The counters of retired namespaces, summed.
    retired: Arc<Namespace>,
    max: usize,
}

struct Table {
    map: HashMap<Box<str>, Arc<Namespace>>,
    /// The clock: records in the order the hand visits them.
    hand: VecDeque<Arc<Namespace>>,
}

/// Name under which the counters of retired namespaces are kept.
pub(crate) const RETIRED: &str = "__retired__";

impl Namespaces {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            inner: RwLock::new(Table {
                map: HashMap::new(),
                hand: VecDeque::new(),
            }),
            retired: Arc::new(Namespace::new(RETIRED)),
            max: max.max(1),
        }
    }

    /// The namespace named `name`, created on first use.
    pub(crate) fn get(&self, name: &str) -> Arc<Namespace> {
        if let Some(ns) = self.inner.read().map.get(name) {
            ns.used.store(true, Ordering::Relaxed);
            return ns.clone();
        }
        let mut t = self.inner.write();
        if let Some(ns) = t.map.get(name) {
            return ns.clone();
        }
        while t.map.len() >= self.max {
            self.retire_one(&mut t);
        }
        let ns = Arc::new(Namespace::new(name));
        t.map.insert(name.into(), ns.clone());
        t.hand.push_back(ns.clone());
        ns
    }

    /// Retires the first record the clock hand finds unused since its last pass.
    fn retire_one(&self, t: &mut Table) {
        while let Some(ns) = t.hand.pop_front() {
            if ns.used.swap(false, Ordering::Relaxed) {
                t.hand.push_back(ns);
                continue;
            }
            t.map.remove(&ns.name);
            ns.epoch.fetch_add(1, Ordering::AcqRel);
            self.retired.metrics.absorb(&ns.metrics);
            self.retired.counters().retired_namespaces.inc();
            return;
        }
    }

    /// Invalidates every entry of `name`; returns the new epoch. A namespace without a
    /// record holds nothing (no entry or load of it exists): nothing is created for it.
    pub(crate) fn bump(&self, name: &str) -> u64 {
        let Some(ns) = self.inner.read().map.get(name).cloned() else {
            return 0;
        };
        ns.epoch.fetch_add(1, Ordering::AcqRel) + 1
    }

    pub(crate) fn snapshot(&self) -> Vec<NamespaceMetrics> {
        let t = self.inner.read();
        let mut out: Vec<_> = t
            .map
            .values()
            .map(|ns| ns.metrics.snapshot(&ns.name))
            .collect();
        let retired = self.retired.metrics.snapshot(RETIRED);
        if retired.counters != Default::default() {
            out.push(retired);
        }
        out.sort_by(|a, b| a.namespace.cmp(&b.namespace));
        out
    }
}
