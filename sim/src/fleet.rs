//! Fleet-wide coalescing, modelled: one shared tier and one lock per key across the
//! simulated processes.
//!
//! This is a MODEL of the Redis tier (crate `herdless-redis`, PROTOCOL.md), not the tier
//! itself: the local leader of a process reads the shared entry, and if it is not fresh
//! takes the key's fleet lock; the lock holder loads from the origin, writes the shared
//! entry and notifies; the other processes' leaders wait for the notice and adopt the shared
//! value into their engine ([`herdless::driver::adopt`]). The notice also drops the key's copy in
//! every other process that is not waiting for it, as the real tier's does, so their next
//! read takes the new entry (a process left holding the old copy until it expires, or until
//! its own XFetch fires, would start drawing XFetch on the new value late, and refresh less
//! often than a real fleet). Network latency, lock leases, crashed holders and lost notices
//! are not modelled; the real behaviour is tested in `redis/`, and
//! redis/benches/sim_fleet.rs compares this model with a real fleet.

use std::rc::Rc;
use std::time::Duration;

use herdless::{Error, LoadError, LoadGuard};

use crate::origin::SimValue;
use crate::strategy::Strategy;
use crate::tier::{Notice, Notified, Shared};
use crate::world::World;

/// Loads `guard`'s key (of `process`'s engine) for the fleet: adopt a fresh shared value
/// (newer than `held`, the birth of the value the caller already has), or win the fleet
/// lock and load, or wait for the holder and try again.
pub(crate) async fn load(
    w: &Rc<World>,
    process: usize,
    guard: LoadGuard<SimValue>,
    held: Option<Duration>,
) -> Result<Option<SimValue>, Error> {
    let tier = w.fleet.as_ref().expect("fleet mode");
    let key = guard.key().to_string();
    loop {
        let now = w.now();
        let shared = tier.entries.borrow().get(&key).copied();
        if let Some(s) = shared.filter(|s| now < s.fresh_until) {
            let newer = match (held, s.value) {
                (Some(h), Some(v)) => v.born > h,
                _ => true,
            };
            if newer {
                return herdless::driver::adopt(guard, s.value, s.fresh_until - now, s.delta);
            }
        }
        let taken = tier.locks.borrow().get(&key).cloned();
        if let Some(notice) = taken {
            tier.lock_waits.set(tier.lock_waits.get() + 1);
            notice.waiting.borrow_mut().push(process);
            Notified(notice).await;
            continue;
        }
        tier.locks
            .borrow_mut()
            .insert(key.clone(), Rc::new(Notice::default()));
        let result = w.origin.call(&w.handle, &key).await;
        let now = w.now();
        return match result {
            Ok(v) => {
                // Jitter once, on the shared entry; the engines are built without it.
                let jitter = match w.strategy {
                    Strategy::Jitter | Strategy::Combined => w.knobs.jitter,
                    _ => 0.0,
                };
                let base = match v {
                    Some(_) => w.knobs.ttl,
                    None => w.knobs.negative_ttl.unwrap_or(Duration::from_nanos(1)),
                };
                let ttl = herdless::jitter::jittered(base, jitter, w.decide_unit());
                let delta = v.map_or(Duration::ZERO, |v| v.delta);
                tier.entries.borrow_mut().insert(
                    key.clone(),
                    Shared {
                        value: v,
                        fresh_until: now + ttl,
                        delta,
                    },
                );
                let waited = tier.unlock(&key);
                // The notice: processes not waiting for this load drop their copy.
                for (p, engine) in w.processes.iter().enumerate() {
                    if p != process && !waited.contains(&p) {
                        let _ = engine.invalidate(&key);
                    }
                }
                let mut guard = guard;
                guard.set_ttl(ttl);
                guard.complete(Ok(v))
            }
            Err(e) => {
                tier.unlock(&key);
                guard.complete(Err(LoadError::new(e)))
            }
        };
    }
}
