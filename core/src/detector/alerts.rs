//! What the detector reports: typed findings with their evidence and likely cures.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

/// Which fingerprint of a stampede an alert is (a miss spike, origin latency, lock wait, a
/// sawtooth of spikes that repeat with the TTL).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AlertKind {
    /// Alert 1: the miss rate is above its steady state times the spike factor (default 5):
    /// a stampede is forming.
    MissSpike,
    /// Alert 2: origin latency p99 is above p50 times the latency factor (default 10): the
    /// origin sees boundary spikes.
    OriginLatency,
    /// Alert 3: the p99 of waiters' wait is above the rebuild time (load duration p99): the
    /// queue behind loads is growing.
    LockWait,
    /// Miss spikes repeat with a period (the TTL's, when it matches): the sawtooth.
    Sawtooth,
}

/// What the detector believes caused the misses, from how they were spread over keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Cause {
    /// Most misses were on one key: a hot key expired.
    HotKey,
    /// Most misses were on keys whose entries had expired, many of them at once: keys
    /// written together expire together.
    MassExpiry,
    /// Most misses were on keys with no entry at all: absent or random ids (a miss storm).
    MissStorm,
    /// Not enough to tell.
    Unknown,
}

/// A remedy herdless offers, named by the option that turns it on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Cure {
    /// Load through `get_or_load` (single-flight) instead of get + set.
    SingleFlight,
    /// XFetch early refresh (`beta` > 0): a hot key is refreshed before it expires.
    XFetch,
    /// A `grace` window: serve stale while one refresh runs.
    Grace,
    /// TTL `jitter`: spread the expiry of keys written together.
    Jitter,
    /// Negative caching: cache "absent" (`Ok(None)`, `negative_ttl`).
    NegativeCaching,
    /// An `origin_budget`: cap concurrent loader calls.
    OriginBudget,
}

impl AlertKind {
    /// The kind as a snake_case name (`miss_spike`, `origin_latency`, `lock_wait`,
    /// `sawtooth`): the Prometheus label value and the bindings' spelling.
    pub fn name(self) -> &'static str {
        match self {
            AlertKind::MissSpike => "miss_spike",
            AlertKind::OriginLatency => "origin_latency",
            AlertKind::LockWait => "lock_wait",
            AlertKind::Sawtooth => "sawtooth",
        }
    }
}

impl Cause {
    /// The cause as a snake_case name (`hot_key`, `mass_expiry`, `miss_storm`, `unknown`).
    pub fn name(self) -> &'static str {
        match self {
            Cause::HotKey => "hot_key",
            Cause::MassExpiry => "mass_expiry",
            Cause::MissStorm => "miss_storm",
            Cause::Unknown => "unknown",
        }
    }
}

impl Cure {
    /// The cure as a snake_case name (`single_flight`, `xfetch`, `grace`, `jitter`,
    /// `negative_caching`, `origin_budget`).
    pub fn name(self) -> &'static str {
        match self {
            Cure::SingleFlight => "single_flight",
            Cure::XFetch => "xfetch",
            Cure::Grace => "grace",
            Cure::Jitter => "jitter",
            Cure::NegativeCaching => "negative_caching",
            Cure::OriginBudget => "origin_budget",
        }
    }

    /// A short imperative, for humans.
    pub fn advice(self) -> &'static str {
        match self {
            Cure::SingleFlight => "load through get_or_load (single-flight) instead of get + set",
            Cure::XFetch => "keep XFetch on (beta > 0) so hot keys refresh before they expire",
            Cure::Grace => "set a grace window to serve stale while one refresh runs",
            Cure::Jitter => "raise TTL jitter so keys written together expire apart",
            Cure::NegativeCaching => "cache absent results (negative caching)",
            Cure::OriginBudget => "set an origin budget to cap concurrent loads",
        }
    }
}

