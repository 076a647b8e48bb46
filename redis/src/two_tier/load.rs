//! [`Load`]: one loader call, for this process or for the whole fleet.

use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use herdless::driver::OriginPermit;
use herdless::driver::Timer;
use herdless::{
    Error, LoadContext, LoadError, LoadGuard, LoadReason, Loaded, MAX_META_BYTES, Previous,
};

use super::step::unwrap;
use super::{Host, Pending, Reply, Step, TwoTier, Versioned};
use crate::fleet::FleetLease;
use crate::lifetimes::Own;

/// Which of a load's deadlines passed (see [`Load::poll_deadline`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deadline {
    /// The soft timeout, with a fail-safe value at hand: answer the caller with
    /// [`Load::answer_stale`] now, and let the load go on in the background (it is stored).
    Soft,
    /// The hard timeout: stop the loader and finish with [`Load::timed_out`].
    Hard,
}

/// A loader call to make: for this process only (no shared tier, the tier down, or the
/// value unshareable), or for the whole fleet under its lock (published when it ends).
///
/// The driver calls its loader, then [`loaded`](Self::loaded). While the loader runs it
/// may watch [`poll_deadline`](Self::poll_deadline). Dropped unfinished (the driver was
/// cancelled), the load is handed over: to a waiter in this process, and in the fleet by
/// releasing the lock. While the thread panics, the waiters get `LoaderPanicked`.
pub struct Load<V: Clone + Send + Sync + 'static> {
    tt: TwoTier<V>,
    /// This process's flight; `None` for a detached refresh (the L1 serves its stale copy
    /// meanwhile, and nobody in this process waits for it).
    guard: Option<LoadGuard<Versioned<V>>>,
    /// The fleet lock, when this load is the fleet's.
    lease: Option<FleetLease>,
    /// A detached refresh's share of the origin budget (a guard holds its own).
    permit: Option<OriginPermit>,
    ttl: Option<Duration>,
    background: bool,
    /// When the loader was started (the shared entry keeps the load's duration).
    started: Instant,
    /// A detached refresh's hard deadline, on the L1's clock (a guard knows its own).
    hard: Option<Duration>,
    soft_told: bool,
    timer: Timer,
    /// A detached refresh's previous value: the shared entry it refreshes.
    previous: Option<Previous<V>>,
    /// A detached refresh's previous tags (the shared entry's): a not-modified answer
    /// keeps them, as the L1's previous entry keeps its own.
    previous_tags: Vec<String>,
}

