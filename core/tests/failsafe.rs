//! Fail-safe (the origin is down: serve yesterday's data rather than an error): when a
//! load fails and a value past grace but within `max_stale` is at hand, everyone gets that
//! value, and the key is not retried before `failsafe_backoff`. Errors are never cached:
//! without stale data, every waiter of the failed load gets the same error and the next call
//! loads again.

mod common;

use std::sync::Arc;

use common::{Origin, OriginDown, Sim, Task, ms, secs};
use herdless::{Cache, Error, HitState, Lookup};

const KEY: &str = "rates:v1:fx?base=EUR";

fn cache(sim: &Sim) -> Cache<u32> {
    sim.builder()
        .ttl(secs(60))
        .grace(secs(10))
        .jitter(0.0)
        .beta(0.0)
        .max_stale(secs(3_600))
        .failsafe_backoff(secs(30))
        .build()
        .unwrap()
}

fn request(
    sim: &Sim,
    cache: &Cache<u32>,
    origin: &Arc<Origin>,
    answer: Result<Option<u32>, OriginDown>,
) -> Task<Result<Option<u32>, Error>> {
    let cache = cache.clone();
    let loader = origin.loader(&sim.clock, ms(200), answer);
    sim.spawn(async move { cache.get_or_load_async(KEY, loader).await })
}

#[test]
fn a_failed_load_serves_the_stale_value_to_everyone_and_backs_off() {
    let mut sim = Sim::new();
    let cache = cache(&sim);
    let origin = Origin::new();
    cache.set(KEY, 1).unwrap();
    sim.advance(secs(100)); // past ttl + grace (70 s), within max_stale
    assert_eq!(
        cache.get(KEY),
        None,
        "past grace nothing is served normally"
    );

    let herd: Vec<_> = (0..50)
        .map(|_| request(&sim, &cache, &origin, Err(OriginDown(1))))
        .collect();
    sim.advance(ms(200));
    for r in &herd {
        assert_eq!(
            r.take().unwrap(),
            Some(1),
            "everyone gets the fail-safe value"
        );
    }
    assert_eq!(origin.calls(), 1);
    let m = cache.metrics().total();
    assert_eq!((m.load_errors, m.failsafe_served), (1, 50));

    // For failsafe_backoff the stale value is served without touching the origin.
    let backoff_ends = sim.now() + secs(30);
    while sim.now() < backoff_ends {
        match cache.lookup(KEY).unwrap() {
            Lookup::Hit(hit) => {
                assert_eq!((hit.value, hit.state), (Some(1), HitState::FailSafe));
                assert!(hit.refresh.is_none());
            }
            _ => panic!("a load was attempted during the backoff at {:?}", sim.now()),
        }
        sim.advance(secs(1));
    }
    assert_eq!(origin.calls(), 1);

    // After it, one caller tries again; this time the origin is back.
    let retry = request(&sim, &cache, &origin, Ok(Some(2)));
    sim.advance(ms(200));
    assert_eq!(retry.take().unwrap(), Some(2));
    assert_eq!(cache.get(KEY), Some(2));
    assert_eq!(origin.calls(), 2);
}

#[test]
fn without_stale_data_every_waiter_gets_the_same_error_and_it_is_not_cached() {
    let mut sim = Sim::new();
    let cache = cache(&sim);
    let origin = Origin::new();
    let herd: Vec<_> = (0..100)
        .map(|_| request(&sim, &cache, &origin, Err(OriginDown(42))))
        .collect();
    sim.advance(ms(200));
    for r in &herd {
        match r.take() {
            Err(Error::Load(e)) => {
                assert_eq!(e.downcast_ref::<OriginDown>(), Some(&OriginDown(42)))
            }
            other => panic!("a caller got {other:?}"),
        }
    }
    assert_eq!(origin.calls(), 1, "one failing call, shared by all");
    assert_eq!(cache.metrics().entries, 0, "the error was not cached");
    // The very next call loads again: there is nothing to back off to.
    let next = request(&sim, &cache, &origin, Ok(Some(5)));
    sim.advance(ms(200));
    assert_eq!(next.take().unwrap(), Some(5));
    assert_eq!(origin.calls(), 2);
}

#[test]
fn past_max_stale_the_error_is_answered() {
    let mut sim = Sim::new();
    let cache = cache(&sim);
    let origin = Origin::new();
    cache.set(KEY, 1).unwrap();
    sim.advance(secs(60 + 3_600));
    let r = request(&sim, &cache, &origin, Err(OriginDown(3)));
    sim.advance(ms(200));
    assert!(matches!(r.take(), Err(Error::Load(_))));
}

#[test]
fn a_failed_background_refresh_keeps_serving_stale_and_backs_off() {
    let mut sim = Sim::new();
    let cache = cache(&sim);
    let origin = Origin::new();
    cache.set(KEY, 1).unwrap();
    sim.advance(secs(61)); // stale, within grace: the first read refreshes in the background
    // Reads every second for two minutes while the origin is down: within grace each is
    // answered at once; past grace a read that finds the backoff over leads a load, which
    // fails, and answers the fail-safe value.
    for _ in 0..120 {
        let r = request(&sim, &cache, &origin, Err(OriginDown(9)));
        sim.advance(ms(200));
        assert_eq!(r.take().unwrap(), Some(1), "at {:?}", sim.now());
        sim.advance(ms(800));
    }
    // Origin calls at 61 s, then one per 30 s backoff: 92 s, 123 s, 154 s.
    assert_eq!(origin.calls(), 4);
    let m = cache.metrics().total();
    assert_eq!(m.load_errors, 4);
    assert_eq!(
        m.refreshes, 1,
        "only the first was a stale-while-revalidate refresh"
    );
}
