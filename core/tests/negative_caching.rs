//! Negative caching (the miss storm): requests for an id that does not exist would go
//! to the origin every time, since there is nothing to cache. herdless caches the absence
//! for `negative_ttl`, so the origin sees one call per negative TTL, and a real write
//! replaces the absence at once.

mod common;

use common::{MS, Origin, Sim, ms, secs};
use herdless::{Cache, HitState, Lookup};

const MISSING: &str = "users:v1:user:404";

fn cache(sim: &Sim) -> Cache<String> {
    sim.builder()
        .ttl(secs(300))
        .negative_ttl(secs(10))
        .jitter(0.0)
        .build()
        .unwrap()
}

#[test]
fn ten_thousand_requests_for_a_missing_id_cost_one_origin_call_per_negative_ttl() {
    let sim = Sim::new();
    let cache = cache(&sim);
    let origin = Origin::new();
    // One request every 10 ms for 100 s: 10,000 requests, 10 negative TTLs.
    for i in 0..10_000u64 {
        sim.clock.set(ms(10 * i));
        let v = cache
            .get_or_load(MISSING, origin.instant(Ok(None)))
            .unwrap();
        assert_eq!(v, None);
    }
    assert_eq!(origin.calls(), 10, "one origin call per 10 s negative TTL");
    let m = cache.metrics().total();
    assert_eq!(m.loads, 10);
    assert_eq!(m.negative_hits, 10_000 - 10);
    assert_eq!(m.hits, 0);
}

#[test]
fn ten_thousand_concurrent_requests_for_a_missing_id_make_one_call() {
    let mut sim = Sim::new();
    let cache = cache(&sim);
    let origin = Origin::new();
    let callers: Vec<_> = (0..10_000)
        .map(|_| {
            let cache = cache.clone();
            let loader = origin.loader::<String>(&sim.clock, ms(50), Ok(None));
            sim.spawn(async move { cache.get_or_load_async(MISSING, loader).await })
        })
        .collect();
    sim.advance(ms(50));
    assert!(callers.iter().all(|c| c.take().unwrap().is_none()));
    assert_eq!(origin.calls(), 1);
    // The absence is cached: the next requests do not reach the origin.
    sim.advance(secs(5));
    let again = cache.get_or_load(MISSING, origin.instant(Ok(Some("x".into()))));
    assert_eq!(again.unwrap(), None);
    assert_eq!(origin.calls(), 1);
    match cache.lookup(MISSING).unwrap() {
        Lookup::Hit(hit) => assert_eq!((hit.value, hit.state), (None, HitState::Fresh)),
        _ => panic!("a cached absence must be a hit"),
    }
    assert_eq!(herdless::driver::flights_in_progress(&cache), 0);
}

#[test]
fn a_real_write_replaces_the_cached_absence_at_once() {
    let sim = Sim::new();
    let cache = cache(&sim);
    let origin = Origin::new();
    assert_eq!(
        cache
            .get_or_load(MISSING, origin.instant(Ok(None)))
            .unwrap(),
        None
    );
    sim.clock.set(MS);
    // The user signs up: the application writes the new row and the cache.
    cache.set(MISSING, "Ada".into()).unwrap();
    assert_eq!(cache.get(MISSING).as_deref(), Some("Ada"));
    let v = cache
        .get_or_load(MISSING, origin.instant(Ok(None)))
        .unwrap();
    assert_eq!(v.as_deref(), Some("Ada"));
    assert_eq!(origin.calls(), 1);
    // And the value now lives for the full TTL, not the negative one.
    sim.clock.set(secs(200));
    assert_eq!(cache.get(MISSING).as_deref(), Some("Ada"));
}

#[test]
fn set_absent_caches_an_absence_for_the_negative_ttl_only() {
    let sim = Sim::new();
    let cache = cache(&sim);
    let origin = Origin::new();
    cache.set("users:v1:user:1", "Bob".into()).unwrap();
    cache.set_absent("users:v1:user:1").unwrap(); // the user was deleted
    let v = cache.get_or_load("users:v1:user:1", origin.instant(Ok(Some("zombie".into()))));
    assert_eq!(v.unwrap(), None);
    assert_eq!(origin.calls(), 0);
    sim.clock.set(secs(10));
    let v = cache.get_or_load("users:v1:user:1", origin.instant(Ok(None)));
    assert_eq!(v.unwrap(), None);
    assert_eq!(origin.calls(), 1, "the absence expired after negative_ttl");
}
