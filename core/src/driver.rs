//! Hooks for drivers of the engine beyond this crate's own: a shared tier (the
//! `herdless-redis` fleet engine) and the language bindings. Nothing here is needed to use a
//! [`Cache`]; everything here keeps a driver's decisions inside the engine's rules (its
//! budget, its counters, its clock).

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::task::{Context, Poll};
use core::time::Duration;

use crate::alarm::{self, Alarm};
pub use crate::batch::{Batch, BatchWave, chunks_of};
use crate::budget::Budget;
pub use crate::budget::OriginPermit;
use crate::cache::Cache;
use crate::clock::Clock;
use crate::context::{LoadContext, LoadReason, Previous};
use crate::error::Error;
use crate::loaded::{Extras, Keep};
use crate::lookup::LoadGuard;
use crate::sync::unchecked::Arc as StdArc;

/// A share of `cache`'s origin budget for a load that runs outside a [`LoadGuard`], such
/// as a two-tier driver's detached refresh; `None` while the budget is spent (a refresh
/// never queues for the origin: the caller skips it and a later read tries again).
/// Without a budget, always granted.
pub fn try_origin_permit<V: Clone + Send + Sync + 'static>(
    cache: &Cache<V>,
) -> Option<OriginPermit> {
    match &cache.table().budget {
        Some(b) => Budget::try_acquire(b).map(|p| OriginPermit::new(Some(p))),
        None => Some(OriginPermit::new(None)),
    }
}

/// A batch request over `cache` (its L1, for a shared tier), for a driver that loads
/// many keys with one loader call: the same waves of lookups as
/// [`Cache::get_or_load_many`], driven by the caller (see [`Batch`]).
pub fn batch<V, I>(cache: &Cache<V>, keys: I) -> Batch<V>
where
    V: Clone + Send + Sync + 'static,
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    Batch::new(cache.table(), keys)
}

/// Begins `guard`'s flight without a unit of the origin budget: it is one key of a batch's
/// loader call, whose one unit the driver holds ([`origin_permit`]).
pub fn begin_in_batch<V: Clone + Send + Sync + 'static>(guard: &mut LoadGuard<V>) {
    guard.begin_covered();
}

/// A share of `cache`'s origin budget, waiting for one to be free (a batch's loader call
/// takes one for all its keys); without a budget, granted at once. Race it against the
/// callers' deadline (e.g. with a [`Timer`]): it does not time out by itself.
pub async fn origin_permit<V: Clone + Send + Sync + 'static>(cache: &Cache<V>) -> OriginPermit {
    match &cache.table().budget {
        Some(b) => OriginPermit::new(Some(Budget::acquire(b).await)),
        None => OriginPermit::new(None),
    }
}

/// Counts one batch loader call of `keys` in `cache`'s `batch_loads`, once per namespace
/// of its keys (a driver that makes the call itself, e.g. a shared tier's).
pub fn count_batch_call<V: Clone + Send + Sync + 'static>(cache: &Cache<V>, keys: &[String]) {
    let mut seen = hashbrown::HashSet::<&str>::new();
    for k in keys {
        let ns = crate::key::namespace_of(k);
        if seen.insert(ns) {
            cache
                .table()
                .namespaces
                .get(ns)
                .counters()
                .batch_loads
                .inc();
        }
    }
}

/// Counts an error of the shared tier (e.g. Redis) against `key`'s namespace, in the
/// `backend_errors` metric.
pub fn record_backend_error<V: Clone + Send + Sync + 'static>(cache: &Cache<V>, key: &str) {
    let ns = cache.table().namespaces.get(crate::key::namespace_of(key));
    ns.counters().backend_errors.inc();
}

/// Counts a loader's answer the driver refused (e.g. metadata over the cap), against
/// `key`'s namespace, in `load_errors`.
pub fn record_load_error<V: Clone + Send + Sync + 'static>(cache: &Cache<V>, key: &str) {
    let ns = cache.table().namespaces.get(crate::key::namespace_of(key));
    ns.counters().load_errors.inc();
}

/// Counts a load of `key` answered "not modified" that the driver resolved itself (a
/// shared tier's: the previous value is republished for the fleet), in `not_modified`.
pub fn record_not_modified<V: Clone + Send + Sync + 'static>(cache: &Cache<V>, key: &str) {
    let ns = cache.table().namespaces.get(crate::key::namespace_of(key));
    ns.counters().not_modified.inc();
}

