//! Stale-while-revalidate (a soft and a hard TTL): once a hot key passes its TTL, readers
//! keep getting the old value at once while exactly one background refresh replaces it.
//! Nobody waits, the origin sees one call per expiry, and nothing older than ttl + grace is
//! ever served.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Origin, Sim, ms, secs};
use futures_util::FutureExt;
use herdless::{Cache, Clock, HitState, Lookup};

const KEY: &str = "prices:v1:sku:1";

/// A cache whose values are the virtual millisecond at which the origin produced them.
fn cache(sim: &Sim) -> Cache<u64> {
    sim.builder()
        .ttl(secs(10))
        .grace(secs(5))
        .jitter(0.0)
        .beta(0.0) // XFetch off: this is about the stale window alone
        .build()
        .unwrap()
}

fn loader(sim: &Sim, origin: &Arc<Origin>) -> impl FnOnce() -> common::Load<u64> + Send + use<> {
    let clock = sim.clock.clone();
    origin.loader_with(&sim.clock, ms(200), move || {
        Ok(Some(clock.now().as_millis() as u64))
    })
}

#[test]
fn under_continuous_reads_nobody_waits_and_one_refresh_runs_per_expiry() {
    let mut sim = Sim::new();
    let cache = cache(&sim);
    let origin = Origin::new();
    let first = {
        let (cache, loader) = (cache.clone(), loader(&sim, &origin));
        sim.spawn(async move { cache.get_or_load_async(KEY, loader).await })
    };
    sim.advance(ms(200));
    assert_eq!(first.take().unwrap(), Some(200));
    let before = cache.metrics().total();

    // 20 reads per virtual second for 40 s: the key goes stale three times.
    let (ttl_plus_grace, mut served) = (secs(15), Vec::new());
    let mut refreshes_seen = 0;
    while sim.now() < secs(40) {
        let call = cache.get_or_load_async(KEY, loader(&sim, &origin));
        let value = call
            .now_or_never()
            .expect("a reader had to wait")
            .unwrap()
            .unwrap();
        let age = sim.now() - Duration::from_millis(value);
        assert!(age < ttl_plus_grace, "served a value {age:?} old");
        if served.last() != Some(&value) {
            served.push(value);
        }
        // One refresh at a time, never more.
        assert!(origin.running() <= 1);
        let refreshes = cache.metrics().total().refreshes;
        assert!(refreshes <= refreshes_seen + 1);
        refreshes_seen = refreshes;
        sim.advance(ms(50));
    }
    // Loaded at 0.2 s, stale at 10.2 s and refreshed by 10.4 s, then 20.4 -> 20.6, 30.6 -> 30.8.
    assert_eq!(served, vec![200, 10_400, 20_600, 30_800]);
    assert_eq!(origin.calls(), 4);
    assert_eq!(origin.peak(), 1);
    let m = cache.metrics().total();
    assert_eq!(m.refreshes - before.refreshes, 3);
    assert_eq!(m.misses - before.misses, 0, "no read missed");
    assert_eq!(m.coalesced_waiters, 0, "no read waited");
    assert_eq!(
        m.stale_served,
        3 * 4,
        "four reads per stale window, 50 ms apart"
    );
    assert_eq!(m.early_refreshes, 0);
    assert_eq!(herdless::driver::flights_in_progress(&cache), 0);
}

#[test]
fn every_stale_lookup_is_a_hit_and_only_the_first_carries_the_refresh() {
    let sim = Sim::new();
    let cache = cache(&sim);
    cache.set(KEY, 1).unwrap();
    sim.clock.set(secs(11));
    let mut guard = None;
    for i in 0..100 {
        match cache.lookup(KEY).unwrap() {
            Lookup::Hit(hit) => {
                assert_eq!((hit.value, hit.state), (Some(1), HitState::Stale));
                assert_eq!(hit.refresh.is_some(), i == 0, "read {i}");
                guard = guard.or(hit.refresh);
            }
            _ => panic!("read {i} of a stale key did not hit"),
        }
    }
    let mut guard = guard.unwrap();
    assert!(guard.try_begin());
    assert_eq!(guard.complete(Ok(Some(2))).unwrap(), Some(2));
    assert_eq!(
        cache.get(KEY),
        Some(2),
        "readers see the refreshed value at once"
    );
    assert_eq!(herdless::driver::flights_in_progress(&cache), 0);
}

