//! Faults on the in-memory tier (no redis-server needed): the fleet engine's policy under a
//! slow tier, checked with exact timings.

use std::time::{Duration, Instant};

use herdless_redis::memory::{Fault, MemoryStore};
use herdless_redis::{Json, TieredCache};

/// A publish that stalls does not stretch the value's life in its process: the L1 keeps it
/// until the shared entry's own end, measured when the publish returns (a full TTL counted
/// from then would serve values 2.2 s old with a TTL of 1 s).
#[test]
fn a_slow_publish_does_not_stretch_freshness() {
    let store = MemoryStore::new();
    let backend = store
        .backend()
        .op_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let ttl = Duration::from_millis(800);
    let cache: TieredCache<String, Json> = TieredCache::builder(backend, Json)
        .ttl(ttl)
        .jitter(0.0)
        .beta(0.0)
        .build()
        .unwrap();
    store.set_fault(Some(Fault::Delay(Duration::from_millis(300))));
    let loaded_at = Instant::now();
    let v = cache
        .get_or_load("slow:1", || Ok::<_, std::io::Error>(Some("v".into())))
        .unwrap();
    assert_eq!(v.as_deref(), Some("v"));
    store.set_fault(None);
    // The acquire (300 ms) came before the load; the publish (300 ms) after: the entry is
    // fresh until ~300 ms + 800 ms after the call began, not 800 ms after it returned.
    let returned = loaded_at.elapsed();
    assert!(returned >= Duration::from_millis(600), "{returned:?}");
    std::thread::sleep(
        (loaded_at + Duration::from_millis(1_200)).saturating_duration_since(Instant::now()),
    );
    assert_eq!(
        cache.l1().get("slow:1").map(|v| v.value),
        None,
        "served past the shared entry's freshness"
    );
}
