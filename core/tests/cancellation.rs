//! Cancellation (the leader's client disconnected): an async request is dropped in
//! the middle of its load (a timeout upstream, a closed connection). If it led the load, the
//! load is handed over: one waiter leads, exactly one new load runs, nobody hangs. If it only
//! waited, nobody else notices.

mod common;

use std::sync::Arc;

use common::{Origin, Sim, Task, ms, secs};
use herdless::{Cache, Error};

const KEY: &str = "search:v1:results?q=shoes";

fn request(
    sim: &Sim,
    cache: &Cache<u32>,
    origin: &Arc<Origin>,
    answer: u32,
) -> Task<Result<Option<u32>, Error>> {
    let cache = cache.clone();
    let loader = origin.loader(&sim.clock, ms(200), Ok(Some(answer)));
    sim.spawn(async move { cache.get_or_load_async(KEY, loader).await })
}

#[test]
fn dropping_the_leader_mid_load_hands_the_load_to_one_waiter() {
    let mut sim = Sim::new();
    let cache: Cache<u32> = sim.builder().ttl(secs(60)).build().unwrap();
    let origin = Origin::new();
    let leader = request(&sim, &cache, &origin, 1);
    sim.run();
    let waiters: Vec<_> = (0..1_000)
        .map(|i| request(&sim, &cache, &origin, 2 + i))
        .collect();
    sim.advance(ms(100));
    assert_eq!((origin.calls(), origin.running()), (1, 1));

    leader.cancel();
    sim.run();
    assert!(!leader.is_done(), "a cancelled request has no answer");
    assert_eq!(origin.calls(), 2, "exactly one waiter took the load over");
    assert_eq!(
        origin.running(),
        1,
        "the leader's loader was dropped with it"
    );
    assert_eq!(herdless::driver::flights_in_progress(&cache), 1);

    sim.advance(ms(200));
    let answers: Vec<_> = waiters.iter().map(|w| w.take().unwrap().unwrap()).collect();
    // Whoever took over answered for everyone.
    assert!(answers.iter().all(|&a| a == answers[0]));
    assert_eq!(cache.get(KEY), Some(answers[0]));
    assert_eq!(origin.calls(), 2);
    assert_eq!(herdless::driver::flights_in_progress(&cache), 0);
    let m = cache.metrics().total();
    assert_eq!(m.abandoned_loads, 1);
    assert_eq!(m.loads, 2);
}

#[test]
fn dropping_waiters_leaves_the_others_unharmed() {
    let mut sim = Sim::new();
    let cache: Cache<u32> = sim.builder().ttl(secs(60)).build().unwrap();
    let origin = Origin::new();
    let leader = request(&sim, &cache, &origin, 1);
    sim.run();
    let waiters: Vec<_> = (0..1_000)
        .map(|_| request(&sim, &cache, &origin, 99))
        .collect();
    sim.advance(ms(50));
    for w in waiters.iter().step_by(2) {
        w.cancel();
    }
    sim.advance(ms(150));
    assert_eq!(leader.take().unwrap(), Some(1));
    for (i, w) in waiters.iter().enumerate() {
        if i % 2 == 0 {
            assert!(!w.is_done());
        } else {
            assert_eq!(w.take().unwrap(), Some(1));
        }
    }
    assert_eq!(origin.calls(), 1);
    assert_eq!(herdless::driver::flights_in_progress(&cache), 0);
}

#[test]
fn cancelling_every_caller_leaves_no_flight_behind() {
    let mut sim = Sim::new();
    let cache: Cache<u32> = sim.builder().ttl(secs(60)).build().unwrap();
    let origin = Origin::new();
    let all: Vec<_> = (0..10).map(|_| request(&sim, &cache, &origin, 1)).collect();
    sim.advance(ms(100));
    // Waiters first, then the leader: the abandoned load finds nobody to hand over to.
    for t in all.iter().rev() {
        t.cancel();
    }
    sim.advance(secs(10));
    assert_eq!(herdless::driver::flights_in_progress(&cache), 0);
    assert_eq!((origin.calls(), origin.running()), (1, 0));
    // The key is loadable again.
    let next = request(&sim, &cache, &origin, 5);
    sim.advance(ms(200));
    assert_eq!(next.take().unwrap(), Some(5));
}
