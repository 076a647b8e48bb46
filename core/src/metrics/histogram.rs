//! A fixed-bucket latency histogram of atomics: cheap to record, Prometheus-shaped to read.

use core::time::Duration;

use crate::sync::{AtomicU64, Ordering};

/// Upper bounds of the buckets, in seconds (the last bucket, +Inf, is implicit).
pub(crate) const BUCKETS: [f64; 18] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0, 60.0,
];

#[derive(Default)]
pub(crate) struct Histogram {
    counts: [AtomicU64; BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

impl Histogram {
    pub(crate) fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let i = BUCKETS
            .iter()
            .position(|&b| secs <= b)
            .unwrap_or(BUCKETS.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> HistogramSnapshot {
        let mut counts = [0; BUCKETS.len() + 1];
        for (c, a) in counts.iter_mut().zip(&self.counts) {
            *c = a.load(Ordering::Relaxed);
        }
        HistogramSnapshot {
            counts,
            sum: Duration::from_nanos(self.sum_nanos.load(Ordering::Relaxed)),
        }
    }
}

/// A point-in-time copy of a histogram.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HistogramSnapshot {
    /// Observations per bucket (not cumulative); the bounds are [`BUCKETS`](Self::BUCKETS)
    /// then +Inf.
    pub counts: [u64; BUCKETS.len() + 1],
    /// Sum of all observations.
    pub sum: Duration,
}

impl HistogramSnapshot {
    /// Upper bounds of the buckets, in seconds; the last bucket, +Inf, is implicit.
    pub const BUCKETS: [f64; 18] = BUCKETS;

    /// Number of observations.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The `q`-quantile (0..=1) estimated as the upper bound of the bucket it falls in
    /// (`None` when empty; `f64::INFINITY` seconds beyond the last bound).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = libm::ceil(q.clamp(0.0, 1.0) * total as f64).max(1.0) as u64;
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(BUCKETS.get(i).copied().unwrap_or(f64::INFINITY));
            }
        }
        Some(f64::INFINITY)
    }
}
