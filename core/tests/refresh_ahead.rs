//! Refresh-ahead by threshold: once an entry has lived the configured share of its ttl, the
//! next read refreshes it in the background, once; under steady reads that is exactly one
//! refresh per `ttl * share` (plus the load's own time), and no reader ever waits.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{OriginDown, Sim, ms, secs};
use futures_util::FutureExt;
use herdless::{Cache, ConfigError, LoadReason, Loaded};

const KEY: &str = "rates:eur";

#[test]
fn one_refresh_per_ttl_times_the_share_under_steady_reads() {
    let mut sim = Sim::new();
    let cache: Cache<u64> = sim
        .builder()
        .ttl(secs(10))
        .refresh_ahead(0.8)
        .jitter(0.0)
        .beta(0.0) // XFetch off: the schedule is refresh-ahead's alone
        .build()
        .unwrap();
    let loads: Arc<Mutex<Vec<(Duration, LoadReason)>>> = Arc::default();
    let loader = |sim: &Sim| {
        let (clock, loads) = (sim.clock.clone(), loads.clone());
        move |ctx: herdless::LoadContext<u64>| async move {
            let start = herdless::Clock::now(&clock);
            loads.lock().unwrap().push((start, ctx.reason()));
            common::sleep(&clock, ms(100)).await;
            Ok::<_, OriginDown>(Loaded::value(start.as_millis() as u64))
        }
    };
    let first = {
        let (cache, load) = (cache.clone(), loader(&sim));
        sim.spawn(async move { cache.get_or_load_with_async(KEY, load).await })
    };
    sim.advance(ms(100));
    assert_eq!(first.take().unwrap(), Some(0));

    // 10 reads per virtual second for a minute: every one answered at once.
    while sim.now() < secs(60) {
        let v = cache
            .get_or_load_with_async(KEY, loader(&sim))
            .now_or_never()
            .expect("a reader waited")
            .unwrap();
        assert!(v.is_some());
        sim.advance(ms(100));
    }
    let loads = loads.lock().unwrap().clone();
    assert_eq!(loads[0], (Duration::ZERO, LoadReason::First));
    for pair in loads.windows(2) {
        // Written 100 ms after it started; due 8 s (0.8 of 10 s) after it was written.
        assert_eq!(pair[1].0 - pair[0].0, ms(8_100), "{loads:?}");
        assert_eq!(pair[1].1, LoadReason::RefreshAhead);
    }
    assert_eq!(loads.len(), 1 + 7, "{loads:?}"); // 0.0, 8.1, ..., 56.7 s
    let c = cache.metrics().total();
    assert_eq!((c.ahead_refreshes, c.refreshes, c.misses), (7, 7, 1));
}

#[test]
fn nothing_is_refreshed_before_the_threshold() {
    let mut sim = Sim::new();
    let cache: Cache<u64> = sim
        .builder()
        .ttl(secs(10))
        .refresh_ahead(0.5)
        .jitter(0.0)
        .beta(0.0)
        .build()
        .unwrap();
    cache.set(KEY, 1).unwrap();
    sim.advance(secs(4));
    assert_eq!(cache.get(KEY), Some(1));
    let refreshed = cache
        .get_or_load_with_async(KEY, |_| async { Ok::<_, OriginDown>(Loaded::value(2)) })
        .now_or_never()
        .unwrap()
        .unwrap();
    assert_eq!(refreshed, Some(1), "before the threshold");
    assert_eq!(cache.metrics().total().refreshes, 0);
}

#[test]
fn the_share_must_be_within_the_ttl() {
    for bad in [0.0, 1.0, 1.5, -0.1, f64::NAN] {
        let err = Cache::<u32>::builder()
            .refresh_ahead(bad)
            .build()
            .unwrap_err();
        assert!(
            matches!(err, ConfigError::Inconsistent { .. }),
            "{bad}: {err:?}"
        );
    }
    let ok = Cache::<u32>::builder().refresh_ahead(0.8).build().unwrap();
    assert_eq!(ok.options().refresh_ahead, Some(0.8));
}
