//! A forked worker (gunicorn, Celery prefork) inherits the parent's memory but only the
//! forking thread: the system clock's timer thread must be started again in the child, or
//! a waiter that relies on it would never reach its `wait_timeout`; and a key that was
//! loading in the parent has no leader in the child, so the child loads it anew.
#![cfg(target_os = "linux")]

use std::time::Duration;

use herdless::{Cache, Error, Lookup};

/// Leads a load that never finishes and has a second thread wait for it: the waiter must
/// give up at `wait_timeout`, woken by the timer thread.
fn waiter_times_out(cache: &Cache<u32>, key: &str) -> bool {
    let Ok(Lookup::Lead(guard)) = cache.lookup(key) else {
        return false;
    };
    let c = cache.clone();
    let key = key.to_string();
    let waiter = std::thread::spawn(move || match c.lookup(&key) {
        Ok(Lookup::Wait(w)) => matches!(w.wait(), Err(Error::WaitTimeout { .. })),
        _ => false,
    });
    let ok = waiter.join().unwrap_or(false);
    drop(guard);
    ok
}

#[test]
fn waits_stay_bounded_in_a_forked_child() {
    let cache: Cache<u32> = Cache::builder()
        .wait_timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    // The parent starts its timer thread.
    assert!(waiter_times_out(&cache, "parent"));
    // A load in progress in the parent when it forks.
    let loading = cache.lookup("loading");
    assert!(matches!(loading, Ok(Lookup::Lead(_))));

    // SAFETY: the child only uses the cache and then leaves with `_exit`; this test binary
    // runs this one test, so no other test thread holds a lock across the fork.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // A watchdog: without the fix the child would hang forever.
        unsafe { libc::alarm(20) };
        let ok = waiter_times_out(&cache, "child");
        // The parent's load is not this process's: the child leads it instead of waiting.
        let leads = matches!(cache.lookup("loading"), Ok(Lookup::Lead(_)));
        unsafe {
            libc::_exit(if !ok {
                1
            } else if !leads {
                2
            } else {
                0
            })
        };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child's waiter did not time out (1) or waited for the parent's load (2): status {status:#x}"
    );
    drop(loading);
}
