//! The leader's handle: the right and the duty to load one key.

use alloc::boxed::Box;
use alloc::string::String;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use super::fallback::Fallback;
use super::waiter::Retry;
use crate::alarm::{self, Alarm};
use crate::budget::{Acquire, Budget, Permit};
use crate::context::{LoadContext, LoadReason, Previous};
use crate::error::{Error, LoadError};
use crate::flight::{Flight, Outcome};
use crate::loaded::{Answer, Extras, Keep, Loaded, MAX_META_BYTES};
use crate::sync::Arc;
use crate::sync::unchecked::Arc as StdArc;
use crate::table::Table;

/// The right and the duty to load one key.
///
/// Finish it with [`complete`](Self::complete) (or [`fail`](Self::fail)). Dropped unfinished,
/// it wakes the waiters: while the thread panics, with [`Error::LoaderPanicked`]; otherwise
/// (cancellation) it hands the load over: waiters get [`Waited::Retry`](crate::Waited::Retry)
/// and one of them leads.
pub struct LoadGuard<V: Clone + Send + Sync + 'static> {
    table: Arc<Table<V>>,
    flight: Arc<Flight<V>>,
    fallback: Fallback<V>,
    permit: Option<Permit>,
    began: Option<Duration>,
    /// How the result is kept: a driver's ttl, the loader's lifetimes and metadata. Boxed
    /// when set: a guard travels by value in every [`Lookup`](crate::Lookup), hits too.
    keep: Option<Box<Keep>>,
    /// When the caller first arrived (before any hand-over), on the cache's clock.
    arrived: Duration,
    reason: LoadReason,
    /// Boxed for the same reason as `keep`.
    previous: Option<Box<Previous<V>>>,
    /// The leader's caller said it no longer wants the result.
    released: bool,
    done: bool,
}

