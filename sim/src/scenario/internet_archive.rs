//! The Internet Archive's experiment (Jim Nelson, "Preventing cache stampede with Redis &
//! XFetch", RedisConf 2017; github.com/internetarchive/xfetch, `stampede.php`): 50 worker
//! processes read one cached value in a closed loop (each pauses 10..1000 ms at random, then
//! reads); the value expires after 20 s and takes 500 ms to recompute; XFetch beta 1.
//!
//! Their four strategies map onto ours: `fetch` = naive, `locked` = single-flight (their
//! losers sleep 10 ms and retry; ours wait for the leader's result), `xfetch` =
//! xfetch-uncoordinated (each reader decides alone and recomputes itself), `xlocked` =
//! xfetch (XFetch plus the engine's single-flight: one early refresh, everyone else keeps
//! reading the value, their "ducked out").

use std::rc::Rc;
use std::time::Duration;

use serde::Serialize;

use super::setup::Setup;
use super::traffic;
use crate::client;
use crate::origin::OriginConfig;
use crate::report::Outcome;
use crate::report::human;
use crate::strategy::{Knobs, Strategy};
use crate::world::World;

/// The key the workers read.
pub const IA_KEY: &str = "ia:cache";

/// The Internet Archive's four strategies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IaStrategy {
    /// Plain cache-aside.
    Fetch,
    /// A lock; losers wait.
    Locked,
    /// XFetch without a lock.
    Xfetch,
    /// XFetch with a lock.
    Xlocked,
}

impl IaStrategy {
    /// All four, in their order.
    pub const ALL: [IaStrategy; 4] = [
        IaStrategy::Fetch,
        IaStrategy::Locked,
        IaStrategy::Xfetch,
        IaStrategy::Xlocked,
    ];

    /// Their name.
    pub fn name(self) -> &'static str {
        match self {
            IaStrategy::Fetch => "fetch",
            IaStrategy::Locked => "locked",
            IaStrategy::Xfetch => "xfetch",
            IaStrategy::Xlocked => "xlocked",
        }
    }

    /// The strategy of ours that models it.
    pub fn strategy(self) -> Strategy {
        match self {
            IaStrategy::Fetch => Strategy::Naive,
            IaStrategy::Locked => Strategy::SingleFlight,
            IaStrategy::Xfetch => Strategy::XfetchUncoordinated,
            IaStrategy::Xlocked => Strategy::Xfetch,
        }
    }
}

/// Parameters of the Internet Archive experiment.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InternetArchive {
    /// Worker processes reading in a closed loop.
    pub workers: usize,
    /// Shortest and longest pause of a worker before each read (uniform).
    pub pause: (Duration, Duration),
    /// How long workers read.
    pub duration: Duration,
    /// The origin (`load_time` = their recompute time).
    pub origin: OriginConfig,
    /// Engine options (`ttl` = their expiration, `beta`).
    pub knobs: Knobs,
}

impl Default for InternetArchive {
    /// Their parameters: 50 workers pausing 10..1000 ms, 20 s expiry, 500 ms recompute,
    /// beta 1; 300 s of reads (their runs lasted 290 to 450 s).
    fn default() -> Self {
        Self {
            workers: 50,
            pause: (Duration::from_millis(10), Duration::from_millis(1000)),
            duration: Duration::from_secs(300),
            origin: OriginConfig::new(Duration::from_millis(500)),
            knobs: Knobs::new(Duration::from_secs(20)),
        }
    }
}

impl Setup for InternetArchive {
    fn name(&self) -> &'static str {
        "internet-archive"
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
            "Internet Archive experiment: {} workers, expiry {}, recompute {}, beta {}",
            self.workers,
            human(self.knobs.ttl),
            human(self.origin.load_time),
            self.knobs.beta
        )
    }
    fn start(&self, w: &Rc<World>) {
        // Their first round of workers fills the cache and is not tallied: start cached.
        traffic::prefill(w, 0, IA_KEY, self.origin.load_time);
        let (lo, hi) = self.pause;
        for _ in 0..self.workers {
            let w2 = w.clone();
            let until = self.duration;
            w.handle.spawn(async move {
                loop {
                    let pause = lo + (hi.saturating_sub(lo)).mul_f64(w2.unit());
                    w2.handle.sleep(pause).await;
                    if w2.now() >= until {
                        return;
                    }
                    client::request(w2.clone(), 0, IA_KEY.to_string()).await;
                }
            });
        }
    }
}

