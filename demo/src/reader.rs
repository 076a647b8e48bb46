//! What a strategy reads through: naive cache-aside over a map, or the herdless engine
//! configured as the strategy says.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use herdless::{Cache, Lookup};

use crate::origin::{Origin, Value};
use crate::scenario::Scenario;
use crate::strategy::Strategy;

/// The cache a strategy reads through.
pub enum Reader {
    /// Naive cache-aside over a plain map.
    Naive(NaiveCache),
    /// The herdless engine.
    Herdless(Cache<Value>),
}

impl Reader {
    /// The cache of `strategy` for `scenario`.
    pub fn new(strategy: Strategy, scenario: &Scenario) -> Self {
        let (grace, beta) = match strategy {
            Strategy::Naive => return Reader::Naive(NaiveCache::new(scenario.ttl)),
            Strategy::SingleFlight => (None, 0.0),
            Strategy::StaleWhileRevalidate => (Some(scenario.grace), 0.0),
            Strategy::XFetch => (None, 1.0),
            Strategy::Combined => (Some(scenario.grace), 1.0),
        };
        let mut builder = Cache::builder()
            .ttl(scenario.ttl)
            // One key has one expiry whatever its jitter (jitter spreads many keys): off, so
            // every strategy's key expires at the same moments and the rows line up.
            .jitter(0.0)
            .beta(beta)
            .spawner(|task| {
                tokio::spawn(task);
            });
        if let Some(grace) = grace {
            builder = builder.grace(grace);
        }
        Reader::Herdless(builder.build().expect("the scenario was checked"))
    }

    /// Loads `key` once, before the run, storing it for `ttl` instead of the cache's TTL.
    pub async fn warm(&self, key: &str, origin: &Origin, ttl: Duration) -> Result<(), String> {
        match self {
            Reader::Naive(naive) => {
                let value = origin.load().await;
                naive.store(key, value, ttl);
                Ok(())
            }
            Reader::Herdless(cache) => {
                let Lookup::Lead(mut guard) = cache.lookup(key).map_err(|e| e.to_string())? else {
                    return Err(format!("warm-up: {key} is already cached"));
                };
                guard.set_ttl(ttl);
                if let Err(e) = guard.begin().await {
                    return guard.fail(e).map(drop).map_err(|e| e.to_string());
                }
                let value = origin.load().await;
                guard
                    .complete(Ok(Some(value)))
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
        }
    }

    /// The value of `key`, calling `origin` when the strategy decides to.
    pub async fn get(&self, key: &str, origin: &Arc<Origin>) -> Result<Value, String> {
        match self {
            Reader::Naive(naive) => Ok(naive.get_or_load(key, origin).await),
            Reader::Herdless(cache) => {
                let origin = origin.clone();
                let loaded = cache
                    .get_or_load_async(key, move || async move {
                        Ok::<_, std::convert::Infallible>(Some(origin.load().await))
                    })
                    .await;
                match loaded {
                    Ok(Some(v)) => Ok(v),
                    Ok(None) => Err("the loader never answers absent".into()),
                    Err(e) => Err(e.to_string()),
                }
            }
        }
    }

    /// The herdless engine's counters, if this is herdless.
    pub fn metrics(&self) -> Option<herdless::CounterSnapshot> {
        match self {
            Reader::Naive(_) => None,
            Reader::Herdless(cache) => Some(cache.metrics().total()),
        }
    }
}

/// Cache-aside as most code writes it: get; on a miss, load and set.
pub struct NaiveCache {
    ttl: Duration,
    map: RwLock<HashMap<String, (Value, Instant)>>,
}

impl NaiveCache {
    /// An empty cache whose values live `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            map: RwLock::new(HashMap::new()),
        }
    }

    /// The fresh value of `key`, or a new one from the origin.
    pub async fn get_or_load(&self, key: &str, origin: &Origin) -> Value {
        if let Some(value) = self.fresh(key) {
            return value;
        }
        let value = origin.load().await;
        self.store(key, value.clone(), self.ttl);
        value
    }

    fn fresh(&self, key: &str) -> Option<Value> {
        let map = self.map.read().unwrap_or_else(PoisonError::into_inner);
        map.get(key)
            .filter(|(_, expires)| Instant::now() < *expires)
            .map(|(value, _)| value.clone())
    }

    fn store(&self, key: &str, value: Value, ttl: Duration) {
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        map.insert(key.to_owned(), (value, Instant::now() + ttl));
    }
}
