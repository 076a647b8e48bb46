//! Time, injected. Every policy (expiry, XFetch, timeouts, backoff) reads time through a
//! [`Clock`], so tests and the simulator run on a [`ManualClock`] and are deterministic.

use alloc::collections::BinaryHeap;
use core::cmp::Ordering as CmpOrdering;
use core::fmt;
use core::task::Waker;
use core::time::Duration;

use crate::sync::{Arc, AtomicU64, Mutex, Ordering};

/// A monotonic clock with timers.
///
/// `now` is the time elapsed since the clock's own origin; only differences matter. `wake_at`
/// is how waiters sleep without a runtime: the clock wakes `waker` once `now() >= deadline`
/// (spurious early wake-ups are allowed; late ones should be small).
pub trait Clock: Send + Sync + 'static {
    /// Monotonic time since this clock's origin.
    fn now(&self) -> Duration;

    /// Wake `waker` once `now() >= deadline`.
    fn wake_at(&self, deadline: Duration, waker: Waker);

    /// A cheap reading that is never earlier than `now()` and at most a few milliseconds
    /// later: the hit path tests freshness with it, so it errs towards "expired" and never
    /// serves past a deadline. Defaults to `now()`.
    #[inline]
    fn now_fast(&self) -> Duration {
        self.now()
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> Duration {
        (**self).now()
    }
    fn wake_at(&self, deadline: Duration, waker: Waker) {
        (**self).wake_at(deadline, waker)
    }
    fn now_fast(&self) -> Duration {
        (**self).now_fast()
    }
}

/// A timer waiting in a heap, ordered by deadline (earliest first) then by arrival.
struct Timer {
    deadline: Duration,
    seq: u64,
    waker: Waker,
}

impl PartialEq for Timer {
    fn eq(&self, other: &Self) -> bool {
        self.deadline == other.deadline && self.seq == other.seq
    }
}
impl Eq for Timer {}
impl PartialOrd for Timer {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl Ord for Timer {
    // Reversed: BinaryHeap is a max-heap and we want the earliest deadline on top.
    fn cmp(&self, other: &Self) -> CmpOrdering {
        (other.deadline, other.seq).cmp(&(self.deadline, self.seq))
    }
}

/// Pending timers of a clock.
#[derive(Default)]
pub(crate) struct Timers {
    heap: BinaryHeap<Timer>,
    seq: u64,
}

impl Timers {
    pub(crate) fn push(&mut self, deadline: Duration, waker: Waker) -> bool {
        self.seq += 1;
        let earliest = self.heap.peek().is_none_or(|t| deadline < t.deadline);
        self.heap.push(Timer {
            deadline,
            seq: self.seq,
            waker,
        });
        earliest
    }

    /// Removes the timers due at `now`, for the caller to wake outside any lock.
    pub(crate) fn take_due(&mut self, now: Duration) -> alloc::vec::Vec<Waker> {
        let mut due = alloc::vec::Vec::new();
        while self.heap.peek().is_some_and(|t| t.deadline <= now) {
            if let Some(t) = self.heap.pop() {
                due.push(t.waker);
            }
        }
        due
    }

    pub(crate) fn next_deadline(&self) -> Option<Duration> {
        self.heap.peek().map(|t| t.deadline)
    }

    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }
}

/// A virtual clock that moves only when told to: the clock of tests and of the simulator.
///
/// Cloning gives another handle to the same time line.
///
/// ```
/// use herdless::{Clock, ManualClock};
/// use core::time::Duration;
///
/// let clock = ManualClock::new();
/// clock.advance(Duration::from_secs(5));
/// assert_eq!(clock.now(), Duration::from_secs(5));
/// ```
#[derive(Clone, Default)]
pub struct ManualClock {
    inner: Arc<ManualInner>,
}

#[derive(Default)]
struct ManualInner {
    nanos: AtomicU64,
    timers: Mutex<Timers>,
}