impl<V: Clone + Send + Sync + 'static> Load<V> {
    fn new(
        tt: TwoTier<V>,
        mut guard: Option<LoadGuard<Versioned<V>>>,
        lease: Option<FleetLease>,
        ttl: Option<Duration>,
        background: bool,
    ) -> Self {
        // A value kept in this process only lives for the call's TTL; a published one for
        // what is left of its shared entry's (set when the publish returns).
        if let (Some(g), Some(t)) = (&mut guard, ttl) {
            g.set_ttl(t);
        }
        Self {
            tt,
            guard,
            lease,
            permit: None,
            ttl,
            background,
            started: Instant::now(),
            hard: None,
            soft_told: false,
            timer: Timer::default(),
            previous: None,
            previous_tags: Vec::new(),
        }
    }

    /// A load for this process only.
    pub(crate) fn local(
        tt: TwoTier<V>,
        guard: LoadGuard<Versioned<V>>,
        ttl: Option<Duration>,
        background: bool,
    ) -> Self {
        Self::new(tt, Some(guard), None, ttl, background)
    }

    /// A load for the whole fleet, by this process's leader of the key.
    pub(crate) fn fleet(
        tt: TwoTier<V>,
        guard: LoadGuard<Versioned<V>>,
        lease: FleetLease,
        ttl: Option<Duration>,
        background: bool,
    ) -> Self {
        Self::new(tt, Some(guard), Some(lease), ttl, background)
    }

    /// A refresh for the fleet with no flight in this process (its stale copy is served).
    pub(crate) fn detached(
        tt: TwoTier<V>,
        lease: FleetLease,
        permit: OriginPermit,
        ttl: Option<Duration>,
        previous: Option<(Previous<V>, Vec<String>)>,
    ) -> Self {
        let hard = tt.l1().options().hard_timeout;
        let now = tt.l1().clock().now();
        let mut load = Self::new(tt, None, Some(lease), ttl, true);
        load.permit = Some(permit);
        load.hard = hard.map(|h| now.saturating_add(h));
        if let Some((previous, tags)) = previous {
            load.previous = Some(previous);
            load.previous_tags = tags;
        }
        load
    }

    /// The context to hand a context-aware loader: the key, why it loads, the value it may
    /// replace (from this process's L1, or the shared entry), and its cancellation signal.
    pub fn context(&self) -> LoadContext<V> {
        match &self.guard {
            Some(g) => g.context().map(|v| v.value),
            None => herdless::driver::detached_context(
                self.tt.l1(),
                self.key(),
                LoadReason::Refresh,
                self.previous.clone(),
                self.hard,
            ),
        }
    }

    /// The value this load may replace, unwrapped.
    fn previous(&self) -> Option<Previous<V>> {
        match &self.guard {
            Some(g) => g.previous().map(|p| p.clone().map(|v| v.value)),
            None => self.previous.clone(),
        }
    }

    /// Takes the origin budget, waiting for it if need be: the step that starts the
    /// loader, or a wait for the budget (which may end in `wait_timeout`). No loader
    /// starts once the engine is closed.
    pub(crate) fn begin(mut self) -> Step<V> {
        if self.tt.is_closed() {
            return self.fail(Error::Closed);
        }
        let Some(guard) = &mut self.guard else {
            return Step::Load(self);
        };
        if guard.try_begin() {
            return Step::Load(self.started_now());
        }
        Step::Tier(Pending::new(async move {
            let began = match &mut self.guard {
                Some(g) => g.begin().await,
                None => Ok(()),
            };
            Reply::began(self, began)
        }))
    }

    /// For a batch: the load begins at once, under the one unit of the origin budget its
    /// driver holds for the batch's loader call.
    pub(crate) fn cover(mut self) -> Step<V> {
        if self.tt.is_closed() {
            return self.fail(Error::Closed);
        }
        if let Some(g) = &mut self.guard {
            herdless::driver::begin_in_batch(g);
        }
        Step::Load(self.started_now())
    }

    /// [`begin`](Self::begin), or [`cover`](Self::cover) for a key of a batch.
    pub(crate) fn start(self, batch: bool) -> Step<V> {
        if batch { self.cover() } else { self.begin() }
    }

    /// The load, once its wait for the origin budget ended with `began`.
    pub(crate) fn began(self, began: Result<(), Error>) -> Step<V> {
        match began {
            Ok(()) if self.tt.is_closed() => self.fail(Error::Closed),
            Ok(()) => Step::Load(self.started_now()),
            Err(e) => self.give_up(e),
        }
    }

    pub(crate) fn started_now(mut self) -> Self {
        self.started = Instant::now();
        self
    }

    /// The key being loaded.
    pub fn key(&self) -> &str {
        match (&self.guard, &self.lease) {
            (Some(g), _) => g.key(),
            (None, Some(l)) => l.key(),
            (None, None) => "",
        }
    }

    /// Whether nobody awaits this load (a refresh): its answer is dropped.
    pub fn is_background(&self) -> bool {
        self.background
    }

    /// Whether this load is the fleet's (its value is published for every process).
    pub fn is_shared(&self) -> bool {
        self.lease.is_some()
    }

    /// The fail-safe value answered if the load fails, if any.
    pub fn fallback(&self) -> Option<&V> {
        self.guard.as_ref()?.fallback().map(|v| &v.value)
    }

    /// When the soft timeout falls, on the L1's clock.
    pub fn soft_deadline(&self) -> Option<Duration> {
        self.guard.as_ref()?.soft_deadline()
    }

    /// When the hard timeout falls, on the L1's clock.
    pub fn hard_deadline(&self) -> Option<Duration> {
        match &self.guard {
            Some(g) => g.hard_deadline(),
            None => self.hard,
        }
    }

    /// Which deadline passed, if one did: the soft one once, while there is a fail-safe
    /// value and a caller to answer with it, then the hard one. Pending otherwise, with one
    /// clock timer armed for the next deadline, which lets go of `cx`'s waker when this
    /// load ends (the clock never holds a finished load's task).
    pub fn poll_deadline(&mut self, cx: &mut Context<'_>) -> Poll<Deadline> {
        let soft = self
            .soft_deadline()
            .filter(|_| !self.soft_told && !self.background && self.fallback().is_some());
        let next = match (soft, self.hard_deadline()) {
            (None, None) => return Poll::Pending,
            (Some(s), Some(h)) => s.min(h),
            (Some(d), None) | (None, Some(d)) => d,
        };
        let clock = self.tt.l1().clock();
        if self.timer.poll_at(clock, next, cx).is_pending() {
            return Poll::Pending;
        }
        if self.hard_deadline().is_some_and(|h| clock.now() >= h) {
            return Poll::Ready(Deadline::Hard);
        }
        self.soft_told = true;
        Poll::Ready(Deadline::Soft)
    }

    /// The fail-safe value to answer a caller with at the soft timeout (counted as
    /// served); the load goes on.
    pub fn answer_stale(&mut self) -> Option<V> {
        self.soft_told = true;
        let guard = self.guard.as_ref()?;
        let v = guard.fallback()?.value.clone();
        herdless::driver::count_failsafe(guard);
        Some(v)
    }

    /// Finishes with the loader's result (`Ok(None)`: absent): stored in this process and,
    /// for the fleet's load, published (a [`Step::Tier`] to await). A value the host's
    /// codec cannot encode is served here only: the fleet lock is handed back at once with
    /// a "load locally" mark (so other processes stop waiting), and the user is warned
    /// once per namespace.
    pub fn loaded(self, result: Result<Option<V>, LoadError>, host: &dyn Host<V>) -> Step<V> {
        self.loaded_with(result.map(Loaded::from), host)
    }

    /// [`loaded`](Self::loaded) with a context-aware loader's answer: its lifetimes and
    /// metadata go into this process's entry and the shared one; "not modified" republishes
    /// the previous value with its lifetime restarted (counted in `not_modified`); "no
    /// cache" answers the callers, stores nothing anywhere and hands the fleet lock back.
    pub fn loaded_with(
        mut self,
        result: Result<Loaded<V>, LoadError>,
        host: &dyn Host<V>,
    ) -> Step<V> {
        let took = self.started.elapsed();
        let loaded = match result {
            Ok(loaded) => loaded,
            Err(e) => {
                let lease = self.lease.take();
                let answer = self.complete(Err(e));
                // A failed load hands the fleet lock back (another process may succeed)
                // before its caller hears of it.
                return release_then(lease, answer);
            }
        };
        let len = loaded.meta_set().map_or(0, str::len);
        if len > MAX_META_BYTES {
            let max = MAX_META_BYTES;
            self.count_refused();
            return self.fail(Error::MetaTooLong { len, max });
        }
        // A not-modified answer that sets no tags keeps the previous entry's.
        let keep_tags = loaded.is_not_modified() && loaded.tags_set().is_none();
        let loaded = if loaded.is_not_modified() {
            let Some(previous) = self.previous() else {
                self.count_refused();
                return self.fail(Error::NoPrevious);
            };
            herdless::driver::record_not_modified(self.tt.l1(), self.key());
            let value = previous.value.clone();
            loaded.resolved(Some(value), Some(&previous))
        } else {
            loaded
        };
        // After the resolution: a not-modified answer keeps the previous entry's tags.
        let tags = match self.tt.tags_of(&loaded) {
            Ok(tags) if tags.is_empty() && keep_tags => self.previous_tags.clone(),
            Ok(tags) => tags,
            Err(e) => {
                self.count_refused();
                return self.fail(e);
            }
        };
        let value: Option<V> = loaded.found().expect("resolved").cloned();
        let own = Own::of(&loaded);
        let Some(lease) = self.lease.take().filter(|_| loaded.is_cached()) else {
            // Kept in this process only, or nowhere ("no cache", which also hands back
            // the fleet lock, if held, for the next caller to load).
            let lease = self.lease.take();
            let answer = self.complete_loaded(loaded);
            return release_then(lease, answer);
        };
        let bytes = match value.as_ref().map(|v| host.encode(v)).transpose() {
            Ok(bytes) => bytes,
            Err(ce) if ce.is_interrupted() => {
                drop(lease);
                if let Some(g) = self.guard.take() {
                    g.abandon();
                }
                return Step::Interrupted(ce);
            }
            Err(ce) => {
                self.tt.unshareable(lease.key(), &ce, host);
                lease.release_unshared();
                return self.complete_loaded(loaded);
            }
        };
        let life = *self
            .tt
            .shared_tier()
            .expect("a fleet load has a shared tier");
        let (mut entry, _) = life.entry_own(bytes, took, lease.epoch(), self.ttl, &own);
        entry.tags = tags.clone();
        // Dated by the loader's start, its life capped by the tags' retention: this
        // process keeps it no longer than the fleet does.
        lease.date(&mut entry, self.started);
        let fresh_until_ms = entry.fresh_until_ms;
        let (tt, guard, permit) = (self.tt.clone(), self.guard.take(), self.permit.take());
        let began = self.started;
        let fleet = tt.fleet();
        Step::Tier(Pending::new(async move {
            let generation = fleet.as_ref().map(|f| (f, f.bus_generation()));
            let key = lease.key().to_owned();
            let published = lease.publish_dated(entry, began).await;
            // Published for the fleet, but unheard here: served, not kept.
            let published = match generation {
                Some((f, g)) => f.heard(&key, g, published),
                None => published,
            };
            // Held until published: the budget counts the whole refresh.
            drop(permit);
            Reply::published(tt, guard, (value, own, tags), fresh_until_ms, published)
        }))
    }

    /// A loader's answer the engine refused, counted as a failed load.
    fn count_refused(&self) {
        herdless::driver::record_load_error(self.tt.l1(), self.key());
    }

    fn complete(mut self, result: Result<Option<V>, LoadError>) -> Step<V> {
        match self.guard.take() {
            Some(g) => Step::Done(unwrap(g.complete(result.map(|v| v.map(Versioned::local))))),
            None => Step::Done(result.map_err(Error::Load)),
        }
    }

    fn complete_loaded(mut self, loaded: Loaded<V>) -> Step<V> {
        match self.guard.take() {
            Some(g) => Step::Done(unwrap(g.complete_loaded(Ok(loaded.map(Versioned::local))))),
            None => Step::Done(Ok(loaded.found().flatten().cloned())),
        }
    }

    /// Finishes a load past its hard timeout: the fail-safe value or `LoadTimeout`, for
    /// this caller and its waiters; the fleet lock is handed back.
    pub fn timed_out(self) -> Step<V> {
        let e = self.tt.load_timeout();
        self.fail(e)
    }

    /// Finishes with `error` (the fail-safe value, if any, answers instead), after handing
    /// the fleet lock back.
    pub fn fail(mut self, error: Error) -> Step<V> {
        let lease = self.lease.take();
        let answer = match self.guard.take() {
            Some(g) => Step::Done(unwrap(g.fail(error))),
            None => Step::Done(Err(error)),
        };
        release_then(lease, answer)
    }

    /// This caller's own wait ran out before its loader could start (for the origin budget):
    /// it answers its fail-safe value or `error`, and the load (and the fleet lock) is
    /// handed over, so each waiter here waits until its own deadline.
    pub(crate) fn give_up(mut self, error: Error) -> Step<V> {
        let lease = self.lease.take();
        let answer = match self.guard.take() {
            Some(g) => Step::Done(unwrap(g.give_up(error))),
            None => Step::Done(Err(error)),
        };
        release_then(lease, answer)
    }

    /// The leader's own caller no longer wants the result (it aborted): the load goes on
    /// for the waiters; once none is left, its context reports it cancelled (see
    /// `LoadGuard::release`). A detached refresh has no caller to leave.
    pub fn release(&mut self) {
        if let Some(g) = &mut self.guard {
            g.release();
        }
    }

    /// Gives the load up without an answer (the driver was interrupted): a waiter takes it
    /// over, here and in the fleet.
    pub fn abandon(mut self) {
        drop(self.lease.take());
        if let Some(g) = self.guard.take() {
            g.abandon();
        }
    }

    /// Finishes because the loader panicked: waiters get `LoaderPanicked`; the next call
    /// loads again.
    pub fn panicked(mut self, message: Option<String>) {
        drop(self.lease.take());
        if let Some(g) = self.guard.take() {
            herdless::driver::panicked(g, message);
        }
    }
}

/// `answer`, once `lease` (if any) was released: this process's waiters already have the
/// outcome; the caller hears of it when the fleet can lead again.
fn release_then<V: Clone + Send + Sync + 'static>(
    lease: Option<FleetLease>,
    answer: Step<V>,
) -> Step<V> {
    match (lease, answer) {
        (Some(lease), Step::Done(r)) => Step::Tier(Pending::new(async move {
            // A release that fails leaves the lock to its lease (counted by the fleet).
            let _ = lease.release().await;
            Reply::ready(r)
        })),
        (_, answer) => answer,
    }
}

impl<V: Clone + Send + Sync + 'static> std::fmt::Debug for Load<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Load")
            .field("key", &self.key())
            .field("shared", &self.is_shared())
            .field("background", &self.background)
            .finish_non_exhaustive()
    }
}
