//! What the cache keeps under a key: a value or a cached absence, with its timing; and what
//! a reader may see of it ([`HitState`], [`Peek`]).

use core::mem::MaybeUninit;
use core::time::Duration;

use alloc::boxed::Box;
use alloc::vec::Vec;

use crate::epoch::{MAX_EPOCH, Namespace};
use crate::expiry::{self, Ends, Lifetimes, LoadCode, Phase, QuietCode, Timing};
use crate::idle::Idle;
use crate::loaded::Extras;
use crate::sync::{Arc, AtomicBool};
use crate::tags::{self, Fate, Tag};

/// One stored entry. Packed (56 bytes with a `u64` value, 72 in its store's node): the
/// value's presence is a flag beside the small fields rather than `Option<V>`'s tag (8
/// bytes of padding for a `V` without a niche), the epoch is kept in 32 bits (a namespace
/// never goes past them: see [`Namespaces::bump`](crate::epoch::Namespaces::bump)), and
/// the stale and retention deadlines are made from the cache's [`Lifetimes`] when asked.
pub(crate) struct Entry<V> {
    /// The value when `has_value`; a cached absence (negative caching) otherwise.
    value: MaybeUninit<V>,
    /// The entry's namespace, held directly so the hit path checks the epoch without a lookup.
    pub(crate) ns: Arc<Namespace>,
    pub(crate) timing: Timing,
    /// What few entries have: one pointer in the common entry.
    pub(crate) rare: Option<Box<Rare>>,
    /// The namespace epoch the entry was written under.
    epoch: u32,
    /// How long the load that produced it took: XFetch's delta.
    load: LoadCode,
    /// Its weight against the capacity, set by the store that holds it.
    pub(crate) weight: u32,
    /// Before this a read is fresh and beyond XFetch's reach (see [`crate::xfetch::reach_nanos`]),
    /// so the hit path rules out an early refresh with one compare instead of float maths.
    quiet: QuietCode,
    /// Used since the eviction hand last passed (SIEVE's bit, set under the read lock).
    pub(crate) visited: AtomicBool,
    /// 1 when `value` holds one. A byte, not a `bool`: a `bool` would be the niche of
    /// `Option<Node>`, and the store's check for a free slot would read this byte, at the
    /// node's far end (often the next cache line), instead of the key pointer it reads next.
    has_value: u8,
}

impl<V> Drop for Entry<V> {
    fn drop(&mut self) {
        if self.has_value() {
            // SAFETY: `has_value` says `value` is initialised; it is dropped once, here.
            unsafe { self.value.assume_init_drop() }
        }
    }
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
    /// Its idle clock, when it has a time-to-idle.
    pub(crate) idle: Option<Idle>,
}

impl Rare {
    /// Boxed for an entry with these extras, tags or idle clock, or nothing when it has
    /// none of them.
    pub(crate) fn of(
        extras: Extras,
        tags: Box<[Arc<Tag>]>,
        born: u64,
        idle: Option<Idle>,
    ) -> Option<Box<Rare>> {
        (extras != Extras::default() || !tags.is_empty() || idle.is_some()).then(|| {
            Box::new(Rare {
                extras,
                backoff_until: 0,
                tags,
                born,
                idle,
            })
        })
    }

    /// Whether reading the entry asks more of it than its times: tags or an idle clock.
    #[inline]
    fn judged(&self) -> bool {
        !self.tags.is_empty() || self.idle.is_some()
    }
}

impl<V> Entry<V> {
    /// An entry of `value` (`None`: a cached absence) written under `epoch` of `ns`.
    pub(crate) fn new(
        value: Option<V>,
        (ns, epoch): (Arc<Namespace>, u64),
        timing: Timing,
        quiet_until: u64,
        load_nanos: u64,
        rare: Option<Box<Rare>>,
    ) -> Self {
        debug_assert!(epoch <= MAX_EPOCH, "an entry of a retired namespace record");
        let has_value = u8::from(value.is_some());
        Self {
            value: value.map_or(MaybeUninit::uninit(), MaybeUninit::new),
            ns,
            timing,
            rare,
            // A namespace's epoch stays below `u32::MAX` (`Namespaces::bump`).
            epoch: epoch as u32,
            load: LoadCode::new(load_nanos),
            weight: 0,
            quiet: QuietCode::new(timing.written, quiet_until),
            visited: AtomicBool::new(false),
            has_value,
        }
    }

    /// The value; `None` for a cached absence.
    #[inline]
    pub(crate) fn value(&self) -> Option<&V> {
        // SAFETY: `has_value` says `value` is initialised.
        self.has_value()
            .then(|| unsafe { self.value.assume_init_ref() })
    }