impl<V: Clone + Send + Sync + 'static> LoadGuard<V> {
    pub(crate) fn new(
        table: Arc<Table<V>>,
        flight: Arc<Flight<V>>,
        fallback: Option<(V, Duration)>,
        arrived: Duration,
    ) -> Self {
        Self {
            table,
            flight,
            fallback: Fallback::new(fallback),
            permit: None,
            began: None,
            keep: None,
            arrived,
            reason: LoadReason::First,
            previous: None,
            released: false,
            done: false,
        }
    }

    /// The load's reason and the value it may replace, for its [`LoadContext`].
    pub(crate) fn with_context(
        mut self,
        reason: LoadReason,
        previous: Option<Previous<V>>,
    ) -> Self {
        self.reason = reason;
        self.previous = previous.map(Box::new);
        self
    }

    /// How the result is kept, made on first use.
    fn keep(&mut self) -> &mut Keep {
        self.keep.get_or_insert_with(Box::default)
    }

    /// Stores the loaded value with this TTL instead of the cache's (jitter still applies;
    /// a zero TTL is ignored). Absences keep `negative_ttl`.
    pub fn set_ttl(&mut self, ttl: Duration) {
        self.keep().ttl = Some(ttl).filter(|t| !t.is_zero());
    }

    /// Answers this load's callers (and its waiters) without storing what it ends with,
    /// whatever the loader says: for a shared tier that cannot tell this process of other
    /// processes' later changes (memcached), whose values must not outlive the call here.
    pub fn serve_only(&mut self) {
        self.keep().no_cache = true;
    }

    /// Why this load runs.
    pub fn reason(&self) -> LoadReason {
        self.reason
    }

    /// Sets why this load runs, for a driver that knows better than the lookup (a warm-up).
    pub fn set_reason(&mut self, reason: LoadReason) {
        self.reason = reason;
    }

    /// The value this load may replace (see [`Previous`]).
    pub fn previous(&self) -> Option<&Previous<V>> {
        self.previous.as_deref()
    }

    /// Gives the load a previous value found elsewhere (a shared tier's stale entry), when
    /// the cache itself had none.
    pub fn set_previous(&mut self, previous: Previous<V>) {
        self.previous.get_or_insert_with(|| Box::new(previous));
    }

    /// The context to hand a context-aware loader: the key, the reason, the previous value
    /// (cloned: the guard keeps it for a not-modified answer) and the cancellation signal.
    pub fn context(&self) -> LoadContext<V> {
        LoadContext::new(
            self.flight.clone(),
            self.table.clock.clone(),
            self.reason,
            self.previous.as_deref().cloned(),
        )
    }

    /// Whether the load is no longer wanted (see [`LoadContext`]).
    pub fn is_cancelled(&self) -> bool {
        self.flight.is_cancelled(self.table.now())
    }

    /// The leader's own caller no longer wants the result (it was cancelled, or it timed
    /// out). The load goes on for the waiters; once none is left either, its
    /// [`LoadContext`] reports it cancelled and its result is not stored. The guard must
    /// still be completed (or dropped).
    pub fn release(&mut self) {
        if !self.released {
            self.released = true;
            self.flight.leave();
        }
    }

    /// The end of this caller's wait, on the cache's clock: `wait_timeout` after it first
    /// arrived (before any hand-over). A driver that waits on the leader's behalf (for the
    /// origin budget, for another process's load) gives up then.
    pub fn wait_deadline(&self) -> Duration {
        self.arrived.saturating_add(self.table.cfg.wait_timeout)
    }

    /// The key being loaded.
    pub fn key(&self) -> &str {
        &self.flight.key
    }

    /// The fail-safe value answered if the load fails (an entry past grace, within
    /// `max_stale`); `None` once it is past `max_stale`, however long the load took.
    pub fn fallback(&self) -> Option<&V> {
        self.fallback.get(self.table.now())
    }

    /// When the soft timeout falls, on the cache's clock.
    pub fn soft_deadline(&self) -> Option<Duration> {
        self.flight.soft_deadline
    }

    /// When the hard timeout falls, on the cache's clock.
    pub fn hard_deadline(&self) -> Option<Duration> {
        self.flight.hard_deadline()
    }

    fn mark_began(&mut self) {
        if self.began.is_none() {
            let now = self.table.now();
            self.mark_began_at(now);
        }
    }

    /// For the crate's own drivers, which lead in the call that looked up: without an origin
    /// budget the load begins at once, and the lookup's clock reading is its start (one clock
    /// read fewer per miss). `false`: there is a budget to wait for ([`begin`](Self::begin)).
    pub(crate) fn begin_at_lookup(&mut self) -> bool {
        if self.table.budget.is_some() {
            return self.began.is_some();
        }
        self.mark_began_at(self.flight.created);
        true
    }

    fn mark_began_at(&mut self, now: Duration) {
        if self.began.is_none() {
            self.began = Some(now);
            self.flight.ns.counters().loads.inc();
        }
    }

    /// Marks the load as started by a driver that is about to run the loader: its hard
    /// deadline runs from now when it began after its flight was made (it waited for the
    /// origin budget, or a shared tier's lock). Not a load marked only as it ends (`complete`
    /// of a guard nobody began): its deadline stays the flight's, or a late answer would
    /// restart the timeout it missed.
    fn start(&mut self) {
        if self.began.is_some() {
            return;
        }
        let now = self.table.now();
        self.mark_began_at(now);
        // Most loads begin when their flight is made: its deadline already runs from then.
        if now > self.flight.created {
            self.flight.begin(now, self.table.cfg.hard_timeout);
        }
    }

    /// For a batch driver: this load is one key of a loader call whose one unit of the
    /// origin budget another guard of the call holds, so it begins without waiting.
    pub(crate) fn begin_covered(&mut self) {
        self.start();
    }

    /// Counts a batch loader call in this key's namespace (`batch_loads`).
    pub(crate) fn count_batch_load(&self) {
        self.flight.ns.counters().batch_loads.inc();
    }

    /// Takes a share of the origin budget if one is free now. Background refreshes use this:
    /// when the origin is busy they are skipped rather than queued.
    pub fn try_begin(&mut self) -> bool {
        if self.began.is_some() {
            return true;
        }
        if let Some(b) = &self.table.budget {
            match Budget::try_acquire(b) {
                Some(p) => self.permit = Some(p),
                None => return false,
            }
        }
        self.start();
        true
    }

    /// Waits for a share of the origin budget (at most until the
    /// [`wait_deadline`](Self::wait_deadline)), then marks the load as started. Without a
    /// budget it is ready at once.
    pub fn begin(&mut self) -> Begin<'_, V> {
        let acquire = match (&self.began, &self.table.budget) {
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
        crate::sync::block_on(self.begin())
    }

    /// The clock now, and how long the load took until now.
    fn took(&self) -> (Duration, Duration) {
        let began = self.began.unwrap_or(self.flight.created);
        let now = self.table.now();
        (now, now.saturating_sub(began))
    }

    /// Finishes the load with the loader's answer (`Ok(None)`: absent) and wakes the waiters.
    /// Returns what this caller answers: the value, or on error the fail-safe value if any.
    /// The value is stored unless the key was written, invalidated or bumped meanwhile.
    pub fn complete(mut self, result: Result<Option<V>, LoadError>) -> Result<Option<V>, Error> {
        self.mark_began();
        let (now, took) = self.took();
        self.flight.ns.metrics.load_duration.observe(took);
        // Past the hard timeout the load was given up (a blocking loader cannot be stopped
        // there): its late result answers its callers but is not kept.
        if self.flight.hard_deadline().is_some_and(|d| now >= d) {
            self.keep().no_cache = true;
        }
        match result {
            Ok(v) => {
                self.end(Outcome::Loaded(v.clone()), took, now);
                Ok(v)
            }
            Err(e) => {
                self.flight.ns.counters().load_errors.inc();
                self.fail(Error::Load(e))
            }
        }
    }

    /// Finishes the load with a context-aware loader's answer (see [`Loaded`]): its value
    /// and lifetimes, or the previous value for "not modified" (an error without one), or
    /// an answer for the callers only (`no_cache`). Returns what this caller answers, as
    /// [`complete`](Self::complete).
    pub fn complete_loaded(
        mut self,
        result: Result<Loaded<V>, LoadError>,
    ) -> Result<Option<V>, Error> {
        let loaded = match result {
            Ok(loaded) => loaded,
            Err(e) => return self.complete(Err(e)),
        };
        let Loaded {
            answer,
            extras,
            store,
        } = loaded;
        if let Some(len) = extras.meta.as_ref().map(|m| m.len()) {
            if len > MAX_META_BYTES {
                let max = MAX_META_BYTES;
                return self.refuse(Error::MetaTooLong { len, max });
            }
        }
        let value = match answer {
            // A plain answer chooses nothing: no `Keep` is allocated for it (one malloc and
            // one free per miss).
            Answer::Value(v) => {
                if !extras.is_empty() || self.keep.is_some() {
                    self.keep().extras = extras;
                }
                v
            }
            Answer::NotModified => match self.previous.take() {
                Some(p) => {
                    self.keep().extras = extras.or(p.extras.as_deref());
                    self.flight.ns.counters().not_modified.inc();
                    Some(p.value)
                }
                None => return self.refuse(Error::NoPrevious),
            },
        };
        match self.keep.as_deref_mut() {
            Some(keep) => {
                if let Err(e) = self.table.check_tags(keep) {
                    return self.refuse(e);
                }
                // `serve_only` stays: a loader's `store` cannot undo it.
                keep.no_cache |= !store;
            }
            // No tags to check, and `no_cache` is already false.
            None if store => {}
            None => self.keep().no_cache = true,
        }
        self.complete(Ok(value))
    }

    /// Fails a load whose answer the engine refuses, counted as a failed load.
    fn refuse(mut self, error: Error) -> Result<Option<V>, Error> {
        self.mark_began();
        self.flight.ns.counters().load_errors.inc();
        self.fail(error)
    }

    /// Finishes the load with a value read from a shared tier (see
    /// [`driver::adopt`](crate::driver::adopt)).
    pub(crate) fn adopt(
        mut self,
        value: Option<V>,
        fresh: Duration,
        load_duration: Duration,
        extras: Extras,
    ) -> Result<Option<V>, Error> {
        // Zero would mean "the cache's TTL": the smallest TTL makes the entry stale at once.
        let keep = self.keep.get_or_insert_with(Box::default);
        keep.ttl = Some(fresh.max(Duration::from_nanos(1)));
        keep.extras = extras;
        if let Err(e) = self.table.check_tags(keep) {
            return self.refuse(e);
        }
        let now = self.table.now();
        self.end(Outcome::Loaded(value.clone()), load_duration, now);
        Ok(value)
    }

    /// Finishes the load with an error (e.g. a timeout the driver enforced). Returns the
    /// fail-safe value if any, else the error; waiters get the same.
    pub fn fail(mut self, error: Error) -> Result<Option<V>, Error> {
        let (now, took) = self.took();
        self.end(Outcome::Failed(error.clone()), took, now);
        match self.fallback.serve(&self.flight, now) {
            Some(v) => Ok(Some(v)),
            None => Err(error),
        }
    }

    /// Ends this caller's part when its own wait ran out before the loader could start (for
    /// the origin budget, or for another process's load: `error` is then
    /// [`Error::WaitTimeout`]): this caller answers its fail-safe value if any, else
    /// `error`; the load is handed over, so each waiter looks up again and waits until its
    /// own deadline, not this caller's. [`fail`](Self::fail) instead gives every waiter the
    /// error.
    pub fn give_up(mut self, error: Error) -> Result<Option<V>, Error> {
        if matches!(error, Error::WaitTimeout { .. }) {
            self.flight.ns.counters().wait_timeouts.inc();
        }
        let (now, took) = self.took();
        self.end(Outcome::Abandoned, took, now);
        match self.fallback.serve(&self.flight, now) {
            Some(v) => Ok(Some(v)),
            None => Err(error),
        }
    }

    /// For the crate's drivers: a loader failed after its load was withdrawn (superseded,
    /// or left by every caller), so its error answers nobody: the load is abandoned (the
    /// waiters look up again) and its caller is told to look up again too, keeping its
    /// first arrival, with the error in case it has nothing left to load with. Otherwise
    /// the guard and the result, to complete.
    #[allow(clippy::type_complexity)]
    pub(crate) fn withdrawn_failure<T>(
        self,
        result: Result<T, LoadError>,
    ) -> Result<(Self, Result<T, LoadError>), (Retry, Error)> {
        let error = match result {
            Err(e) if self.flight.is_withdrawn() => Error::Load(e),
            result => return Ok((self, result)),
        };
        let arrived = self.arrived;
        self.abandon();
        Err((Retry { arrived }, error))
    }

    /// Gives the load up without an answer: waiters look up again and one of them leads.
    pub fn abandon(mut self) {
        let (now, took) = self.took();
        self.end(Outcome::Abandoned, took, now);
    }

    /// Finishes the load because its loader panicked (see
    /// [`driver::panicked`](crate::driver::panicked)).
    pub(crate) fn panicked(mut self, message: Option<String>) {
        self.end_panicked(message);
    }

    fn end_panicked(&mut self, message: Option<String>) {
        self.flight.ns.counters().load_errors.inc();
        let (now, took) = self.took();
        self.end(
            Outcome::Failed(Error::LoaderPanicked { message }),
            took,
            now,
        );
    }

    /// Counts that this caller was answered with its fail-safe value by its driver (see
    /// [`driver::count_failsafe`](crate::driver::count_failsafe)).
    pub(crate) fn count_failsafe(&self) {
        self.flight.ns.counters().failsafe_served.inc();
    }

    fn end(&mut self, outcome: Outcome<V>, took: Duration, now: Duration) {
        self.done = true;
        if matches!(outcome, Outcome::Abandoned) {
            self.flight.ns.counters().abandoned_loads.inc();
        }
        let keep = self.keep.take();
        self.table.finish(&self.flight, outcome, took, keep, now);
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
            self.end_panicked(None);
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
    sleep: Option<StdArc<Alarm>>,
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
                    let now = this.guard.table.now();
                    if now >= this.deadline {
                        this.acquire = None;
                        alarm::disarm(&mut this.sleep);
                        let waited = now.saturating_sub(this.guard.arrived);
                        return Poll::Ready(Err(Error::WaitTimeout { waited }));
                    }
                    let clock = &*this.guard.table.clock;
                    alarm::arm(&mut this.sleep, this.deadline, cx.waker(), clock);
                    return Poll::Pending;
                }
            }
        }
        this.guard.start();
        Poll::Ready(Ok(()))
    }
}
