//! The loom models' harness (see core/tests/loom.rs): the model runner and the cache every
//! model uses.

use std::sync::atomic::{AtomicUsize as StdAtomicUsize, Ordering as StdOrdering};
use std::time::Duration;

use herdless::{Cache, DefaultRng, ManualClock};
use rand_core::SeedableRng;

/// Default preemption bound: 2 covers the classic register-versus-finish and
/// check-then-act races while keeping each model to seconds.
const PREEMPTIONS: usize = 2;

/// Runs `f` under every interleaving loom explores and reports how many there were.
pub fn model(name: &str, f: impl Fn() + Sync + Send + 'static) {
    let runs = std::sync::Arc::new(StdAtomicUsize::new(0));
    let counted = runs.clone();
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(PREEMPTIONS);
    }
    let bound = builder.preemption_bound;
    builder.check(move || {
        counted.fetch_add(1, StdOrdering::Relaxed);
        f();
    });
    eprintln!(
        "loom model {name}: {} interleavings (preemption bound {bound:?})",
        runs.load(StdOrdering::Relaxed)
    );
}

/// A cache on a virtual clock, with everything random pinned down: loom needs each
/// execution to be a deterministic function of its schedule.
pub fn cache_with(clock: &ManualClock, hard_timeout: Option<Duration>) -> Cache<u32> {
    cache_waiting(clock, hard_timeout, Duration::from_secs(5))
}

/// [`cache_with`] with its waiters' `wait_timeout`.
pub fn cache_waiting(
    clock: &ManualClock,
    hard_timeout: Option<Duration>,
    wait_timeout: Duration,
) -> Cache<u32> {
    let mut b = Cache::builder()
        .wait_timeout(wait_timeout)
        .clock(clock.clone())
        .shards(1)
        .jitter(0.0)
        .beta(0.0)
        .rng(DefaultRng::seed_from_u64(7));
    if let Some(t) = hard_timeout {
        b = b.hard_timeout(t);
    }
    b.build().expect("valid options")
}

pub fn cache(clock: &ManualClock) -> Cache<u32> {
    cache_with(clock, None)
}
