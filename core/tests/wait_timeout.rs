//! The waiter policy (what the losers do while the winner rebuilds): waiters wait
//! at most `wait_timeout`, then take the stale value if there is one, else a clear timeout
//! error. "Every loser calls the loader itself" is never the fallback: the origin still sees
//! one call.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Origin, Sim, Task, secs};
use herdless::{Cache, Error};

const KEY: &str = "analytics:v1:dashboard";

fn request(
    sim: &Sim,
    cache: &Cache<u32>,
    origin: &Arc<Origin>,
    answer: u32,
) -> Task<Result<Option<u32>, Error>> {
    let cache = cache.clone();
    // The origin is struggling: the load takes 10 s.
    let loader = origin.loader(&sim.clock, secs(10), Ok(Some(answer)));
    sim.spawn(async move { cache.get_or_load_async(KEY, loader).await })
}

#[test]
fn without_stale_data_waiters_give_up_with_a_timeout_and_never_load_themselves() {
    let mut sim = Sim::new();
    let cache: Cache<u32> = sim.builder().wait_timeout(secs(1)).build().unwrap();
    let origin = Origin::new();
    let leader = request(&sim, &cache, &origin, 1);
    let waiters: Vec<_> = (0..100)
        .map(|_| request(&sim, &cache, &origin, 2))
        .collect();
    sim.advance(secs(1) - Duration::from_nanos(1));
    assert!(waiters.iter().all(|w| !w.is_done()));
    sim.advance(Duration::from_nanos(1));
    for w in &waiters {
        match w.take() {
            Err(Error::WaitTimeout { waited }) => assert_eq!(waited, secs(1)),
            other => panic!("a waiter got {other:?}"),
        }
    }
    assert_eq!(origin.calls(), 1, "no waiter went to the origin");
    assert_eq!(cache.metrics().total().wait_timeouts, 100);

    // The leader is not bound by wait_timeout: its load finishes and is stored.
    sim.advance(secs(9));
    assert_eq!(leader.take().unwrap(), Some(1));
    assert_eq!(cache.get(KEY), Some(1));
    assert_eq!(herdless::driver::flights_in_progress(&cache), 0);
}

#[test]
fn with_fail_safe_data_waiters_take_the_stale_value_at_the_timeout() {
    let mut sim = Sim::new();
    let cache: Cache<u32> = sim
        .builder()
        .ttl(secs(60))
        .jitter(0.0)
        .max_stale(secs(3_600))
        .wait_timeout(secs(1))
        .build()
        .unwrap();
    let origin = Origin::new();
    cache.set(KEY, 7).unwrap();
    sim.advance(secs(120)); // past the TTL, within max_stale
    let leader = request(&sim, &cache, &origin, 8);
    let waiters: Vec<_> = (0..100)
        .map(|_| request(&sim, &cache, &origin, 9))
        .collect();
    sim.advance(secs(1));
    for w in &waiters {
        assert_eq!(w.take().unwrap(), Some(7), "the fail-safe value");
    }
    assert!(!leader.is_done(), "the leader keeps loading");
    assert_eq!(origin.calls(), 1);
    let m = cache.metrics().total();
    assert_eq!((m.wait_timeouts, m.failsafe_served), (100, 100));

    sim.advance(secs(9));
    assert_eq!(leader.take().unwrap(), Some(8));
    assert_eq!(cache.get(KEY), Some(8), "the load landed after all");
}

#[test]
fn blocking_waiters_time_out_too() {
    // The blocking API on the real clock: the waiter parks and wakes at its deadline.
    let cache: Cache<u32> = Cache::builder()
        .wait_timeout(Duration::from_millis(50))
        .build()
        .unwrap();
    let herdless::Lookup::Lead(guard) = cache.lookup(KEY).unwrap() else {
        panic!("the first caller leads")
    };
    let waiter = std::thread::spawn({
        let cache = cache.clone();
        move || cache.get_or_load(KEY, || Ok::<_, std::io::Error>(Some(2)))
    });
    let got = waiter.join().unwrap();
    assert!(matches!(got, Err(Error::WaitTimeout { .. })), "{got:?}");
    assert_eq!(guard.complete(Ok(Some(1))).unwrap(), Some(1));
    assert_eq!(cache.get(KEY), Some(1));
}

