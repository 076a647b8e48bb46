//! Epoch invalidation: `bump(namespace)` adds one to the namespace's epoch, O(1).
//! Every entry remembers the epoch it was written under; an entry of an older epoch is a miss
//! and the first to be evicted. No scan, ever. A load that began under an older epoch is not
//! stored.

use alloc::boxed::Box;
use alloc::vec::Vec;

use crate::generation::Generation;
use crate::metrics::{Counters, NamespaceMetrics, NsMetrics};
use crate::registry::{Record, Registry};
use crate::sync::{Arc, AtomicBool, AtomicU64, Ordering};

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

    /// One more epoch, never past [`MAX_EPOCH`]; the epoch now.
    fn advance(&self) -> u64 {
        let step = |e: u64| (e < MAX_EPOCH).then(|| e + 1);
        match self
            .epoch
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, step)
        {
            Ok(e) => e + 1,
            Err(e) => e,
        }
    }

    /// The namespace's counters.
    #[inline]
    pub(crate) fn counters(&self) -> &Counters {
        &self.metrics.counters
    }
}

/// The registry of namespaces. Bounded (keys are user input): past `max` distinct
/// namespaces, the record least recently looked up (see [`Registry`]) is retired to make
/// room. Retiring moves it to [`RETIRED_EPOCH`], which no entry or load carries, so every
/// entry and load of it becomes a miss for good (they hold the retired record, whose epoch
/// never comes back), and a later use of the name starts a new record: a bump always
/// invalidates exactly its own namespace, and a forgotten namespace can never resurrect
/// old entries. A writer holding a record it looked up before the retirement reads its
/// epoch through [`Namespaces::live`], never storing under [`RETIRED_EPOCH`]. Retirements
/// are counted, and the retired records' counters are kept under [`RETIRED`], so totals
/// never go down.
pub(crate) struct Namespaces {
    registry: Registry<Namespace>,
    /// The counters of retired namespaces, summed.
    retired: Arc<Namespace>,
    /// The cache's write generation: kept here because retiring a namespace (which any
    /// lookup of a new one may do) invalidates entries too.
    pub(crate) writes: Generation,
}

impl Record for Namespace {
    fn name(&self) -> &str {
        &self.name
    }

    fn used(&self) -> &AtomicBool {
        &self.used
    }
}

/// The last epoch of a live namespace record: entries keep theirs in 32 bits, and the last
/// 32-bit value is [`RETIRED_EPOCH`]'s.
pub(crate) const MAX_EPOCH: u64 = u32::MAX as u64 - 1;

/// The epoch of a retired record, and of no entry: an entry compares its 32 bits with the
/// record's epoch cut to 32 bits, here `u32::MAX`, above every live epoch.
const RETIRED_EPOCH: u64 = u64::MAX;

/// Name under which the counters of retired namespaces are kept.
pub(crate) const RETIRED: &str = "__retired__";

impl Namespaces {
    pub(crate) fn new(max: usize, count_writes: bool) -> Self {
        Self {
            registry: Registry::new(max),
            retired: Arc::new(Namespace::new(RETIRED)),
            writes: Generation::new(count_writes),
        }
    }

    /// The namespace named `name`, created on first use.
    pub(crate) fn get(&self, name: &str) -> Arc<Namespace> {
        self.registry
            .get(name, Namespace::new, |ns| self.retire(ns))
    }

    /// The namespace of `key` (as [`get`](Self::get) of its
    /// [`namespace_of`](crate::key::namespace_of)), from `last` when that is the one and not
    /// retired, else from the registry (and kept in `last`). `last` is a shard's, under its
    /// lock. A record found in `last` is marked used, as a registry lookup would; one
    /// retired just after the check is no worse than one retired just after a lookup (a
    /// writer reads its epoch through [`live`](Self::live)).
    #[inline]
    pub(crate) fn get_cached(
        &self,
        last: &mut Option<Arc<Namespace>>,
        key: &str,
    ) -> Arc<Namespace> {
        if let Some(ns) = last {
            if crate::key::in_namespace(key, &ns.name) && ns.epoch() != RETIRED_EPOCH {
                ns.used.store(true, Ordering::Relaxed);
                return ns.clone();
            }
        }
        let ns = self.get(crate::key::namespace_of(key));
        *last = Some(ns.clone());
        ns
    }

    /// A record leaves the registry (already out of its map, under its lock): at
    /// [`RETIRED_EPOCH`], its counters kept under [`RETIRED`].
    fn retire(&self, ns: &Namespace) {
        ns.epoch.store(RETIRED_EPOCH, Ordering::Release);
        self.retired.metrics.absorb(&ns.metrics);
        self.retired.counters().retired_namespaces.inc();
        self.writes.advance();
    }

