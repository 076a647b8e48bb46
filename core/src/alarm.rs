//! A waiter's timer that lets go of the waiter as soon as it is done.
//!
//! [`Clock::wake_at`](crate::Clock::wake_at) cannot cancel a timer: the clock keeps what it
//! was given until the deadline (`wait_timeout`, 5 s by default). Given the waiter's own
//! waker, it would keep that waker, and with it whatever owns it (a tokio task's memory, a
//! binding's pending call), for that long after the waiter was served: under a stampede,
//! every coalesced caller of the last 5 s. The clock gets an [`Alarm`] instead, a shared cell
//! holding the waker, which the waiter empties when it ends.

use alloc::sync::Arc;
use alloc::task::Wake;
use core::task::Waker;

use crate::sync::Mutex;

/// The cell a clock timer wakes through; empty once its waiter ended or it fired.
pub(crate) struct Alarm {
    waker: Mutex<Option<Waker>>,
}

impl Alarm {
    /// A new alarm holding `waker`, and the waker to give the clock.
    pub(crate) fn new(waker: &Waker) -> (Arc<Self>, Waker) {
        let alarm = Arc::new(Self {
            waker: Mutex::new(Some(waker.clone())),
        });
        let for_clock = Waker::from(alarm.clone());
        (alarm, for_clock)
    }

    /// Whether it is still armed and would wake `waker`'s task.
    pub(crate) fn holds(&self, waker: &Waker) -> bool {
        self.waker
            .lock()
            .as_ref()
            .is_some_and(|w| w.will_wake(waker))
    }

    /// Points the alarm at `waker` (the waiter moved to another task); `false` if it already
    /// fired or was disarmed.
    pub(crate) fn rearm(&self, waker: &Waker) -> bool {
        let mut slot = self.waker.lock();
        match slot.as_mut() {
            Some(w) => {
                w.clone_from(waker);
                true
            }
            None => false,
        }
    }

    /// Lets go of the waker: the timer, when it fires, wakes nobody.
    pub(crate) fn disarm(&self) {
        let waker = self.waker.lock().take();
        drop(waker);
    }
}

impl Wake for Alarm {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Taken out of the lock before waking: a waker may poll at once.
        let waker = self.waker.lock().take();
        if let Some(w) = waker {
            w.wake();
        }
    }
}
