//! Loom models of the single-flight table: the real engine (`Cache::lookup`, `LoadGuard`
//! completion and drop, `Waiter` polling, flight registration and removal), with loom's
//! locks, atomics, `Arc` and `block_on` (behind `Waiter::wait`) swapped in by
//! `core/src/sync.rs`. A lost wake-up shows up as a loom deadlock, a leaked `Arc` (a flight
//! record kept alive by a cycle) as a loom leak, and a flight record left in the table as
//! `driver::flights_in_progress() != 0` or as a later lookup that does not lead.
//!
//! Run (in CI, release mode, a few seconds per model):
//!
//! ```text
//! RUSTFLAGS="--cfg herdless_loom" cargo test -p herdless --test loom --release
//! ```
//!
//! Each model explores every interleaving with at most `PREEMPTIONS` preemptions (forced
//! thread switches); a scheduler switch at a blocking point is free. Set
//! `LOOM_MAX_PREEMPTIONS=3` (or more) for a deeper, much slower search; `LOOM_LOG=1` traces
//! the executions and `LOOM_LOCATION=1` adds source locations to a failure's report.

#![cfg(herdless_loom)]

mod loom_support;
/// Models of the flight's waiters: its one clock timer and the published outcome.
#[path = "loom/waiters.rs"]
mod waiters;

use std::time::Duration;

use herdless::{Cache, Error, LoadError, Loaded, Lookup, ManualClock, Waited, Waiter};
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;
use loom_support::{cache, cache_with, model};

const KEY: &str = "ns:k";

/// How one caller of `call` got its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Led,
    Waited,
    Hit,
}

/// One caller driving the state machine to the end as the APIs do: lead and complete with
/// `value`, wait (looking up again on `Retry`), or take a hit. Returns the roles it played,
/// in order, and its answer.
fn call(cache: &Cache<u32>, value: u32) -> (Vec<Role>, Option<u32>) {
    let mut roles = Vec::new();
    let mut step = cache.lookup(KEY);
    loop {
        match step.expect("valid key") {
            Lookup::Hit(hit) => {
                assert!(hit.refresh.is_none(), "nothing is stale here");
                roles.push(Role::Hit);
                return (roles, hit.value);
            }
            Lookup::Lead(guard) => {
                roles.push(Role::Led);
                let v = guard.complete(Ok(Some(value))).expect("the load succeeds");
                return (roles, v);
            }
            Lookup::Wait(waiter) => {
                roles.push(Role::Waited);
                match waiter.wait().expect("the load succeeds") {
                    Waited::Loaded(v) => return (roles, v),
                    Waited::Retry(r) => step = cache.lookup_again(KEY, r),
                    Waited::Stale(_) => panic!("no fail-safe value exists"),
                }
            }
        }
    }
}

/// Lookup that must find the load running.
fn must_wait(cache: &Cache<u32>) -> Waiter<u32> {
    match cache.lookup(KEY).expect("valid key") {
        Lookup::Wait(w) => w,
        Lookup::Lead(_) => panic!("a second leader for one key"),
        Lookup::Hit(_) => panic!("a hit before the load finished"),
    }
}

/// Counts the waiters that have looked up, so the leader finishes only after they did (the
/// race left is then between their polls and the finish: the lost wake-up window). A
/// condition variable, not a spin: a blocked thread gives loom one schedule to explore where
/// a spinning one gives it many (and two spinning threads can starve the one they wait for).
#[derive(Default)]
struct Gate {
    arrived: Mutex<usize>,
    changed: Condvar,
}

impl Gate {
    fn arrive(&self) {
        *self.arrived.lock().unwrap() += 1;
        self.changed.notify_all();
    }

    fn until(&self, n: usize) {
        let mut arrived = self.arrived.lock().unwrap();
        while *arrived < n {
            arrived = self.changed.wait(arrived).unwrap();
        }
    }
}

/// Spawns a thread that joins the running load as a waiter, says so at `gate`, then waits.
fn spawn_waiter<T: 'static>(
    cache: &Cache<u32>,
    gate: &Arc<Gate>,
    then: impl FnOnce(&Cache<u32>, Waiter<u32>) -> T + Send + 'static,
) -> thread::JoinHandle<T> {
    let (cache, gate) = (cache.clone(), gate.clone());
    thread::spawn(move || {
        let waiter = must_wait(&cache);
        gate.arrive();
        then(&cache, waiter)
    })
}

