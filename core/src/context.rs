//! What a context-aware loader is told ([`LoadContext`]): the key, why it loads
//! ([`LoadReason`]), the entry it may replace ([`Previous`]), and a cancellation signal
//! ([`Cancelled`]) that fires once nobody wants the load's result.

use alloc::boxed::Box;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use crate::alarm::{self, Alarm};
use crate::cancel::Signal;
use crate::clock::Clock;
use crate::flight::Flight;
use crate::loaded::{Answer, Extras, Loaded};
use crate::sync::Arc;
use crate::sync::unchecked::Arc as StdArc;

/// Why a load runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LoadReason {
    /// Nothing servable was cached (a miss, or an entry past grace kept for fail-safe).
    First,
    /// A stale entry (within grace) is served while this refreshes it
    /// (stale-while-revalidate).
    Refresh,
    /// XFetch chose this read to refresh a fresh entry early.
    EarlyRefresh,
    /// The entry lived the [`refresh_ahead`](crate::Builder::refresh_ahead) share of its
    /// ttl.
    RefreshAhead,
    /// Pre-warming ([`Cache::warm`](crate::Cache::warm)).
    Warm,
}

impl LoadReason {
    /// The reason's name, as the bindings spell it: `"first"`, `"refresh"`,
    /// `"early_refresh"`, `"refresh_ahead"`, `"warm"`.
    pub fn as_str(self) -> &'static str {
        match self {
            LoadReason::First => "first",
            LoadReason::Refresh => "refresh",
            LoadReason::EarlyRefresh => "early_refresh",
            LoadReason::RefreshAhead => "refresh_ahead",
            LoadReason::Warm => "warm",
        }
    }
}

/// The value a load may replace: the key's entry when the load began (fresh for an early
/// refresh, stale, or kept for fail-safe), with the metadata its own load chose.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Previous<V> {
    /// The value.
    pub value: V,
    /// How long ago it was stored.
    pub age: Duration,
    /// What its loader set with [`Loaded::meta`](crate::Loaded::meta) (e.g. an ETag).
    pub meta: Option<Box<str>>,
    /// Its lifetimes, kept by a not-modified answer.
    pub(crate) extras: Option<Box<Extras>>,
}

impl<V> Previous<V> {
    pub(crate) fn new(value: V, age: Duration, extras: Option<&Extras>) -> Self {
        Self {
            value,
            age,
            meta: extras.and_then(|e| e.meta.clone()),
            extras: extras.map(|e| Box::new(e.clone())),
        }
    }

    /// A previous value read from elsewhere (a shared tier's stale entry), with the ttl and
    /// metadata its loader chose, for a driver that hands its loader a context itself.
    pub fn from_parts(value: V, age: Duration, ttl: Option<Duration>, meta: Option<&str>) -> Self {
        let extras = Extras {
            ttl,
            meta: meta.map(Into::into),
            ..Extras::default()
        };
        let extras = (extras != Extras::default()).then_some(extras);
        Self::new(value, age, extras.as_ref())
    }

    /// The same previous entry with its value mapped by `f`.
    pub fn map<U>(self, f: impl FnOnce(V) -> U) -> Previous<U> {
        Previous {
            value: f(self.value),
            age: self.age,
            meta: self.meta,
            extras: self.extras,
        }
    }

    /// The ttl its loader chose, if any.
    pub fn ttl(&self) -> Option<Duration> {
        self.extras.as_ref().and_then(|e| e.ttl)
    }

    /// Its tags (kept by a not-modified answer that sets none).
    pub fn tags(&self) -> &[Box<str>] {
        self.extras
            .as_ref()
            .and_then(|e| e.tags.as_deref())
            .unwrap_or(&[])
    }
}