#[test]
fn a_served_waiter_leaves_no_waker_behind_in_the_clock() {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};

    use herdless::{Lookup, ManualClock};

    let clock = ManualClock::new();
    let cache: Cache<u32> = Cache::builder()
        .clock(clock.clone())
        .wait_timeout(secs(5))
        .build()
        .unwrap();
    let Ok(Lookup::Lead(guard)) = cache.lookup(KEY) else {
        panic!("the first caller leads");
    };
    let Ok(Lookup::Wait(mut waiter)) = cache.lookup(KEY) else {
        panic!("the second caller waits");
    };
    let probe = common::Probe::new();
    let other = common::Probe::new();
    {
        let waker = Waker::from(probe.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(std::pin::Pin::new(&mut waiter).poll(&mut cx).is_pending());
        // Polled again from another task: still one timer, now pointed at the new task.
        let other_waker = Waker::from(other.clone());
        let mut cx = Context::from_waker(&other_waker);
        assert!(std::pin::Pin::new(&mut waiter).poll(&mut cx).is_pending());
        guard.complete(Ok(Some(7))).unwrap();
        assert_eq!(other.wakes(), 1, "woken by the load");
        match std::pin::Pin::new(&mut waiter).poll(&mut cx) {
            Poll::Ready(Ok(herdless::Waited::Loaded(Some(7)))) => {}
            p => panic!("not the loaded value (ready: {})", p.is_ready()),
        }
    }
    // The wait_timeout timer (5 s) is still in the clock, but holds neither task's waker.
    assert_eq!(
        Arc::strong_count(&probe),
        1,
        "the clock kept the first task's waker"
    );
    assert_eq!(
        Arc::strong_count(&other),
        1,
        "the clock kept the waiter's waker"
    );
    clock.advance(secs(6));
    assert_eq!(probe.wakes(), 0);
    assert_eq!(other.wakes(), 1, "no late wake-up");
}

/// A hand-over (the leader went away) does not restart a caller's wait: `wait_timeout`
/// counts from the caller's first arrival, however many leaders go away one after another.
#[test]
fn wait_timeout_holds_from_the_first_arrival_across_hand_overs() {
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::sync::Mutex;

    let mut sim = Sim::new();
    let cache: Cache<u32> = sim.builder().wait_timeout(secs(1)).build().unwrap();
    let origin = Origin::new();
    // Which caller's loader runs now: that caller is the leader to cancel next.
    let leading: Arc<Mutex<Option<usize>>> = Arc::default();
    type Caller = (Duration, Task<Result<Option<u32>, Error>>);
    let callers: Rc<RefCell<Vec<Caller>>> = Rc::default();
    let arrive = |sim: &Sim, n: usize| {
        for _ in 0..n {
            let mut all = callers.borrow_mut();
            let i = all.len();
            let (cache, leading) = (cache.clone(), leading.clone());
            let load = origin.loader(&sim.clock, secs(10), Ok(Some(1)));
            let task = sim.spawn(async move {
                let loader = move || {
                    *leading.lock().unwrap() = Some(i);
                    load()
                };
                cache.get_or_load_async(KEY, loader).await
            });
            all.push((sim.now(), task));
        }
    };
    arrive(&sim, 10);
    sim.run();
    let mut cancelled = Vec::new();
    for _ in 0..5 {
        sim.advance(Duration::from_millis(900));
        let leader = leading.lock().unwrap().take().expect("someone leads");
        callers.borrow()[leader].1.cancel();
        cancelled.push(leader);
        arrive(&sim, 2);
        sim.run();
        // Every caller still waiting is within wait_timeout of its own arrival.
        for (i, (arrived, task)) in callers.borrow().iter().enumerate() {
            if cancelled.contains(&i) || Some(i) == *leading.lock().unwrap() {
                continue;
            }
            let waited = sim.now() - *arrived;
            if waited >= secs(1) {
                assert!(task.is_done(), "caller {i} still waits after {waited:?}");
            }
        }
    }
    sim.advance(secs(1));
    let now_leading = leading.lock().unwrap().take();
    for (i, (arrived, task)) in callers.borrow().iter().enumerate() {
        if cancelled.contains(&i) || Some(i) == now_leading {
            continue;
        }
        match task.take() {
            Err(Error::WaitTimeout { waited }) => {
                assert_eq!(
                    waited,
                    secs(1),
                    "caller {i} (arrived {arrived:?}) waited {waited:?}"
                )
            }
            other => panic!("caller {i} got {other:?}"),
        }
    }
    assert_eq!(
        origin.calls(),
        6,
        "one loader call per leader, none by a waiter"
    );
}

