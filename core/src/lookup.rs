//! The caller's side of the state machine: what [`Cache::lookup`] answers, and the handles
//! that finish the job — a [`LoadGuard`] for the caller that loads, a [`Waiter`] for the
//! callers that wait.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use crate::alarm::{self, Alarm};
use crate::budget::{Acquire, Budget, Permit};
use crate::engine::Cache;
use crate::error::{Error, LoadError};
use crate::flight::{Flight, Outcome};
use crate::sync::{Arc, Ordering};

/// What a caller of [`Cache::lookup`] does next.
#[must_use = "a Lead must be completed and a Wait awaited, or the key's waiters are handed over"]
pub enum Lookup<V: Clone + Send + Sync + 'static> {
    /// Serve this value now.
    Hit(Hit<V>),
    /// You load the value: run the loader and [`complete`](LoadGuard::complete) the guard.
    /// Callers arriving meanwhile wait for you.
    Lead(LoadGuard<V>),
    /// Someone else is loading: await (or [`wait`](Waiter::wait) on) this.
    Wait(Waiter<V>),
}

/// How fresh a served value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HitState {
    /// Within its TTL.
    Fresh,
    /// Past its TTL, within grace (stale-while-revalidate).
    Stale,
    /// Past grace, served because the last load failed (fail-safe, within `max_stale`).
    FailSafe,
}

/// A value to serve now, possibly with a refresh for the caller to run in the background.
pub struct Hit<V: Clone + Send + Sync + 'static> {
    /// The value; `None` is a cached absence.
    pub value: Option<V>,
    /// How fresh it is.
    pub state: HitState,
    /// When set, this caller was chosen (alone) to refresh the key: run the loader in the
    /// background and complete the guard; do not make the current request wait for it.
    pub refresh: Option<LoadGuard<V>>,
}

/// What a waiter ends with, besides an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Waited<V> {
    /// The leader's result (`None`: absent).
    Loaded(Option<V>),
    /// The load failed or took too long; this is the fail-safe stale value.
    Stale(V),
    /// The leader went away without an answer: look up again with
    /// [`Cache::lookup_again`] (one caller will lead), which keeps the caller's deadline.
    Retry(Retry),
}

/// A caller's place in line after a hand-over: when it first arrived. Looking up again with
/// it ([`Cache::lookup_again`]) keeps `wait_timeout` counted from that first arrival, so
/// leaders that go away one after another cannot stretch a caller's wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    pub(crate) arrived: Duration,
}

/// The right and the duty to load one key.
///
/// Finish it with [`complete`](Self::complete) (or [`fail`](Self::fail)). Dropped unfinished,
/// it wakes the waiters: while the thread panics, with [`Error::LoaderPanicked`]; otherwise
/// (cancellation) it hands the load over: waiters get [`Waited::Retry`] and one of them leads.
pub struct LoadGuard<V: Clone + Send + Sync + 'static> {
    cache: Cache<V>,
    flight: Arc<Flight<V>>,
    fallback: Option<V>,
    /// The fallback's retention deadline (`retain_until`), on the cache's clock.
    fallback_until: Duration,
    permit: Option<Permit>,
    began: Option<Duration>,
    ttl: Option<Duration>,
    /// When the caller first arrived (before any hand-over), on the cache's clock.
    arrived: Duration,
    done: bool,
}

