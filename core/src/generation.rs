//! The write generation: a count of the changes to what a read can answer, for a copy of
//! recent answers kept outside the engine (the Node binding's front). Such a copy is exact
//! while the count has not moved since it read the answer and the clock is before the
//! answer's [`steady_until`](crate::Cache::steady_until) (`steady.rs` reads it).
//!
//! Every kind of write advances it, at its one call site: a stored entry (`set`, a finished
//! load or refresh, a value adopted from a shared tier, and the evictions storing makes),
//! `invalidate`, `retain`, `clear`, a namespace bump, a tag invalidation or expiry. Expiry
//! by time does not: the deadline covers it. One count for the whole cache, not one per
//! shard or namespace: a bump or a tag stamp reaches entries of every shard, so finer
//! counts would need the same global step for those, and the front a reader keeps is
//! small enough to refill after any write (the Node binding's BENCHMARKS.md measures it).
//!
//! Off unless asked for ([`Builder::count_writes`](crate::Builder::count_writes)): then a
//! write pays one predictable branch, not an atomic add on a line every writer shares.

use crate::sync::{AtomicU64, Ordering};

/// The count, when counting was asked for.
pub(crate) struct Generation {
    on: bool,
    count: AtomicU64,
}

impl Generation {
    pub(crate) fn new(on: bool) -> Self {
        Generation {
            on,
            count: AtomicU64::new(0),
        }
    }

    /// Called after a write's change is made (under or after its lock), so a reader that
    /// read the count before taking the lock and saw the old entry sees a new count next.
    #[inline]
    pub(crate) fn advance(&self) {
        if self.on {
            self.count.fetch_add(1, Ordering::Release);
        }
    }

    /// The count, when kept.
    pub(crate) fn get(&self) -> Option<u64> {
        self.on.then(|| self.count.load(Ordering::Acquire))
    }
}