/// What a context-aware loader is told about its load (see
/// [`Cache::get_or_load_with`](crate::Cache::get_or_load_with)).
///
/// **Cancellation.** The load is no longer wanted, and its result will not be stored, once
/// - every caller waiting for it left (each [`Waiter`](crate::Waiter) dropped or timed out,
///   and the leader's caller too: a driver says so with
///   [`LoadGuard::release`](crate::LoadGuard::release)),
/// - its hard timeout passed,
/// - or the key was written, invalidated, cleared or its namespace bumped meanwhile (a
///   `bump` is O(1) and touches no load: [`is_cancelled`](Self::is_cancelled) sees it at
///   once, the [`cancelled`](Self::cancelled) future at its next poll).
///
/// It also reads as cancelled once the load has ended (its outcome is set), which a loader
/// that returned never sees.
///
/// A loader watches it with [`is_cancelled`](Self::is_cancelled) (between steps),
/// [`cancelled`](Self::cancelled) (a future, e.g. in a `select!` against its request), or,
/// blocking, [`wait_cancelled`](Self::wait_cancelled). A loader that gives up because of it
/// returns an error of its own: the waiters left look up again (one of them loads anew), and
/// so does its caller.
pub struct LoadContext<V> {
    flight: StdArc<dyn Watch>,
    clock: StdArc<dyn Clock>,
    reason: LoadReason,
    previous: Option<Previous<V>>,
}

impl<V> core::fmt::Debug for LoadContext<V> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("LoadContext")
            .field("key", &self.key())
            .field("reason", &self.reason)
            .field("previous", &self.previous.is_some())
            .finish_non_exhaustive()
    }
}

impl<V> LoadContext<V> {
    pub(crate) fn new<W: Send + Sync + 'static>(
        flight: Arc<Flight<W>>,
        clock: StdArc<dyn Clock>,
        reason: LoadReason,
        previous: Option<Previous<V>>,
    ) -> Self {
        Self {
            flight: StdArc::new(FlightWatch(flight)),
            clock,
            reason,
            previous,
        }
    }

    /// A context for a load that has no flight in this process (see
    /// [`driver::detached_context`](crate::driver::detached_context)).
    pub(crate) fn detached(
        key: &str,
        clock: StdArc<dyn Clock>,
        reason: LoadReason,
        previous: Option<Previous<V>>,
        hard_deadline: Option<Duration>,
    ) -> Self {
        let watch = Detached {
            key: key.into(),
            signal: Signal::new(),
            hard_deadline,
        };
        Self {
            flight: StdArc::new(watch),
            clock,
            reason,
            previous,
        }
    }

    /// The same context with its previous value mapped by `f` (a driver that keeps values
    /// wrapped in its cache and hands its loader the bare value).
    pub fn map<U>(self, f: impl FnOnce(V) -> U) -> LoadContext<U> {
        LoadContext {
            flight: self.flight,
            clock: self.clock,
            reason: self.reason,
            previous: self.previous.map(|p| p.map(f)),
        }
    }

    /// The key being loaded.
    pub fn key(&self) -> &str {
        self.flight.key()
    }

    /// Why it loads.
    pub fn reason(&self) -> LoadReason {
        self.reason
    }

    /// The entry the load may replace, if any (see [`Previous`]).
    pub fn previous(&self) -> Option<&Previous<V>> {
        self.previous.as_ref()
    }

    /// Takes the previous value out of the context (e.g. to move it into an async block).
    pub fn take_previous(&mut self) -> Option<Previous<V>> {
        self.previous.take()
    }

    /// Whether the load is no longer wanted (see the type's documentation).
    pub fn is_cancelled(&self) -> bool {
        self.flight.is_cancelled(self.clock.now())
    }

    /// Ready once the load is no longer wanted. Owns what it needs: it may outlive the
    /// context (moved into another task, say).
    pub fn cancelled(&self) -> Cancelled<V> {
        Cancelled {
            flight: self.flight.clone(),
            _value: core::marker::PhantomData,
            clock: self.clock.clone(),
            until: None,
            slot: None,
            alarm: None,
        }
    }

    /// Blocks the thread until the load is no longer wanted (`true`) or `timeout` passed on
    /// the cache's clock (`false`): a blocking loader's way to wait between polls of its
    /// own work.
    #[cfg(feature = "std")]
    pub fn wait_cancelled(&self, timeout: Duration) -> bool {
        let mut watch = self.cancelled();
        watch.until = Some(self.clock.now().saturating_add(timeout));
        crate::sync::block_on(Until(watch))
    }
}