impl<V: Clone + Send + Sync + 'static> LoadGuard<V> {
    /// Stores the loaded value with this TTL instead of the cache's (jitter still applies;
    /// a zero TTL is ignored). Absences keep `negative_ttl`.
    pub fn set_ttl(&mut self, ttl: Duration) {
        self.ttl = Some(ttl).filter(|t| !t.is_zero());
    }

    pub(crate) fn new(
        cache: Cache<V>,
        flight: Arc<Flight<V>>,
        fallback: Option<(V, Duration)>,
        arrived: Duration,
    ) -> Self {
        let (fallback, fallback_until) = split_fallback(fallback);
        Self {
            cache,
            flight,
            fallback,
            fallback_until,
            permit: None,
            began: None,
            ttl: None,
            arrived,
            done: false,
        }
    }

    /// The end of this caller's wait, on the cache's clock: `wait_timeout` after it first
    /// arrived (before any hand-over). A driver that waits on the leader's behalf (for the
    /// origin budget, for another process's load) gives up then.
    pub fn wait_deadline(&self) -> Duration {
        self.arrived
            .saturating_add(self.cache.inner.cfg.wait_timeout)
    }

    /// The key being loaded.
    pub fn key(&self) -> &str {
        &self.flight.key
    }

    /// The fail-safe value answered if the load fails (an entry past grace, within
    /// `max_stale`); `None` once it is past `max_stale`, however long the load took.
    pub fn fallback(&self) -> Option<&V> {
        self.fallback
            .as_ref()
            .filter(|_| self.cache.inner.clock.now() < self.fallback_until)
    }

    /// When the soft timeout falls, on the cache's clock.
    pub fn soft_deadline(&self) -> Option<Duration> {
        self.flight.soft_deadline
    }

    /// When the hard timeout falls, on the cache's clock.
    pub fn hard_deadline(&self) -> Option<Duration> {
        self.flight.hard_deadline
    }

    fn mark_began(&mut self) {
        if self.began.is_none() {
            let now = self.cache.inner.clock.now();
            self.mark_began_at(now);
        }
    }

    /// For the crate's own drivers, which lead in the call that looked up: without an origin
    /// budget the load begins at once, and the lookup's clock reading is its start (one clock
    /// read fewer per miss). `false`: there is a budget to wait for ([`begin`](Self::begin)).
    pub(crate) fn begin_at_lookup(&mut self) -> bool {
        if self.cache.inner.budget.is_some() {
            return self.began.is_some();
        }
        self.mark_began_at(self.flight.created);
        true
    }

    fn mark_began_at(&mut self, now: Duration) {
        if self.began.is_none() {
            self.began = Some(now);
            self.flight
                .ns
                .metrics
                .c
                .loads
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Takes a share of the origin budget if one is free now. Background refreshes use this:
    /// when the origin is busy they are skipped rather than queued.
    pub fn try_begin(&mut self) -> bool {
        if self.began.is_some() {
            return true;
        }
        if let Some(b) = &self.cache.inner.budget {
            match Budget::try_acquire(b) {
                Some(p) => self.permit = Some(p),
                None => return false,
            }
        }
        self.mark_began();
        true
    }

    /// Waits for a share of the origin budget (at most `wait_timeout`), then marks the load
    /// as started. Without a budget it is ready at once.
    pub fn begin(&mut self) -> Begin<'_, V> {
        let acquire = match (&self.began, &self.cache.inner.budget) {
            (None, Some(b)) => Some(Budget::acquire(b)),
            _ => None,
        };
        // Saturating: a `wait_timeout` of `Duration::MAX` means "as long as it takes". Only
        // a wait for the budget has a deadline: no clock read otherwise (a miss's path reads
        // the clock often enough already).
        let deadline = match acquire {
            Some(_) => self.wait_deadline(),
            None => Duration::MAX,
        };
        Begin {
            guard: self,
            acquire,
            sleep: None,
            deadline,
        }
    }

    /// [`begin`](Self::begin), blocking the thread.
    #[cfg(feature = "std")]
    pub fn begin_blocking(&mut self) -> Result<(), Error> {
        crate::park::block_on(self.begin())
    }

    /// The clock now, and how long the load took until now.
    fn took(&self) -> (Duration, Duration) {
        let began = self.began.unwrap_or(self.flight.created);
        let now = self.cache.inner.clock.now();
        (now, now.saturating_sub(began))
    }

    /// Finishes the load with the loader's answer (`Ok(None)`: absent) and wakes the waiters.
    /// Returns what this caller answers: the value, or on error the fail-safe value if any.
    /// The value is stored unless the key was written, invalidated or bumped meanwhile.
    pub fn complete(mut self, result: Result<Option<V>, LoadError>) -> Result<Option<V>, Error> {
        self.mark_began();
        let (now, took) = self.took();
        self.flight.ns.metrics.load_duration.observe(took);
        match result {
            Ok(v) => {
                self.end(Outcome::Loaded(v.clone()), took, now);
                Ok(v)
            }
            Err(e) => {
                self.flight
                    .ns
                    .metrics
                    .c
                    .load_errors
                    .fetch_add(1, Ordering::Relaxed);
                self.fail(Error::Load(e))
            }
        }
    }

    /// Finishes the load with a value another process loaded, read from a shared tier (the
    /// Redis L2): stored fresh for `fresh` from now (a zero `fresh` stores it already stale,
    /// within grace), with `load_duration` (the original load's, kept with the shared
    /// entry) as XFetch's delta. Not a loader call: neither counted as a load nor timed,
    /// and no origin budget is needed. Waiters get the value as from a loader.
    ///
    /// Jitter applies as for [`set_ttl`](Self::set_ttl), so a two-tier cache builds its
    /// first tier with `jitter(0.0)` and jitters once, when it writes the shared entry.
    /// Absences keep `negative_ttl`.
    pub fn adopt(
        mut self,
        value: Option<V>,
        fresh: Duration,
        load_duration: Duration,
    ) -> Result<Option<V>, Error> {
        // Zero would mean "the cache's TTL": the smallest TTL makes the entry stale at once.
        self.ttl = Some(fresh.max(Duration::from_nanos(1)));
        let now = self.cache.inner.clock.now();
        self.end(Outcome::Loaded(value.clone()), load_duration, now);
        Ok(value)
    }

    /// Finishes the load with an error (e.g. a timeout the driver enforced). Returns the
    /// fail-safe value if any, else the error; waiters get the same.
    pub fn fail(mut self, error: Error) -> Result<Option<V>, Error> {
        let (now, took) = self.took();
        self.end(Outcome::Failed(error.clone()), took, now);
        match serve_failsafe(&self.flight, &mut self.fallback, self.fallback_until, now) {
            Some(v) => Ok(Some(v)),
            None => Err(error),
        }
    }

    /// Gives the load up without an answer: waiters look up again and one of them leads.
    pub fn abandon(mut self) {
        let (now, took) = self.took();
        self.end(Outcome::Abandoned, took, now);
    }

    /// Finishes the load because its loader panicked; waiters get
    /// [`Error::LoaderPanicked`] and the next call loads again.
    pub fn panicked(mut self, message: Option<alloc::string::String>) {
        self.flight
            .ns
            .metrics
            .c
            .load_errors
            .fetch_add(1, Ordering::Relaxed);
        let (now, took) = self.took();
        self.end(
            Outcome::Failed(Error::LoaderPanicked { message }),
            took,
            now,
        );
    }

    /// Records that this caller answered with the fail-safe value itself (a driver that
    /// enforces the soft timeout, then lets the load finish in the background).
    pub fn count_failsafe(&self) {
        self.flight
            .ns
            .metrics
            .c
            .failsafe_served
            .fetch_add(1, Ordering::Relaxed);
    }

    fn end(&mut self, outcome: Outcome<V>, took: Duration, now: Duration) {
        self.done = true;
        if matches!(outcome, Outcome::Abandoned) {
            self.flight
                .ns
                .metrics
                .c
                .abandoned_loads
                .fetch_add(1, Ordering::Relaxed);
        }
        self.cache
            .finish(&self.flight, outcome, took, self.ttl, now);
        self.permit = None;
    }
}

