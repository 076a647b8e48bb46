//! Running code that uses a cache on virtual time, deterministically: the harness herdless's
//! own scenario tests run on, for yours.
//!
//! A [`Runner`] is a single-threaded executor over a [`ManualClock`]: it polls the tasks you
//! [`spawn`](Runner::spawn) and the cache's background work (refreshes, loads past their soft
//! timeout, queued by its [`QueueSpawn`]) until every one waits for time to move, and moves
//! time only when told, stopping at each timer on the way so every task wakes at its own
//! deadline ([`ManualClock::advance`] alone fires them all at the target time). Loaders
//! sleep on the same clock with [`sleep`].
//!
//! ```
//! use std::time::Duration;
//! use herdless::testing::{Runner, sleep};
//!
//! let mut rt = Runner::new();
//! let cache = rt.builder::<u32>().ttl(Duration::from_secs(60)).build()?;
//! let clock = rt.clock().clone();
//! let slow_query = move || async move {
//!     sleep(&clock, Duration::from_millis(200)).await; // a 200 ms query, on virtual time
//!     Ok::<_, std::io::Error>(Some(1))
//! };
//! let c = cache.clone();
//! let first = rt.spawn(async move { c.get_or_load_async("k", slow_query).await });
//! let c = cache.clone();
//! let second = rt.spawn(async move {
//!     c.get_or_load_async("k", || async { Ok::<_, std::io::Error>(Some(2)) }).await
//! });
//! rt.advance(Duration::from_millis(200));
//! assert_eq!(first.take()?, Some(1));
//! assert_eq!(second.take()?, Some(1), "the second caller waited for the first one's load");
//! assert_eq!(rt.now(), Duration::from_millis(200));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::rc::Rc;
use alloc::task::Wake;
use alloc::vec::Vec;
use core::cell::{Cell, RefCell};
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use core::time::Duration;

use crate::clock::{Clock, ManualClock};
use crate::config::Builder;
use crate::spawn::{BoxFuture, Spawn};
use crate::sync::Ordering;
use crate::sync::unchecked::{Arc, AtomicBool, Mutex, MutexGuard};

/// The seed [`Runner::builder`] gives the cache's generator, so runs repeat exactly.
pub const SEED: u64 = 42;

/// A spawner that queues the cache's background tasks for a [`Runner`] to run.
#[derive(Clone, Default)]
pub struct QueueSpawn {
    queue: Arc<Mutex<Vec<BoxFuture>>>,
}

impl Spawn for QueueSpawn {
    fn spawn(&self, task: BoxFuture) {
        lock(&self.queue).push(task);
    }
}

impl core::fmt::Debug for QueueSpawn {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("QueueSpawn")
            .field("queued", &lock(&self.queue).len())
            .finish()
    }
}

/// A task of a [`Runner`]: its output once it has finished.
pub struct Task<T> {
    out: Rc<RefCell<Option<T>>>,
    cancelled: Rc<Cell<bool>>,
    waker: Waker,
}

impl<T> Task<T> {
    /// Whether it has finished (and its output was not taken yet).
    pub fn is_done(&self) -> bool {
        self.out.borrow().is_some()
    }

    /// The output.
    ///
    /// # Panics
    /// If the task has not finished, or its output was taken already.
    pub fn take(&self) -> T {
        self.out
            .borrow_mut()
            .take()
            .expect("the task has not finished")
    }

    /// Drops the task's future at the runner's next turn, as a client that disconnects
    /// cancels its request.
    pub fn cancel(&self) {
        self.cancelled.set(true);
        self.waker.wake_by_ref();
    }
}

impl<T> core::fmt::Debug for Task<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Task")
            .field("done", &self.is_done())
            .field("cancelled", &self.cancelled.get())
            .finish()
    }
}

/// A future that ends once a clock reaches a deadline.
#[derive(Debug)]
pub struct Sleep {
    clock: ManualClock,
    deadline: Duration,
    /// The waker the clock will wake; a future moved to another task arms again.
    armed: Option<Waker>,
}

/// Sleeps `d` on `clock`: what a loader under test awaits in place of its real I/O.
pub fn sleep(clock: &ManualClock, d: Duration) -> Sleep {
    Sleep {
        clock: clock.clone(),
        deadline: clock.now().saturating_add(d),
        armed: None,
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.clock.now() >= self.deadline {
            return Poll::Ready(());
        }
        if !self.armed.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            self.armed = Some(cx.waker().clone());
            self.clock.wake_at(self.deadline, cx.waker().clone());
        }
        Poll::Pending
    }
}

/// The wake-up of one task: puts it back in the runner's ready queue, once.
struct Wakeup {
    id: usize,
    queued: AtomicBool,
    ready: Arc<Mutex<VecDeque<usize>>>,
}

impl Wake for Wakeup {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.queued.swap(true, Ordering::AcqRel) {
            lock(&self.ready).push_back(self.id);
        }
    }
}

struct Slot {
    fut: Pin<Box<dyn Future<Output = ()>>>,
    wakeup: Arc<Wakeup>,
    cancelled: Rc<Cell<bool>>,
}

