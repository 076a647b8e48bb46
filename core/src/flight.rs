//! The single-flight record of one key: at most one per key in the shard's table,
//! created by the caller that leads the load, finished exactly once (value, error, timeout or
//! abandonment), waking every waiter.
//!
//! The outcome is published once ([`Published`]): written under the record's lock, then read
//! without it, so a herd of waiters woken together does not queue on that lock to read the
//! same answer. Waiters register under the lock and the finisher publishes and takes their
//! wakers under it, so no wake-up can be lost. The waiters' own deadlines share one clock
//! timer per flight ([`waiters`]).

mod waiters;

use alloc::task::Wake;
use core::task::{Poll, Waker};
use core::time::Duration;

use self::waiters::Waiters;
pub(crate) use self::waiters::Wakers;
use crate::alarm;
use crate::cancel::Signal;
use crate::clock::Clock;
use crate::epoch::Namespace;
use crate::error::Error;
use crate::store::Key;
use crate::sync::unchecked::Arc as StdArc;
use crate::sync::{Arc, AtomicBool, AtomicU64, AtomicUsize, Mutex, Ordering, UnsafeCell};

/// [`Flight::hard_deadline`] without a hard timeout.
const UNSET: u64 = u64::MAX;

/// `d` in nanoseconds, saturated below [`UNSET`].
fn nanos_of(d: Duration) -> u64 {
    crate::expiry::nanos(d).min(UNSET - 1)
}

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

pub(crate) struct Flight<V> {
    pub(crate) id: u64,
    /// Shared with the node that stores the load's result, not copied for it.
    pub(crate) key: Key,
    pub(crate) hash: u64,
    pub(crate) ns: Arc<Namespace>,
    /// The namespace epoch when the load began: a bump since then means "do not store".
    pub(crate) epoch: u64,
    /// The tag clock when the load began: a tag of its answer invalidated since then means
    /// "do not store".
    pub(crate) born: u64,
    /// Clock reading when the flight was created.
    pub(crate) created: Duration,
    /// The shard held no entry of the key when the flight began (a miss). Nothing else can
    /// store one while this stays the key's flight (a `set` supersedes it first, and a key
    /// has one flight in the table), so its own store, made only then, skips the search for
    /// an old entry.
    pub(crate) vacant: bool,
    /// After this, waiters holding a stale value take it and leave (soft timeout).
    pub(crate) soft_deadline: Option<Duration>,
    /// When the hard timeout falls, in nanoseconds on the cache's clock ([`UNSET`]: no hard
    /// timeout): counted from the load's start ([`begin`](Self::begin)), the flight's
    /// creation until it begins.
    hard_at: AtomicU64,
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
    /// How it ended, once it has, and the clock's reading when it did (its finisher's).
    outcome: Published<(Outcome<V>, Duration)>,
    waiters: Mutex<Waiters>,
}

impl<V> Flight<V> {
    /// The load began at `now`: its hard deadline runs from here. A load begins when its
    /// flight is made unless it waited first (for the origin budget, or, through a shared
    /// tier, for another process's fleet lock before taking the load over): its loader
    /// still gets the whole timeout. Never moves the deadline earlier.
    /// `hard`: the cache's hard timeout (the one the flight was made with).
    pub(crate) fn begin(&self, now: Duration, hard: Option<Duration>) {
        if let Some(h) = hard {
            self.hard_at
                .fetch_max(nanos_of(now.saturating_add(h)), Ordering::AcqRel);
        }
    }

    /// When the hard timeout falls (`None` without one): [`begin`](Self::begin)'s start
    /// plus the timeout, the flight's creation until then.
    pub(crate) fn hard_deadline(&self) -> Option<Duration> {
        match self.hard_at.load(Ordering::Acquire) {
            UNSET => None,
            at => Some(Duration::from_nanos(at)),
        }
    }
}

