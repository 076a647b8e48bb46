//! `get_or_load_scoped`: a blocking loader that borrows from its caller (neither `Send` nor
//! `'static`) still gets single-flight; it runs only on its caller's thread, so a stale hit
//! starts no refresh from it.

mod common;

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::secs;
use herdless::{Cache, HitState, Lookup, ManualClock};

#[test]
fn a_loader_may_borrow_locals_that_are_neither_send_nor_static() {
    let cache = Cache::<usize>::new();
    let rows = String::from("abc");
    let calls = Cell::new(0); // !Sync: the loader is !Send
    let n = cache
        .get_or_load_scoped("rows:count", || {
            calls.set(calls.get() + 1);
            Ok::<_, std::io::Error>(Some(rows.len()))
        })
        .unwrap();
    assert_eq!((n, calls.get()), (Some(3), 1));
    let again = cache
        .get_or_load_scoped("rows:count", || Ok::<_, std::io::Error>(Some(0)))
        .unwrap();
    assert_eq!(again, Some(3), "a hit: the loader does not run");
}

#[test]
fn concurrent_borrowing_callers_share_one_load() {
    let cache = Cache::<u32>::new();
    let calls = AtomicUsize::new(0);
    let started = std::sync::Barrier::new(8);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                started.wait();
                let v = cache
                    .get_or_load_scoped("hot:1", || {
                        calls.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(100));
                        Ok::<_, std::io::Error>(Some(42))
                    })
                    .unwrap();
                assert_eq!(v, Some(42));
            });
        }
    });
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[test]
fn a_stale_hit_starts_no_refresh_from_a_borrowing_caller() {
    let clock = ManualClock::new();
    let cache: Cache<u32> = Cache::builder()
        .clock(clock.clone())
        .ttl(secs(10))
        .grace(secs(5))
        .jitter(0.0)
        .beta(0.0)
        .build()
        .unwrap();
    cache.set("k:1", 1).unwrap();
    clock.set(secs(12));
    let calls = Cell::new(0);
    for _ in 0..3 {
        let v = cache
            .get_or_load_scoped("k:1", || {
                calls.set(calls.get() + 1);
                Ok::<_, std::io::Error>(Some(2))
            })
            .unwrap();
        assert_eq!(v, Some(1), "the stale value, at once");
    }
    assert_eq!(calls.get(), 0);
    assert_eq!(herdless::driver::flights_in_progress(&cache), 0);
    assert_eq!(cache.metrics().total().refreshes, 0);
    // The key is still due for a refresh: the next caller of the state machine gets it.
    match cache.lookup("k:1").unwrap() {
        Lookup::Hit(hit) => {
            assert_eq!(hit.state, HitState::Stale);
            assert!(hit.refresh.is_some());
        }
        _ => panic!("a stale hit"),
    }
}