impl ManualClock {
    /// A clock at time zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves time forward by `by` and wakes every timer that became due.
    ///
    /// The timers due on the way all fire at the end, at the target time: a waiter whose
    /// deadline fell in between wakes to `now() == target`, not to its own deadline (so a
    /// [`WaitTimeout`](crate::Error::WaitTimeout) reports `waited` up to the target). To wake
    /// each at its own deadline, step from [`next_timer`](Self::next_timer) to the next with
    /// [`set`](Self::set), letting the woken tasks run in between:
    /// [`testing::Runner::advance`](crate::testing::Runner::advance) does exactly that.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        let now = self
            .inner
            .nanos
            .fetch_add(by, Ordering::AcqRel)
            .saturating_add(by);
        self.fire(Duration::from_nanos(now));
    }

    /// Sets the time to `to` (never backwards) and wakes every timer that became due (at
    /// `to`, as [`advance`](Self::advance) does).
    pub fn set(&self, to: Duration) {
        let to = u64::try_from(to.as_nanos()).unwrap_or(u64::MAX);
        let now = self.inner.nanos.fetch_max(to, Ordering::AcqRel).max(to);
        self.fire(Duration::from_nanos(now));
    }

    /// The earliest pending timer, if any: a simulator jumps straight to it.
    pub fn next_timer(&self) -> Option<Duration> {
        self.inner.timers.lock().next_deadline()
    }

    /// Number of timers not yet fired.
    pub fn pending_timers(&self) -> usize {
        self.inner.timers.lock().len()
    }

    fn fire(&self, now: Duration) {
        let due = self.inner.timers.lock().take_due(now);
        for w in due {
            w.wake();
        }
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManualClock")
            .field("now", &self.now())
            .finish()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.inner.nanos.load(Ordering::Acquire))
    }

    fn wake_at(&self, deadline: Duration, waker: Waker) {
        if deadline <= self.now() {
            waker.wake();
            return;
        }
        self.inner.timers.lock().push(deadline, waker);
        // Time may have moved between the check and the push: fire again so no timer is lost.
        self.fire(self.now());
    }
}

#[cfg(feature = "std")]
pub use self::system::SystemClock;

#[cfg(feature = "std")]
mod system {
    use core::task::Waker;
    use core::time::Duration;

    use super::{Clock, Timers};
    use crate::sync::unchecked::{Condvar, Mutex};

    /// The real monotonic clock, with one shared timer thread that wakes waiters at their
    /// deadlines, whatever async runtime (or none) they run on.
    ///
    /// On Linux it reads `CLOCK_MONOTONIC`, and for [`now_fast`](Clock::now_fast) the coarse
    /// variant plus its resolution (one kernel tick): ~4 ns instead of ~20 ns a read.
    #[derive(Clone, Copy, Debug, Default)]
    pub struct SystemClock;

    #[cfg(target_os = "linux")]
    mod os {
        use core::time::Duration;

        use crate::sync::Ordering;
        use crate::sync::unchecked::{AtomicU64, OnceLock};

        fn read(clock: libc::clockid_t) -> Duration {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `ts` is a valid, writable timespec; both clock ids exist on Linux.
            unsafe { libc::clock_gettime(clock, &mut ts) };
            Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
        }

        pub(super) fn now() -> Duration {
            read(libc::CLOCK_MONOTONIC)
        }

        pub(super) fn now_fast() -> Duration {
            static RESOLUTION: OnceLock<Duration> = OnceLock::new();
            let res = *RESOLUTION.get_or_init(|| {
                let mut ts = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                // SAFETY: as above.
                unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
                Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
            });
            read(libc::CLOCK_MONOTONIC_COARSE) + res
        }