/// The figures behind an alert, over the window that fired it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Evidence {
    /// Alert 1 figures.
    MissRate {
        /// Misses per second in the last tick.
        per_second: f64,
        /// Steady state: the median misses per second of the recent ticks.
        steady_per_second: f64,
        /// Share of those misses on entries that had expired (0..=1).
        expired_share: f64,
        /// Share of those misses on the most missed key (0..=1).
        top_key_share: f64,
    },
    /// Alert 2 figures (bucket upper bounds of the load-duration histogram).
    Latency {
        /// Median load duration.
        p50: Duration,
        /// 99th percentile load duration.
        p99: Duration,
        /// Loads in the window.
        loads: u64,
    },
    /// Alert 3 figures (bucket upper bounds).
    LockWait {
        /// 99th percentile of waiters' wait.
        wait_p99: Duration,
        /// 99th percentile load duration: the rebuild time.
        rebuild_p99: Duration,
        /// Waits in the window.
        waits: u64,
    },
    /// Sawtooth figures.
    Periodic {
        /// Mean interval between the spikes.
        period: Duration,
        /// Spikes seen in the series.
        spikes: u32,
        /// The cache's TTL, when the period matches it.
        ttl: Option<Duration>,
    },
}

/// One finding of the stampede detector.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Alert {
    /// Which fingerprint.
    pub kind: AlertKind,
    /// The likely cause.
    pub cause: Cause,
    /// Where: the namespace.
    pub namespace: String,
    /// Where: the key, when one key dominates.
    pub key: Option<String>,
    /// When it first fired, on the cache's clock.
    pub since: Duration,
    /// When its condition last held, on the cache's clock.
    pub last_seen: Duration,
    /// Whether the condition held at the last evaluation (alerts stay listed for the hold
    /// time after it stops holding, so a poller does not miss a short spike).
    pub active: bool,
    /// The figures.
    pub evidence: Evidence,
    /// Likely cures, most likely first.
    pub cures: Vec<Cure>,
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

impl fmt::Display for AlertKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AlertKind::MissSpike => "miss spike",
            AlertKind::OriginLatency => "origin latency skew",
            AlertKind::LockWait => "lock wait above rebuild time",
            AlertKind::Sawtooth => "periodic miss spikes (sawtooth)",
        })
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Cause::HotKey => "a hot key expiring",
            Cause::MassExpiry => "keys expiring together",
            Cause::MissStorm => "a storm of misses on absent keys",
            Cause::Unknown => "unknown",
        })
    }
}

impl fmt::Display for Evidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Evidence::MissRate {
                per_second,
                steady_per_second,
                expired_share,
                top_key_share,
            } => write!(
                f,
                "{per_second:.1} misses/s against a steady {steady_per_second:.1}/s; \
                 {:.0}% on expired entries, {:.0}% on one key",
                expired_share * 100.0,
                top_key_share * 100.0
            ),
            Evidence::Latency { p50, p99, loads } => write!(
                f,
                "load p99 {:.3}s vs p50 {:.3}s over {loads} loads",
                secs(*p99),
                secs(*p50)
            ),
            Evidence::LockWait {
                wait_p99,
                rebuild_p99,
                waits,
            } => write!(
                f,
                "wait p99 {:.3}s vs rebuild p99 {:.3}s over {waits} waits",
                secs(*wait_p99),
                secs(*rebuild_p99)
            ),
            Evidence::Periodic {
                period,
                spikes,
                ttl,
            } => {
                write!(f, "{spikes} spikes every {:.1}s", secs(*period))?;
                if let Some(ttl) = ttl {
                    write!(f, " (the TTL is {:.1}s)", secs(*ttl))?;
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for Alert {
    /// One line per alert, e.g.
    /// `miss spike in "users" key "users:top" since 120.0s (a hot key expiring): ...; cure: ...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} in {:?}", self.kind, self.namespace)?;
        if let Some(key) = &self.key {
            write!(f, " key {key:?}")?;
        }
        write!(f, " since {:.1}s", secs(self.since))?;
        if !self.active {
            write!(f, " (last seen {:.1}s)", secs(self.last_seen))?;
        }
        if self.cause != Cause::Unknown {
            write!(f, " ({})", self.cause)?;
        }
        write!(f, ": {}", self.evidence)?;
        for (i, c) in self.cures.iter().enumerate() {
            f.write_str(if i == 0 { "; cure: " } else { "; or " })?;
            f.write_str(c.advice())?;
        }
        Ok(())
    }
}
