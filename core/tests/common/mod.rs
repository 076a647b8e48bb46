//! What the scenario tests share: a simulation on the virtual clock (a single-threaded
//! executor whose time moves only when told to), an origin that counts its calls and their
//! peak concurrency, and seeded randomness. Every scenario is deterministic.

#![allow(dead_code)] // each test binary uses a different part of this module

use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures_executor::LocalPool;
use futures_util::future::{AbortHandle, Abortable};
use futures_util::task::LocalSpawnExt;
use herdless::{BoxFuture, Builder, Clock, DefaultRng, ManualClock};
use rand_core::SeedableRng;

pub const MS: Duration = Duration::from_millis(1);
pub const SEC: Duration = Duration::from_secs(1);

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A seeded generator, so jitter and XFetch draw the same numbers on every run.
pub fn rng(seed: u64) -> DefaultRng {
    DefaultRng::seed_from_u64(seed)
}

/// A future that ends once the virtual clock reaches `deadline`.
pub struct Sleep {
    clock: ManualClock,
    deadline: Duration,
    /// The waker the clock will wake; a future moved to another task must re-arm.
    armed: Option<Waker>,
}

/// Sleeps `d` of virtual time.
pub fn sleep(clock: &ManualClock, d: Duration) -> Sleep {
    Sleep {
        clock: clock.clone(),
        deadline: clock.now() + d,
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

/// The origin's failure (a database down, an upstream 503).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginDown(pub u32);

impl fmt::Display for OriginDown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "origin down (incident {})", self.0)
    }
}

impl std::error::Error for OriginDown {}

/// What an async loader returns in these tests.
pub type Load<V> = Pin<Box<dyn Future<Output = Result<Option<V>, OriginDown>> + Send>>;

/// The slow thing behind the cache: counts calls, calls running now, and their peak.
#[derive(Default)]
pub struct Origin {
    calls: AtomicUsize,
    running: AtomicUsize,
    peak: AtomicUsize,
}

/// One origin call in progress; it ends when dropped (also when its load is cancelled).
pub struct Call(Arc<Origin>);

impl Drop for Call {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Origin {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Loader calls so far.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Loader calls running now.
    pub fn running(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }

    /// The most loader calls that ever ran at once.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }

    /// Starts one call.
    pub fn enter(self: &Arc<Self>) -> Call {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        Call(self.clone())
    }

    /// An async loader: one call that takes `took` of virtual time, then answers `answer`.
    pub fn loader<V: Send + 'static>(
        self: &Arc<Self>,
        clock: &ManualClock,
        took: Duration,
        answer: Result<Option<V>, OriginDown>,
    ) -> impl FnOnce() -> Load<V> + Send + 'static + use<V> {
        let (origin, clock) = (self.clone(), clock.clone());
        move || {
            Box::pin(async move {
                let _call = origin.enter();
                sleep(&clock, took).await;
                answer
            })
        }
    }

    /// An async loader whose answer is computed when the call ends.
    pub fn loader_with<V, F>(
        self: &Arc<Self>,
        clock: &ManualClock,
        took: Duration,
        answer: F,
    ) -> impl FnOnce() -> Load<V> + Send + 'static + use<V, F>
    where
        V: Send + 'static,
        F: FnOnce() -> Result<Option<V>, OriginDown> + Send + 'static,
    {
        let (origin, clock) = (self.clone(), clock.clone());
        move || {
            Box::pin(async move {
                let _call = origin.enter();
                sleep(&clock, took).await;
                answer()
            })
        }
    }

    /// A blocking loader that answers at once (the virtual clock does not move).
    pub fn instant<V: Send + 'static>(
        self: &Arc<Self>,
        answer: Result<Option<V>, OriginDown>,
    ) -> impl FnOnce() -> Result<Option<V>, OriginDown> + Send + 'static + use<V> {
        let origin = self.clone();
        move || {
            let _call = origin.enter();
            answer
        }
    }
}

/// Background tasks the cache spawned (refreshes, loads past their soft timeout), waiting
/// to be moved onto the simulation's executor.
type Queue = Arc<Mutex<Vec<BoxFuture>>>;

/// A simulation: tasks on one thread, a virtual clock, background work on the same
/// executor.
pub struct Sim {
    pub clock: ManualClock,
    pool: LocalPool,
    background: Queue,
    seed: u64,
}

/// A task of the simulation: its output once done; cancel drops its future.
pub struct Task<T> {
    out: Rc<RefCell<Option<T>>>,
    abort: AbortHandle,
}

impl<T> Task<T> {
    pub fn is_done(&self) -> bool {
        self.out.borrow().is_some()
    }

    /// The output; panics if the task has not finished.
    pub fn take(&self) -> T {
        self.out
            .borrow_mut()
            .take()
            .expect("the task has not finished")
    }

    /// Drops the task's future at the executor's next turn (like a client disconnecting).
    pub fn cancel(&self) {
        self.abort.abort();
    }
}

impl Default for Sim {
    fn default() -> Self {
        Self::new()
    }
}

impl Sim {
    pub fn new() -> Self {
        Self::with_seed(42)
    }

    pub fn with_seed(seed: u64) -> Self {
        Self {
            clock: ManualClock::new(),
            pool: LocalPool::new(),
            background: Queue::default(),
            seed,
        }
    }

    /// A cache builder wired to this simulation: its clock, a seeded rng, and a spawner
    /// that runs background work on the simulation's executor.
    pub fn builder<V: Clone + Send + Sync + 'static>(&self) -> Builder<V> {
        let queue = self.background.clone();
        herdless::Cache::builder()
            .clock(self.clock.clone())
            .rng(rng(self.seed))
            .spawner(move |task: BoxFuture| queue.lock().unwrap().push(task))
    }

    pub fn now(&self) -> Duration {
        self.clock.now()
    }

    /// Starts `fut` (it first runs at the next `run`).
    pub fn spawn<T: 'static>(&self, fut: impl Future<Output = T> + 'static) -> Task<T> {
        let out = Rc::new(RefCell::new(None));
        let (abort, registration) = AbortHandle::new_pair();
        let slot = out.clone();
        let fut = Abortable::new(
            async move {
                let v = fut.await;
                *slot.borrow_mut() = Some(v);
            },
            registration,
        );
        self.pool
            .spawner()
            .spawn_local(async move {
                let _ = fut.await;
            })
            .expect("the executor is alive");
        Task { out, abort }
    }

    /// Runs every task until all wait for time to move, background work included.
    pub fn run(&mut self) {
        loop {
            self.pool.run_until_stalled();
            let spawned: Vec<_> = std::mem::take(&mut *self.background.lock().unwrap());
            if spawned.is_empty() {
                return;
            }
            for task in spawned {
                self.pool
                    .spawner()
                    .spawn_local(task)
                    .expect("the executor is alive");
            }
        }
    }

    /// Moves time forward by `d`, stopping at every timer on the way so each task wakes
    /// at its own deadline.
    pub fn advance(&mut self, d: Duration) {
        let target = self.clock.now() + d;
        self.run();
        while let Some(t) = self.clock.next_timer().filter(|&t| t <= target) {
            self.clock.set(t);
            self.run();
        }
        self.clock.set(target);
        self.run();
    }
}

/// A waker that counts its wake-ups; its `Arc`'s strong count tells whether anyone (the
/// clock's timer heap, say) still holds a waker of it.
pub struct Probe(AtomicUsize);

impl Probe {
    pub fn new() -> Arc<Self> {
        Arc::new(Self(AtomicUsize::new(0)))
    }

    /// Wake-ups so far.
    pub fn wakes(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl std::task::Wake for Probe {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}
