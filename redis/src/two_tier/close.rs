//! Closing the fleet engine: what a closed cache answers, decided once for every language
//! (the bindings' `close()` calls [`TwoTier::close`]; their methods ask
//! [`TwoTier::check_open`] first).
//!
//! - Every call after `close` answers [`Error::Closed`]: a load's first step, `get`, `set`,
//!   `invalidate`, `bump` and the tag invalidations. The L1 is emptied, so a hit path that
//!   reads it directly finds nothing and goes on to a load, which is refused.
//! - The shared tier the engine connected itself ([`TwoTier::connect`], as the bindings do)
//!   is closed at once and let go of: its runtime thread ends, its connections close, and
//!   its file descriptors go with the last call in flight ([`TwoTier::tier`] is `None`
//!   from then on; [`TwoTier::shared_metrics`] keeps its counters). A tier given as an
//!   object ([`TwoTier::shared`]) may serve others: its owner closes it.
//! - Calls in flight are not cut: a loader already running finishes, and its callers (and
//!   this process's waiters) get its value, stored nowhere (the L1's `clear` keeps running
//!   loads from storing). Whatever still needed the tier, or was about to start a loader,
//!   answers [`Error::Closed`].
//!
//! In a child of `fork`, a closed engine does not connect again, and closing there leaves
//! the parent's connection alone (its threads are not in the child; its locks may be held).

use std::sync::atomic::Ordering;

use herdless::Error;

use super::TwoTier;

impl<V: Clone + Send + Sync + 'static> TwoTier<V> {
    /// Closes the engine (see the module docs): for every clone of it, at once. Idempotent.
    pub fn close(&self) {
        if self.inner.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Some(shared) = &self.inner.shared
            && shared.address.is_some()
        {
            // Let go of it too: a closed runtime's handles still hold its file descriptors
            // (the poller, its waker) until the last one is dropped, and calls in flight
            // drop theirs as they answer.
            let live = shared
                .live
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            if let Some(live) = live {
                let _ = shared.closed_metrics.set(live.tier.metrics());
                if live.pid == std::process::id() {
                    live.tier.close();
                }
            }
        }
        self.inner.locks.close();
        // After the flag: a load that begins from now on sees it and is refused; one that
        // began before is superseded by the clear and stores nothing.
        self.inner.l1.clear();
    }

    /// Whether [`close`](Self::close) was called.
    #[inline]
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }

    /// `Err(Error::Closed)` once the engine is closed: what a binding's method checks
    /// first, so that a closed cache refuses every call the same way in every language.
    #[inline]
    pub fn check_open(&self) -> Result<(), Error> {
        match self.is_closed() {
            false => Ok(()),
            true => Err(Error::Closed),
        }
    }

    /// `e`, or [`Error::Closed`] when the engine was closed meanwhile: a tier operation in
    /// flight at the close fails because of it, not because the tier did.
    pub(crate) fn or_closed(&self, e: Error) -> Error {
        match self.is_closed() {
            false => e,
            true => Error::Closed,
        }
    }
}