/// The blocking driver keeps the first arrival too: callers parked on their threads, five
/// leaders replaced then cancelled 0.9 s apart, two callers arriving at each hand-over.
/// Each caller is answered by a timeout exactly `wait_timeout` after its own arrival (with
/// the old per-lookup deadline, a caller that arrived at 0 was still waiting at 1.0 s).
#[test]
fn blocking_waiters_keep_their_first_arrival_across_hand_overs() {
    use std::thread::JoinHandle;
    use std::time::Instant;

    use herdless::{Clock, Lookup, ManualClock};

    type Caller = (Duration, JoinHandle<Result<Option<u32>, Error>>);
    let clock = ManualClock::new();
    let cache: Cache<u32> = Cache::builder()
        .clock(clock.clone())
        .wait_timeout(secs(1))
        .build()
        .unwrap();
    let coalesced = || cache.metrics().total().coalesced_waiters;
    // Blocks (really) until `cond` holds: the callers' threads run on their own.
    let until = |what: &str, cond: &dyn Fn() -> bool| {
        let give_up = Instant::now() + Duration::from_secs(20);
        while !cond() {
            assert!(Instant::now() < give_up, "{what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    let lead = || match cache.lookup(KEY).unwrap() {
        Lookup::Lead(guard) => guard,
        _ => panic!("the test's caller leads"),
    };
    let mut callers: Vec<Caller> = Vec::new();
    // Waits decided so far: each arrival, and each caller again after a hand-over.
    let registered = std::cell::Cell::new(0);
    let arrive = |callers: &mut Vec<Caller>, n: u64| {
        for _ in 0..n {
            let c = cache.clone();
            let handle = std::thread::spawn(move || {
                c.get_or_load(KEY, || -> Result<Option<u32>, std::io::Error> {
                    panic!("a waiter led: the test's leader should have been there")
                })
            });
            callers.push((clock.now(), handle));
        }
        registered.set(registered.get() + n);
        until("the callers did not start waiting", &|| {
            coalesced() == registered.get()
        });
    };
    // Moves the clock to `to`, stopping at every deadline on the way; a caller whose
    // deadline passed must then have its answer.
    let advance = |callers: &mut Vec<Caller>, to: Duration| {
        while let Some(t) = clock.next_timer().filter(|&t| t <= to) {
            clock.set(t);
            for (arrived, handle) in callers.iter() {
                if *arrived + secs(1) <= t {
                    until("a caller still waits past its wait_timeout", &|| {
                        handle.is_finished()
                    });
                }
            }
        }
        clock.set(to);
        for (arrived, handle) in std::mem::take(callers) {
            if !handle.is_finished() {
                callers.push((arrived, handle));
                continue;
            }
            match handle.join().unwrap() {
                Err(Error::WaitTimeout { waited }) => assert_eq!(waited, secs(1)),
                other => panic!("a caller that arrived at {arrived:?} got {other:?}"),
            }
        }
    };
    let mut leader = lead();
    arrive(&mut callers, 10);
    for round in 1..=5u32 {
        advance(&mut callers, Duration::from_millis(900) * round);
        // The next leader is in place before the old one goes: every caller handed over
        // finds it and waits for it again.
        cache.invalidate(KEY).unwrap();
        let next = lead();
        let waiting = callers.len() as u64;
        drop(leader); // cancelled: its waiters get a Retry
        leader = next;
        registered.set(registered.get() + waiting);
        until("a caller did not wait again after the hand-over", &|| {
            coalesced() == registered.get()
        });
        arrive(&mut callers, 2);
    }
    advance(&mut callers, secs(10));
    assert!(callers.is_empty(), "every caller was answered");
    leader.abandon();
}
