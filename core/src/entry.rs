//! What the cache keeps under a key: a value or a cached absence, with its timing; and what
//! a reader may see of it ([`HitState`], [`Peek`]).

use core::time::Duration;

use alloc::boxed::Box;

use crate::epoch::Namespace;
use crate::expiry::{Phase, Timing};
use crate::loaded::Extras;
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
    /// What few entries have: one pointer in the common entry (a node of a small value
    /// fits two cache lines).
    pub(crate) rare: Option<Box<Rare>>,
}

/// The parts of an entry that most entries do without.
#[derive(Default)]
pub(crate) struct Rare {
    /// The loader's own lifetimes and metadata.
    pub(crate) extras: Extras,
    /// Fail-safe: no refresh is attempted before this after a failed one.
    pub(crate) backoff_until: u64,
}

impl Rare {
    /// Boxed for an entry with these extras, or nothing when they are the cache's defaults.
    pub(crate) fn of(extras: Extras) -> Option<Box<Rare>> {
        (extras != Extras::default()).then(|| {
            Box::new(Rare {
                extras,
                backoff_until: 0,
            })
        })
    }
}

impl<V> Entry<V> {
    /// The loader's own lifetimes and metadata, if it chose any.
    #[inline]
    pub(crate) fn extras(&self) -> Option<&Extras> {
        self.rare.as_ref().map(|r| &r.extras)
    }

    /// Fail-safe: no refresh is attempted before this after a failed one (0: none).
    #[inline]
    pub(crate) fn backoff_until(&self) -> u64 {
        self.rare.as_ref().map_or(0, |r| r.backoff_until)
    }

    /// Backs off from loading until `until`.
    pub(crate) fn set_backoff(&mut self, until: u64) {
        self.rare.get_or_insert_with(Box::default).backoff_until = until;
    }

    /// The entry's phase, `Dead` once its namespace was bumped.
    #[inline]
    pub(crate) fn phase(&self, now: u64) -> Phase {
        if self.epoch != self.ns.epoch() {
            return Phase::Dead;
        }
        self.timing.phase(now)
    }

    /// What [`Cache::peek`](crate::Cache::peek) reports at `now`; `None` once dead.
    pub(crate) fn peek(&self, now: u64) -> Option<Peek<V>>
    where
        V: Clone,
    {
        let state = match self.phase(now) {
            Phase::Fresh => HitState::Fresh,
            Phase::Stale => HitState::Stale,
            Phase::FailSafe => HitState::FailSafe,
            Phase::Dead => return None,
        };
        let t = &self.timing;
        Some(Peek {
            value: self.value.clone(),
            state,
            age: Duration::from_nanos(now.saturating_sub(t.written)),
            fresh_until: Duration::from_nanos(t.fresh_until),
            stale_until: Duration::from_nanos(t.stale_until),
            load_duration: Duration::from_nanos(self.load_nanos),
            meta: self.extras().and_then(|e| e.meta.clone()),
        })
    }
}

/// Where an entry is in its life: how fresh a served or peeked value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HitState {
    /// Within its TTL.
    Fresh,
    /// Past its TTL, within grace: served at once while one refresh runs
    /// (stale-while-revalidate).
    Stale,
    /// Past grace, within `max_stale`: kept only as the fail-safe fallback, served when a
    /// load fails or times out.
    FailSafe,
}

/// An entry as [`Cache::peek`](crate::Cache::peek) sees it, without touching it.
///
/// Times are on the cache's [`Clock`](crate::Clock), like every deadline of the crate.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Peek<V> {
    /// The value; `None` is a cached absence (the loader answered "absent").
    pub value: Option<V>,
    /// Fresh, stale (within grace) or kept only for fail-safe.
    pub state: HitState,
    /// Time since the entry was stored (loaded, written or adopted from a shared tier).
    pub age: Duration,
    /// Until when it is fresh (its jittered TTL after it was stored).
    pub fresh_until: Duration,
    /// Until when it may be served stale: `fresh_until + grace` (equal to `fresh_until`
    /// without grace, and for a cached absence).
    pub stale_until: Duration,
    /// The measured duration of the key's last load (XFetch's delta): kept when a `set`
    /// replaces the value; zero if the key was never loaded.
    pub load_duration: Duration,
    /// The metadata its loader kept with it ([`Loaded::meta`](crate::Loaded::meta)).
    pub meta: Option<Box<str>>,
}
