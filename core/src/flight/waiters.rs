//! The waiters of one flight and their one clock timer.
//!
//! Each waiter must wake at its own time if the load has not ended by then (its
//! `wait_timeout`, or the flight's soft or hard timeout). A clock timer per waiter put every
//! coalesced caller into the process's shared timer heap, where it stayed until its deadline
//! (5 s by default) whether or not the load answered in 1 ms. Here the flight keeps its
//! waiters' times in a heap of its own, dropped with it, and holds one clock timer, armed at
//! the earliest of them: firing, it wakes the waiters due by then and re-arms at the next.
//! A load that ends first only disarms that one timer.

use alloc::collections::BinaryHeap;
use alloc::vec::Vec;
use core::cmp::Reverse;
use core::task::Waker;
use core::time::Duration;

use crate::alarm::{self, Alarm};
use crate::clock::Clock;
use crate::sync::unchecked::Arc as StdArc;

/// One registered waiter.
struct Slot {
    /// `None` once it left, or was woken by the timer (it registers again if it goes on
    /// waiting).
    waker: Option<Waker>,
    /// When it must be woken if the load has not ended.
    wake_at: Duration,
}

/// The registered waiters of a flight, kept under its lock.
pub(crate) struct Waiters {
    slots: Vec<Slot>,
    /// `(wake_at, slot)`, earliest first. An entry is live while its slot holds a waker for
    /// that time; others (the waiter left, was woken, or registered for another time) are
    /// skipped when they reach the top.
    due: BinaryHeap<Reverse<(Duration, usize)>>,
    /// The flight's clock timer, armed at or before the earliest live entry.
    timer: Option<StdArc<Alarm>>,
}

/// The wakers of a flight's waiters, taken when it ended, for [`wake_all`](super::wake_all).
pub(crate) struct Wakers(Vec<Slot>);

impl Wakers {
    /// No waiter to wake.
    pub(crate) const fn none() -> Self {
        Self(Vec::new())
    }

    /// Wakes every waiter that was still registered.
    #[inline]
    pub(crate) fn wake_all(self) {
        // A load nobody waited for (most): no call, no iterator to make and drop.
        if !self.0.is_empty() {
            self.wake_each();
        }
    }

    /// The waking itself, out of line: the inline check above is all most loads run.
    #[inline(never)]
    fn wake_each(self) {
        for w in self.0.into_iter().filter_map(|s| s.waker) {
            w.wake();
        }
    }
}

/// A change of the flight's timer, made once its lock is released (a clock may fire a timer
/// inline, and firing takes that lock).
#[must_use]
pub(crate) struct Rearm {
    start: Option<StdArc<Alarm>>,
    stop: Option<StdArc<Alarm>>,
}

impl Rearm {
    const NONE: Self = Self {
        start: None,
        stop: None,
    };

    /// The deadline of the timer to start, if any.
    pub(crate) fn starts_at(&self) -> Option<Duration> {
        self.start.as_ref().map(|a| a.deadline())
    }

    /// Disarms the replaced timer but does not start the new one: the caller fires it
    /// itself, and that firing takes it out of the flight again.
    pub(crate) fn without_start(mut self) {
        alarm::disarm(&mut self.stop);
    }

    /// Disarms the replaced timer and gives the new one to `clock`.
    pub(crate) fn apply(mut self, clock: &dyn Clock) {
        alarm::disarm(&mut self.stop);
        if let Some(a) = self.start {
            a.start(clock);
        }
    }
}

impl Waiters {
    pub(crate) const fn new() -> Self {
        Self {
            slots: Vec::new(),
            due: BinaryHeap::new(),
            timer: None,
        }
    }

    /// Registers `waker` in `slot` (a new slot when `None`), to be woken at the end or at
    /// `wake_at`. `timer` makes the waker of a flight timer for a deadline.
    pub(crate) fn register(
        &mut self,
        slot: &mut Option<usize>,
        waker: &Waker,
        wake_at: Duration,
        timer: impl FnOnce(Duration) -> Waker,
    ) -> Rearm {
        let i = *slot.get_or_insert_with(|| {
            self.slots.push(Slot {
                waker: None,
                wake_at,
            });
            self.slots.len() - 1
        });
        let s = &mut self.slots[i];
        let fresh = s.waker.is_none() || s.wake_at != wake_at;
        match &mut s.waker {
            Some(w) if w.will_wake(waker) => {}
            w => *w = Some(waker.clone()),
        }
        s.wake_at = wake_at;
        if !fresh {
            return Rearm::NONE;
        }
        self.due.push(Reverse((wake_at, i)));
        self.rearm(timer)
    }

    /// Forgets a waiter that left before the end. Its entry in `due` dies with its waker.
    pub(crate) fn deregister(&mut self, slot: usize) {
        if let Some(s) = self.slots.get_mut(slot) {
            s.waker = None;
        }
    }

    /// A timer armed for `fired` went off and the clock reads `now`: takes the wakers of
    /// the waiters due by then (the later of the two; a clock may fire early, and then the
    /// waiters woken register again) and re-arms at the next one.
    pub(crate) fn fire(
        &mut self,
        fired: Duration,
        now: Duration,
        timer: impl FnOnce(Duration) -> Waker,
    ) -> (Vec<Waker>, Rearm) {
        let by = fired.max(now);
        let mut woken = Vec::new();
        while let Some(&Reverse((at, i))) = self.due.peek() {
            if at > by {
                break;
            }
            self.due.pop();
            let s = &mut self.slots[i];
            if s.wake_at == at {
                woken.extend(s.waker.take());
            }
        }
        // The armed timer is due too: it went off (this one) or is about to, for nothing.
        let gone = self.timer.take_if(|t| t.deadline() <= by);
        let mut rearm = self.rearm(timer);
        // With the timer taken, `rearm` replaced nothing.
        rearm.stop = rearm.stop.or(gone);
        (woken, rearm)
    }

    /// The end: the wakers of the waiters still registered, for the caller to wake outside
    /// the lock, and the timer to disarm.
    pub(crate) fn end(&mut self) -> (Wakers, Option<StdArc<Alarm>>) {
        self.due = BinaryHeap::new();
        (Wakers(core::mem::take(&mut self.slots)), self.timer.take())
    }

    /// Keeps the timer at or before the earliest live entry: a new timer when there is none
    /// or it is later; the one it replaces is disarmed.
    fn rearm(&mut self, timer: impl FnOnce(Duration) -> Waker) -> Rearm {
        while let Some(&Reverse((at, i))) = self.due.peek() {
            let s = &self.slots[i];
            if s.waker.is_some() && s.wake_at == at {
                break;
            }
            self.due.pop();
        }
        let Some(&Reverse((next, _))) = self.due.peek() else {
            // Nobody left to wake: the timer would only keep the flight alive.
            return Rearm {
                start: None,
                stop: self.timer.take(),
            };
        };
        if self.timer.as_ref().is_some_and(|t| t.deadline() <= next) {
            return Rearm::NONE;
        }
        let alarm = Alarm::new(next, timer(next));
        Rearm {
            stop: self.timer.replace(alarm.clone()),
            start: Some(alarm),
        }
    }
}