/// No record is left: the counter is back to zero and the next caller leads.
fn assert_no_flight(cache: &Cache<u32>) {
    assert_eq!(
        herdless::driver::flights_in_progress(&cache),
        0,
        "a flight record leaked"
    );
    match cache.lookup(KEY).expect("valid key") {
        Lookup::Lead(guard) => guard.abandon(),
        Lookup::Wait(_) => panic!("a finished flight is still in the table"),
        Lookup::Hit(_) => {}
    }
    assert_eq!(
        herdless::driver::flights_in_progress(&cache),
        0,
        "a flight record leaked"
    );
}

fn lead(cache: &Cache<u32>) -> herdless::LoadGuard<u32> {
    match cache.lookup(KEY).expect("valid key") {
        Lookup::Lead(g) => g,
        _ => panic!("the first caller of a missing key leads"),
    }
}

/// The address of a load error's shared payload: equal for the very same error.
fn error_addr(e: &LoadError) -> *const () {
    e.get() as *const (dyn std::error::Error + Send + Sync) as *const ()
}

#[derive(Debug)]
struct Boom;
impl std::fmt::Display for Boom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("boom")
    }
}
impl std::error::Error for Boom {}

/// 1. Three callers miss the same key at once: exactly one leads, the others wait (or, when
///    they arrive after the end, hit), and every one of them ends with the leader's value.
#[test]
fn one_leader_among_three_callers() {
    model("one_leader_among_three_callers", || {
        let clock = ManualClock::new();
        let cache = cache(&clock);
        let others: Vec<_> = (1..3)
            .map(|i| {
                let cache = cache.clone();
                thread::spawn(move || call(&cache, i))
            })
            .collect();
        let mut results = vec![call(&cache, 0)];
        results.extend(others.into_iter().map(|h| h.join().unwrap()));
        let leads: Vec<_> = results
            .iter()
            .filter(|(roles, _)| roles.contains(&Role::Led))
            .collect();
        assert_eq!(leads.len(), 1, "exactly one leader: {results:?}");
        let (roles, value) = leads[0];
        assert_eq!(roles, &[Role::Led], "the leader never waited: {results:?}");
        for (roles, v) in &results {
            assert_eq!(
                roles.len(),
                1,
                "no retry without an abandoned load: {results:?}"
            );
            assert_eq!(v, value, "everyone gets the one result: {results:?}");
        }
        assert_eq!(cache.get(KEY), *value);
        assert_no_flight(&cache);
    });
}

/// 1b. The waiters are registered before the leader finishes: each one's waker registration
///     races the finish, and no wake-up may be lost (loom reports a deadlock if one is).
#[test]
fn no_lost_wakeup() {
    model("no_lost_wakeup", || {
        let clock = ManualClock::new();
        let cache = cache(&clock);
        let guard = lead(&cache);
        let gate = Arc::new(Gate::default());
        let waiters: Vec<_> = (0..2)
            .map(|_| spawn_waiter(&cache, &gate, |_, w| w.wait()))
            .collect();
        gate.until(2);
        assert_eq!(guard.complete(Ok(Some(7))).unwrap(), Some(7));
        for w in waiters {
            assert_eq!(w.join().unwrap().unwrap(), Waited::Loaded(Some(7)));
        }
        assert_eq!(cache.get(KEY), Some(7));
        assert_no_flight(&cache);
    });
}

/// 1c. The blocking API end to end: concurrent `get_or_load` calls run the loader once.
#[test]
fn get_or_load_runs_the_loader_once() {
    model("get_or_load_runs_the_loader_once", || {
        let clock = ManualClock::new();
        let cache = cache(&clock);
        let calls = Arc::new(AtomicUsize::new(0));
        let load = |cache: &Cache<u32>, calls: &Arc<AtomicUsize>| {
            let calls = calls.clone();
            cache.get_or_load(KEY, move || {
                calls.fetch_add(1, Ordering::Relaxed);
                Ok::<_, Boom>(Some(5))
            })
        };
        let other = {
            let (cache, calls) = (cache.clone(), calls.clone());
            thread::spawn(move || load(&cache, &calls))
        };
        assert_eq!(load(&cache, &calls).unwrap(), Some(5));
        assert_eq!(other.join().unwrap().unwrap(), Some(5));
        assert_eq!(calls.load(Ordering::Relaxed), 1, "one loader call");
        assert_no_flight(&cache);
    });
}

