//! The loader's cancellation signal: it fires when every caller waiting for the load left,
//! when the key is written during the load, or when the hard timeout passes; a blocked
//! loader is woken by it; and a cancelled load never stores its result.

mod common;

use std::sync::Arc;
use std::sync::mpsc;
use std::thread;

use common::{OriginDown, Sim, ms, secs};
use futures_util::FutureExt;
use herdless::{Cache, LoadGuard, Loaded, Lookup, ManualClock, Waiter};

const KEY: &str = "ns:k";

fn cache(clock: &ManualClock) -> Cache<u32> {
    Cache::builder()
        .clock(clock.clone())
        .jitter(0.0)
        .beta(0.0)
        .without_spawner()
        .build()
        .unwrap()
}

fn lead(cache: &Cache<u32>) -> LoadGuard<u32> {
    match cache.lookup(KEY).unwrap() {
        Lookup::Lead(g) => g,
        _ => panic!("expected to lead"),
    }
}

fn wait(cache: &Cache<u32>) -> Waiter<u32> {
    match cache.lookup(KEY).unwrap() {
        Lookup::Wait(w) => w,
        _ => panic!("expected to wait"),
    }
}

#[test]
fn the_signal_fires_when_the_last_caller_leaves_and_the_load_is_not_stored() {
    let clock = ManualClock::new();
    let cache = cache(&clock);
    let mut guard = lead(&cache);
    let ctx = guard.context();
    let (w1, w2) = (wait(&cache), wait(&cache));
    let mut cancelled = ctx.cancelled();
    guard.release(); // the leader's own caller went away; two waiters still want it
    assert!(!ctx.is_cancelled());
    drop(w1);
    assert!(!ctx.is_cancelled(), "one waiter is still there");
    assert!((&mut cancelled).now_or_never().is_none());
    drop(w2);
    assert!(ctx.is_cancelled());
    assert!(cancelled.now_or_never().is_some());
    // The loader finished anyway: its result answers nobody and is not kept.
    assert_eq!(guard.complete(Ok(Some(1))).unwrap(), Some(1));
    assert!(
        cache.peek(KEY).is_none(),
        "a cancelled load stored its result"
    );
    // The next caller leads a load of its own.
    let g = lead(&cache);
    assert!(!g.context().is_cancelled());
}

#[test]
fn a_leader_whose_caller_stays_is_never_cancelled_by_waiters_leaving() {
    let clock = ManualClock::new();
    let cache = cache(&clock);
    let guard = lead(&cache);
    let ctx = guard.context();
    drop(wait(&cache));
    assert!(!ctx.is_cancelled());
    guard.complete(Ok(Some(1))).unwrap();
    assert_eq!(cache.get(KEY), Some(1));
}

#[test]
fn a_blocked_loader_is_woken_when_the_last_waiter_leaves() {
    let clock = ManualClock::new();
    let cache = cache(&clock);
    let mut guard = lead(&cache);
    let ctx = guard.context();
    let waiter = wait(&cache);
    guard.release();
    let (started, ready) = mpsc::channel();
    let loader = thread::spawn(move || {
        started.send(()).unwrap();
        // The manual clock never reaches the hour: only the signal can end this wait.
        ctx.wait_cancelled(secs(3600))
    });
    ready.recv().unwrap();
    drop(waiter);
    assert!(
        loader.join().unwrap(),
        "woken by the signal, not the timeout"
    );
    guard.complete(Ok(Some(1))).unwrap();
    assert!(cache.peek(KEY).is_none());
}

#[test]
fn a_blocking_wait_ends_at_its_timeout_when_nothing_cancels() {
    let clock = ManualClock::new();
    let cache = cache(&clock);
    let guard = lead(&cache);
    let ctx = guard.context();
    let c = clock.clone();
    let loader = thread::spawn(move || ctx.wait_cancelled(secs(1)));
    while clock.pending_timers() == 0 {
        thread::yield_now();
    }
    c.advance(secs(1));
    assert!(!loader.join().unwrap());
    drop(guard);
}

#[test]
fn a_blocking_loader_sees_the_hard_timeout_and_its_late_result_is_not_stored() {
    let clock = ManualClock::new();
    let cache: Cache<u32> = Cache::builder()
        .clock(clock.clone())
        .hard_timeout(secs(2))
        .without_spawner()
        .build()
        .unwrap();
    let (started, ready) = mpsc::channel();
    let c = cache.clone();
    let call = thread::spawn(move || {
        c.get_or_load_with(KEY, move |ctx| {
            started.send(()).unwrap();
            let cancelled = ctx.wait_cancelled(secs(3600));
            Ok::<_, OriginDown>(Loaded::value(if cancelled { 1 } else { 2 }))
        })
    });
    ready.recv().unwrap();
    while clock.pending_timers() == 0 {
        thread::yield_now();
    }
    clock.advance(secs(2));
    let _ = call.join().unwrap();
    assert!(
        cache.peek(KEY).is_none(),
        "a load past its hard timeout stored"
    );
}

#[test]
fn a_write_during_the_load_cancels_it_and_its_callers_get_the_written_value() {
    let mut sim = Sim::new();
    let cache: Cache<u32> = sim.builder().build().unwrap();
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let call = {
        let (cache, calls) = (cache.clone(), calls.clone());
        sim.spawn(async move {
            cache
                .get_or_load_with_async(KEY, move |ctx| async move {
                    calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    ctx.cancelled().await; // an origin call that would take forever
                    Err::<Loaded<u32>, _>(OriginDown(1))
                })
                .await
        })
    };
    let waiter = {
        let cache = cache.clone();
        sim.spawn(async move {
            cache
                .get_or_load_async(KEY, || async { Ok::<_, OriginDown>(Some(3)) })
                .await
        })
    };
    sim.run();
    sim.advance(ms(10));
    assert!(!call.is_done());
    cache.set(KEY, 9).unwrap();
    sim.run();
    assert_eq!(call.take().unwrap(), Some(9));
    assert_eq!(waiter.take().unwrap(), Some(9));
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(cache.get(KEY), Some(9));
}

#[test]
fn a_bump_during_the_load_is_seen_by_the_context() {
    let clock = ManualClock::new();
    let cache = cache(&clock);
    let guard = lead(&cache);
    let ctx = guard.context();
    cache.bump("ns");
    assert!(ctx.is_cancelled());
    guard.complete(Ok(Some(1))).unwrap();
    assert!(cache.peek(KEY).is_none());
}

#[test]
fn dropping_the_only_caller_of_an_async_load_drops_the_loader_future() {
    let mut sim = Sim::new();
    let cache: Cache<u32> = sim.builder().build().unwrap();
    let (tx, rx) = mpsc::channel::<()>();
    struct Dropped(mpsc::Sender<()>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            let _ = self.0.send(());
        }
    }
    let clock = sim.clock.clone();
    let call = {
        let cache = cache.clone();
        sim.spawn(async move {
            cache
                .get_or_load_with_async(KEY, move |_| async move {
                    let _d = Dropped(tx);
                    common::sleep(&clock, secs(60)).await;
                    Ok::<_, OriginDown>(Loaded::value(1))
                })
                .await
        })
    };
    sim.run();
    call.cancel();
    sim.run();
    rx.try_recv().expect("the loader future was dropped");
    assert!(cache.peek(KEY).is_none());
    assert_eq!(herdless::driver::flights_in_progress(&cache), 0);
}
