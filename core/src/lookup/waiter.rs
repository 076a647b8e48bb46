//! A caller waiting for another caller's load, and what its wait ends with.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use super::fallback::Fallback;
use crate::error::Error;
use crate::flight::{Flight, Outcome};
use crate::sync::Arc;
use crate::table::Table;

/// What a waiter ends with, besides an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Waited<V> {
    /// The leader's result (`None`: absent).
    Loaded(Option<V>),
    /// The load failed or took too long; this is the fail-safe stale value.
    Stale(V),
    /// The leader went away without an answer: look up again with
    /// [`Cache::lookup_again`](crate::Cache::lookup_again) (one caller will lead), which
    /// keeps the caller's deadline.
    Retry(Retry),
}

/// A caller's place in line after a hand-over: when it first arrived. Looking up again with
/// it ([`Cache::lookup_again`](crate::Cache::lookup_again)) keeps `wait_timeout` counted from
/// that first arrival, so leaders that go away one after another cannot stretch a caller's
/// wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    pub(crate) arrived: Duration,
}

/// A caller waiting for another caller's load of the same key.
///
/// A `Future` (runtime-agnostic: timers come from the cache's clock), or
/// [`wait`](Self::wait) to block the thread. It ends at the load's outcome, or at
/// `wait_timeout` after the caller first arrived with the fail-safe value or
/// [`Error::WaitTimeout`]. Dropping it only removes this waiter; the load goes on for the
/// others.
pub struct Waiter<V: Clone + Send + Sync + 'static> {
    table: Arc<Table<V>>,
    flight: Arc<Flight<V>>,
    fallback: Fallback<V>,
    arrived: Duration,
    deadline: Duration,
    /// Its place among the flight's registered waiters, once it registered.
    slot: Option<usize>,
    done: bool,
}

impl<V: Clone + Send + Sync + 'static> Waiter<V> {
    /// A waiter for `flight`, for a caller that first arrived at `arrived`.
    pub(crate) fn new(
        table: Arc<Table<V>>,
        flight: Arc<Flight<V>>,
        fallback: Option<(V, Duration)>,
        arrived: Duration,
    ) -> Self {
        let deadline = arrived.saturating_add(table.cfg.wait_timeout);
        flight.join();
        Self {
            table,
            flight,
            fallback: Fallback::new(fallback),
            arrived,
            deadline,
            slot: None,
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
        crate::sync::block_on(self)
    }

    /// Stops waiting before the end (timed out, or fail-safe at the soft timeout, or
    /// dropped): the last caller to leave cancels the load.
    fn leave(&mut self) {
        self.done = true;
        self.flight.leave();
        if let Some(slot) = self.slot.take() {
            self.flight.deregister(slot);
        }
    }

    /// This waiter's answer to the load's `outcome`; `now`: when its wait ended.
    fn answer(&mut self, outcome: Outcome<V>, now: Duration) -> Result<Waited<V>, Error> {
        self.done = true;
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
            Outcome::Failed(e) => match self.fallback.serve(&self.flight, now) {
                Some(v) => Ok(Waited::Stale(v)),
                None => Err(e),
            },
        }
    }
}

// Nothing in a waiter is pinned structurally; `V` is only moved out by value.
impl<V: Clone + Send + Sync + 'static> Unpin for Waiter<V> {}

impl<V: Clone + Send + Sync + 'static> Future for Waiter<V> {
    type Output = Result<Waited<V>, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        // A load that ended with an answer needs no clock reading (one per waiter of a
        // herd): the wait is counted to the load's end.
        // A failed one is answered below, against the clock (its fail-safe's retention).
        let failed = match this.flight.ended() {
            Some((o @ (Outcome::Loaded(_) | Outcome::Abandoned), at)) => {
                return Poll::Ready(this.answer(o, at));
            }
            ended => ended.map(|(o, _)| o),
        };
        let now = this.table.now();
        // Past its retention the fallback is gone: a late wait ends in the error instead.
        this.fallback.expire(now);
        // A hung leader cannot hold its waiters past the hard timeout: a waiter ends it.
        if this.flight.hard_deadline().is_some_and(|d| now >= d) {
            this.table.time_out(&this.flight);
        }
        // Without the flight's lock: a herd woken together reads the answer side by side.
        if let Some(outcome) = failed.or_else(|| this.flight.outcome()) {
            return Poll::Ready(this.answer(outcome, now));
        }
        let flight = this.flight.clone();
        if this.fallback.is_some() && flight.soft_deadline.is_some_and(|d| now >= d) {
            this.leave();
            let stale = this.fallback.take_served(&flight).expect("checked");
            return Poll::Ready(Ok(Waited::Stale(stale)));
        }
        if now >= this.deadline {
            this.leave();
            flight.ns.counters().wait_timeouts.inc();
            return Poll::Ready(match this.fallback.take_served(&flight) {
                Some(v) => Ok(Waited::Stale(v)),
                None => Err(Error::WaitTimeout {
                    waited: now - this.arrived,
                }),
            });
        }
        let mut wake = this.deadline;
        if let Some(h) = flight.hard_deadline() {
            wake = wake.min(h);
        }
        if let (Some(s), true) = (flight.soft_deadline, this.fallback.is_some()) {
            wake = wake.min(s);
        }
        match Flight::poll_outcome(&flight, &mut this.slot, cx.waker(), wake, &this.table.clock) {
            Poll::Ready(outcome) => Poll::Ready(this.answer(outcome, now)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<V: Clone + Send + Sync + 'static> Drop for Waiter<V> {
    fn drop(&mut self) {
        if !self.done {
            self.leave();
        }
    }
}
