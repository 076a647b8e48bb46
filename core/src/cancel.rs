//! A load's cancellation signal: set once, never cleared, and every task that registered a
//! waker before or after is woken. Set when nobody wants the load's result any more (see
//! [`LoadContext`](crate::LoadContext) for when); the flight's mutex is not reused so that
//! firing never contends with waiters registering for the load's outcome.

use alloc::vec::Vec;
use core::task::{Context, Poll, Waker};

use crate::sync::{AtomicBool, Mutex, Ordering};

/// Set-once flag with wakers. A poller registers under the mutex and re-checks the flag
/// there; the firer sets the flag before it takes the wakers under the same mutex, so no
/// wake-up is lost.
pub(crate) struct Signal {
    fired: AtomicBool,
    /// Registered pollers; a slot is `None` once its poller left.
    wakers: Mutex<Vec<Option<Waker>>>,
}

impl Signal {
    pub(crate) fn new() -> Self {
        Self {
            fired: AtomicBool::new(false),
            wakers: Mutex::new(Vec::new()),
        }
    }

    /// Whether it fired.
    #[inline]
    pub(crate) fn fired(&self) -> bool {
        self.fired.load(Ordering::Acquire)
    }

    /// Fires (once; later calls do nothing) and wakes every registered poller.
    pub(crate) fn fire(&self) {
        if self.fired.swap(true, Ordering::AcqRel) {
            return;
        }
        let wakers = core::mem::take(&mut *self.wakers.lock());
        // Usually nobody polls it (a blocking load's): no iterator to make and drop.
        if wakers.is_empty() {
            return;
        }
        for w in wakers.into_iter().flatten() {
            w.wake();
        }
    }

    /// Ready once fired; otherwise keeps `cx`'s waker in `slot`.
    pub(crate) fn poll(&self, slot: &mut Option<usize>, cx: &mut Context<'_>) -> Poll<()> {
        if self.fired() {
            return Poll::Ready(());
        }
        let mut wakers = self.wakers.lock();
        // Re-checked under the lock: a `fire` that set the flag after the check above takes
        // the wakers after this registration.
        if self.fired() {
            return Poll::Ready(());
        }
        match *slot {
            Some(i) if i < wakers.len() => match &mut wakers[i] {
                Some(w) if w.will_wake(cx.waker()) => {}
                w => *w = Some(cx.waker().clone()),
            },
            _ => {
                wakers.push(Some(cx.waker().clone()));
                *slot = Some(wakers.len() - 1);
            }
        }
        Poll::Pending
    }

    /// Forgets a poller that stopped waiting.
    pub(crate) fn forget(&self, slot: usize) {
        if let Some(w) = self.wakers.lock().get_mut(slot) {
            *w = None;
        }
    }
}
