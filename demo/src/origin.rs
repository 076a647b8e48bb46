//! The simulated origin: a slow aggregation that counts its calls and records how many are
//! in flight over time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A value the origin produces: which load made it and when, so clients can measure the
/// age of what they are served.
#[derive(Debug)]
pub struct Feed {
    /// 1 for the first load of a run's origin, then 2, 3...
    pub version: u64,
    /// When the load that produced it finished.
    pub loaded_at: Instant,
}

/// What the cache stores: cheap to clone.
pub type Value = Arc<Feed>;

/// What the origin saw during a run.
#[derive(Clone, Debug, Default)]
pub struct OriginStats {
    /// Calls started.
    pub calls: u64,
    /// Most calls in flight at once.
    pub peak: u32,
    /// Every change of the number of calls in flight: (time since the run started, calls
    /// in flight from then on), in time order.
    pub timeline: Vec<(Duration, u32)>,
}

struct State {
    t0: Instant,
    in_flight: u32,
    stats: OriginStats,
}

/// A simulated origin (a database aggregation, an upstream API) that takes a fixed time per
/// call, however many calls run at once. A real origin slows down under a herd, so the
/// naive figures this produces are the optimistic ones.
pub struct Origin {
    delay: Duration,
    versions: AtomicU64,
    state: Mutex<State>,
}

impl Origin {
    /// An origin whose every call takes `delay`.
    pub fn new(delay: Duration) -> Arc<Self> {
        Arc::new(Self {
            delay,
            versions: AtomicU64::new(0),
            state: Mutex::new(State {
                t0: Instant::now(),
                in_flight: 0,
                stats: OriginStats::default(),
            }),
        })
    }

    /// One call: waits `delay` (without blocking a thread) and returns a new version.
    pub async fn load(&self) -> Value {
        let call = InFlight::enter(self);
        tokio::time::sleep(self.delay).await;
        drop(call);
        Arc::new(Feed {
            version: self.versions.fetch_add(1, Ordering::Relaxed) + 1,
            loaded_at: Instant::now(),
        })
    }

    /// Starts the clock of the run now and forgets what was seen before (the warm-up).
    pub fn start_run(&self) -> Instant {
        let mut s = self.lock();
        s.t0 = Instant::now();
        s.stats = OriginStats {
            peak: s.in_flight,
            ..OriginStats::default()
        };
        let (t0, now) = (s.t0, s.in_flight);
        s.stats.timeline.push((Duration::ZERO, now));
        t0
    }

    /// Calls in flight right now.
    pub fn in_flight(&self) -> u32 {
        self.lock().in_flight
    }

    /// What the origin saw since [`start_run`](Self::start_run).
    pub fn stats(&self) -> OriginStats {
        self.lock().stats.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The state stays consistent at every unlock, so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn change(&self, enter: bool) {
        let mut s = self.lock();
        if enter {
            s.in_flight += 1;
            s.stats.calls += 1;
            s.stats.peak = s.stats.peak.max(s.in_flight);
        } else {
            s.in_flight -= 1;
        }
        let (at, now) = (s.t0.elapsed(), s.in_flight);
        s.stats.timeline.push((at, now));
    }
}

/// Counts one call in flight; leaving happens on drop, so a cancelled call is not counted
/// forever.
struct InFlight<'a>(&'a Origin);

impl<'a> InFlight<'a> {
    fn enter(origin: &'a Origin) -> Self {
        origin.change(true);
        Self(origin)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.change(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn counts_concurrent_calls_and_their_timeline() {
        let origin = Origin::new(Duration::from_millis(300));
        origin.load().await; // a warm-up, forgotten by start_run
        origin.start_run();
        let calls: Vec<_> = (0..3)
            .map(|_| {
                let o = origin.clone();
                tokio::spawn(async move { o.load().await.version })
            })
            .collect();
        let mut versions = Vec::new();
        for c in calls {
            versions.push(c.await.unwrap());
        }
        versions.sort();
        assert_eq!(versions, [2, 3, 4]);
        let stats = origin.stats();
        assert_eq!(stats.calls, 3);
        assert_eq!(stats.peak, 3);
        assert_eq!(origin.in_flight(), 0);
        assert_eq!(stats.timeline.len(), 1 + 6);
        assert_eq!(stats.timeline.last().map(|e| e.1), Some(0));
        assert!(stats.timeline.windows(2).all(|w| w[0].0 <= w[1].0));
    }

    #[tokio::test]
    async fn a_cancelled_call_leaves() {
        let origin = Origin::new(Duration::from_secs(60));
        origin.start_run();
        let load = origin.load();
        let cancelled = tokio::time::timeout(Duration::from_millis(10), load).await;
        assert!(cancelled.is_err());
        assert_eq!(origin.in_flight(), 0);
        assert_eq!(origin.stats().calls, 1);
    }
}
