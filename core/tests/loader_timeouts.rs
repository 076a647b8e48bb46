//! Loader timeouts (a hung rebuild must not hold the key forever). Soft timeout: callers
//! holding a fail-safe value take it after `soft_timeout`, while the load finishes in the
//! background and its result is stored. Hard timeout: the load is given up with
//! `Error::LoadTimeout` for everyone, its result is discarded, and the next call loads again.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Origin, Sim, Task, ms, secs};
use herdless::{Builder, Cache, Error, Lookup};

const KEY: &str = "inventory:v1:warehouse:3";

fn request(
    sim: &Sim,
    cache: &Cache<u32>,
    origin: &Arc<Origin>,
    took: Duration,
    answer: u32,
) -> Task<Result<Option<u32>, Error>> {
    let cache = cache.clone();
    let loader = origin.loader(&sim.clock, took, Ok(Some(answer)));
    sim.spawn(async move { cache.get_or_load_async(KEY, loader).await })
}

fn builder(sim: &Sim) -> Builder<u32> {
    sim.builder()
        .ttl(secs(60))
        .jitter(0.0)
        .beta(0.0)
        .wait_timeout(secs(30))
}

#[test]
fn at_the_soft_timeout_everyone_takes_the_stale_value_and_the_load_lands_later() {
    let mut sim = Sim::new();
    let cache = builder(&sim)
        .max_stale(secs(3_600))
        .soft_timeout(secs(1))
        .hard_timeout(secs(10))
        .build()
        .unwrap();
    let origin = Origin::new();
    cache.set(KEY, 1).unwrap();
    sim.advance(secs(100));
    let start = sim.now();
    let herd: Vec<_> = (0..50)
        .map(|_| request(&sim, &cache, &origin, secs(3), 2))
        .collect();
    sim.advance(secs(1) - Duration::from_nanos(1));
    assert!(herd.iter().all(|r| !r.is_done()));
    sim.advance(Duration::from_nanos(1));
    for r in &herd {
        assert_eq!(
            r.take().unwrap(),
            Some(1),
            "the stale value at the soft timeout"
        );
    }
    assert_eq!(origin.running(), 1, "the load goes on in the background");
    assert_eq!(cache.metrics().total().failsafe_served, 50);

    sim.advance(start + secs(3) - sim.now());
    assert_eq!(origin.running(), 0);
    assert_eq!(cache.get(KEY), Some(2), "the background load was stored");
    assert_eq!(origin.calls(), 1);
    assert_eq!(herdless::driver::flights_in_progress(&cache), 0);
}

#[test]
fn at_the_hard_timeout_everyone_gets_load_timeout_and_the_next_call_loads_again() {
    let mut sim = Sim::new();
    let cache = builder(&sim).hard_timeout(secs(5)).build().unwrap();
    let origin = Origin::new();
    let herd: Vec<_> = (0..50)
        .map(|_| request(&sim, &cache, &origin, secs(30), 1))
        .collect();
    sim.advance(secs(5));
    for r in &herd {
        match r.take() {
            Err(Error::LoadTimeout { after }) => assert_eq!(after, secs(5)),
            other => panic!("a caller got {other:?}"),
        }
    }
    assert_eq!(origin.running(), 0, "the hung loader was dropped");
    assert_eq!(herdless::driver::flights_in_progress(&cache), 0);
    assert_eq!(cache.get(KEY), None);
    let m = cache.metrics().total();
    assert_eq!(m.load_timeouts, 1, "one load timed out");

    let next = request(&sim, &cache, &origin, ms(200), 2);
    sim.advance(ms(200));
    assert_eq!(next.take().unwrap(), Some(2));
    assert_eq!(origin.calls(), 2);
}

