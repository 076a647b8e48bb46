//! The hit-path contenders shared by the `hit_path` bench and the `hit_interleaved` bin: each
//! holds the same 1,000 keys, fresh, and answers a `u64` per hit.

use std::sync::Arc;
use std::time::Duration;

use herdless::{Cache, Lookup};

use crate::keys;

/// Keys held by every contender.
pub const N: usize = 1_000;

/// One read by key.
pub type Get = Arc<dyn Fn(&str) -> Option<u64> + Send + Sync>;

/// herdless `get` (also with the detector and hot-key tracker off) and `lookup` (freshness and
/// XFetch checks and the hit counter included),
/// quick_cache, moka and a parking_lot `RwLock<hashbrown::HashMap>`, filled with [`N`] keys.
pub fn contenders() -> Vec<(&'static str, Get)> {
    let keys = keys(N);
    let herdless: Cache<u64> = Cache::builder()
        .capacity(10 * N as u64)
        .ttl(Duration::from_secs(3600))
        .build()
        .unwrap();
    let quick = quick_cache::sync::Cache::<String, u64>::new(10 * N);
    let moka = moka::sync::Cache::<String, u64>::new(10 * N as u64);
    // The same cache without the stampede detector and the hot-key tracker: their cost on
    // the hit path is the difference with `herdless_get`.
    let bare: Cache<u64> = Cache::builder()
        .capacity(10 * N as u64)
        .ttl(Duration::from_secs(3600))
        .detector(herdless::DetectorOptions::off())
        .hot_keys(0)
        .build()
        .unwrap();
    let mut map = hashbrown::HashMap::new();
    for (i, k) in keys.iter().enumerate() {
        bare.set(k, i as u64).unwrap();
        herdless.set(k, i as u64).unwrap();
        quick.insert(k.clone(), i as u64);
        moka.insert(k.clone(), i as u64);
        map.insert(k.clone(), i as u64);
    }
    let rw = Arc::new(parking_lot::RwLock::new(map));
    let lookup = herdless.clone();
    vec![
        ("herdless_get", Arc::new(move |k: &str| herdless.get(k))),
        (
            "herdless_get_no_detector",
            Arc::new(move |k: &str| bare.get(k)),
        ),
        (
            "herdless_lookup",
            Arc::new(move |k: &str| match lookup.lookup(k) {
                Ok(Lookup::Hit(h)) => h.value,
                _ => None,
            }),
        ),
        ("quick_cache_get", Arc::new(move |k: &str| quick.get(k))),
        ("moka_get", Arc::new(move |k: &str| moka.get(k))),
        (
            "rwlock_hashmap_get",
            Arc::new(move |k: &str| rw.read().get(k).copied()),
        ),
    ]
}
