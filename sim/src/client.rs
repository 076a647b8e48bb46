//! Simulated clients: one request of one client, driven through a strategy.
//!
//! Engine strategies drive the state machine exactly as the crate's own drivers do
//! ([`Cache::lookup`]; a `Lead` waits for the budget, calls the origin and completes its
//! guard; a `Wait` awaits its waiter; a hit carrying a refresh runs it in the background).
//! The naive strategies use `get`/`set` and call the origin themselves.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use herdless::{Cache, Error, HitState, LoadError, LoadGuard, Lookup, Waited};
use rand_core::Rng;

use crate::executor::Handle;
use crate::fleet::FleetTier;
use crate::origin::{Origin, SimValue};
use crate::strategy::{Knobs, Strategy};

/// What the clients of one run saw.
#[derive(Default)]
pub(crate) struct Recorder {
    pub(crate) requests: u64,
    /// Client latency of every answered or failed request, in nanoseconds.
    pub(crate) latencies: Vec<u64>,
    pub(crate) stale: u64,
    pub(crate) oldest: Duration,
    /// Sum of the ages of the values served, and how many there were (for the mean).
    pub(crate) age_sum: Duration,
    pub(crate) aged: u64,
    pub(crate) errors: u64,
    pub(crate) timeouts: u64,
    /// Client-side XFetch decisions (xfetch-uncoordinated only).
    pub(crate) early: u64,
}

/// Everything the tasks of one run share.
pub(crate) struct World {
    pub(crate) handle: Handle,
    pub(crate) origin: Rc<Origin>,
    /// One engine per simulated process.
    pub(crate) processes: Vec<Cache<SimValue>>,
    pub(crate) strategy: Strategy,
    pub(crate) knobs: Knobs,
    /// The fleet-wide lock and shared tier, when processes coalesce across the fleet.
    pub(crate) fleet: Option<FleetTier>,
    pub(crate) rec: RefCell<Recorder>,
    /// Draws of the traffic (arrivals, keys, pauses).
    pub(crate) rng: RefCell<herdless::DefaultRng>,
    /// Draws of the strategies (client-side XFetch, the fleet tier's jitter): a stream of
    /// its own, so every strategy sees the same arrivals.
    pub(crate) decide: RefCell<herdless::DefaultRng>,
    /// Misses the engines counted while the scenario filled or warmed them before traffic.
    pub(crate) setup_misses: Cell<u64>,
}

impl World {
    pub(crate) fn now(&self) -> Duration {
        self.handle.now()
    }