/// 2. The leader's error reaches every waiter, the very same error, and is not cached.
#[test]
fn error_reaches_every_waiter() {
    model("error_reaches_every_waiter", || {
        let clock = ManualClock::new();
        let cache = cache(&clock);
        let guard = lead(&cache);
        let gate = Arc::new(Gate::default());
        let waiters: Vec<_> = (0..2)
            .map(|_| spawn_waiter(&cache, &gate, |_, w| w.wait()))
            .collect();
        gate.until(2);
        let Err(Error::Load(mine)) = guard.complete(Err(LoadError::new(Boom))) else {
            panic!("the leader gets its own error");
        };
        for w in waiters {
            match w.join().unwrap() {
                Err(Error::Load(e)) => {
                    assert!(e.downcast_ref::<Boom>().is_some());
                    assert_eq!(error_addr(&e), error_addr(&mine), "the same error");
                }
                other => panic!("a waiter of a failed load got {other:?}"),
            }
        }
        assert_eq!(cache.get(KEY), None, "errors are never cached");
        assert_no_flight(&cache);
    });
}

/// 3. A leader dropped unfinished (cancelled) hands the load over: its waiters retry and
///    exactly one of them leads the new load, which every caller then gets.
#[test]
fn cancelled_leader_hands_the_load_over() {
    model("cancelled_leader_hands_the_load_over", || {
        let clock = ManualClock::new();
        let cache = cache(&clock);
        let guard = lead(&cache);
        let gate = Arc::new(Gate::default());
        let waiters: Vec<_> = (1..3)
            .map(|i| {
                spawn_waiter(&cache, &gate, move |cache, w| {
                    match w.wait().expect("a handed-over load is no error") {
                        Waited::Retry(_) => {}
                        other => panic!("the cancelled load answered {other:?}"),
                    }
                    call(cache, i)
                })
            })
            .collect();
        gate.until(2);
        drop(guard);
        let results: Vec<_> = waiters.into_iter().map(|h| h.join().unwrap()).collect();
        let leads: Vec<_> = results
            .iter()
            .filter(|(roles, _)| roles.contains(&Role::Led))
            .collect();
        assert_eq!(leads.len(), 1, "exactly one waiter takes over: {results:?}");
        let value = leads[0].1;
        assert!(value.is_some());
        for (_, v) in &results {
            assert_eq!(
                *v, value,
                "everyone gets the new leader's value: {results:?}"
            );
        }
        assert_eq!(cache.get(KEY), value);
        assert_no_flight(&cache);
    });
}

/// 4. A loader panic reported by the driver (`LoadGuard::panicked`, what `get_or_load`,
///    `get_or_load_async` and the bindings do) reaches every waiter as `LoaderPanicked`.
///
/// A guard dropped by real unwinding is not modelled: loom runs all model threads as
/// coroutines of one OS thread, so `std::thread::panicking()` and std's mutex poisoning leak
/// from the unwinding thread into whichever thread loom switches to (loom then reports a
/// poisoned lock, not our bug). That `Drop` branch ends the flight through the very same
/// `LoadGuard::end` as `panicked`, so its concurrency is covered here; its
/// `panicking()` test belongs to a plain threaded test.
#[test]
fn panicked_leader_fails_its_waiters() {
    model("panicked_leader_fails_its_waiters", || {
        let clock = ManualClock::new();
        let cache = cache(&clock);
        let guard = lead(&cache);
        let gate = Arc::new(Gate::default());
        let waiters: Vec<_> = (0..2)
            .map(|_| spawn_waiter(&cache, &gate, |_, w| w.wait()))
            .collect();
        gate.until(2);
        herdless::driver::panicked(guard, Some("boom".into()));
        for w in waiters {
            match w.join().unwrap() {
                Err(Error::LoaderPanicked { message }) => {
                    assert_eq!(message.as_deref(), Some("boom"))
                }
                other => panic!("a waiter of a panicked load got {other:?}"),
            }
        }
        assert_no_flight(&cache);
    });
}

/// 5a. A `set` while a load runs wins: the load's older result is never stored over it,
///     whichever of the two finishes first.
#[test]
fn set_during_load_is_not_overwritten() {
    model("set_during_load_is_not_overwritten", || {
        let clock = ManualClock::new();
        let cache = cache(&clock);
        let guard = lead(&cache);
        let writer = {
            let cache = cache.clone();
            thread::spawn(move || cache.set(KEY, 2).unwrap())
        };
        assert_eq!(guard.complete(Ok(Some(1))).unwrap(), Some(1));
        writer.join().unwrap();
        assert_eq!(cache.get(KEY), Some(2), "the newer write stays");
        assert_no_flight(&cache);
    });
}

