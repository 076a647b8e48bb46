//! The single-flight record of one key: at most one per key in the shard's table,
//! created by the caller that leads the load, finished exactly once (value, error, timeout or
//! abandonment), waking every waiter. Waiters register a `Waker` under the record's mutex and
//! the finisher takes the wakers under that same mutex, so no wake-up can be lost.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::task::{Context, Poll, Waker};
use core::time::Duration;

use crate::cancel::Signal;
use crate::epoch::Namespace;
use crate::error::Error;
use crate::sync::{Arc, AtomicUsize, Mutex, Ordering};

/// How a flight ended.
pub(crate) enum Outcome<V> {
    /// The loader answered: a value, or `None` for "absent".
    Loaded(Option<V>),
    /// The loader failed, panicked or timed out.
    Failed(Error),
    /// The leader went away without an answer: waiters look up again and one of them leads.
    Abandoned,
}

impl<V: Clone> Clone for Outcome<V> {
    fn clone(&self) -> Self {
        match self {
            Outcome::Loaded(v) => Outcome::Loaded(v.clone()),
            Outcome::Failed(e) => Outcome::Failed(e.clone()),
            Outcome::Abandoned => Outcome::Abandoned,
        }
    }
}

struct State<V> {
    outcome: Option<Outcome<V>>,
    /// Registered waiters; a slot is `None` once its waiter left.
    wakers: Vec<Option<Waker>>,
}

pub(crate) struct Flight<V> {
    pub(crate) id: u64,
    pub(crate) key: Box<str>,
    pub(crate) hash: u64,
    pub(crate) ns: Arc<Namespace>,
    /// The namespace epoch when the load began: a bump since then means "do not store".
    pub(crate) epoch: u64,
    /// The tag clock when the load began: a tag of its answer invalidated since then means
    /// "do not store".
    pub(crate) born: u64,
    /// Clock reading when the flight was created.
    pub(crate) created: Duration,
    /// After this, waiters holding a stale value take it and leave (soft timeout).
    pub(crate) soft_deadline: Option<Duration>,
    /// After this, the load is abandoned with a timeout error (hard timeout).
    pub(crate) hard_deadline: Option<Duration>,
    /// Fired when the load is no longer wanted: superseded by `set`/`invalidate`/`clear`,
    /// left by every caller, or ended (its outcome set). Its result is then not stored.
    pub(crate) cancel: Signal,
    /// Callers that want the result: the leader's (until it
    /// [releases](crate::LoadGuard::release) it) and each waiter still waiting.
    interest: AtomicUsize,
    /// The process whose caller leads it: a child of `fork` inherits the table, not the
    /// thread or task that would finish the load.
    #[cfg(feature = "std")]
    pid: u32,
    state: Mutex<State<V>>,
}

impl<V: Clone> Flight<V> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        id: u64,
        key: &str,
        hash: u64,
        ns: Arc<Namespace>,
        (created, born): (Duration, u64),
        soft: Option<Duration>,
        hard: Option<Duration>,
    ) -> Self {
        let epoch = ns.epoch();
        Self {
            id,
            key: key.into(),
            hash,
            ns,
            epoch,
            born,
            created,
            soft_deadline: soft.map(|s| created.saturating_add(s)),
            hard_deadline: hard.map(|h| created.saturating_add(h)),
            cancel: Signal::new(),
            interest: AtomicUsize::new(1),
            #[cfg(feature = "std")]
            pid: std::process::id(),
            state: Mutex::new(State {
                outcome: None,
                wakers: Vec::new(),
            }),
        }
    }

    /// Whether its leader is in another process (this is a child of `fork`): nobody here
    /// will finish it.
    pub(crate) fn orphaned(&self) -> bool {
        #[cfg(feature = "std")]
        return self.pid != std::process::id();
        #[cfg(not(feature = "std"))]
        return false;
    }

    /// Records the outcome if the flight has none yet and returns the wakers for the caller
    /// to [`wake_all`] (outside its locks); `None` when another outcome won.
    pub(crate) fn set_outcome(&self, outcome: Outcome<V>) -> Option<Vec<Option<Waker>>> {
        let mut st = self.state.lock();
        if st.outcome.is_some() {
            return None;
        }
        st.outcome = Some(outcome);
        let wakers = core::mem::take(&mut st.wakers);
        drop(st);
        // Ended: whatever still runs for it (a loader past its hard timeout) is unwanted.
        self.cancel.fire();
        Some(wakers)
    }

    /// The outcome if finished; otherwise registers `cx`'s waker in `slot`.
    pub(crate) fn poll_outcome(
        &self,
        slot: &mut Option<usize>,
        cx: &mut Context<'_>,
    ) -> Poll<Outcome<V>> {
        let mut st = self.state.lock();
        if let Some(o) = &st.outcome {
            return Poll::Ready(o.clone());
        }
        match *slot {
            Some(i) => match &mut st.wakers[i] {
                Some(w) if w.will_wake(cx.waker()) => {}
                w => *w = Some(cx.waker().clone()),
            },
            None => {
                st.wakers.push(Some(cx.waker().clone()));
                *slot = Some(st.wakers.len() - 1);
            }
        }
        Poll::Pending
    }

    /// Forgets a waiter that left before the end (cancelled or timed out).
    pub(crate) fn deregister(&self, slot: usize) {
        let mut st = self.state.lock();
        if let Some(w) = st.wakers.get_mut(slot) {
            *w = None;
        }
    }
}

impl<V> Flight<V> {
    /// Superseded or left by every caller: its result must not be stored, and a caller
    /// arriving now starts a load of its own.
    pub(crate) fn is_withdrawn(&self) -> bool {
        self.cancel.fired()
    }

    /// A write made the load's result outdated.
    pub(crate) fn supersede(&self) {
        self.cancel.fire();
    }

    /// Whether the load is no longer wanted at `now`: withdrawn, past its hard timeout, or
    /// of a namespace bumped since it began.
    pub(crate) fn is_cancelled(&self, now: Duration) -> bool {
        self.is_withdrawn()
            || self.hard_deadline.is_some_and(|d| now >= d)
            || self.epoch != self.ns.epoch()
    }

    /// One more caller wants the result.
    pub(crate) fn join(&self) {
        self.interest.fetch_add(1, Ordering::AcqRel);
    }

    /// One caller no longer wants the result; the last one cancels the load.
    pub(crate) fn leave(&self) {
        if self.interest.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.cancel.fire();
        }
    }
}

/// Wakes the waiters a [`Flight::set_outcome`] returned.
pub(crate) fn wake_all(wakers: Vec<Option<Waker>>) {
    for w in wakers.into_iter().flatten() {
        w.wake();
    }
}
