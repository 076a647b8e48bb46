//! The detector's options: its thresholds, window widths and hold time.

use core::time::Duration;

use crate::error::ConfigError;

/// Options of the stampede detector. `DetectorOptions::default()` are the thresholds of the
/// fingerprint: misses 5x their steady state, origin p99 10x its p50, lock waits above the
/// rebuild time.
#[derive(Clone, Debug, PartialEq)]
pub struct DetectorOptions {
    /// On or off (default on: it costs nothing on the hit path).
    pub enabled: bool,
    /// Width of one window tick (default 1 s).
    pub tick: Duration,
    /// Alert 1: misses per tick above this times their steady state (default 5).
    pub spike_factor: f64,
    /// Alert 1: and at least this many misses in the tick (default 20), so a quiet
    /// namespace going from 0 to 3 misses is not a stampede.
    pub min_spike_misses: u64,
    /// Alert 2: load p99 above this times load p50 (default 10).
    pub latency_factor: f64,
    /// Alerts 2 and 3: the latency window (default 60 s).
    pub latency_window: Duration,
    /// Alerts 2 and 3: at least this many loads / waits in the window (default 20).
    pub min_samples: u64,
    /// Alert 1: one key with at least this share of a spike's misses is named (default 0.5).
    pub key_share: f64,
    /// How long an alert stays listed after its condition last held (default 10 min).
    pub hold: Duration,
}

impl Default for DetectorOptions {
    fn default() -> Self {
        Self {
            enabled: true,
            tick: Duration::from_secs(1),
            spike_factor: 5.0,
            min_spike_misses: 20,
            latency_factor: 10.0,
            latency_window: Duration::from_secs(60),
            min_samples: 20,
            key_share: 0.5,
            hold: Duration::from_secs(600),
        }
    }
}

impl DetectorOptions {
    /// The detector switched off.
    pub fn off() -> Self {
        Self {
            enabled: false,
            ..Self::default()
        }
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.tick.is_zero() {
            return Err(ConfigError::ZeroDuration {
                option: "detector.tick",
            });
        }
        if self.latency_window.is_zero() {
            return Err(ConfigError::ZeroDuration {
                option: "detector.latency_window",
            });
        }
        for f in [self.spike_factor, self.latency_factor] {
            if !(f.is_finite() && f >= 1.0) {
                return Err(ConfigError::Inconsistent {
                    reason: "detector factors must be finite and at least 1",
                });
            }
        }
        if !(self.key_share > 0.0 && self.key_share <= 1.0) {
            return Err(ConfigError::Inconsistent {
                reason: "detector.key_share must be in (0, 1]",
            });
        }
        Ok(())
    }
}
