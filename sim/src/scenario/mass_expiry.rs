//! Mass expiry: `keys` keys written at the same instant (a deploy, a batch import), read
//! uniformly at `rate`. Without jitter they all expire together: one load per key at once,
//! even with single-flight. Jitter spreads the expiries over `ttl * jitter`.

use std::rc::Rc;
use std::time::Duration;

use serde::Serialize;

use super::setup::Setup;
use super::traffic;
use crate::origin::OriginConfig;
use crate::report::human;
use crate::strategy::Knobs;
use crate::world::World;

/// Parameters of the mass-expiry scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MassExpiry {
    /// Keys written together at time zero.
    pub keys: usize,
    /// Requests per second over all keys (Poisson, keys uniform).
    pub rate: f64,
    /// How long clients send requests.
    pub duration: Duration,
    /// The origin.
    pub origin: OriginConfig,
    /// Engine options (`ttl`, `jitter`, ...).
    pub knobs: Knobs,
}

impl Default for MassExpiry {
    /// 1,000 keys, 5,000 requests/s for 90 s, a 200 ms load on a 50-connection pool,
    /// a 60 s TTL, jitter 0.2.
    fn default() -> Self {
        let mut origin = OriginConfig::new(Duration::from_millis(200));
        origin.pool = Some(50);
        let mut knobs = Knobs::new(Duration::from_secs(60));
        knobs.origin_budget = Some(50);
        Self {
            keys: 1000,
            rate: 5000.0,
            duration: Duration::from_secs(90),
            origin,
            knobs,
        }
    }
}

impl Setup for MassExpiry {
    fn name(&self) -> &'static str {
        "mass-expiry"
    }
    fn knobs(&self) -> Knobs {
        self.knobs.clone()
    }
    fn origin(&self) -> OriginConfig {
        self.origin.clone()
    }
    fn duration(&self) -> Duration {
        self.duration
    }
    fn title(&self) -> String {
        format!(
            "Mass expiry: {} keys written together, TTL {}, jitter {} (jitter, combined), {} req/s",
            self.keys,
            human(self.knobs.ttl),
            self.knobs.jitter,
            self.rate
        )
    }
    fn start(&self, w: &Rc<World>) {
        for i in 0..self.keys {
            traffic::prefill(w, 0, &format!("mass:{i}"), self.origin.load_time);
        }
        let keys = self.keys as u64;
        w.handle.spawn(traffic::poisson(
            w.clone(),
            self.rate,
            self.duration,
            move |w| (0, format!("mass:{}", w.below(keys))),
        ));
    }
}
