//! The origin budget (a cold start must not open 1,000 connections to a pool of 20): when
//! many different keys miss at once, single-flight alone still sends one load per key. With
//! `origin_budget(20)` at most 20 loader calls run at once; the rest queue, first come first
//! served, and every key is loaded in the end.

mod common;

use common::{Origin, Sim, ms, secs};
use herdless::{Cache, Error};

#[test]
fn a_thousand_keys_expiring_at_once_never_run_more_than_twenty_loads() {
    let mut sim = Sim::new();
    let cache: Cache<usize> = sim
        .builder()
        .ttl(secs(300))
        .jitter(0.0) // the worst case: everything expires together
        .origin_budget(20)
        .wait_timeout(secs(60)) // 1,000 loads / 20 at a time * 200 ms = 10 s of queueing
        .build()
        .unwrap();
    let origin = Origin::new();
    let keys: Vec<String> = (0..1_000).map(|i| format!("catalog:v1:item:{i}")).collect();
    for k in &keys {
        cache.set(k, 0).unwrap();
    }
    sim.advance(secs(300));

    // Three requests per key arrive together: 1,000 leaders and 2,000 waiters.
    let requests: Vec<_> = (0..3)
        .flat_map(|_| keys.iter().enumerate())
        .map(|(i, k)| {
            let (cache, key) = (cache.clone(), k.clone());
            let loader = origin.loader(&sim.clock, ms(200), Ok(Some(i)));
            sim.spawn(async move { cache.get_or_load_async(&key, loader).await })
        })
        .collect();
    sim.run();
    assert_eq!(origin.running(), 20);
    assert_eq!(cache.budget_in_use(), 20);
    assert_eq!(
        herdless::driver::flights_in_progress(&cache),
        1_000,
        "one flight per key, queued or running"
    );

    let start = sim.now();
    while requests.iter().any(|r| !r.is_done()) {
        assert!(sim.now() - start < secs(11), "the queue did not drain");
        assert!(origin.running() <= 20);
        assert!(cache.budget_in_use() <= 20);
        sim.advance(ms(100));
    }
    assert_eq!(
        origin.peak(),
        20,
        "the budget was used in full, never exceeded"
    );
    assert_eq!(origin.calls(), 1_000, "one load per key");
    for (n, r) in requests.iter().enumerate() {
        assert_eq!(r.take().unwrap(), Some(n % 1_000));
    }
    // 50 rounds of 20 loads of 200 ms each.
    assert_eq!(sim.now() - start, secs(10));
    assert_eq!(cache.budget_in_use(), 0);
    assert_eq!(herdless::driver::flights_in_progress(&cache), 0);
}

#[test]
fn a_leader_that_cannot_get_the_budget_in_time_fails_with_wait_timeout() {
    let mut sim = Sim::new();
    let cache: Cache<u32> = sim
        .builder()
        .origin_budget(1)
        .wait_timeout(secs(1))
        .build()
        .unwrap();
    let origin = Origin::new();
    let slow = {
        let cache = cache.clone();
        let loader = origin.loader(&sim.clock, secs(5), Ok(Some(1)));
        sim.spawn(async move { cache.get_or_load_async("a:1", loader).await })
    };
    sim.run();
    let (queued, queued_waiter) = {
        let spawn = || {
            let cache = cache.clone();
            let loader = origin.loader(&sim.clock, ms(1), Ok(Some(2)));
            sim.spawn(async move { cache.get_or_load_async("a:2", loader).await })
        };
        (spawn(), spawn())
    };
    sim.advance(secs(1));
    assert!(matches!(queued.take(), Err(Error::WaitTimeout { .. })));
    assert!(matches!(
        queued_waiter.take(),
        Err(Error::WaitTimeout { .. })
    ));
    assert_eq!(
        origin.calls(),
        1,
        "the queued load never reached the origin"
    );
    assert_eq!(herdless::driver::flights_in_progress(&cache), 1);
    sim.advance(secs(4));
    assert_eq!(slow.take().unwrap(), Some(1));
    assert_eq!(cache.budget_in_use(), 0);
}

#[test]
fn background_refreshes_are_skipped_rather_than_queued_when_the_budget_is_spent() {
    let mut sim = Sim::new();
    let cache: Cache<u32> = sim
        .builder()
        .ttl(secs(10))
        .grace(secs(60))
        .jitter(0.0)
        .origin_budget(1)
        .build()
        .unwrap();
    let origin = Origin::new();
    cache.set("a:stale", 1).unwrap();
    let busy = {
        let cache = cache.clone();
        let loader = origin.loader(&sim.clock, secs(30), Ok(Some(9)));
        sim.spawn(async move { cache.get_or_load_async("a:busy", loader).await })
    };
    sim.advance(secs(11));
    let read = {
        let cache = cache.clone();
        let loader = origin.loader(&sim.clock, ms(1), Ok(Some(2)));
        sim.spawn(async move { cache.get_or_load_async("a:stale", loader).await })
    };
    sim.run();
    assert_eq!(read.take().unwrap(), Some(1), "the stale value, at once");
    assert_eq!(
        origin.calls(),
        1,
        "the refresh did not queue for the budget"
    );
    assert_eq!(
        herdless::driver::flights_in_progress(&cache),
        1,
        "the skipped refresh left no flight"
    );
    sim.advance(secs(20));
    assert_eq!(busy.take().unwrap(), Some(9));
}