impl<V: Clone + Send + Sync + 'static> Drop for LoadGuard<V> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        #[cfg(feature = "std")]
        if std::thread::panicking() {
            self.flight
                .ns
                .metrics
                .c
                .load_errors
                .fetch_add(1, Ordering::Relaxed);
            let (now, took) = self.took();
            self.end(
                Outcome::Failed(Error::LoaderPanicked { message: None }),
                took,
                now,
            );
            return;
        }
        let (now, took) = self.took();
        self.end(Outcome::Abandoned, took, now);
    }
}

/// The future of [`LoadGuard::begin`].
pub struct Begin<'g, V: Clone + Send + Sync + 'static> {
    guard: &'g mut LoadGuard<V>,
    acquire: Option<Acquire>,
    /// The clock timer of the wait for the budget (see [`Alarm`]).
    sleep: Option<alloc::sync::Arc<Alarm>>,
    deadline: Duration,
}

impl<V: Clone + Send + Sync + 'static> Drop for Begin<'_, V> {
    fn drop(&mut self) {
        alarm::disarm(&mut self.sleep);
    }
}

impl<V: Clone + Send + Sync + 'static> Future for Begin<'_, V> {
    type Output = Result<(), Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if let Some(acquire) = &mut this.acquire {
            match Pin::new(acquire).poll(cx) {
                Poll::Ready(permit) => {
                    this.acquire = None;
                    this.guard.permit = Some(permit);
                    alarm::disarm(&mut this.sleep);
                }
                Poll::Pending => {
                    let now = this.guard.cache.inner.clock.now();
                    if now >= this.deadline {
                        this.acquire = None;
                        alarm::disarm(&mut this.sleep);
                        let waited = now.saturating_sub(this.guard.arrived);
                        return Poll::Ready(Err(Error::WaitTimeout { waited }));
                    }
                    let clock = &*this.guard.cache.inner.clock;
                    alarm::arm(&mut this.sleep, this.deadline, cx.waker(), clock);
                    return Poll::Pending;
                }
            }
        }
        this.guard.mark_began();
        Poll::Ready(Ok(()))
    }
}

