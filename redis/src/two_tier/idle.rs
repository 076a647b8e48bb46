//! An L1's reads of entries with a time-to-idle, told to the shared tier: the L1 is built
//! before the engine it is the first tier of, so its hook
//! ([`herdless::Builder::idle_reads`]) finds the engine through a slot filled once the
//! engine is made.

use std::sync::{Arc, OnceLock, Weak};

use herdless::Builder;

use super::{Inner, TwoTier};
use crate::versioned::Versioned;

/// The slot an L1's idle-read hook finds its engine in.
pub(crate) struct IdleReads<V: Clone + Send + Sync + 'static>(Arc<OnceLock<Weak<Inner<V>>>>);

impl<V: Clone + Send + Sync + 'static> IdleReads<V> {
    /// A slot, empty until [`attach`](Self::attach).
    pub(crate) fn new() -> Self {
        Self(Arc::default())
    }

    /// `l1` with the hook: each read it reports keeps the shared entry alive for the fleet,
    /// in the background (never on the hit path itself: `touch_later` spawns).
    pub(crate) fn on(&self, l1: Builder<Versioned<V>>) -> Builder<Versioned<V>> {
        let slot = self.0.clone();
        l1.idle_reads(move |key, tti| {
            let Some(inner) = slot.get().and_then(Weak::upgrade) else {
                return;
            };
            if let Some(fleet) = (TwoTier { inner }).fleet() {
                fleet.touch_later(key, tti);
            }
        })
    }

    /// The engine whose L1 was built [`on`](Self::on) this slot. A weak handle: the L1's
    /// hook must not keep its own engine alive.
    pub(crate) fn attach(&self, tt: &TwoTier<V>) {
        let _ = self.0.set(Arc::downgrade(&tt.inner));
    }
}
