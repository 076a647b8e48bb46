//! `cache.alerts()`, `cache.hotKeys()`, `exportHotKeys()` / `importHotKeys()`: the engine's
//! stampede detector and hot-key tracker in camelCase and milliseconds.

use herdless::{Alert as CoreAlert, AlertKind, Cause, Cure, Evidence, HotKey as CoreHotKey};
use napi_derive::napi;

/// The figures behind an alert; which are set depends on `kind`.
#[napi(object, object_from_js = false)]
pub struct AlertEvidence {
    /// `missSpike`: misses per second in the last tick.
    pub misses_per_second: Option<f64>,
    /// `missSpike`: the steady state (median of the recent ticks), per second.
    pub steady_misses_per_second: Option<f64>,
    /// `missSpike`: share (0..1) of the misses on expired entries.
    pub expired_share: Option<f64>,
    /// `missSpike`: share (0..1) of the misses on the most missed key.
    pub top_key_share: Option<f64>,
    /// `originLatency`: median load duration, milliseconds.
    pub load_p50_ms: Option<f64>,
    /// `originLatency`: 99th percentile load duration, milliseconds.
    pub load_p99_ms: Option<f64>,
    /// `originLatency`: loads in the window.
    pub loads: Option<f64>,
    /// `lockWait`: 99th percentile wait, milliseconds.
    pub wait_p99_ms: Option<f64>,
    /// `lockWait`: 99th percentile load duration (the rebuild time), milliseconds.
    pub rebuild_p99_ms: Option<f64>,
    /// `lockWait`: waits in the window.
    pub waits: Option<f64>,
    /// `sawtooth`: the period of the spikes, milliseconds.
    pub period_ms: Option<f64>,
    /// `sawtooth`: spikes in the series.
    pub spikes: Option<f64>,
    /// `sawtooth`: the cache's TTL in milliseconds, when the period matches it.
    pub ttl_ms: Option<f64>,
}

/// One finding of the stampede detector.
#[napi(object, object_from_js = false)]
pub struct Alert {
    /// `missSpike` (misses above 5x their steady state), `originLatency` (load p99 above
    /// 10x p50), `lockWait` (wait p99 above the rebuild time) or `sawtooth` (miss spikes
    /// repeating with a period, usually the TTL's).
    #[napi(ts_type = "'missSpike' | 'originLatency' | 'lockWait' | 'sawtooth'")]
    pub kind: String,
    /// What the misses looked like.
    #[napi(ts_type = "'hotKey' | 'massExpiry' | 'missStorm' | 'unknown'")]
    pub cause: String,
    /// Where: the namespace.
    pub namespace: String,
    /// Where: the key, when one key dominates.
    pub key: Option<String>,
    /// When it first fired, milliseconds on the cache's (monotonic) clock.
    pub since_ms: f64,
    /// When its condition last held, milliseconds on the cache's clock.
    pub last_seen_ms: f64,
    /// Whether the condition held at the last evaluation.
    pub active: bool,
    /// The figures.
    pub evidence: AlertEvidence,
    /// Likely cures, most likely first.
    #[napi(
        ts_type = "Array<'singleFlight' | 'xfetch' | 'grace' | 'jitter' | 'negativeCaching' | 'originBudget'>"
    )]
    pub cures: Vec<String>,
    /// The alert in one line, for humans.
    pub message: String,
}

/// One key of the hot-key tracker's top-K.
#[napi(object)]
pub struct HotKey {
    /// The key.
    pub key: String,
    /// Estimated accesses (fresh hits are sampled and weighted).
    pub count: f64,
    /// Misses recorded while the key was tracked.
    pub misses: f64,
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn evidence(e: &Evidence) -> AlertEvidence {
    let mut out = AlertEvidence {
        misses_per_second: None,
        steady_misses_per_second: None,
        expired_share: None,
        top_key_share: None,
        load_p50_ms: None,
        load_p99_ms: None,
        loads: None,
        wait_p99_ms: None,
        rebuild_p99_ms: None,
        waits: None,
        period_ms: None,
        spikes: None,
        ttl_ms: None,
    };
    match e {
        Evidence::MissRate {
            per_second,
            steady_per_second,
            expired_share,
            top_key_share,
        } => {
            out.misses_per_second = Some(*per_second);
            out.steady_misses_per_second = Some(*steady_per_second);
            out.expired_share = Some(*expired_share);
            out.top_key_share = Some(*top_key_share);
        }
        Evidence::Latency { p50, p99, loads } => {
            out.load_p50_ms = Some(ms(*p50));
            out.load_p99_ms = Some(ms(*p99));
            out.loads = Some(*loads as f64);
        }
        Evidence::LockWait {
            wait_p99,
            rebuild_p99,
            waits,
        } => {
            out.wait_p99_ms = Some(ms(*wait_p99));
            out.rebuild_p99_ms = Some(ms(*rebuild_p99));
            out.waits = Some(*waits as f64);
        }
        Evidence::Periodic {
            period,
            spikes,
            ttl,
        } => {
            out.period_ms = Some(ms(*period));
            out.spikes = Some(f64::from(*spikes));
            out.ttl_ms = ttl.map(ms);
        }
        _ => {}
    }
    out
}

fn name<T: std::fmt::Debug>(t: &T) -> String {
    // `MissSpike` -> `missSpike`, `XFetch` -> `xfetch`.
    let s = format!("{t:?}");
    if s == "XFetch" {
        return "xfetch".into();
    }
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_ascii_lowercase().to_string() + c.as_str())
        .unwrap_or_default()
}

/// The engine's alerts as JS sees them.
pub(crate) fn alerts(alerts: &[CoreAlert]) -> Vec<Alert> {
    alerts
        .iter()
        .map(|a| Alert {
            kind: name::<AlertKind>(&a.kind),
            cause: name::<Cause>(&a.cause),
            namespace: a.namespace.clone(),
            key: a.key.clone(),
            since_ms: ms(a.since),
            last_seen_ms: ms(a.last_seen),
            active: a.active,
            evidence: evidence(&a.evidence),
            cures: a.cures.iter().map(name::<Cure>).collect(),
            message: a.to_string(),
        })
        .collect()
}

/// Hot keys as JS sees them.
pub(crate) fn hot_keys(keys: Vec<CoreHotKey>) -> Vec<HotKey> {
    keys.into_iter()
        .map(|k| HotKey {
            key: k.key,
            count: k.count as f64,
            misses: k.misses as f64,
        })
        .collect()
}