/// The context of a load of `key` that has no flight in `cache` (a two-tier driver's
/// detached refresh of a shared entry, served stale meanwhile): cancelled only by its
/// hard timeout at `hard_deadline` on `cache`'s clock.
pub fn detached_context<V: Clone + Send + Sync + 'static, U>(
    cache: &Cache<V>,
    key: &str,
    reason: LoadReason,
    previous: Option<Previous<U>>,
    hard_deadline: Option<Duration>,
) -> LoadContext<U> {
    let clock = cache.table().clock.clone();
    LoadContext::detached(key, clock, reason, previous, hard_deadline)
}

/// Keys currently loading in `cache` (flight records): a cheap read, for leak checks
/// (the same number is `loads_in_flight` in [`Cache::metrics`]).
pub fn flights_in_progress<V: Clone + Send + Sync + 'static>(cache: &Cache<V>) -> usize {
    cache.table().flights()
}

/// Drops every entry of `cache` whose value (`None`: a cached absence) `keep` refuses, and
/// keeps loads in progress from storing their results, as `Cache::clear` does for all. A
/// scan of the whole cache: for rare events, such as a tier's notifications being lost.
pub fn retain<V: Clone + Send + Sync + 'static>(
    cache: &Cache<V>,
    keep: impl Fn(Option<&V>) -> bool,
) {
    cache.table().retain(keep);
}

/// Finishes `guard` with a value another process loaded, read from a shared tier (the Redis
/// L2): stored fresh for `fresh` from now (a zero `fresh` stores it already stale, within
/// grace), with `load_duration` (the original load's, kept with the shared entry) as
/// XFetch's delta. Not a loader call: neither counted as a load nor timed, and no origin
/// budget is needed. Waiters get the value as from a loader; so does the caller.
///
/// Jitter applies as for [`LoadGuard::set_ttl`], so a two-tier cache builds its first tier
/// with `jitter(0.0)` and jitters once, when it writes the shared entry. Absences keep
/// `negative_ttl`.
pub fn adopt<V: Clone + Send + Sync + 'static>(
    guard: LoadGuard<V>,
    value: Option<V>,
    fresh: Duration,
    load_duration: Duration,
) -> Result<Option<V>, Error> {
    guard.adopt(value, fresh, load_duration, Extras::default())
}

/// [`adopt`] of a shared entry whose loader chose its own `ttl` or kept `meta` with it
/// (PROTOCOL.md, entry format 2): the L1 keeps both, so the next load of the key is told
/// the metadata and a not-modified answer restarts the same lifetime.
pub fn adopt_with<V: Clone + Send + Sync + 'static>(
    guard: LoadGuard<V>,
    value: Option<V>,
    fresh: Duration,
    load_duration: Duration,
    ttl: Option<Duration>,
    meta: Option<&str>,
) -> Result<Option<V>, Error> {
    let extras = Extras {
        ttl,
        meta: meta.map(Into::into),
        ..Extras::default()
    };
    guard.adopt(value, fresh, load_duration, extras)
}

/// The tags, ttl and metadata of a shared tier's entry, as the first tier keeps them
/// ([`adopt_shared`], [`set_shared_entry`]).
#[derive(Clone, Debug, Default)]
pub struct SharedEntry<'a> {
    /// Fresh for this long from now (zero: already stale, within grace).
    pub fresh: Duration,
    /// The ttl its loader chose, if any.
    pub ttl: Option<Duration>,
    /// The metadata its loader kept, if any.
    pub meta: Option<&'a str>,
    /// Its time-to-idle, if it has one: the first tier's copy keeps an idle clock.
    pub tti: Option<Duration>,
    /// Its tags (checked as [`Loaded::tags`](crate::Loaded::tags) are).
    pub tags: &'a [String],
    /// For [`set_shared_entry`]: the [`tag_clock`] reading taken before the shared tier was
    /// read, so that a tag invalidated meanwhile (a notification that arrived during the
    /// read) drops the entry instead of storing it; `None`: now. A load
    /// ([`adopt_shared`]) is dated by its start instead.
    pub born: Option<u64>,
}

impl SharedEntry<'_> {
    fn extras(&self) -> Extras {
        Extras {
            ttl: self.ttl,
            tti: self.tti,
            meta: self.meta.map(Into::into),
            tags: (!self.tags.is_empty())
                .then(|| self.tags.iter().map(|t| t.as_str().into()).collect()),
            ..Extras::default()
        }
    }
}