#[test]
fn a_leader_that_got_the_budget_leaves_no_waker_behind_in_the_clock() {
    use std::future::Future;
    use std::sync::Arc;
    use std::task::{Context, Waker};

    use herdless::{Lookup, ManualClock};

    let clock = ManualClock::new();
    let cache: Cache<u32> = Cache::builder()
        .clock(clock.clone())
        .origin_budget(1)
        .wait_timeout(secs(5))
        .build()
        .unwrap();
    let Ok(Lookup::Lead(mut first)) = cache.lookup("a:1") else {
        panic!("leads a:1");
    };
    assert!(first.try_begin(), "the one share is free");
    let Ok(Lookup::Lead(mut second)) = cache.lookup("a:2") else {
        panic!("leads a:2");
    };
    let probe = common::Probe::new();
    {
        let waker = Waker::from(probe.clone());
        let mut cx = Context::from_waker(&waker);
        let mut begin = second.begin();
        assert!(std::pin::Pin::new(&mut begin).poll(&mut cx).is_pending());
        first.complete(Ok(Some(1))).unwrap();
        assert_eq!(probe.wakes(), 1, "handed the share");
        assert!(std::pin::Pin::new(&mut begin).poll(&mut cx).is_ready());
    }
    // The budget wait's timer (5 s) is still in the clock, without the leader's waker.
    assert_eq!(
        Arc::strong_count(&probe),
        1,
        "the clock kept the leader's waker"
    );
    clock.advance(secs(6));
    assert_eq!(probe.wakes(), 1, "no late wake-up");
    second.complete(Ok(Some(2))).unwrap();
}

/// A leader queued for the budget that gives up at its own deadline hands the load over:
/// a caller who arrived later keeps waiting until its own deadline (and here gets the value
/// once the budget frees up), instead of sharing the leader's timeout.
#[test]
fn a_leader_giving_up_on_the_budget_leaves_later_callers_their_own_wait() {
    let mut sim = Sim::new();
    let cache: Cache<u32> = sim
        .builder()
        .origin_budget(1)
        .wait_timeout(secs(1))
        .build()
        .unwrap();
    let origin = Origin::new();
    let call = |sim: &Sim, key: &'static str, took, answer| {
        let (cache, load) = (
            cache.clone(),
            origin.loader(&sim.clock, took, Ok(Some(answer))),
        );
        sim.spawn(async move { cache.get_or_load_async(key, load).await })
    };
    // Another key holds the only share of the budget until 1.5 s.
    let busy = call(&sim, "other:1", ms(1_500), 0);
    sim.run();
    let first = call(&sim, "report:1", ms(100), 1);
    sim.advance(ms(900));
    let second = call(&sim, "report:1", ms(100), 2);
    sim.advance(ms(100));
    match first.take() {
        Err(Error::WaitTimeout { waited }) => assert_eq!(waited, secs(1)),
        other => panic!("the first caller got {other:?}"),
    }
    assert!(!second.is_done(), "the second caller waits until 1.9 s");
    sim.advance(ms(600));
    assert_eq!(
        second.take().unwrap(),
        Some(2),
        "it led once the budget freed up"
    );
    assert_eq!(busy.take().unwrap(), Some(0));
    assert_eq!(origin.calls(), 2);
    assert_eq!(cache.metrics().total().wait_timeouts, 1);
}

#[test]
fn a_load_that_waited_for_the_budget_gets_its_whole_hard_timeout() {
    // One unit of budget: `b:1` waits 800 ms behind `a:1`'s load, then loads for 700 ms.
    // The hard timeout (1 s) runs from the loader's start, so `b:1`'s caller and its waiter
    // get the value at 1.5 s, not `LoadTimeout` at 1 s.
    let mut sim = Sim::new();
    let cache: Cache<usize> = sim
        .builder()
        .ttl(secs(300))
        .origin_budget(1)
        .hard_timeout(secs(1))
        .wait_timeout(secs(30))
        .build()
        .unwrap();
    let origin = Origin::new();
    let call = |sim: &Sim, key: &'static str, took, v| {
        let cache = cache.clone();
        let loader = origin.loader(&sim.clock, took, Ok(Some(v)));
        sim.spawn(async move { cache.get_or_load_async(key, loader).await })
    };
    let a = call(&sim, "a:1", ms(800), 1);
    sim.run();
    let b = call(&sim, "b:1", ms(700), 2);
    let b_waiter = call(&sim, "b:1", ms(700), 3);
    sim.advance(ms(1_200));
    assert_eq!(a.take().unwrap(), Some(1));
    assert!(
        !b.is_done() && !b_waiter.is_done(),
        "still loading at 1.2 s"
    );
    sim.advance(ms(300));
    assert_eq!(b.take().unwrap(), Some(2));
    assert_eq!(b_waiter.take().unwrap(), Some(2));
    assert_eq!(cache.metrics().total().load_timeouts, 0);
    assert_eq!(origin.calls(), 2);
}
