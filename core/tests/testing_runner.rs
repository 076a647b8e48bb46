//! `herdless::testing`: the public harness for code on virtual time (core's own scenario
//! tests run on it too, through `common::Sim`).

use std::time::Duration;

use herdless::testing::{Runner, sleep};
use herdless::{Cache, Clock, Error};

const MS: Duration = Duration::from_millis(1);

#[test]
fn advance_wakes_each_task_at_its_own_deadline() {
    let mut rt = Runner::new();
    let clock = rt.clock().clone();
    let woke: Vec<_> = [300, 100, 200]
        .into_iter()
        .map(|ms| {
            let clock = clock.clone();
            rt.spawn(async move {
                sleep(&clock, ms * MS).await;
                clock.now()
            })
        })
        .collect();
    rt.advance(1000 * MS);
    let at: Vec<Duration> = woke.iter().map(|t| t.take()).collect();
    assert_eq!(at, [300 * MS, 100 * MS, 200 * MS]);
    assert_eq!(rt.now(), 1000 * MS);
}

#[test]
fn block_on_moves_time_until_the_future_ends() {
    let mut rt = Runner::new();
    let cache: Cache<u32> = rt
        .builder()
        .wait_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let clock = rt.clock().clone();
    let got = rt.block_on(async move {
        cache
            .get_or_load_async("k", move || async move {
                sleep(&clock, 250 * MS).await;
                Ok::<_, std::io::Error>(Some(9))
            })
            .await
    });
    assert_eq!(got.unwrap(), Some(9));
    assert_eq!(rt.now(), 250 * MS);
}

#[test]
#[should_panic(expected = "no timer is left")]
fn block_on_refuses_to_wait_forever() {
    let mut rt = Runner::new();
    rt.block_on(std::future::pending::<()>());
}

#[test]
fn a_cancelled_leader_hands_its_load_over_and_the_cache_spawner_runs_on_the_runner() {
    let mut rt = Runner::new();
    let cache: Cache<u32> = rt
        .builder()
        .ttl(Duration::from_secs(1))
        .grace(Duration::from_secs(10))
        .jitter(0.0)
        .beta(0.0)
        .build()
        .unwrap();
    let clock = rt.clock().clone();
    let slow = |v: u32| {
        let clock = clock.clone();
        move || async move {
            sleep(&clock, 100 * MS).await;
            Ok::<_, Error>(Some(v))
        }
    };
    let (c1, c2) = (cache.clone(), cache.clone());
    let (l1, l2) = (slow(1), slow(2));
    let leader = rt.spawn(async move { c1.get_or_load_async("k", l1).await });
    let waiter = rt.spawn(async move { c2.get_or_load_async("k", l2).await });
    rt.run();
    leader.cancel();
    rt.advance(100 * MS);
    assert!(!leader.is_done(), "a cancelled task never ends");
    assert_eq!(
        waiter.take().unwrap(),
        Some(2),
        "the waiter took the load over"
    );
    // Stale: the refresh goes to the runner's spawner and lands as time moves.
    rt.advance(Duration::from_secs(1));
    let c3 = cache.clone();
    let l3 = slow(3);
    assert_eq!(
        rt.block_on(async move { c3.get_or_load_async("k", l3).await })
            .unwrap(),
        Some(2)
    );
    rt.advance(100 * MS);
    assert_eq!(cache.get("k"), Some(3));
}