/// A caller waiting for another caller's load of the same key.
///
/// A `Future` (runtime-agnostic: timers come from the cache's clock), or
/// [`wait`](Self::wait) to block the thread. It ends at the load's outcome, or after
/// `wait_timeout` with the fail-safe value or [`Error::WaitTimeout`]. Dropping it only
/// removes this waiter; the load goes on for the others.
pub struct Waiter<V: Clone + Send + Sync + 'static> {
    cache: Cache<V>,
    flight: Arc<Flight<V>>,
    fallback: Option<V>,
    /// The fallback's retention deadline (`retain_until`), on the cache's clock.
    fallback_until: Duration,
    arrived: Duration,
    deadline: Duration,
    slot: Option<usize>,
    /// The clock timer of this wait (see [`Alarm`]).
    timer: Option<alloc::sync::Arc<Alarm>>,
    done: bool,
}

impl<V: Clone + Send + Sync + 'static> Waiter<V> {
    /// A waiter for `flight`, for a caller that first arrived at `arrived`.
    pub(crate) fn new(
        cache: Cache<V>,
        flight: Arc<Flight<V>>,
        fallback: Option<(V, Duration)>,
        arrived: Duration,
    ) -> Self {
        let deadline = arrived.saturating_add(cache.inner.cfg.wait_timeout);
        let (fallback, fallback_until) = split_fallback(fallback);
        Self {
            cache,
            flight,
            fallback,
            fallback_until,
            arrived,
            deadline,
            slot: None,
            timer: None,
            done: false,
        }
    }

    /// The key being waited for.
    pub fn key(&self) -> &str {
        &self.flight.key
    }

    /// Blocks the thread until the wait ends.
    #[cfg(feature = "std")]
    pub fn wait(self) -> Result<Waited<V>, Error> {
        crate::park::block_on(self)
    }

    fn leave(&mut self) {
        self.done = true;
        alarm::disarm(&mut self.timer);
        if let Some(slot) = self.slot.take() {
            self.flight.deregister(slot);
        }
    }

    fn settle(&mut self, outcome: Outcome<V>, now: Duration) -> Result<Waited<V>, Error> {
        self.done = true;
        alarm::disarm(&mut self.timer);
        self.slot = None;
        self.flight
            .ns
            .metrics
            .lock_wait
            .observe(now.saturating_sub(self.arrived));
        match outcome {
            Outcome::Loaded(v) => Ok(Waited::Loaded(v)),
            Outcome::Abandoned => Ok(Waited::Retry(Retry {
                arrived: self.arrived,
            })),
            Outcome::Failed(e) => {
                match serve_failsafe(&self.flight, &mut self.fallback, self.fallback_until, now) {
                    Some(v) => Ok(Waited::Stale(v)),
                    None => Err(e),
                }
            }
        }
    }
}

