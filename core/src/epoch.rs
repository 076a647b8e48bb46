//! Epoch invalidation (DESIGN 8): `bump(namespace)` adds one to the namespace's epoch, O(1).
//! Every entry remembers the epoch it was written under; an entry of an older epoch is a miss
//! and the first to be evicted. No scan, ever. A load that began under an older epoch is not
//! stored.

use alloc::boxed::Box;
use alloc::vec::Vec;

use hashbrown::HashMap;

use crate::metrics::{NamespaceMetrics, NsMetrics};
use crate::sync::{Arc, AtomicU64, Ordering, RwLock};

/// One namespace: its epoch and its metrics.
pub(crate) struct Namespace {
    pub(crate) name: Box<str>,
    epoch: AtomicU64,
    pub(crate) metrics: NsMetrics,
}

impl Namespace {
    fn new(name: &str) -> Self {
        Self {
            name: name.into(),
            epoch: AtomicU64::new(0),
            metrics: NsMetrics::default(),
        }
    }

    #[inline]
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }
}

/// The registry of namespaces. Bounded: past `max` distinct namespaces (keys are user input)
/// new ones share one overflow namespace, whose bump then invalidates all of them together,
/// which is safe, only broader.
pub(crate) struct Namespaces {
    map: RwLock<HashMap<Box<str>, Arc<Namespace>>>,
    overflow: Arc<Namespace>,
    max: usize,
}

/// Name under which namespaces beyond the limit are counted.
pub(crate) const OVERFLOW: &str = "__overflow__";

impl Namespaces {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            map: RwLock::new(HashMap::new()),
            overflow: Arc::new(Namespace::new(OVERFLOW)),
            max,
        }
    }

    /// The namespace named `name`, created on first use.
    pub(crate) fn get(&self, name: &str) -> Arc<Namespace> {
        if let Some(ns) = self.map.read().get(name) {
            return ns.clone();
        }
        let mut map = self.map.write();
        if let Some(ns) = map.get(name) {
            return ns.clone();
        }
        if map.len() >= self.max {
            return self.overflow.clone();
        }
        let ns = Arc::new(Namespace::new(name));
        map.insert(name.into(), ns.clone());
        ns
    }

    /// Invalidates every entry of `name`; returns the new epoch.
    pub(crate) fn bump(&self, name: &str) -> u64 {
        self.get(name).epoch.fetch_add(1, Ordering::AcqRel) + 1
    }

    pub(crate) fn snapshot(&self) -> Vec<NamespaceMetrics> {
        let map = self.map.read();
        let mut out: Vec<_> = map
            .values()
            .map(|ns| ns.metrics.snapshot(&ns.name))
            .collect();
        let overflow = self.overflow.metrics.snapshot(OVERFLOW);
        if overflow.counters != Default::default() {
            out.push(overflow);
        }
        out.sort_by(|a, b| a.namespace.cmp(&b.namespace));
        out
    }
}