#[test]
fn past_ttl_plus_grace_the_old_value_is_never_served() {
    let mut sim = Sim::new();
    let cache = cache(&sim);
    let origin = Origin::new();
    cache.set(KEY, 0).unwrap();
    sim.clock.set(secs(15) - Duration::from_nanos(1));
    assert_eq!(cache.get(KEY), Some(0), "still within grace");
    sim.clock.set(secs(15));
    assert_eq!(cache.get(KEY), None, "ttl + grace is over");
    let reader = {
        let (cache, loader) = (cache.clone(), loader(&sim, &origin));
        sim.spawn(async move { cache.get_or_load_async(KEY, loader).await })
    };
    sim.run();
    assert!(!reader.is_done(), "the reader must wait for a fresh load");
    sim.advance(ms(200));
    assert_eq!(reader.take().unwrap(), Some(15_200));
}

#[test]
fn the_blocking_api_refreshes_on_a_background_thread_by_default() {
    let clock = herdless::ManualClock::new();
    let cache: Cache<u64> = Cache::builder()
        .clock(clock.clone())
        .ttl(secs(10))
        .grace(secs(5))
        .beta(0.0)
        .build()
        .unwrap();
    let origin = Origin::new();
    cache.set(KEY, 1).unwrap();
    clock.set(secs(12));
    let v = cache.get_or_load(KEY, origin.instant(Ok(Some(2)))).unwrap();
    assert_eq!(v, Some(1), "the stale value is answered at once");
    let deadline = Instant::now() + Duration::from_secs(10);
    while cache.get(KEY) != Some(2) {
        assert!(
            Instant::now() < deadline,
            "the background refresh never landed"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(origin.calls(), 1);
    assert_eq!(cache.metrics().total().refreshes, 1);
}

#[test]
fn the_blocking_api_routes_its_refresh_to_the_spawner_given() {
    let mut sim = Sim::new();
    let cache = cache(&sim);
    let origin = Origin::new();
    cache.set(KEY, 1).unwrap();
    sim.clock.set(secs(12));
    let v = cache.get_or_load(KEY, origin.instant(Ok(Some(2)))).unwrap();
    assert_eq!(v, Some(1), "the stale value is answered at once");
    // The refresh waits on the simulation's spawner: nothing ran it yet.
    assert_eq!(origin.calls(), 0);
    assert_eq!(cache.get(KEY), Some(1));
    sim.run();
    assert_eq!(origin.calls(), 1);
    assert_eq!(cache.get(KEY), Some(2));
    assert_eq!(cache.metrics().total().refreshes, 1);
}

#[test]
fn without_a_spawner_stale_hits_start_no_refresh_and_the_first_caller_past_grace_loads() {
    let clock = herdless::ManualClock::new();
    let cache: Cache<u64> = Cache::builder()
        .clock(clock.clone())
        .ttl(secs(10))
        .grace(secs(5))
        .jitter(0.0)
        .beta(0.0)
        .without_spawner()
        .build()
        .unwrap();
    let origin = Origin::new();
    cache.set(KEY, 1).unwrap();
    clock.set(secs(12));
    for _ in 0..3 {
        let v = cache.get_or_load(KEY, origin.instant(Ok(Some(2)))).unwrap();
        assert_eq!(v, Some(1), "the stale value is answered at once");
        match cache.lookup(KEY).unwrap() {
            Lookup::Hit(hit) => {
                assert_eq!(hit.state, HitState::Stale);
                assert!(hit.refresh.is_none(), "no refresh is handed out");
            }
            _ => panic!("a stale hit"),
        }
    }
    let total = cache.metrics().total();
    assert_eq!(
        (origin.calls(), total.refreshes, total.abandoned_loads),
        (0, 0, 0)
    );
    assert_eq!(herdless::driver::flights_in_progress(&cache), 0);
    clock.set(secs(15));
    let v = cache.get_or_load(KEY, origin.instant(Ok(Some(2)))).unwrap();
    assert_eq!(v, Some(2), "past grace the caller loads in the foreground");
    assert_eq!(origin.calls(), 1);
}
