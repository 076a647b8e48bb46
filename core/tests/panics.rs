//! A loader that panics (a dead leader must not hang its waiters): every waiter of that
//! load gets `Error::LoaderPanicked` at once, the panic goes on in the leader's own caller,
//! and the next call loads again.

mod common;

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use common::{Origin, Sim, ms, secs, sleep};
use herdless::{Cache, Error, Lookup};

const KEY: &str = "reports:v1:daily";

#[test]
fn threads_waiting_on_a_panicking_loader_all_get_the_error_then_the_next_call_loads() {
    const THREADS: usize = 16;
    let cache: Cache<u32> = Cache::builder().wait_timeout(secs(30)).build().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let (cache, calls) = (cache.clone(), calls.clone());
            std::thread::spawn(move || {
                let probe = cache.clone();
                cache.get_or_load(KEY, move || -> Result<Option<u32>, std::io::Error> {
                    calls.fetch_add(1, Ordering::SeqCst);
                    // Panic only once every other thread waits on this load.
                    let deadline = Instant::now() + Duration::from_secs(20);
                    while probe.metrics().total().coalesced_waiters < (THREADS - 1) as u64 {
                        assert!(Instant::now() < deadline, "the waiters never arrived");
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    panic!("boom")
                })
            })
        })
        .collect();
    let (mut leaders, mut waiters) = (0, 0);
    for t in threads {
        match t.join() {
            Err(payload) => {
                assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom"));
                leaders += 1;
            }
            Ok(Err(Error::LoaderPanicked { message })) => {
                assert_eq!(message.as_deref(), Some("boom"));
                waiters += 1;
            }
            Ok(other) => panic!("a waiter got {other:?}"),
        }
    }
    assert_eq!((leaders, waiters), (1, THREADS - 1));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(herdless::driver::flights_in_progress(&cache), 0);
    assert_eq!(cache.metrics().total().load_errors, 1);

    // Nothing was cached: the next call loads again, and succeeds.
    let v = cache.get_or_load(KEY, || Ok::<_, std::io::Error>(Some(9)));
    assert_eq!(v.unwrap(), Some(9));
    assert_eq!(cache.metrics().total().loads, 2);
}

#[test]
fn async_waiters_get_the_panic_and_the_leaders_caller_unwinds() {
    let mut sim = Sim::new();
    let cache: Cache<u32> = sim.builder().build().unwrap();
    let origin = Origin::new();
    let mut leader = {
        let (origin, clock) = (origin.clone(), sim.clock.clone());
        Box::pin(cache.get_or_load_async(KEY, move || async move {
            let _call = origin.enter();
            sleep(&clock, ms(200)).await;
            panic!("boom");
            #[allow(unreachable_code)]
            Ok::<_, std::io::Error>(Some(1))
        }))
    };
    let mut cx = Context::from_waker(Waker::noop());
    assert!(leader.as_mut().poll(&mut cx).is_pending());
    let waiters: Vec<_> = (0..100)
        .map(|_| {
            let cache = cache.clone();
            let loader = origin.loader(&sim.clock, ms(200), Ok(Some(2)));
            sim.spawn(async move { cache.get_or_load_async(KEY, loader).await })
        })
        .collect();
    sim.advance(ms(200));
    assert!(waiters.iter().all(|w| !w.is_done()));
    let unwound = catch_unwind(AssertUnwindSafe(|| leader.as_mut().poll(&mut cx)));
    assert!(unwound.is_err(), "the leader's caller must see the panic");
    sim.run();
    for w in &waiters {
        match w.take() {
            Err(Error::LoaderPanicked { message }) => assert_eq!(message.as_deref(), Some("boom")),
            other => panic!("a waiter got {other:?}"),
        }
    }
    assert_eq!(origin.calls(), 1, "no waiter called the loader itself");
    assert_eq!(origin.running(), 0);
    assert_eq!(herdless::driver::flights_in_progress(&cache), 0);

    let retry = {
        let cache = cache.clone();
        let loader = origin.loader(&sim.clock, ms(200), Ok(Some(3)));
        sim.spawn(async move { cache.get_or_load_async(KEY, loader).await })
    };
    sim.advance(ms(200));
    assert_eq!(retry.take().unwrap(), Some(3));
    assert_eq!(origin.calls(), 2);
}

#[test]
fn a_guard_dropped_by_a_panicking_thread_wakes_its_waiters_with_the_panic() {
    let sim = Sim::new();
    let cache: Cache<u32> = sim.builder().build().unwrap();
    let Lookup::Lead(guard) = cache.lookup(KEY).unwrap() else {
        panic!("the first caller leads")
    };
    let Lookup::Wait(waiter) = cache.lookup(KEY).unwrap() else {
        panic!("the second caller waits")
    };
    let died = std::thread::spawn(move || {
        let _guard = guard;
        panic!("a binding's loader thread died");
    })
    .join();
    assert!(died.is_err());
    match waiter.wait() {
        Err(Error::LoaderPanicked { message: None }) => {}
        other => panic!("the waiter got {other:?}"),
    }
    assert!(matches!(cache.lookup(KEY).unwrap(), Lookup::Lead(_)));
    // Explicitly reported panics carry their message.
    let Lookup::Lead(guard) = cache.lookup(KEY).unwrap() else {
        panic!("the key is loadable again")
    };
    let Lookup::Wait(waiter) = cache.lookup(KEY).unwrap() else {
        panic!("the second caller waits")
    };
    herdless::driver::panicked(guard, Some("TypeError: x is undefined".into()));
    assert!(matches!(
        waiter.wait(),
        Err(Error::LoaderPanicked { message: Some(m) }) if m == "TypeError: x is undefined"
    ));
    assert_eq!(herdless::driver::flights_in_progress(&cache), 0);
    assert_eq!(cache.metrics().total().load_errors, 2);
}