impl<V: Clone> Flight<V> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        id: u64,
        key: &str,
        hash: u64,
        (ns, epoch): (Arc<Namespace>, u64),
        (created, born): (Duration, u64),
        soft: Option<Duration>,
        hard: Option<Duration>,
    ) -> Self {
        Self {
            id,
            key: Key::new(key),
            hash,
            ns,
            epoch,
            born,
            created,
            vacant: false,
            soft_deadline: soft.map(|s| created.saturating_add(s)),
            hard_at: AtomicU64::new(hard.map_or(UNSET, |h| nanos_of(created.saturating_add(h)))),
            cancel: Signal::new(),
            interest: AtomicUsize::new(1),
            #[cfg(feature = "std")]
            pid: process_id(),
            outcome: Published::new(),
            waiters: Mutex::new(Waiters::new()),
        }
    }

    /// Whether its leader is in another process (this is a child of `fork`): nobody here
    /// will finish it.
    pub(crate) fn orphaned(&self) -> bool {
        #[cfg(feature = "std")]
        return self.pid != process_id();
        #[cfg(not(feature = "std"))]
        return false;
    }

    /// Records the outcome, reached at `at` on the cache's clock, if the flight has none
    /// yet and returns the wakers for the caller to [`wake_all`] (outside its locks); `None`
    /// when another outcome won.
    pub(crate) fn set_outcome(&self, outcome: Outcome<V>, at: Duration) -> Option<Wakers> {
        let mut waiters = self.waiters.lock();
        if self.outcome.is_published() {
            return None;
        }
        // SAFETY: under `waiters`' lock, which every call of `publish` holds, and only once:
        // published, the outcome is never written again.
        unsafe { self.outcome.publish((outcome, at)) };
        let (wakers, mut timer) = waiters.end();
        drop(waiters);
        alarm::disarm(&mut timer);
        // Ended: whatever still runs for it (a loader past its hard timeout) is unwanted.
        self.cancel.fire();
        Some(wakers)
    }

    /// [`set_outcome`](Self::set_outcome) for a flight its finisher has just taken out of
    /// the shard's table (under the shard's lock) and holds the only reference to: nobody
    /// else can read its outcome, wait on it or find it again (every other reference is
    /// cloned from the table's or from another one), so nothing is published, woken or
    /// fired, and this finisher wins. A miss nobody waited for skips the flight's lock.
    ///
    /// A flight so ended is kept in `spare` (when empty) for the shard's next flight to be
    /// written into ([`renew`](Self::renew)): it holds no outcome, waiter or timer.
    pub(crate) fn end_alone(
        this: &Arc<Self>,
        outcome: Outcome<V>,
        at: Duration,
        spare: &mut Option<Arc<Self>>,
    ) -> Option<Wakers> {
        if Arc::strong_count(this) != 1 || this.outcome.is_published() {
            return this.set_outcome(outcome, at);
        }
        drop(outcome);
        if spare.is_none() {
            *spare = Some(this.clone());
        }
        Some(Wakers::none())
    }

    /// `flight` in an allocation of its own: `spare`'s, when nothing else holds that one any
    /// more (its finisher's guard dropped its share), which saves a miss the allocation and
    /// the free of its flight. A spare still held stays for a later flight.
    pub(crate) fn renew(spare: &mut Option<Arc<Self>>, flight: Self) -> Arc<Self> {
        if let Some(mut old) = spare.take() {
            // The only reference: nobody can read, wait on or find the old flight, so it
            // is replaced as a new allocation would be (its old fields dropped here).
            if let Some(f) = Arc::get_mut(&mut old) {
                *f = flight;
                return old;
            }
            *spare = Some(old);
        }
        Arc::new(flight)
    }

    /// The outcome, once published: read without the lock.
    pub(crate) fn outcome(&self) -> Option<Outcome<V>> {
        self.ended().map(|(o, _)| o)
    }

    /// The outcome and when it was reached, once published: read without the lock. A
    /// waiter that finds the load ended takes its time from here, not from the clock.
    pub(crate) fn ended(&self) -> Option<(Outcome<V>, Duration)> {
        self.outcome.read(|(o, at)| (o.clone(), *at))
    }

    /// Forgets a waiter that left before the end (cancelled or timed out).
    pub(crate) fn deregister(&self, slot: usize) {
        self.waiters.lock().deregister(slot);
    }
}

