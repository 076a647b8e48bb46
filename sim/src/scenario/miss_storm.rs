//! Miss storm: requests for random ids the origin does not have (a scraper, an attack, a
//! bad deploy). Without negative caching every request reaches the origin; with it, each id
//! costs at most one origin call per `negative_ttl`.

use std::rc::Rc;
use std::time::Duration;

use serde::Serialize;

use super::{Setup, traffic};
use crate::client::World;
use crate::origin::OriginConfig;
use crate::report::human;
use crate::strategy::Knobs;

/// Parameters of the miss-storm scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MissStorm {
    /// Distinct absent ids requested (uniformly).
    pub ids: u64,
    /// Requests per second.
    pub rate: f64,
    /// How long clients send requests.
    pub duration: Duration,
    /// The origin (it answers "absent" for every id).
    pub origin: OriginConfig,
    /// Engine options; `negative_ttl: None` turns negative caching off.
    pub knobs: Knobs,
}

impl Default for MissStorm {
    /// 1,000 ids at 2,000 requests/s for 30 s, a 50 ms lookup, absences cached 10 s.
    fn default() -> Self {
        Self {
            ids: 1000,
            rate: 2000.0,
            duration: Duration::from_secs(30),
            origin: OriginConfig::new(Duration::from_millis(50)),
            knobs: Knobs::new(Duration::from_secs(60)),
        }
    }
}

impl Setup for MissStorm {
    fn name(&self) -> &'static str {
        "miss-storm"
    }
    fn variant(&self) -> String {
        match self.knobs.negative_ttl {
            Some(_) => "negative caching".into(),
            None => "no negative caching".into(),
        }
    }
    fn knobs(&self) -> Knobs {
        self.knobs.clone()
    }
    fn origin(&self) -> OriginConfig {
        self.origin.clone()
    }
    fn exists(&self) -> fn(&str) -> bool {
        |_| false
    }
    fn duration(&self) -> Duration {
        self.duration
    }
    fn title(&self) -> String {
        format!(
            "Miss storm: {} req/s over {} absent ids, lookup {}",
            self.rate,
            self.ids,
            human(self.origin.load_time)
        )
    }
    fn start(&self, w: &Rc<World>) {
        let ids = self.ids;
        w.handle.spawn(traffic::poisson(
            w.clone(),
            self.rate,
            self.duration,
            move |w| (0, format!("storm:{}", w.below(ids))),
        ));
    }
}
