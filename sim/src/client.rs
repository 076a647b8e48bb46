//! Simulated clients: one request of one client, driven through a strategy.
//!
//! Engine strategies drive the state machine exactly as the crate's own drivers do
//! ([`Cache::lookup`]; a `Lead` waits for the budget, calls the origin and completes its
//! guard; a `Wait` awaits its waiter; a hit carrying a refresh runs it in the background).
//! The naive strategies use `get`/`set` and call the origin themselves.

use std::rc::Rc;
use std::time::Duration;

use herdless::{Error, HitState, LoadError, LoadGuard, Lookup, Waited};

use crate::origin::SimValue;
use crate::strategy::Strategy;
use crate::world::World;

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