/// What a context watches: its flight, or a detached load's own deadline.
trait Watch: Send + Sync {
    fn key(&self) -> &str;
    fn is_cancelled(&self, now: Duration) -> bool;
    fn signal(&self) -> &Signal;
    fn hard_deadline(&self) -> Option<Duration>;
}

struct FlightWatch<W>(Arc<Flight<W>>);

impl<W: Send + Sync> Watch for FlightWatch<W> {
    fn key(&self) -> &str {
        &self.0.key
    }
    fn is_cancelled(&self, now: Duration) -> bool {
        self.0.is_cancelled(now)
    }
    fn signal(&self) -> &Signal {
        &self.0.cancel
    }
    fn hard_deadline(&self) -> Option<Duration> {
        self.0.hard_deadline()
    }
}

/// A detached load's: nothing but its hard deadline ends it.
struct Detached {
    key: Box<str>,
    signal: Signal,
    hard_deadline: Option<Duration>,
}

impl Watch for Detached {
    fn key(&self) -> &str {
        &self.key
    }
    fn is_cancelled(&self, now: Duration) -> bool {
        self.hard_deadline.is_some_and(|d| now >= d)
    }
    fn signal(&self) -> &Signal {
        &self.signal
    }
    fn hard_deadline(&self) -> Option<Duration> {
        self.hard_deadline
    }
}

/// The future of [`LoadContext::cancelled`].
pub struct Cancelled<V> {
    flight: StdArc<dyn Watch>,
    _value: core::marker::PhantomData<fn() -> V>,
    clock: StdArc<dyn Clock>,
    /// A wait that also ends at this time (the blocking wait's timeout).
    until: Option<Duration>,
    slot: Option<usize>,
    alarm: Option<StdArc<Alarm>>,
}

impl<V> core::fmt::Debug for Cancelled<V> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Cancelled")
            .field("key", &self.flight.key())
            .finish_non_exhaustive()
    }
}

impl<V> Cancelled<V> {
    /// `Ready(true)`: cancelled; `Ready(false)`: `until` passed first.
    fn poll_watch(&mut self, cx: &mut Context<'_>) -> Poll<bool> {
        let now = self.clock.now();
        if self.flight.is_cancelled(now) || self.flight.signal().poll(&mut self.slot, cx).is_ready()
        {
            return Poll::Ready(true);
        }
        if self.until.is_some_and(|u| now >= u) {
            return Poll::Ready(false);
        }
        // The hard timeout fires nothing by itself: a clock timer wakes this then.
        let next = [self.until, self.flight.hard_deadline()]
            .into_iter()
            .flatten()
            .min();
        if let Some(at) = next {
            alarm::arm(&mut self.alarm, at, cx.waker(), &*self.clock);
        }
        Poll::Pending
    }
}

impl<V> Unpin for Cancelled<V> {}

impl<V> Future for Cancelled<V> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.poll_watch(cx).map(|_| ())
    }
}

impl<V> Drop for Cancelled<V> {
    fn drop(&mut self) {
        alarm::disarm(&mut self.alarm);
        if let Some(slot) = self.slot.take() {
            self.flight.signal().forget(slot);
        }
    }
}

/// [`Cancelled`] with a deadline, for [`LoadContext::wait_cancelled`].
#[cfg(feature = "std")]
struct Until<V>(Cancelled<V>);

#[cfg(feature = "std")]
impl<V> Future for Until<V> {
    type Output = bool;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        self.0.poll_watch(cx)
    }
}

impl<V> Loaded<V> {
    /// The same lifetimes, metadata and caching with `value` as the answer (a driver that
    /// resolved "not modified" to the previous value itself). The metadata and ttl are
    /// `previous`'s unless this answer set its own.
    pub fn resolved<U>(self, value: Option<U>, previous: Option<&Previous<U>>) -> Loaded<U> {
        Loaded {
            answer: Answer::Value(value),
            extras: self.extras.or(previous.and_then(|p| p.extras.as_deref())),
            store: self.store,
        }
    }
}