    /// `ns` and its epoch now, for a writer to store under (a `set`, or a load at its
    /// start), or, when `ns` was retired since it was looked up, the name's record now and
    /// its epoch. Never [`RETIRED_EPOCH`]: an entry stored under it would match its retired
    /// record forever, out of reach of a later `bump` (which finds the name's new record).
    ///
    /// One atomic decides, so no other ordering is needed: an epoch read before the
    /// retirement's store is older than it, and the entry stored under it is dead once the
    /// record is retired. Seeing [`RETIRED_EPOCH`] means the retirement (under the
    /// registry's write lock, after taking `ns` out of the map) is before the lookup here,
    /// which finds the new record or makes one.
    #[inline]
    pub(crate) fn live(&self, ns: Arc<Namespace>) -> (Arc<Namespace>, u64) {
        // A live record (nearly always): one load, no call.
        let epoch = ns.epoch();
        if epoch != RETIRED_EPOCH {
            return (ns, epoch);
        }
        self.live_again(ns)
    }

    /// [`live`](Self::live) of a retired record: the name's record now.
    #[inline(never)]
    fn live_again(&self, mut ns: Arc<Namespace>) -> (Arc<Namespace>, u64) {
        loop {
            let epoch = ns.epoch();
            if epoch != RETIRED_EPOCH {
                return (ns, epoch);
            }
            ns = self.get(&ns.name);
        }
    }

    /// Invalidates every entry of `name`; returns the new epoch. A namespace without a
    /// record holds nothing (no entry or load of it exists): nothing is created for it.
    /// Entries keep their epoch in 32 bits, so an epoch never wraps around to theirs: the
    /// bump that reaches [`MAX_EPOCH`] also retires the record, as a full registry would
    /// (every entry and load of it stays a miss, and the name's next use starts a new one).
    pub(crate) fn bump(&self, name: &str) -> u64 {
        let (epoch, ns) = self.registry.with(name, |ns| match ns {
            Some(ns) => (ns.advance(), Some(ns.clone())),
            None => (0, None),
        });
        if let Some(ns) = ns.filter(|_| epoch >= MAX_EPOCH) {
            self.registry.remove(&ns, |ns| self.retire(ns));
        }
        self.writes.advance();
        epoch
    }

    pub(crate) fn snapshot(&self) -> Vec<NamespaceMetrics> {
        let mut out = Vec::new();
        self.registry
            .for_each(|ns| out.push(ns.metrics.snapshot(&ns.name)));
        let retired = self.retired.metrics.snapshot(RETIRED);
        if retired.counters != Default::default() {
            out.push(retired);
        }
        out.sort_by(|a, b| a.namespace.cmp(&b.namespace));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries keep their epoch in 32 bits: the bump that would let it wrap around retires
    /// the record instead, so no old entry ever matches its namespace again.
    #[test]
    fn an_epoch_never_passes_32_bits_and_the_last_bump_retires_the_record() {
        let ns = Namespaces::new(16, false);
        let old = ns.get("users");
        old.epoch.store(MAX_EPOCH - 2, Ordering::Relaxed);
        assert_eq!(ns.bump("users"), MAX_EPOCH - 1);
        assert!(Arc::ptr_eq(&old, &ns.get("users")), "not retired yet");
        assert_eq!(ns.bump("users"), MAX_EPOCH);
        let new = ns.get("users");
        assert!(!Arc::ptr_eq(&old, &new), "retired at the last epoch");
        assert_eq!((old.epoch(), new.epoch()), (RETIRED_EPOCH, 0));
        // No entry of the retired record matches it again, not even one of the last epoch.
        assert_ne!(old.epoch() as u32, MAX_EPOCH as u32);
        old.advance();
        assert_eq!(old.epoch(), RETIRED_EPOCH);
    }

    /// A writer that looked a record up before its retirement (by the bound) and reads the
    /// epoch to store under after it gets the name's new record: its entry is then within
    /// reach of the name's next bump.
    #[test]
    fn a_writer_holding_a_retired_record_stores_under_the_new_one() {
        let ns = Namespaces::new(1, false);
        let old = ns.get("a");
        ns.get("b"); // retires "a"
        let (new, epoch) = ns.live(old.clone());
        assert!(!Arc::ptr_eq(&old, &new), "the name's new record");
        assert_eq!(epoch, 0);
        assert_eq!(ns.bump("a"), 1);
        assert_ne!(new.epoch(), epoch, "the bump reaches the writer's entry");
        let (same, _) = ns.live(new.clone());
        assert!(Arc::ptr_eq(&same, &new), "a live record is kept");
    }
}
