//! Hot key: one key read at `rate` by many clients, loaded in `load_time`, fresh for `ttl`.
//! Cached when traffic starts; every expiry is a chance for a herd of about
//! `rate * load_time` identical origin calls.

use std::rc::Rc;
use std::time::Duration;

use serde::Serialize;

use super::setup::Setup;
use super::traffic;
use crate::origin::OriginConfig;
use crate::report::human;
use crate::strategy::Knobs;
use crate::world::World;

/// The key every client reads.
pub const HOT_KEY: &str = "hot:feed";

/// Parameters of the hot-key scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HotKey {
    /// Requests per second (Poisson arrivals).
    pub rate: f64,
    /// How long clients send requests.
    pub duration: Duration,
    /// The origin (its `load_time` is the key's rebuild time).
    pub origin: OriginConfig,
    /// Engine options (`ttl`, `grace`, `beta`, `jitter`, ...).
    pub knobs: Knobs,
}

impl Default for HotKey {
    /// 2,000 requests/s for 60 s, a 200 ms load, a 10 s TTL.
    fn default() -> Self {
        Self {
            rate: 2000.0,
            duration: Duration::from_secs(60),
            origin: OriginConfig::new(Duration::from_millis(200)),
            knobs: Knobs::new(Duration::from_secs(10)),
        }
    }
}

impl Setup for HotKey {
    fn name(&self) -> &'static str {
        "hot-key"
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
            "Hot key: {} req/s, load {}, TTL {}",
            self.rate,
            human(self.origin.load_time),
            human(self.knobs.ttl)
        )
    }
    fn start(&self, w: &Rc<World>) {
        traffic::prefill(w, 0, HOT_KEY, self.origin.load_time);
        let w2 = w.clone();
        w.handle
            .spawn(traffic::poisson(w2, self.rate, self.duration, |_| {
                (0, HOT_KEY.to_string())
            }));
    }
}