        /// [`now_fast`] in nanoseconds, for the engine's hit path: no `Duration` round trip.
        #[inline]
        pub(super) fn now_fast_nanos() -> u64 {
            static RESOLUTION: AtomicU64 = AtomicU64::new(u64::MAX);
            let mut res = RESOLUTION.load(Ordering::Relaxed);
            if res == u64::MAX {
                let mut ts = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                // SAFETY: as above.
                unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
                res = (ts.tv_sec as u64)
                    .saturating_mul(1_000_000_000)
                    .saturating_add(ts.tv_nsec as u64)
                    .min(u64::MAX - 1);
                RESOLUTION.store(res, Ordering::Relaxed);
            }
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: as above.
            unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
            (ts.tv_sec as u64)
                .saturating_mul(1_000_000_000)
                .saturating_add(ts.tv_nsec as u64)
                .saturating_add(res)
        }
    }

    #[cfg(not(target_os = "linux"))]
    mod os {
        use core::time::Duration;
        use std::time::Instant;

        use crate::sync::unchecked::OnceLock;

        pub(super) fn now() -> Duration {
            static ORIGIN: OnceLock<Instant> = OnceLock::new();
            ORIGIN.get_or_init(Instant::now).elapsed()
        }

        pub(super) fn now_fast() -> Duration {
            now()
        }

        pub(super) fn now_fast_nanos() -> u64 {
            u64::try_from(now().as_nanos()).unwrap_or(u64::MAX)
        }
    }

    struct TimerThread {
        timers: Mutex<Timers>,
        changed: Condvar,
    }

    /// The timer thread of this process. Keyed by process id: a child forked from a process
    /// that had one inherits its memory but not the thread (gunicorn, Celery prefork), so
    /// it starts its own rather than waiting on timers nobody fires.
    fn timer_thread() -> &'static TimerThread {
        static THREAD: Mutex<Option<(u32, &'static TimerThread)>> = Mutex::new(None);
        let pid = std::process::id();
        let mut slot = THREAD.lock().unwrap_or_else(|e| e.into_inner());
        match *slot {
            Some((owner, t)) if owner == pid => t,
            _ => {
                let t: &'static TimerThread = Box::leak(Box::new(TimerThread {
                    timers: Mutex::new(Timers::default()),
                    changed: Condvar::new(),
                }));
                std::thread::Builder::new()
                    .name("herdless-timer".into())
                    .spawn(move || t.run())
                    .expect("herdless: cannot spawn the timer thread");
                *slot = Some((pid, t));
                t
            }
        }
    }

    impl TimerThread {
        fn run(&self) {
            let mut timers = self.timers.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                let now = SystemClock.now();
                let due = timers.take_due(now);
                if !due.is_empty() {
                    drop(timers);
                    due.into_iter().for_each(Waker::wake);
                    timers = self.timers.lock().unwrap_or_else(|e| e.into_inner());
                    continue;
                }
                timers = match timers.next_deadline() {
                    Some(d) => {
                        let wait = d.saturating_sub(now);
                        self.changed
                            .wait_timeout(timers, wait)
                            .unwrap_or_else(|e| e.into_inner())
                            .0
                    }
                    None => self.changed.wait(timers).unwrap_or_else(|e| e.into_inner()),
                };
            }
        }
    }

    impl SystemClock {
        /// [`Clock::now_fast`] in nanoseconds, called directly by the engine's hit path when
        /// the cache runs on the system clock (no virtual call, no `Duration` round trip).
        #[inline]
        pub(crate) fn now_fast_nanos() -> u64 {
            os::now_fast_nanos()
        }
    }

    impl Clock for SystemClock {
        #[inline]
        fn now(&self) -> Duration {
            os::now()
        }

        #[inline]
        fn now_fast(&self) -> Duration {
            os::now_fast()
        }

        fn wake_at(&self, deadline: Duration, waker: Waker) {
            if deadline <= self.now() {
                waker.wake();
                return;
            }
            let t = timer_thread();
            let earliest = t
                .timers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(deadline, waker);
            if earliest {
                t.changed.notify_one();
            }
        }
    }
}