/// 5b. An `invalidate` while a load runs: the load's result is not stored afterwards.
#[test]
fn invalidate_during_load_is_not_overwritten() {
    model("invalidate_during_load_is_not_overwritten", || {
        let clock = ManualClock::new();
        let cache = cache(&clock);
        let guard = lead(&cache);
        let writer = {
            let cache = cache.clone();
            thread::spawn(move || cache.invalidate(KEY).unwrap())
        };
        assert_eq!(guard.complete(Ok(Some(1))).unwrap(), Some(1));
        writer.join().unwrap();
        assert_eq!(cache.get(KEY), None, "the invalidation stays");
        assert_no_flight(&cache);
    });
}

/// 5c. A namespace `bump` while a load runs: the load began under the old epoch, so its
///     result is not stored (or, stored first, is dead after the bump).
#[test]
fn bump_during_load_is_not_overwritten() {
    model("bump_during_load_is_not_overwritten", || {
        let clock = ManualClock::new();
        let cache = cache(&clock);
        let guard = lead(&cache);
        let writer = {
            let cache = cache.clone();
            thread::spawn(move || cache.bump("ns"))
        };
        assert_eq!(guard.complete(Ok(Some(1))).unwrap(), Some(1));
        assert_eq!(writer.join().unwrap(), 1);
        assert_eq!(cache.get(KEY), None, "the bump stays");
        assert_no_flight(&cache);
    });
}

/// 5d. An `invalidate_tag` while a load answering with that tag runs: whichever comes
///     first, the result is never served afterwards (not stored, or stored and dead), and
///     a load that begins after the invalidation is stored.
#[test]
fn invalidate_tag_during_load_is_not_overwritten() {
    model("invalidate_tag_during_load_is_not_overwritten", || {
        let clock = ManualClock::new();
        let cache = cache(&clock);
        let guard = lead(&cache);
        let writer = {
            let cache = cache.clone();
            thread::spawn(move || cache.invalidate_tag("t").unwrap())
        };
        let answer = guard.complete_loaded(Ok(Loaded::value(1).tag("t")));
        assert_eq!(answer.unwrap(), Some(1));
        writer.join().unwrap();
        assert_eq!(cache.get(KEY), None, "the tag invalidation stays");
        assert!(cache.peek(KEY).is_none());
        let guard = lead(&cache);
        guard
            .complete_loaded(Ok(Loaded::value(2).tag("t")))
            .unwrap();
        assert_eq!(cache.get(KEY), Some(2), "a later load is stored");
    });
}

const HARD: Duration = Duration::from_secs(1);

/// 6a. A hung leader: another thread moves the clock past the hard timeout, the waiter
///     (woken by its clock timer) ends with `LoadTimeout` and removes the record; the
///     leader's late `complete` does not store.
#[test]
fn hard_timeout_ends_the_waiter_and_drops_the_late_result() {
    model(
        "hard_timeout_ends_the_waiter_and_drops_the_late_result",
        || {
            let clock = ManualClock::new();
            let cache = cache_with(&clock, Some(HARD));
            let guard = lead(&cache);
            let gate = Arc::new(Gate::default());
            let waiter = spawn_waiter(&cache, &gate, |_, w| w.wait());
            let ticker = {
                let (clock, gate) = (clock.clone(), gate.clone());
                thread::spawn(move || {
                    gate.until(1);
                    clock.advance(2 * HARD);
                })
            };
            match waiter.join().unwrap() {
                Err(Error::LoadTimeout { after }) => assert_eq!(after, HARD),
                other => panic!("a waiter of a hung load got {other:?}"),
            }
            ticker.join().unwrap();
            assert_eq!(
                herdless::driver::flights_in_progress(&cache),
                0,
                "the timed-out record is removed"
            );
            assert_eq!(guard.complete(Ok(Some(1))).unwrap(), Some(1));
            assert_eq!(cache.get(KEY), None, "a late result is not stored");
            assert_no_flight(&cache);
        },
    );
}

