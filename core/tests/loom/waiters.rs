//! Loom models of a flight's waiters (core/src/flight.rs, core/src/flight/waiters.rs): the
//! outcome published once and read without the lock, and the one clock timer that wakes the
//! waiters due. Run with the other models (see core/tests/loom.rs).

use std::time::Duration;

use herdless::{Error, ManualClock, Waited};
use loom::sync::Arc;
use loom::thread;

use super::loom_support::{cache_waiting, model};
use super::{Gate, assert_no_flight, lead, spawn_waiter};

/// The waiters' one clock timer (core/src/flight/waiters.rs) and the lock-free read of
/// the outcome: two waiters with different deadlines (a 500 ms `wait_timeout`, arrived
/// at 0 and 100 ms), the clock moved to 550 ms as the load completes. The timer, armed
/// for the first, wakes it and re-arms for the second; however that races the
/// completion and the lock-free reads of the outcome, the first ends once (value or
/// timeout), the second always gets the value (a wake-up lost between the timer and the
/// end would hang it), no read races the write of the outcome (loom checks the cell),
/// and no timer keeps the record alive (a loom leak). That each waiter wakes exactly at
/// its own deadline is tests/wait_timeout.rs's
/// `blocking_waiters_keep_their_first_arrival_across_hand_overs`. (Times stay under a second: a detector tick in the
/// completion would take the model past loom's branch limit.)
#[test]
fn the_flight_timer_racing_the_completion_loses_no_waiter() {
    model(
        "the_flight_timer_racing_the_completion_loses_no_waiter",
        || {
            let clock = ManualClock::new();
            let cache = cache_waiting(&clock, None, Duration::from_millis(500));
            let guard = lead(&cache);
            let gate = Arc::new(Gate::default());
            let first = spawn_waiter(&cache, &gate, |_, w| w.wait());
            gate.until(1);
            clock.advance(Duration::from_millis(100));
            let second = spawn_waiter(&cache, &gate, |_, w| w.wait());
            gate.until(2);
            let ticker = {
                let clock = clock.clone();
                thread::spawn(move || clock.advance(Duration::from_millis(450)))
            };
            assert_eq!(guard.complete(Ok(Some(1))).unwrap(), Some(1));
            match first.join().unwrap() {
                Ok(Waited::Loaded(Some(1))) | Err(Error::WaitTimeout { .. }) => {}
                other => panic!("the first waiter got {other:?}"),
            }
            match second.join().unwrap() {
                Ok(Waited::Loaded(Some(1))) => {}
                other => panic!("the second waiter, not due, got {other:?}"),
            }
            ticker.join().unwrap();
            assert_no_flight(&cache);
        },
    );
}
