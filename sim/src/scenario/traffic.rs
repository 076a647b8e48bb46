//! Building blocks of scenarios: Poisson arrivals, prefilled entries, Zipf popularity,
//! and waiting for a group of tasks.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use herdless::Lookup;

use crate::client;
use crate::origin::SimValue;
use crate::world::World;

/// Sends requests with exponential gaps of mean `1 / rate` until `until` (virtual time);
/// `pick` chooses the process and key of each.
pub(crate) async fn poisson(
    w: Rc<World>,
    rate: f64,
    until: Duration,
    pick: impl Fn(&World) -> (usize, String),
) {
    // No traffic at all (and no infinite gap to sleep on).
    if !(rate > 0.0 && rate.is_finite()) {
        return;
    }
    loop {
        let gap = w.exp_gap(rate);
        w.handle.sleep(gap).await;
        if w.now() >= until {
            return;
        }
        let (process, key) = pick(&w);
        w.handle.spawn(client::request(w.clone(), process, key));
    }
}

/// Stores a value for `key` in `process` as if it had just been loaded in `delta`: through
/// the engine's own path (a `Lead` adopted), so XFetch knows the key's cost; plain `set`
/// for the naive strategies. Also writes the shared tier in fleet-wide mode.
pub(crate) fn prefill(w: &World, process: usize, key: &str, delta: Duration) {
    let now = w.now();
    let v = SimValue { born: now, delta };
    let cache = &w.processes[process];
    if w.strategy.is_naive() {
        let _ = cache.set(key, v);
    } else if let Ok(Lookup::Lead(guard)) = cache.lookup(key) {
        w.setup_misses.set(w.setup_misses.get() + 1);
        let _ = herdless::driver::adopt(guard, Some(v), w.knobs.ttl, delta);
    }
    if let Some(tier) = &w.fleet {
        tier.insert(key, v, now + w.knobs.ttl, delta);
    }
}

/// Zipf popularity over `n` keys: key `i` (0-based) has weight `1 / (i + 1)^alpha`.
pub(crate) struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub(crate) fn new(n: usize, alpha: f64) -> Self {
        let mut total = 0.0;
        let mut cdf: Vec<f64> = (0..n.max(1))
            .map(|i| {
                total += 1.0 / ((i + 1) as f64).powf(alpha);
                total
            })
            .collect();
        cdf.iter_mut().for_each(|c| *c /= total);
        Self { cdf }
    }

    /// The key index for a uniform draw `u` in [0, 1).
    pub(crate) fn sample(&self, u: f64) -> usize {
        self.cdf
            .partition_point(|&c| c <= u)
            .min(self.cdf.len() - 1)
    }
}

type Boxed = Pin<Box<dyn Future<Output = ()>>>;

/// Resolves when every future of `all` has.
pub(crate) struct JoinAll(pub(crate) Vec<Option<Boxed>>);

impl Future for JoinAll {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut pending = false;
        for slot in self.0.iter_mut() {
            if let Some(f) = slot {
                if f.as_mut().poll(cx).is_ready() {
                    *slot = None;
                } else {
                    pending = true;
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_prefers_the_first_keys_and_covers_all() {
        let z = Zipf::new(100, 1.0);
        assert_eq!(z.sample(0.0), 0);
        assert_eq!(z.sample(0.999_999), 99);
        // Key 0 holds 1/H(100) ~ 19 % of the mass.
        assert_eq!(z.sample(0.18), 0);
        assert!(z.sample(0.2) > 0);
    }
}
