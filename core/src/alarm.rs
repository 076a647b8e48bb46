//! A waiter's timer that lets go of the waiter as soon as it is done.
//!
//! [`Clock::wake_at`] cannot cancel a timer: the clock keeps what it was given until the
//! deadline (`wait_timeout`, 5 s by default). Given the waiter's own waker, it would keep
//! that waker, and with it whatever owns it (a tokio task's memory, a binding's pending
//! call), for that long after the waiter was served: under a stampede, every coalesced
//! caller of the last 5 s. The clock gets an [`Alarm`] instead, a shared cell holding the
//! waker, which the waiter empties when it ends.

use alloc::task::Wake;
use core::task::Waker;
use core::time::Duration;

use crate::clock::Clock;
use crate::sync::Mutex;
use crate::sync::unchecked::Arc;

/// The cell a clock timer wakes through; empty once its waiter ended or it fired.
pub(crate) struct Alarm {
    deadline: Duration,
    waker: Mutex<Option<Waker>>,
}

/// Keeps `slot` armed at `deadline` for `waker`: an alarm already set for that deadline
/// is pointed at `waker` (the wait may have moved to another task); otherwise the old one
/// is disarmed and a new one given to `clock`. One clock timer per deadline, not per poll.
pub(crate) fn arm(
    slot: &mut Option<Arc<Alarm>>,
    deadline: Duration,
    waker: &Waker,
    clock: &dyn Clock,
) {
    if let Some(alarm) = slot {
        if alarm.deadline == deadline && alarm.rearm(waker) {
            return;
        }
    }
    disarm(slot);
    let alarm = Alarm::new(deadline, waker.clone());
    alarm.start(clock);
    *slot = Some(alarm);
}

/// The wait is over: the timer, when it fires, wakes nobody and holds no waker.
pub(crate) fn disarm(slot: &mut Option<Arc<Alarm>>) {
    if let Some(alarm) = slot.take() {
        let waker = alarm.waker.lock().take();
        drop(waker);
    }
}

impl Alarm {
    /// An alarm that will wake `waker` at `deadline` once [started](Self::start).
    pub(crate) fn new(deadline: Duration, waker: Waker) -> Arc<Self> {
        Arc::new(Self {
            deadline,
            waker: Mutex::new(Some(waker)),
        })
    }

    /// Gives the alarm to `clock`. Apart from [`new`](Self::new) so that an alarm can be
    /// made under a lock and started outside it (a clock may fire it at once, inline).
    pub(crate) fn start(self: &Arc<Self>, clock: &dyn Clock) {
        clock.wake_at(self.deadline, Waker::from(self.clone()));
    }

    /// When it fires.
    pub(crate) fn deadline(&self) -> Duration {
        self.deadline
    }

    /// Points a live alarm at `waker` (`Waker::clone_from` keeps it when it would wake the
    /// same task); `false` if it already fired.
    fn rearm(&self, waker: &Waker) -> bool {
        match self.waker.lock().as_mut() {
            Some(w) => {
                w.clone_from(waker);
                true
            }
            None => false,
        }
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
