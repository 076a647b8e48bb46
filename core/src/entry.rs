//! What the cache keeps under a key: a value or a cached absence, with its timing; and what
//! a reader may see of it ([`HitState`], [`Peek`]).

use core::time::Duration;

use alloc::boxed::Box;
use alloc::vec::Vec;

use crate::epoch::Namespace;
use crate::expiry::{Phase, Timing};
use crate::loaded::Extras;
use crate::sync::Arc;
use crate::tags::{self, Fate, Tag};

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
    /// The loader's own lifetimes and metadata (never its tag names: `tags` holds them).
    pub(crate) extras: Extras,
    /// Fail-safe: no refresh is attempted before this after a failed one.
    pub(crate) backoff_until: u64,
    /// The entry's tags, held directly so a read checks them without a lookup.
    pub(crate) tags: Box<[Arc<Tag>]>,
    /// The tag clock when the entry's load began (or it was written).
    pub(crate) born: u64,
}

impl Rare {
    /// Boxed for an entry with these extras or tags, or nothing when it has neither.
    pub(crate) fn of(extras: Extras, tags: Box<[Arc<Tag>]>, born: u64) -> Option<Box<Rare>> {
        (extras != Extras::default() || !tags.is_empty()).then(|| {
            Box::new(Rare {
                extras,
                backoff_until: 0,
                tags,
                born,
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

    /// The extras a [`Previous`](crate::Previous) of this entry keeps, its tag names
    /// included.
    pub(crate) fn previous_extras(&self) -> Option<Extras> {
        let r = self.rare.as_ref()?;
        let mut extras = r.extras.clone();
        if !r.tags.is_empty() {
            extras.tags = Some(self.tag_names().into_boxed_slice());
        }
        Some(extras)
    }

    /// The names of the entry's tags.
    pub(crate) fn tag_names(&self) -> Vec<Box<str>> {
        let tags = self.rare.as_ref().map_or(&[][..], |r| &r.tags[..]);
        tags.iter().map(|t| t.name().into()).collect()
    }

    /// Whether the entry was invalidated (its namespace bumped, or one of its tags
    /// invalidated), as opposed to expired: nothing of it may be served or kept.
    pub(crate) fn killed(&self) -> bool {
        self.epoch != self.ns.epoch()
            || self
                .rare
                .as_ref()
                .is_some_and(|r| tags::fate(&r.tags, r.born) == Fate::Removed)
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

    /// The entry's phase, `Dead` once its namespace was bumped or one of its tags
    /// invalidated; past its fresh time once one of its tags was expired.
    #[inline]
    pub(crate) fn phase(&self, now: u64) -> Phase {
        if self.epoch != self.ns.epoch() {
            return Phase::Dead;
        }
        let phase = self.timing.phase(now);
        match &self.rare {
            Some(r) if !r.tags.is_empty() => self.tagged_phase(phase, r),
            _ => phase,
        }
    }

    /// [`phase`](Self::phase) of a tagged entry. Expired by a tag, a fresh entry is stale
    /// while its grace lasts (until its own `stale_until`), kept for fail-safe when it has
    /// no grace, and dead with neither, as a naturally expired entry would be. Out of line:
    /// the untagged hit path stays as small as before tags.
    #[inline(never)]
    fn tagged_phase(&self, phase: Phase, r: &Rare) -> Phase {
        let t = &self.timing;
        match (tags::fate(&r.tags, r.born), phase) {
            (Fate::Removed, _) => Phase::Dead,
            (Fate::Expired, Phase::Fresh) if t.stale_until > t.fresh_until => Phase::Stale,
            (Fate::Expired, Phase::Fresh) if t.retain_until > t.fresh_until => Phase::FailSafe,
            (Fate::Expired, Phase::Fresh) => Phase::Dead,
            (_, phase) => phase,
        }
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
            tags: self.tag_names(),
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
    /// Its tags ([`Loaded::tags`](crate::Loaded::tags), [`Cache::set_with`](crate::Cache::set_with)).
    pub tags: Vec<Box<str>>,
}
