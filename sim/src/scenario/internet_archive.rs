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

use super::{Setup, traffic};
use crate::client::{self, World};
use crate::origin::OriginConfig;
use crate::strategy::{Knobs, Strategy};

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