/// The final tally of one published run of `stampede.php` (github.com/internetarchive/xfetch,
/// `samples/<strategy>.log` at commit 44e4efff51c711ec1eed1e1dcd8260198afe0abd: 50 workers,
/// 20 s expiration, 500 ms recompute, beta 1).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct IaAnchor {
    /// Their strategy.
    pub strategy: IaStrategy,
    /// How long their run lasted, in seconds.
    pub seconds: f64,
    /// Reads tallied ("samples").
    pub samples: u64,
    /// Reads that found no value ("misses").
    pub misses: u64,
    /// Recomputations ("recomputes").
    pub recomputes: u64,
    /// Recomputations that started while another was running ("simul. recomputes").
    pub simultaneous: u64,
    /// Reads whose XFetch draw fired ("earlies").
    pub earlies: u64,
}

/// Their four published tallies, copied from the logs named in [`IaAnchor`].
pub const IA_ANCHORS: [IaAnchor; 4] = [
    IaAnchor {
        strategy: IaStrategy::Fetch,
        seconds: 290.0,
        samples: 27_179,
        misses: 484,
        recomputes: 484,
        simultaneous: 471,
        earlies: 0,
    },
    IaAnchor {
        strategy: IaStrategy::Locked,
        seconds: 294.0,
        samples: 27_765,
        misses: 519,
        recomputes: 14,
        simultaneous: 0,
        earlies: 0,
    },
    IaAnchor {
        strategy: IaStrategy::Xfetch,
        seconds: 450.0,
        samples: 42_944,
        misses: 0,
        recomputes: 52,
        simultaneous: 28,
        earlies: 52,
    },
    IaAnchor {
        strategy: IaStrategy::Xlocked,
        seconds: 317.0,
        samples: 30_025,
        misses: 0,
        recomputes: 17,
        simultaneous: 0,
        earlies: 53,
    },
];

/// Their tallies beside ours, raw and per 100 s of reads (their runs lasted 290 to 450 s);
/// as Markdown when `markdown`.
pub fn comparison(outcomes: &[Outcome], seconds: f64, markdown: bool) -> String {
    let head = [
        "strategy",
        "source",
        "modelled by",
        "seconds",
        "samples",
        "misses",
        "recomputes",
        "simul.",
        "earlies",
        "recomputes/100 s",
        "misses/100 s",
    ];
    let per100 = |n: u64, s: f64| format!("{:.1}", n as f64 * 100.0 / s);
    let mut cells = Vec::new();
    for a in IA_ANCHORS {
        cells.push(vec![
            a.strategy.name().to_string(),
            "Internet Archive".to_string(),
            String::new(),
            format!("{:.0}", a.seconds),
            a.samples.to_string(),
            a.misses.to_string(),
            a.recomputes.to_string(),
            a.simultaneous.to_string(),
            a.earlies.to_string(),
            per100(a.recomputes, a.seconds),
            per100(a.misses, a.seconds),
        ]);
        let ours = outcomes
            .iter()
            .find(|o| o.row.strategy == a.strategy.strategy());
        if let Some(o) = ours {
            let r = &o.row;
            cells.push(vec![
                a.strategy.name().to_string(),
                "herdless-sim".to_string(),
                r.strategy.name().to_string(),
                format!("{seconds:.0}"),
                r.requests.to_string(),
                r.misses.to_string(),
                r.origin_calls.to_string(),
                r.simultaneous.to_string(),
                r.early_refreshes.to_string(),
                per100(r.origin_calls, seconds),
                per100(r.misses, seconds),
            ]);
        }
    }
    if markdown {
        crate::report::render_markdown(&head, &cells)
    } else {
        crate::report::render(&head, &cells)
    }
}
