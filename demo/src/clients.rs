//! The clients: `clients` tasks reading the hot key in a loop, timing every request.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::origin::{Origin, OriginStats};
use crate::reader::Reader;
use crate::scenario::Scenario;
use crate::strategy::Strategy;

/// The hot key every client reads.
pub const HOT_KEY: &str = "feed:v1:home";

/// What one strategy's run measured.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// The strategy that ran.
    pub strategy: Strategy,
    /// Request latencies in nanoseconds, sorted.
    pub latencies: Vec<u64>,
    /// Requests that ended in an error (each message once, with its count).
    pub errors: Vec<(String, usize)>,
    /// The oldest value any client was served: time since its load finished.
    pub max_age: Duration,
    /// What the origin saw.
    pub origin: OriginStats,
    /// herdless's own counters (None for naive).
    pub metrics: Option<herdless::CounterSnapshot>,
}

impl RunResult {
    /// Requests answered (with a value or an error).
    pub fn requests(&self) -> usize {
        self.latencies.len()
    }

    /// The latency at quantile `q` in [0, 1] (nearest rank).
    pub fn latency(&self, q: f64) -> Duration {
        let Some(last) = self.latencies.len().checked_sub(1) else {
            return Duration::ZERO;
        };
        let rank = ((q * self.latencies.len() as f64).ceil() as usize).clamp(1, last + 1) - 1;
        Duration::from_nanos(self.latencies[rank])
    }
}

/// What one client measured.
#[derive(Default)]
struct ClientLog {
    latencies: Vec<u64>,
    errors: Vec<String>,
    max_age: Duration,
}

/// Runs `strategy` through `scenario` on the current tokio runtime.
pub async fn run(strategy: Strategy, scenario: &Scenario) -> Result<RunResult, String> {
    let origin = Origin::new(scenario.origin);
    let reader = Arc::new(Reader::new(strategy, scenario));
    reader.warm(HOT_KEY, &origin, scenario.first_expiry).await?;
    let t0 = origin.start_run();
    let end = t0 + scenario.duration;
    let think_nanos = u64::try_from(scenario.think.as_nanos()).unwrap_or(u64::MAX);
    let clients: Vec<_> = (0..scenario.clients)
        .map(|i| {
            let (reader, origin) = (reader.clone(), origin.clone());
            // A fixed seed per client: runs differ only by timing.
            let rng = fastrand::Rng::with_seed(i as u64);
            tokio::spawn(client(reader, origin, rng, think_nanos, end))
        })
        .collect();
    let mut logs = Vec::with_capacity(clients.len());
    for c in clients {
        logs.push(c.await.map_err(|e| format!("a client task failed: {e}"))?);
    }
    let stats = origin.stats();
    let metrics = reader.metrics();
    // Let a background refresh still running finish, so it does not overlap the next run.
    let settle = Instant::now();
    while origin.in_flight() > 0 && settle.elapsed() < scenario.origin * 10 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(collect(strategy, logs, stats, metrics))
}

async fn client(
    reader: Arc<Reader>,
    origin: Arc<Origin>,
    mut rng: fastrand::Rng,
    think_nanos: u64,
    end: Instant,
) -> ClientLog {
    let mut log = ClientLog::default();
    let mut pause = || Duration::from_nanos(rng.u64(0..=think_nanos.saturating_mul(2)));
    // Start at a random moment, so the clients are spread over the think time.
    tokio::time::sleep(pause()).await;
    loop {
        let start = Instant::now();
        if start >= end {
            return log;
        }
        let answer = reader.get(HOT_KEY, &origin).await;
        let done = Instant::now();
        log.latencies
            .push(u64::try_from((done - start).as_nanos()).unwrap_or(u64::MAX));
        match answer {
            Ok(value) => log.max_age = log.max_age.max(done - value.loaded_at),
            Err(e) => log.errors.push(e),
        }
        tokio::time::sleep(pause()).await;
    }
}

fn collect(
    strategy: Strategy,
    logs: Vec<ClientLog>,
    origin: OriginStats,
    metrics: Option<herdless::CounterSnapshot>,
) -> RunResult {
    let mut latencies = Vec::with_capacity(logs.iter().map(|l| l.latencies.len()).sum());
    let mut errors: Vec<(String, usize)> = Vec::new();
    let mut max_age = Duration::ZERO;
    for log in logs {
        latencies.extend(log.latencies);
        max_age = max_age.max(log.max_age);
        for e in log.errors {
            match errors.iter_mut().find(|(m, _)| *m == e) {
                Some((_, n)) => *n += 1,
                None => errors.push((e, 1)),
            }
        }
    }
    latencies.sort_unstable();
    RunResult {
        strategy,
        latencies,
        errors,
        max_age,
        origin,
        metrics,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(latencies_ms: &[u64]) -> RunResult {
        RunResult {
            strategy: Strategy::Naive,
            latencies: latencies_ms.iter().map(|ms| ms * 1_000_000).collect(),
            errors: Vec::new(),
            max_age: Duration::ZERO,
            origin: OriginStats::default(),
            metrics: None,
        }
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        let r = result(&(1..=100).collect::<Vec<_>>());
        assert_eq!(r.latency(0.5), Duration::from_millis(50));
        assert_eq!(r.latency(0.99), Duration::from_millis(99));
        assert_eq!(r.latency(1.0), Duration::from_millis(100));
        assert_eq!(r.latency(0.0), Duration::from_millis(1));
        assert_eq!(result(&[]).latency(0.5), Duration::ZERO);
    }
}
