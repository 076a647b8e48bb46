//! `defaults()`: the engine's defaults of the options it decides, read from the engine
//! (`herdless::Builder::default()`, `herdless::DetectorOptions::default()`,
//! `herdless_redis::call::DEFAULT_WARM_CONCURRENCY`), in Node's units (milliseconds,
//! counts). The binding states none of them itself; its docs' "(default N)" are checked
//! against these by `test/defaults.test.js`.

use std::time::Duration;

use napi_derive::napi;

/// The engine's defaults of the `new Cache(options)` it decides (see `defaults()`);
/// durations in milliseconds.
#[napi(object, object_from_js = false)]
pub struct Defaults {
    /// `ttl`.
    pub ttl: f64,
    /// `grace` (0: off).
    pub grace: f64,
    /// `jitter`.
    pub jitter: f64,
    /// `beta`.
    pub beta: f64,
    /// `negativeTtl`.
    pub negative_ttl: f64,
    /// `waitTimeout`.
    pub wait_timeout: f64,
    /// `failsafeBackoff`.
    pub failsafe_backoff: f64,
    /// `capacity`.
    pub capacity: f64,
    /// `maxFlights`.
    pub max_flights: f64,
    /// `maxBatch`.
    pub max_batch: f64,
    /// `maxKeyLen`.
    pub max_key_len: f64,
    /// `maxNamespaces`.
    pub max_namespaces: f64,
    /// `cache.warm`'s `concurrency` (never more than `originBudget`).
    pub warm_concurrency: f64,
    /// The stampede detector's thresholds (`detector`).
    pub detector: DetectorDefaults,
}

/// The engine's defaults of the stampede detector's thresholds; durations in milliseconds.
#[napi(object, object_from_js = false)]
pub struct DetectorDefaults {
    /// `tick` (and `detectorTick`).
    pub tick: f64,
    /// `spikeFactor`.
    pub spike_factor: f64,
    /// `minSpikeMisses`.
    pub min_spike_misses: f64,
    /// `latencyFactor`.
    pub latency_factor: f64,
    /// `latencyWindow`.
    pub latency_window: f64,
    /// `minSamples`.
    pub min_samples: f64,
    /// `keyShare`.
    pub key_share: f64,
    /// `hold`.
    pub hold: f64,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The engine's defaults of the options it decides, in Node's units (milliseconds,
/// counts): what `new Cache()` uses for an option it is not given. A new object each call.
#[napi]
pub fn defaults() -> Defaults {
    let o = herdless::Builder::<()>::default().options();
    let d = herdless::DetectorOptions::default();
    Defaults {
        ttl: ms(o.ttl),
        grace: ms(o.grace),
        jitter: o.jitter,
        beta: o.beta,
        negative_ttl: ms(o.negative_ttl),
        wait_timeout: ms(o.wait_timeout),
        failsafe_backoff: ms(o.failsafe_backoff),
        capacity: o.capacity as f64,
        max_flights: o.max_flights as f64,
        max_batch: o.max_batch as f64,
        max_key_len: o.max_key_len as f64,
        max_namespaces: o.max_namespaces as f64,
        warm_concurrency: herdless_redis::call::DEFAULT_WARM_CONCURRENCY as f64,
        detector: DetectorDefaults {
            tick: ms(d.tick),
            spike_factor: d.spike_factor,
            min_spike_misses: d.min_spike_misses as f64,
            latency_factor: d.latency_factor,
            latency_window: ms(d.latency_window),
            min_samples: d.min_samples as f64,
            key_share: d.key_share,
            hold: ms(d.hold),
        },
    }
}