/// [`adopt_with`] of a shared entry with tags: the L1 entry carries them, so an
/// [`invalidate_tag`](Cache::invalidate_tag) here (e.g. on a notification) drops it. If
/// one of them was invalidated in this cache since the load began, the value answers the
/// callers but is not stored. Tags out of bounds fail the load
/// ([`Error::TooManyTags`], [`Error::TagTooLong`], [`Error::EmptyTag`]).
pub fn adopt_shared<V: Clone + Send + Sync + 'static>(
    guard: LoadGuard<V>,
    value: Option<V>,
    load_duration: Duration,
    entry: SharedEntry<'_>,
) -> Result<Option<V>, Error> {
    let extras = entry.extras();
    guard.adopt(value, entry.fresh, load_duration, extras)
}

/// The tag clock of `cache` now: read it before reading a shared tier, and give it as
/// [`SharedEntry::born`] to [`set_shared_entry`].
pub fn tag_clock<V: Clone + Send + Sync + 'static>(cache: &Cache<V>) -> u64 {
    cache.table().tags.now()
}

/// Checks an entry's tags as [`Loaded::tags`](crate::Loaded::tags) are checked when stored
/// (each 1 to [`MAX_TAG_BYTES`](crate::MAX_TAG_BYTES) bytes, at most `max` distinct) and
/// removes duplicates, keeping the first of each: for a shared tier that writes the tags
/// before its first tier does.
pub fn check_tags(tags: &mut Vec<Box<str>>, max: usize) -> Result<(), Error> {
    crate::tags::check_all(tags, max)
}

/// [`set_shared`] with tags and a birth ([`SharedEntry`]): not stored when one of its tags
/// was invalidated in this cache since `born`. Tags out of bounds are refused as by
/// [`Cache::set_with`].
pub fn set_shared_entry<V: Clone + Send + Sync + 'static>(
    cache: &Cache<V>,
    key: &str,
    value: Option<V>,
    entry: SharedEntry<'_>,
) -> Result<(), Error> {
    let keep = Keep {
        ttl: Some(entry.fresh.max(Duration::from_nanos(1))),
        extras: entry.extras(),
        ..Keep::default()
    };
    cache.table().write_keep(key, value, keep, entry.born)
}

/// Stores `value` under `key` as [`Cache::set_with_ttl`] does (fresh for `fresh`), keeping
/// the `ttl` and `meta` its loader chose: a value read from a shared tier's entry (format 2)
/// outside a load.
pub fn set_shared<V: Clone + Send + Sync + 'static>(
    cache: &Cache<V>,
    key: &str,
    value: V,
    fresh: Duration,
    ttl: Option<Duration>,
    meta: Option<&str>,
) -> Result<(), Error> {
    let mut keep = Keep {
        ttl: Some(fresh),
        ..Keep::default()
    };
    keep.extras.ttl = ttl;
    keep.extras.meta = meta.map(Into::into);
    cache.table().write_keep(key, Some(value), keep, None)
}

/// Records that the caller of `guard` was answered with its fail-safe value by the driver
/// itself (a driver that enforces the soft timeout, then lets the load finish in the
/// background).
pub fn count_failsafe<V: Clone + Send + Sync + 'static>(guard: &LoadGuard<V>) {
    guard.count_failsafe();
}

/// Finishes `guard` because its loader panicked (caught by the driver, or raised by the
/// loader's language): waiters get [`Error::LoaderPanicked`] and the next call loads again.
pub fn panicked<V: Clone + Send + Sync + 'static>(guard: LoadGuard<V>, message: Option<String>) {
    guard.panicked(message);
}

/// A wake-up at a deadline of a cache's [`Clock`] that lets go of its waker as soon as it
/// is dropped or fired: the clock cannot cancel a timer, so it is handed a cell that this
/// empties, never the task's waker itself. One clock timer per deadline, however often it
/// is polled.
#[derive(Default)]
pub struct Timer {
    alarm: Option<StdArc<Alarm>>,
}

impl Timer {
    /// Ready once `clock` reaches `at`; otherwise arranges for `cx` to be woken then.
    pub fn poll_at(&mut self, clock: &dyn Clock, at: Duration, cx: &mut Context<'_>) -> Poll<()> {
        if clock.now() >= at {
            alarm::disarm(&mut self.alarm);
            return Poll::Ready(());
        }
        alarm::arm(&mut self.alarm, at, cx.waker(), clock);
        Poll::Pending
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        alarm::disarm(&mut self.alarm);
    }
}

impl core::fmt::Debug for Timer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Timer")
            .field("armed", &self.alarm.is_some())
            .finish()
    }
}