impl<V: Clone + Send + Sync + 'static> Flight<V> {
    /// The outcome if finished; otherwise registers `waker` in `slot`, to be woken at the
    /// end or at `wake_at` (by the flight's timer on `clock`).
    pub(crate) fn poll_outcome(
        this: &Arc<Self>,
        slot: &mut Option<usize>,
        waker: &Waker,
        wake_at: Duration,
        clock: &StdArc<dyn Clock>,
    ) -> Poll<Outcome<V>> {
        let mut waiters = this.waiters.lock();
        if let Some(o) = this.outcome() {
            return Poll::Ready(o);
        }
        let rearm = waiters.register(slot, waker, wake_at, |at| Self::timer(this, clock, at));
        drop(waiters);
        rearm.apply(&**clock);
        Poll::Pending
    }

    /// The waker of the flight's timer for `deadline`.
    fn timer(this: &Arc<Self>, clock: &StdArc<dyn Clock>, deadline: Duration) -> Waker {
        Waker::from(StdArc::new(Timer {
            flight: this.clone(),
            clock: clock.clone(),
            deadline,
        }))
    }

    /// The flight's timer for `fired` went off: wakes the waiters due and re-arms.
    fn expire(this: &Arc<Self>, clock: &StdArc<dyn Clock>, mut fired: Duration) {
        loop {
            let now = clock.now();
            let mut waiters = this.waiters.lock();
            if this.outcome.is_published() {
                return;
            }
            let (woken, rearm) = waiters.fire(fired, now, |at| Self::timer(this, clock, at));
            drop(waiters);
            woken.into_iter().for_each(Waker::wake);
            match rearm.starts_at() {
                // Already due: fire again here rather than through the clock, which would
                // call back inline, one stack frame deeper each time.
                Some(at) if at <= clock.now() => {
                    rearm.without_start();
                    fired = at;
                }
                _ => return rearm.apply(&**clock),
            }
        }
    }
}

/// What the clock wakes when a flight's timer goes off.
struct Timer<V: Clone + Send + Sync + 'static> {
    flight: Arc<Flight<V>>,
    clock: StdArc<dyn Clock>,
    deadline: Duration,
}

impl<V: Clone + Send + Sync + 'static> Wake for Timer<V> {
    fn wake(self: StdArc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &StdArc<Self>) {
        Flight::expire(&self.flight, &self.clock, self.deadline);
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
            || self.hard_deadline().is_some_and(|d| now >= d)
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

/// This process's id. `getpid` is a system call (glibc no longer caches it) and every
/// lookup that meets a flight asks ([`Flight::orphaned`]): ~10% of the CPU of a herd of
/// 5,000 Node callers. Read once, and again only in a child of `fork`, where a
/// `pthread_atfork` handler forgets it.
#[cfg(feature = "std")]
fn process_id() -> u32 {
    // libc is a dependency on Linux only (the coarse clock): elsewhere, ask each time.
    #[cfg(target_os = "linux")]
    {
        use crate::sync::Ordering;
        use crate::sync::unchecked::{AtomicU32, Once};
        static PID: AtomicU32 = AtomicU32::new(0);
        static HOOK: Once = Once::new();
        extern "C" fn forget() {
            PID.store(0, Ordering::Relaxed);
        }
        let pid = PID.load(Ordering::Relaxed);
        if pid != 0 {
            return pid;
        }
        // SAFETY: registers a handler that only stores to an atomic (async-signal-safe),
        // once per process (a child inherits the registration).
        HOOK.call_once(|| unsafe {
            libc::pthread_atfork(None, None, Some(forget));
        });
        let pid = std::process::id();
        PID.store(pid, Ordering::Relaxed);
        pid
    }
    #[cfg(not(target_os = "linux"))]
    std::process::id()
}

/// Wakes the waiters a [`Flight::set_outcome`] returned.
#[inline]
pub(crate) fn wake_all(wakers: Wakers) {
    wakers.wake_all();
}

/// A value written once and then read without a lock: `ready` is set (release) after the
/// write, and a reader that sees it set (acquire) sees the value. The writers serialise on
/// a lock of their own (the flight's), which is what makes the single write safe.
struct Published<T> {
    ready: AtomicBool,
    value: UnsafeCell<Option<T>>,
}

// SAFETY: the value is written once, before `ready`, by a caller holding the flight's
// lock, and only read (shared) after; `T: Send + Sync` as for any shared `&T`.
unsafe impl<T: Send + Sync> Sync for Published<T> {}

impl<T> Published<T> {
    fn new() -> Self {
        Self {
            ready: AtomicBool::new(false),
            value: UnsafeCell::new(None),
        }
    }

    fn is_published(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// `f` of the value, once published.
    fn read<R>(&self, f: impl FnOnce(&T) -> R) -> Option<R> {
        if !self.is_published() {
            return None;
        }
        // SAFETY: published: written before `ready` was set (and this load of it
        // synchronised with that store), never written again.
        self.value.with(|p| unsafe { (*p).as_ref() }.map(f))
    }

    /// Writes the value and publishes it.
    ///
    /// # Safety
    /// Callers hold one same lock around every call, and call it at most once.
    unsafe fn publish(&self, value: T) {
        // SAFETY: no reader looks before `ready`, and the caller is the only writer.
        self.value.with_mut(|p| unsafe { *p = Some(value) });
        self.ready.store(true, Ordering::Release);
    }
}
