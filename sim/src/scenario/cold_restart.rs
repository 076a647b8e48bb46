//! Cold restart: the cache was flushed (a restart, a new Redis), and traffic over `keys`
//! keys with Zipf popularity arrives at once. With warm-up, the top `warm_top` keys are
//! loaded through the engine first, at most `warm_concurrency` at a time, and traffic starts
//! when they are in.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

use serde::Serialize;

use super::setup::Setup;
use super::traffic::{self, JoinAll, Zipf};
use crate::client;
use crate::origin::OriginConfig;
use crate::report::human;
use crate::strategy::Knobs;
use crate::world::World;

/// Parameters of the cold-restart scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ColdRestart {
    /// Distinct keys.
    pub keys: usize,
    /// Zipf exponent of their popularity (key 0 the most popular).
    pub alpha: f64,
    /// Requests per second.
    pub rate: f64,
    /// How long clients send requests (from the end of the warm-up, if any).
    pub duration: Duration,
    /// Warm the most popular keys before traffic (None: no warm-up).
    pub warm_top: Option<usize>,
    /// At most this many warm-up loads at once.
    pub warm_concurrency: usize,
    /// The origin.
    pub origin: OriginConfig,
    /// Engine options.
    pub knobs: Knobs,
}

impl Default for ColdRestart {
    /// 10,000 keys, Zipf 1.0, 5,000 requests/s for 30 s, a 100 ms load on a 50-connection
    /// pool, a 300 s TTL; no warm-up (set `warm_top` to compare, e.g. 1,000 keys, 20 at once).
    fn default() -> Self {
        let mut origin = OriginConfig::new(Duration::from_millis(100));
        origin.pool = Some(50);
        let mut knobs = Knobs::new(Duration::from_secs(300));
        knobs.origin_budget = Some(50);
        Self {
            keys: 10_000,
            alpha: 1.0,
            rate: 5000.0,
            duration: Duration::from_secs(30),
            warm_top: None,
            warm_concurrency: 20,
            origin,
            knobs,
        }
    }
}

impl Setup for ColdRestart {
    fn name(&self) -> &'static str {
        "cold-restart"
    }
    fn variant(&self) -> String {
        match self.warm_top {
            Some(n) => format!("warm-up top {n}, {} at once", self.warm_concurrency),
            None => "no warm-up".into(),
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
            "Cold restart: {} keys (Zipf {}), {} req/s, load {}, pool {}",
            self.keys,
            self.alpha,
            self.rate,
            human(self.origin.load_time),
            self.origin
                .pool
                .map_or("unlimited".to_string(), |p| p.to_string())
        )
    }
    fn start(&self, w: &Rc<World>) {
        let this = self.clone();
        let w = w.clone();
        w.handle.clone().spawn(async move {
            if let Some(n) = this.warm_top {
                let queue: Rc<RefCell<VecDeque<String>>> = Rc::new(RefCell::new(
                    (0..n.min(this.keys))
                        .map(|i| format!("restart:{i}"))
                        .collect(),
                ));
                let workers = (0..this.warm_concurrency.max(1))
                    .map(|_| {
                        let (w, queue) = (w.clone(), queue.clone());
                        let f: std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> =
                            Box::pin(async move {
                                loop {
                                    let key = queue.borrow_mut().pop_front();
                                    let Some(key) = key else { return };
                                    client::warm(&w, 0, &key).await;
                                }
                            });
                        Some(f)
                    })
                    .collect();
                JoinAll(workers).await;
            }
            let zipf = Zipf::new(this.keys, this.alpha);
            let until = w.now() + this.duration;
            traffic::poisson(w.clone(), this.rate, until, move |w| {
                (0, format!("restart:{}", zipf.sample(w.unit())))
            })
            .await;
        });
    }
}
