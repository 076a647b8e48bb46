//! What the scenario tests share: a simulation on the virtual clock (a single-threaded
//! executor whose time moves only when told to), an origin that counts its calls and their
//! peak concurrency, and seeded randomness. Every scenario is deterministic.

#![allow(dead_code)] // each test binary uses a different part of this module

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use herdless::testing::Runner;
pub use herdless::testing::{Task, sleep};
use herdless::{Builder, Clock, DefaultRng, ManualClock};
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

/// A simulation: tasks on one thread, a virtual clock, background work on the same
/// executor. A thin layer over the public [`Runner`], so the crate's own scenarios run on
/// the helper its users get.
pub struct Sim {
    pub clock: ManualClock,
    runner: Runner,
    seed: u64,
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
        let runner = Runner::new();
        Self {
            clock: runner.clock().clone(),
            runner,
            seed,
        }
    }

    /// A cache builder wired to this simulation: its clock, a seeded rng, and a spawner
    /// that runs background work on the simulation's executor.
    pub fn builder<V: Clone + Send + Sync + 'static>(&self) -> Builder<V> {
        self.runner.builder().seed(self.seed)
    }

    pub fn now(&self) -> Duration {
        self.clock.now()
    }

    /// Starts `fut` (it first runs at the next `run`).
    pub fn spawn<T: 'static>(&self, fut: impl Future<Output = T> + 'static) -> Task<T> {
        self.runner.spawn(fut)
    }

    /// Runs every task until all wait for time to move, background work included.
    pub fn run(&mut self) {
        self.runner.run();
    }

    /// Moves time forward by `d`, stopping at every timer on the way so each task wakes
    /// at its own deadline.
    pub fn advance(&mut self, d: Duration) {
        self.runner.advance(d);
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