/// 6b. A completion racing the hard timeout: whichever wins, the waiter and the store agree.
///     A waiter told `LoadTimeout` never finds that load's value cached afterwards (a value
///     may reach the waiter without being stored, when the table gave the load up first).
#[test]
fn completion_racing_the_hard_timeout_is_consistent() {
    model("completion_racing_the_hard_timeout_is_consistent", || {
        let clock = ManualClock::new();
        let cache = cache_with(&clock, Some(HARD));
        let guard = lead(&cache);
        let gate = Arc::new(Gate::default());
        let waiter = spawn_waiter(&cache, &gate, |_, w| w.wait());
        gate.until(1);
        let ticker = {
            let clock = clock.clone();
            thread::spawn(move || clock.advance(2 * HARD))
        };
        assert_eq!(guard.complete(Ok(Some(1))).unwrap(), Some(1));
        let waited = waiter.join().unwrap();
        ticker.join().unwrap();
        let stored = cache.get(KEY);
        match waited {
            Ok(Waited::Loaded(Some(1))) => {}
            Err(Error::LoadTimeout { .. }) => {
                assert_eq!(
                    stored, None,
                    "a waiter timed out on a value that was stored"
                )
            }
            other => panic!("a waiter got {other:?}"),
        }
        assert_no_flight(&cache);
    });
}

/// 6c. The wait timeout firing as the load completes: the clock's alarm and the load's
///     wake-up race for the waiter, which ends once, with the value or the timeout, and the
///     timer lets go of its waker either way (the alarm is disarmed or fired, never both).
#[test]
fn wait_timeout_racing_the_completion_ends_the_waiter_once() {
    model(
        "wait_timeout_racing_the_completion_ends_the_waiter_once",
        || {
            let clock = ManualClock::new();
            let cache = cache(&clock);
            let guard = lead(&cache);
            let gate = Arc::new(Gate::default());
            let waiter = spawn_waiter(&cache, &gate, |_, w| w.wait());
            gate.until(1);
            let ticker = {
                let clock = clock.clone();
                thread::spawn(move || clock.advance(Duration::from_secs(6)))
            };
            assert_eq!(guard.complete(Ok(Some(1))).unwrap(), Some(1));
            match waiter.join().unwrap() {
                Ok(Waited::Loaded(Some(1))) | Err(Error::WaitTimeout { .. }) => {}
                other => panic!("a waiter got {other:?}"),
            }
            ticker.join().unwrap();
            assert_eq!(
                cache.get(KEY),
                Some(1),
                "the load's value is stored either way"
            );
            assert_no_flight(&cache);
        },
    );
}

/// 7. A tier's lost notifications (`driver::retain`, run on the tier's listener thread)
///    while a load runs: the load's result is never stored afterwards (the tier may hold a
///    newer entry this process was not told of), the entry `retain` keeps stays, and the
///    waiter still gets the load's value.
#[test]
fn retain_during_load_drops_the_result_and_keeps_what_it_keeps() {
    model(
        "retain_during_load_drops_the_result_and_keeps_what_it_keeps",
        || {
            let clock = ManualClock::new();
            let cache = cache(&clock);
            cache.set("ns:kept", 9).unwrap();
            let guard = lead(&cache);
            let gate = Arc::new(Gate::default());
            let waiter = spawn_waiter(&cache, &gate, |_, w| w.wait());
            gate.until(1);
            let listener = {
                let cache = cache.clone();
                thread::spawn(move || herdless::driver::retain(&cache, |v| v == Some(&9)))
            };
            assert_eq!(guard.complete(Ok(Some(1))).unwrap(), Some(1));
            listener.join().unwrap();
            match waiter.join().unwrap() {
                Ok(Waited::Loaded(Some(1))) => {}
                other => panic!("a waiter got {other:?}"),
            }
            // Stored before the retain ran, then dropped by it; or refused after it.
            assert_eq!(
                cache.get(KEY),
                None,
                "a load overlapping the loss is not kept"
            );
            assert_eq!(cache.get("ns:kept"), Some(9), "retain keeps what it keeps");
            assert_no_flight(&cache);
        },
    );
}

/// 8. The last waiter leaving wakes a loader blocked on the signal (a lost wake-up hangs).
#[test]
fn last_waiter_leaving_wakes_the_loader() {
    model("last_waiter_leaving_wakes_the_loader", || {
        let cache = cache(&ManualClock::new());
        let (mut guard, waiter) = (lead(&cache), must_wait(&cache));
        let ctx = guard.context();
        guard.release(); // the leader's own caller left
        let leaving = thread::spawn(move || drop(waiter));
        assert!(ctx.wait_cancelled(Duration::from_secs(3600)));
        leaving.join().unwrap();
        assert_eq!(guard.complete(Ok(Some(1))).unwrap(), Some(1));
        assert_eq!(cache.get(KEY), None, "a cancelled load stored its result");
        assert_no_flight(&cache);
    });
}