/// A single-threaded executor on a [`ManualClock`] (see the [module docs](self)).
pub struct Runner {
    clock: ManualClock,
    background: QueueSpawn,
    tasks: RefCell<Vec<Option<Slot>>>,
    ready: Arc<Mutex<VecDeque<usize>>>,
}

impl Default for Runner {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for Runner {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let live = self.tasks.borrow().iter().flatten().count();
        f.debug_struct("Runner")
            .field("now", &self.clock.now())
            .field("tasks", &live)
            .finish()
    }
}

impl Runner {
    /// A runner on a new clock at time zero.
    pub fn new() -> Self {
        Self::with_clock(ManualClock::new())
    }

    /// A runner on `clock`.
    pub fn with_clock(clock: ManualClock) -> Self {
        Self {
            clock,
            background: QueueSpawn::default(),
            tasks: RefCell::new(Vec::new()),
            ready: Arc::default(),
        }
    }

    /// The runner's clock.
    pub fn clock(&self) -> &ManualClock {
        &self.clock
    }

    /// The clock now.
    pub fn now(&self) -> Duration {
        self.clock.now()
    }

    /// The spawner whose tasks this runner runs.
    pub fn spawner(&self) -> QueueSpawn {
        self.background.clone()
    }

    /// A cache builder wired to this runner: its clock, its spawner, and the generator
    /// seeded with [`SEED`] (set another with [`Builder::seed`]).
    pub fn builder<V>(&self) -> Builder<V> {
        Builder::default()
            .clock(self.clock.clone())
            .spawner(self.spawner())
            .seed(SEED)
    }

    /// Starts `fut`; it first runs at the next [`run`](Self::run) (or `advance`).
    pub fn spawn<T: 'static>(&self, fut: impl Future<Output = T> + 'static) -> Task<T> {
        let out = Rc::new(RefCell::new(None));
        let slot = out.clone();
        let cancelled = Rc::new(Cell::new(false));
        let wakeup = self.add(
            Box::pin(async move {
                let v = fut.await;
                *slot.borrow_mut() = Some(v);
            }),
            cancelled.clone(),
        );
        Task {
            out,
            cancelled,
            waker: Waker::from(wakeup),
        }
    }

    fn add(
        &self,
        fut: Pin<Box<dyn Future<Output = ()>>>,
        cancelled: Rc<Cell<bool>>,
    ) -> Arc<Wakeup> {
        let mut tasks = self.tasks.borrow_mut();
        let id = tasks.len();
        let wakeup = Arc::new(Wakeup {
            id,
            queued: AtomicBool::new(false),
            ready: self.ready.clone(),
        });
        tasks.push(Some(Slot {
            fut,
            wakeup: wakeup.clone(),
            cancelled,
        }));
        wakeup.wake_by_ref();
        wakeup
    }

    /// Runs every task until each one waits for time to move (or has finished), the
    /// cache's background work included.
    pub fn run(&mut self) {
        loop {
            let spawned = core::mem::take(&mut *lock(&self.background.queue));
            for task in spawned {
                let task: Pin<Box<dyn Future<Output = ()>>> = task;
                self.add(task, Rc::default());
            }
            let Some(id) = lock(&self.ready).pop_front() else {
                if lock(&self.background.queue).is_empty() {
                    return;
                }
                continue;
            };
            self.poll(id);
        }
    }

    fn poll(&mut self, id: usize) {
        let Some(mut slot) = self.tasks.borrow_mut()[id].take() else {
            return;
        };
        slot.wakeup.queued.store(false, Ordering::Release);
        if slot.cancelled.get() {
            return; // dropped here, as a cancelled request's future is
        }
        let waker = Waker::from(slot.wakeup.clone());
        let mut cx = Context::from_waker(&waker);
        if slot.fut.as_mut().poll(&mut cx).is_pending() {
            self.tasks.borrow_mut()[id] = Some(slot);
        }
    }

    /// Moves time forward by `d`, stopping at every timer on the way (and running the tasks
    /// it wakes) so each task wakes at its own deadline.
    pub fn advance(&mut self, d: Duration) {
        let target = self.clock.now().saturating_add(d);
        self.run();
        while let Some(t) = self.clock.next_timer().filter(|&t| t <= target) {
            self.clock.set(t);
            self.run();
        }
        self.clock.set(target);
        self.run();
    }

    /// Runs `fut` to its end, moving time from timer to timer whenever every task waits.
    ///
    /// # Panics
    /// If `fut` waits while no timer is left to wake anything: it would wait forever.
    pub fn block_on<T: 'static>(&mut self, fut: impl Future<Output = T> + 'static) -> T {
        let task = self.spawn(fut);
        loop {
            self.run();
            if task.is_done() {
                return task.take();
            }
            match self.clock.next_timer() {
                Some(t) => self.clock.set(t),
                None => panic!("herdless::testing: the future waits and no timer is left"),
            }
        }
    }
}

/// A poison-free lock: a panicking task must not take the runner down with it.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