#[test]
fn a_hung_leader_that_answers_after_the_hard_timeout_is_discarded() {
    // A binding's leader (e.g. a Python thread) that cannot be cancelled: the waiters end
    // it at the hard timeout, and what it answers later is thrown away.
    let mut sim = Sim::new();
    let cache = builder(&sim)
        .max_stale(secs(3_600))
        .hard_timeout(secs(5))
        .build()
        .unwrap();
    let origin = Origin::new();
    let Lookup::Lead(guard) = cache.lookup(KEY).unwrap() else {
        panic!("the first caller leads")
    };
    let waiters: Vec<_> = (0..10)
        .map(|_| request(&sim, &cache, &origin, ms(1), 9))
        .collect();
    sim.advance(secs(5));
    for w in &waiters {
        assert!(matches!(w.take(), Err(Error::LoadTimeout { .. })));
    }
    assert_eq!(herdless::driver::flights_in_progress(&cache), 0);
    assert_eq!(cache.metrics().total().load_timeouts, 1);

    sim.advance(secs(1));
    assert_eq!(guard.complete(Ok(Some(1))).unwrap(), Some(1));
    assert_eq!(
        cache.get(KEY),
        None,
        "a result past the hard timeout is discarded"
    );
    let next = request(&sim, &cache, &origin, ms(200), 2);
    sim.advance(ms(200));
    assert_eq!(next.take().unwrap(), Some(2));
    assert_eq!(origin.calls(), 1, "only the new load reached this origin");
}

#[test]
fn a_leader_nobody_waited_for_that_answers_after_the_hard_timeout_is_discarded() {
    // No waiter ends the flight: the leader's own late answer must still not be kept (the
    // deadline runs from the flight, or from an explicit begin, never from the answer).
    let mut sim = Sim::new();
    let cache = builder(&sim).hard_timeout(secs(5)).build().unwrap();
    let Lookup::Lead(guard) = cache.lookup(KEY).unwrap() else {
        panic!("the first caller leads")
    };
    sim.advance(secs(6));
    assert_eq!(guard.complete(Ok(Some(1))).unwrap(), Some(1));
    assert_eq!(
        cache.get(KEY),
        None,
        "a result past the hard timeout is discarded"
    );
}

#[test]
fn with_fail_safe_data_the_hard_timeout_answers_the_stale_value() {
    let mut sim = Sim::new();
    let cache = builder(&sim)
        .max_stale(secs(3_600))
        .hard_timeout(secs(5))
        .build()
        .unwrap();
    let origin = Origin::new();
    cache.set(KEY, 1).unwrap();
    sim.advance(secs(100));
    let herd: Vec<_> = (0..20)
        .map(|_| request(&sim, &cache, &origin, secs(30), 2))
        .collect();
    sim.advance(secs(5));
    for r in &herd {
        assert_eq!(r.take().unwrap(), Some(1));
    }
    assert_eq!(origin.running(), 0);
    assert_eq!(cache.metrics().total().load_timeouts, 1);
}

/// After a hard timeout with fail-safe data at hand, the key backs off like after any failed
/// load: for `failsafe_backoff` the stale value is served at once, with no new load.
fn assert_backs_off(sim: &mut Sim, cache: &Cache<u32>) {
    for _ in 0..5 {
        match cache.lookup(KEY).unwrap() {
            Lookup::Hit(hit) => {
                assert_eq!(
                    (hit.value, hit.state),
                    (Some(1), herdless::HitState::FailSafe)
                );
            }
            _ => panic!("a load started during the backoff, at {:?}", sim.now()),
        }
        sim.advance(secs(5));
    }
}

#[test]
fn a_hard_timeout_backs_off_whoever_noticed_it() {
    for leader_is_async in [true, false] {
        let mut sim = Sim::new();
        let cache = builder(&sim)
            .max_stale(secs(3_600))
            .hard_timeout(secs(5))
            .failsafe_backoff(secs(30))
            .build()
            .unwrap();
        let origin = Origin::new();
        cache.set(KEY, 1).unwrap();
        sim.advance(secs(100));
        // Either the async leader's own timer ends the load, or (a binding's leader that
        // cannot be interrupted) its waiters do.
        let _hung = if leader_is_async {
            let r = request(&sim, &cache, &origin, secs(60), 2);
            sim.advance(secs(5));
            assert_eq!(r.take().unwrap(), Some(1));
            None
        } else {
            let Lookup::Lead(guard) = cache.lookup(KEY).unwrap() else {
                panic!("the first caller leads")
            };
            let w = request(&sim, &cache, &origin, secs(60), 2);
            sim.advance(secs(5));
            assert_eq!(w.take().unwrap(), Some(1));
            Some(guard)
        };
        assert_eq!(cache.metrics().total().load_timeouts, 1);
        assert_backs_off(&mut sim, &cache);
    }
}
