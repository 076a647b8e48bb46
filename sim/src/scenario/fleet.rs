//! Fleet: `processes` processes, each with its own engine, behind a load balancer that
//! spreads requests for one hot key uniformly. Local coalescing alone sends one load per
//! process per expiry; fleet-wide coalescing (modelled on the Redis lock, see
//! [`crate::fleet`]) sends one for the whole fleet.

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
pub const FLEET_KEY: &str = "fleet:feed";

/// Parameters of the fleet scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Fleet {
    /// Processes, each with its own engine.
    pub processes: usize,
    /// Whether they coalesce fleet-wide (shared tier and lock) or only locally.
    pub fleet_wide: bool,
    /// Requests per second over the fleet.
    pub rate: f64,
    /// How long clients send requests.
    pub duration: Duration,
    /// The origin.
    pub origin: OriginConfig,
    /// Engine options.
    pub knobs: Knobs,
}

impl Default for Fleet {
    /// 16 processes, local coalescing, 2,000 requests/s for 60 s, a 200 ms load, 10 s TTL.
    fn default() -> Self {
        Self {
            processes: 16,
            fleet_wide: false,
            rate: 2000.0,
            duration: Duration::from_secs(60),
            origin: OriginConfig::new(Duration::from_millis(200)),
            knobs: Knobs::new(Duration::from_secs(10)),
        }
    }
}

impl Setup for Fleet {
    fn name(&self) -> &'static str {
        "fleet"
    }
    fn variant(&self) -> String {
        let scope = if self.fleet_wide {
            "fleet-wide"
        } else {
            "local"
        };
        format!("{} processes, {scope}", self.processes)
    }
    fn knobs(&self) -> Knobs {
        self.knobs.clone()
    }
    fn origin(&self) -> OriginConfig {
        self.origin.clone()
    }
    fn processes(&self) -> usize {
        self.processes.max(1)
    }
    fn fleet_wide(&self) -> bool {
        self.fleet_wide
    }
    fn duration(&self) -> Duration {
        self.duration
    }
    fn title(&self) -> String {
        format!(
            "Fleet: {} processes, one hot key at {} req/s, load {}, TTL {}",
            self.processes,
            self.rate,
            human(self.origin.load_time),
            human(self.knobs.ttl)
        )
    }
    fn start(&self, w: &Rc<World>) {
        let n = self.processes.max(1);
        for p in 0..n {
            traffic::prefill(w, p, FLEET_KEY, self.origin.load_time);
        }
        w.handle.spawn(traffic::poisson(
            w.clone(),
            self.rate,
            self.duration,
            move |w| (w.below(n as u64) as usize, FLEET_KEY.to_string()),
        ));
    }
}