// Nothing in a waiter is pinned structurally; `V` is only moved out by value.
impl<V: Clone + Send + Sync + 'static> Unpin for Waiter<V> {}

impl<V: Clone + Send + Sync + 'static> Future for Waiter<V> {
    type Output = Result<Waited<V>, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let now = this.cache.inner.clock.now();
        // Past its retention the fallback is gone: a late wait ends in the error instead.
        if now >= this.fallback_until {
            this.fallback = None;
        }
        // A hung leader cannot hold its waiters past the hard timeout: a waiter ends it.
        if this.flight.hard_deadline.is_some_and(|d| now >= d) {
            this.cache.time_out(&this.flight);
        }
        if let Poll::Ready(outcome) = this.flight.poll_outcome(&mut this.slot, cx) {
            return Poll::Ready(this.settle(outcome, now));
        }
        let flight = this.flight.clone();
        let c = &flight.ns.metrics.c;
        if this.fallback.is_some() && this.flight.soft_deadline.is_some_and(|d| now >= d) {
            this.leave();
            c.failsafe_served.fetch_add(1, Ordering::Relaxed);
            return Poll::Ready(Ok(Waited::Stale(this.fallback.take().expect("checked"))));
        }
        if now >= this.deadline {
            this.leave();
            c.wait_timeouts.fetch_add(1, Ordering::Relaxed);
            return Poll::Ready(match this.fallback.take() {
                Some(v) => {
                    c.failsafe_served.fetch_add(1, Ordering::Relaxed);
                    Ok(Waited::Stale(v))
                }
                None => Err(Error::WaitTimeout {
                    waited: now - this.arrived,
                }),
            });
        }
        let mut wake = this.deadline;
        if let Some(h) = this.flight.hard_deadline {
            wake = wake.min(h);
        }
        if let (Some(s), Some(_)) = (this.flight.soft_deadline, &this.fallback) {
            wake = wake.min(s);
        }
        alarm::arm(&mut this.timer, wake, cx.waker(), &*this.cache.inner.clock);
        Poll::Pending
    }
}

impl<V: Clone + Send + Sync + 'static> Drop for Waiter<V> {
    fn drop(&mut self) {
        if !self.done {
            self.leave();
        }
    }
}

/// Takes the fail-safe value if it is still within its retention (`until`) at `now`, and
/// counts it as served: what a failed load's leader and its waiters answer instead.
fn serve_failsafe<V>(
    flight: &Flight<V>,
    fallback: &mut Option<V>,
    until: Duration,
    now: Duration,
) -> Option<V> {
    let v = fallback.take().filter(|_| now < until)?;
    flight
        .ns
        .metrics
        .c
        .failsafe_served
        .fetch_add(1, Ordering::Relaxed);
    Some(v)
}

/// A fallback and its retention deadline, kept apart (none: no deadline to keep).
fn split_fallback<V>(fallback: Option<(V, Duration)>) -> (Option<V>, Duration) {
    match fallback {
        Some((v, until)) => (Some(v), until),
        None => (None, Duration::ZERO),
    }
}
