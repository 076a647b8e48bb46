//! Refresh-ahead study: refresh-ahead at a share of the TTL against XFetch, on the same
//! traffic. One key is the hot key; many keys read with Zipf popularity are a long tail
//! whose cool keys are read a few times per TTL. Every key is written at time zero (a
//! deploy, a warm-up), so the keys start in step: refresh-ahead keeps them in step (its
//! schedule is fixed), XFetch spreads them (its draw is random).

use std::rc::Rc;
use std::time::Duration;

use serde::Serialize;

use super::setup::Setup;
use super::traffic::{self, Zipf};
use crate::origin::OriginConfig;
use crate::report::{Outcome, human};
use crate::strategy::{Knobs, Strategy};
use crate::world::World;

/// Parameters of the refresh-ahead study (`knobs.ahead` is the share studied, `knobs.beta`
/// XFetch's beta).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RefreshAheadStudy {
    /// Keys, all written at time zero (1: the hot key).
    pub keys: usize,
    /// Zipf exponent of key popularity (0: uniform).
    pub alpha: f64,
    /// Requests per second over all keys (Poisson arrivals).
    pub rate: f64,
    /// How long clients send requests.
    pub duration: Duration,
    /// The origin.
    pub origin: OriginConfig,
    /// Engine options (`ttl`, `ahead`, `beta`, `grace`).
    pub knobs: Knobs,
}

impl Default for RefreshAheadStudy {
    /// The hot key of `hot-key`: one key, 2,000 requests/s for 60 s, a 200 ms load, a
    /// 10 s TTL (Zipf 1.0 when `keys` is raised).
    fn default() -> Self {
        Self {
            keys: 1,
            alpha: 1.0,
            rate: 2000.0,
            duration: Duration::from_secs(60),
            origin: OriginConfig::new(Duration::from_millis(200)),
            knobs: Knobs::new(Duration::from_secs(10)),
        }
    }
}

impl RefreshAheadStudy {
    fn workload(&self) -> String {
        if self.keys <= 1 {
            "1 key".into()
        } else {
            format!("{} keys, Zipf {}", self.keys, self.alpha)
        }
    }
}

impl Setup for RefreshAheadStudy {
    fn name(&self) -> &'static str {
        "refresh-ahead-study"
    }
    fn variant(&self) -> String {
        self.workload()
    }
    fn variant_for(&self, strategy: Strategy) -> String {
        if strategy.uses_ahead() {
            format!("{}, share {}", self.workload(), self.knobs.ahead)
        } else if strategy.uses_beta() {
            format!("{}, beta {}", self.workload(), self.knobs.beta)
        } else {
            self.workload()
        }
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
            "Refresh-ahead against XFetch: {}, {} req/s, load {}, TTL {}",
            self.workload(),
            self.rate,
            human(self.origin.load_time),
            human(self.knobs.ttl)
        )
    }
    fn start(&self, w: &Rc<World>) {
        let keys = self.keys.max(1);
        for i in 0..keys {
            traffic::prefill(w, 0, &format!("ahead:{i}"), self.origin.load_time);
        }
        let zipf = Zipf::new(keys, self.alpha);
        w.handle.spawn(traffic::poisson(
            w.clone(),
            self.rate,
            self.duration,
            move |w| (0, format!("ahead:{}", zipf.sample(w.unit()))),
        ));
    }
}

impl RefreshAheadStudy {
    /// The head of the study's summary table ([`ahead_summary`](super::ahead_summary)).
    pub(crate) const SUMMARY_HEAD: [&'static str; 13] = [
        "workload",
        "strategy",
        "option",
        "origin calls",
        "per TTL",
        "ahead refreshes",
        "early refreshes",
        "misses",
        "peak origin",
        "p50",
        "p99",
        "mean age",
        "oldest served",
    ];

    /// One row of the study's summary: origin calls per TTL (over all keys), the
    /// refreshes by kind, misses, the origin's peak, latency, the mean and oldest age of
    /// the values served.
    pub(crate) fn summary_cells(&self, o: &Outcome) -> Vec<String> {
        let ttls = self.duration.as_secs_f64() / self.knobs.ttl.as_secs_f64();
        let r = &o.row;
        let option = if r.strategy.uses_ahead() {
            format!("share {}", self.knobs.ahead)
        } else if r.strategy.uses_beta() {
            format!("beta {}", self.knobs.beta)
        } else {
            String::new()
        };
        vec![
            self.workload(),
            r.strategy.name().to_string(),
            option,
            r.origin_calls.to_string(),
            format!("{:.2}", r.origin_calls as f64 / ttls),
            r.ahead_refreshes.to_string(),
            r.early_refreshes.to_string(),
            r.misses.to_string(),
            r.peak_origin.to_string(),
            format!("{:.1} ms", r.p50_ms),
            format!("{:.1} ms", r.p99_ms),
            format!("{:.2} s", r.mean_age_s),
            format!("{:.1} s", r.oldest_served_s),
        ]
    }
}
