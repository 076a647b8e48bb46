//! What the cache keeps under a key: a value or a cached absence, with its timing.

use crate::epoch::Namespace;
use crate::expiry::{Phase, Timing};
use crate::sync::Arc;

/// One stored entry.
pub(crate) struct Entry<V> {
    /// The value; `None` is a cached absence (negative caching).
    pub(crate) value: Option<V>,
    /// The entry's namespace, held directly so the hit path checks the epoch without a lookup.
    pub(crate) ns: Arc<Namespace>,
    /// The namespace epoch the entry was written under.
    pub(crate) epoch: u64,
    pub(crate) timing: Timing,
    /// Before this a read is fresh and beyond XFetch's reach (see [`crate::xfetch::reach_nanos`]),
    /// so the hit path rules out an early refresh with one compare instead of float maths.
    pub(crate) quiet_until: u64,
    /// How long the load that produced it took: XFetch's delta.
    pub(crate) load_nanos: u64,
    /// Fail-safe: no refresh is attempted before this after a failed one.
    pub(crate) backoff_until: u64,
}

impl<V> Entry<V> {
    /// The entry's phase, `Dead` once its namespace was bumped.
    #[inline]
    pub(crate) fn phase(&self, now: u64) -> Phase {
        if self.epoch != self.ns.epoch() {
            return Phase::Dead;
        }
        self.timing.phase(now)
    }
}
