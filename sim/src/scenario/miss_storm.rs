//! Miss storm: requests for random ids the origin does not have (a scraper, an attack, a
//! bad deploy). Without negative caching every request reaches the origin; with it, each id
//! costs at most one origin call per `negative_ttl`. Optionally the namespace first serves
//! its regular traffic (ids that exist, cached) and the storm begins later, as a stampede
//! detector sees it in production.

use std::rc::Rc;
use std::time::Duration;

use serde::Serialize;

use super::setup::Setup;
use super::traffic;
use crate::origin::OriginConfig;
use crate::report::human;
use crate::strategy::Knobs;
use crate::world::World;

/// Key prefix of the ids that exist (regular traffic).
const KNOWN: &str = "storm:known-";
/// How many ids the regular traffic spreads over.
const REGULAR_IDS: u64 = 100;

/// Parameters of the miss-storm scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MissStorm {
    /// Distinct absent ids requested (uniformly).
    pub ids: u64,
    /// Requests per second for absent ids, from `storm_from` on.
    pub rate: f64,
    /// How long clients send requests.
    pub duration: Duration,
    /// When the storm begins (default: at once).
    pub storm_from: Duration,
    /// Requests per second of regular traffic, all along, for 100 ids that exist (keys
    /// `storm:known-<i>`, cached at time zero); default 0.
    pub regular_rate: f64,
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
            storm_from: Duration::ZERO,
            regular_rate: 0.0,
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
        |key| key.starts_with(KNOWN)
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
        if self.regular_rate > 0.0 {
            for i in 0..REGULAR_IDS {
                traffic::prefill(w, 0, &format!("{KNOWN}{i}"), self.origin.load_time);
            }
            w.handle.spawn(traffic::poisson(
                w.clone(),
                self.regular_rate,
                self.duration,
                |w| (0, format!("{KNOWN}{}", w.below(REGULAR_IDS))),
            ));
        }
        let ids = self.ids;
        let (w, rate, from, until) = (w.clone(), self.rate, self.storm_from, self.duration);
        w.handle.clone().spawn(async move {
            w.handle.sleep(from).await;
            traffic::poisson(w, rate, until, move |w| {
                (0, format!("storm:{}", w.below(ids)))
            })
            .await
        });
    }
}