    /// Whether it holds a value (not a cached absence).
    #[inline]
    pub(crate) fn has_value(&self) -> bool {
        self.has_value != 0
    }

    /// Moves the value out, leaving a cached absence.
    pub(crate) fn take_value(&mut self) -> Option<V> {
        let had = core::mem::replace(&mut self.has_value, 0) != 0;
        // SAFETY: `has_value` said `value` was initialised; it is now marked as not, so it
        // is read out once and never dropped here.
        had.then(|| unsafe { self.value.assume_init_read() })
    }

    /// How long the load that produced it took (XFetch's delta), in nanoseconds.
    #[inline]
    pub(crate) fn load_nanos(&self) -> u64 {
        self.load.nanos()
    }

    /// Before this a read is fresh and out of XFetch's and refresh-ahead's reach.
    #[inline]
    pub(crate) fn quiet_until(&self) -> u64 {
        self.quiet.until(self.timing.written)
    }

    /// Its stale and retention deadlines under the cache's `life`.
    #[inline]
    pub(crate) fn ends(&self, life: &Lifetimes) -> Ends {
        let own_grace = self.rare.as_ref().and_then(|r| r.extras.grace);
        life.ends(self.timing.fresh_until, self.has_value(), own_grace)
    }

    /// Whether its namespace was bumped since it was written.
    #[inline]
    fn bumped(&self) -> bool {
        self.epoch != self.ns.epoch() as u32
    }

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
        self.bumped()
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

    /// The entry's phase under the cache's `life`, `Dead` once its namespace was bumped or
    /// one of its tags invalidated; past its fresh time once one of its tags was expired.
    #[inline]
    pub(crate) fn phase(&self, now: u64, life: &Lifetimes) -> Phase {
        if self.bumped() {
            return Phase::Dead;
        }
        let phase = expiry::phase(now, self.timing.fresh_until, || self.ends(life));
        match &self.rare {
            Some(r) if r.judged() => self.judged_phase(phase, r, life, now),
            _ => phase,
        }
    }

    /// The entry's idle clock, if it has a time-to-idle.
    #[inline]
    pub(crate) fn idle(&self) -> Option<&Idle> {
        self.rare.as_ref().and_then(|r| r.idle.as_ref())
    }

    /// [`phase`](Self::phase) of an entry with tags or an idle clock: dead once idle too
    /// long (neither stale nor kept for fail-safe: nobody was reading it), else as its tags
    /// say. Out of line: the plain hit path stays as small as before.
    #[inline(never)]
    fn judged_phase(&self, phase: Phase, r: &Rare, life: &Lifetimes, now: u64) -> Phase {
        if r.idle.as_ref().is_some_and(|i| i.expired(now)) {
            return Phase::Dead;
        }
        if r.tags.is_empty() {
            return phase;
        }
        self.tagged_phase(phase, r, life)
    }

    /// [`phase`](Self::phase) of a tagged entry. Expired by a tag, a fresh entry is stale
    /// while its grace lasts (until its own `stale_until`), kept for fail-safe when it has
    /// no grace, and dead with neither, as a naturally expired entry would be.
    fn tagged_phase(&self, phase: Phase, r: &Rare, life: &Lifetimes) -> Phase {
        let fresh_until = self.timing.fresh_until;
        let ends = || self.ends(life);
        match (tags::fate(&r.tags, r.born), phase) {
            (Fate::Removed, _) => Phase::Dead,
            (Fate::Expired, Phase::Fresh) if ends().stale_until > fresh_until => Phase::Stale,
            (Fate::Expired, Phase::Fresh) if ends().retain_until > fresh_until => Phase::FailSafe,
            (Fate::Expired, Phase::Fresh) => Phase::Dead,
            (_, phase) => phase,
        }
    }

    /// What [`Cache::peek`](crate::Cache::peek) reports at `now`; `None` once dead.
    pub(crate) fn peek(&self, now: u64, life: &Lifetimes) -> Option<Peek<V>>
    where
        V: Clone,
    {
        let state = match self.phase(now, life) {
            Phase::Fresh => HitState::Fresh,
            Phase::Stale => HitState::Stale,
            Phase::FailSafe => HitState::FailSafe,
            Phase::Dead => return None,
        };
        let t = &self.timing;
        Some(Peek {
            value: self.value().cloned(),
            state,
            age: Duration::from_nanos(now.saturating_sub(t.written)),
            fresh_until: Duration::from_nanos(t.fresh_until),
            stale_until: Duration::from_nanos(self.ends(life).stale_until),
            load_duration: Duration::from_nanos(self.load_nanos()),
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