    /// Uniform in [0, 1).
    pub(crate) fn unit(&self) -> f64 {
        (self.rng.borrow_mut().next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [0, 1), from the strategies' stream.
    pub(crate) fn decide_unit(&self) -> f64 {
        (self.decide.borrow_mut().next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [0, n).
    pub(crate) fn below(&self, n: u64) -> u64 {
        (self.unit() * n as f64) as u64 % n.max(1)
    }

    /// An exponential gap of mean `1 / rate` seconds (Poisson arrivals).
    pub(crate) fn exp_gap(&self, rate: f64) -> Duration {
        Duration::from_secs_f64(-(1.0 - self.unit()).ln() / rate)
    }

    fn serve(&self, arrived: Duration, value: Option<SimValue>, stale: bool) {
        let now = self.now();
        let mut rec = self.rec.borrow_mut();
        rec.latencies.push(nanos(now - arrived));
        if stale {
            rec.stale += 1;
        }
        if let Some(v) = value {
            let age = now.saturating_sub(v.born);
            rec.oldest = rec.oldest.max(age);
            rec.age_sum += age;
            rec.aged += 1;
        }
    }

    fn fail(&self, arrived: Duration, error: &Error) {
        let now = self.now();
        let mut rec = self.rec.borrow_mut();
        rec.latencies.push(nanos(now - arrived));
        match error {
            Error::WaitTimeout { .. } | Error::LoadTimeout { .. } => rec.timeouts += 1,
            _ => rec.errors += 1,
        }
    }

    fn answer(&self, arrived: Duration, result: Result<Option<SimValue>, Error>) {
        match result {
            Ok(v) => self.serve(arrived, v, false),
            Err(e) => self.fail(arrived, &e),
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// One client request for `key` on process `process`.
pub(crate) async fn request(w: Rc<World>, process: usize, key: String) {
    w.rec.borrow_mut().requests += 1;
    let arrived = w.now();
    match w.strategy {
        Strategy::Naive => naive(&w, process, &key, arrived, false).await,
        Strategy::XfetchUncoordinated => naive(&w, process, &key, arrived, true).await,
        _ => engine(&w, process, &key, arrived).await,
    }
}

async fn engine(w: &Rc<World>, process: usize, key: &str, arrived: Duration) {
    let cache = w.processes[process].clone();
    let mut step = cache.lookup(key);
    loop {
        match step {
            Ok(Lookup::Hit(hit)) => {
                if let Some(guard) = hit.refresh {
                    let held = hit.value.map(|v| v.born);
                    let w2 = w.clone();
                    w.handle
                        .spawn(async move { refresh(&w2, process, guard, held).await });
                }
                w.serve(arrived, hit.value, hit.state != HitState::Fresh);
            }
            Ok(Lookup::Lead(guard)) => {
                let result = lead(w, process, guard).await;
                w.answer(arrived, result);
            }
            Ok(Lookup::Wait(waiter)) => match waiter.await {
                Ok(Waited::Loaded(v)) => w.serve(arrived, v, false),
                Ok(Waited::Stale(v)) => w.serve(arrived, Some(v), true),
                // The leader went away: look up again, one of us leads.
                Ok(Waited::Retry(r)) => {
                    step = cache.lookup_again(key, r);
                    continue;
                }
                Err(e) => w.fail(arrived, &e),
            },
            Err(e) => w.fail(arrived, &e),
        }
        return;
    }
}

/// A caller that leads a load: waits for the origin budget, then loads.
async fn lead(
    w: &Rc<World>,
    process: usize,
    mut guard: LoadGuard<SimValue>,
) -> Result<Option<SimValue>, Error> {
    if let Err(e) = guard.begin().await {
        return guard.fail(e);
    }
    load(w, process, guard, None).await
}

/// A background refresh (stale-while-revalidate or XFetch): skipped when the origin budget
/// is busy, as the engine's own drivers do.
async fn refresh(
    w: &Rc<World>,
    process: usize,
    mut guard: LoadGuard<SimValue>,
    held: Option<Duration>,
) {
    if guard.try_begin() {
        // Its answer goes nowhere: the callers were served already.
        let _ = load(w, process, guard, held).await;
    }
}

/// Runs the load of a guard of `process` that began: through the fleet tier if there is
/// one, else straight to the origin. `held` is the birth of the value the caller already has.
async fn load(
    w: &Rc<World>,
    process: usize,
    guard: LoadGuard<SimValue>,
    held: Option<Duration>,
) -> Result<Option<SimValue>, Error> {
    if w.fleet.is_some() {
        return crate::fleet::load(w, process, guard, held).await;
    }
    let key = guard.key().to_string();
    match w.origin.call(&w.handle, &key).await {
        Ok(v) => guard.complete(Ok(v)),
        Err(e) => guard.complete(Err(LoadError::new(e))),
    }
}

/// Cache-aside: `get`, else call the origin and `set`. With `xfetch`, a hit may also decide
/// (alone, uncoordinated) to recompute early, with the engine's XFetch formula.
async fn naive(w: &Rc<World>, process: usize, key: &str, arrived: Duration, xfetch: bool) {
    let cache = w.processes[process].clone();
    if let Some(v) = cache.get(key) {
        // The value was set the instant it was born, with the cache's TTL (no jitter).
        let gap = (v.born + w.knobs.ttl).saturating_sub(w.now());
        let early = xfetch
            && herdless::xfetch::should_refresh(gap, v.delta, w.knobs.beta, 1.0 - w.decide_unit());
        if !early {
            w.serve(arrived, Some(v), false);
            return;
        }
        w.rec.borrow_mut().early += 1;
    }
    match w.origin.call(&w.handle, key).await {
        Ok(v) => {
            if let Some(v) = v {
                // A full cache or a too-long key would be the engine refusing the write;
                // cache-aside code ignores that and answers anyway.
                let _ = cache.set(key, v);
            }
            w.serve(arrived, v, false);
        }
        Err(e) => w.fail(arrived, &Error::Load(LoadError::new(e))),
    }
}

/// Loads `key` into `process` before traffic (pre-warming): through the engine for engine
/// strategies (a miss leads the load), with a plain origin call and `set` for the naive ones.
pub(crate) async fn warm(w: &Rc<World>, process: usize, key: &str) {
    let cache = w.processes[process].clone();
    if w.strategy.is_naive() {
        if let Ok(Some(v)) = w.origin.call(&w.handle, key).await {
            let _ = cache.set(key, v);
        }
        return;
    }
    let counted = |w: &World| w.setup_misses.set(w.setup_misses.get() + 1);
    match cache.lookup(key) {
        Ok(Lookup::Lead(guard)) => {
            counted(w);
            let _ = lead(w, process, guard).await;
        }
        Ok(Lookup::Wait(waiter)) => {
            counted(w);
            let _ = waiter.await;
        }
        _ => {}
    }
}
