//! For drivers of the engine beyond this crate's own: a shared tier (the `herdless-redis`
//! fleet engine) and the language bindings. Nothing here is needed to use a [`Cache`];
//! everything here keeps a driver's decisions inside the engine's rules (its budget, its
//! counters, its clock).

use alloc::string::String;
use alloc::sync::Arc;
use core::task::{Context, Poll};
use core::time::Duration;

use crate::alarm::{self, Alarm};
use crate::budget::OriginPermit;
use crate::clock::Clock;
use crate::engine::Cache;
use crate::lookup::LoadGuard;

/// A share of `cache`'s origin budget for a load that runs outside a [`LoadGuard`], such
/// as a two-tier driver's detached refresh; `None` while the budget is spent (a refresh
/// never queues for the origin: the caller skips it and a later read tries again).
/// Without a budget, always granted.
pub fn try_origin_permit<V: Clone + Send + Sync + 'static>(
    cache: &Cache<V>,
) -> Option<OriginPermit> {
    cache.try_origin_permit()
}

/// Counts an error of the shared tier (e.g. Redis) against `key`'s namespace, in the
/// `backend_errors` metric.
pub fn record_backend_error<V: Clone + Send + Sync + 'static>(cache: &Cache<V>, key: &str) {
    cache.record_backend_error(key);
}

/// Keys currently loading in `cache` (flight records): for leak checks.
pub fn flights_in_progress<V: Clone + Send + Sync + 'static>(cache: &Cache<V>) -> usize {
    cache.flights_in_progress()
}

/// Drops every entry of `cache` whose value (`None`: a cached absence) `keep` refuses, and
/// keeps loads in progress from storing their results, as `Cache::clear` does for all. A
/// scan of the whole cache: for rare events, such as a tier's notifications being lost.
pub fn retain<V: Clone + Send + Sync + 'static>(
    cache: &Cache<V>,
    keep: impl Fn(Option<&V>) -> bool,
) {
    cache.retain(keep);
}

/// Records that the caller of `guard` was answered with its fail-safe value by the driver
/// itself (a driver that enforces the soft timeout, then lets the load finish in the
/// background).
pub fn count_failsafe<V: Clone + Send + Sync + 'static>(guard: &LoadGuard<V>) {
    guard.count_failsafe();
}

/// Finishes `guard` because its loader panicked (caught by the driver, or raised by the
/// loader's language): waiters get [`Error::LoaderPanicked`](crate::Error::LoaderPanicked)
/// and the next call loads again.
pub fn panicked<V: Clone + Send + Sync + 'static>(guard: LoadGuard<V>, message: Option<String>) {
    guard.panicked(message);
}

/// A wake-up at a deadline of a cache's [`Clock`] that lets go of its waker as soon as it
/// is dropped or fired: the clock cannot cancel a timer, so it is handed a cell that this
/// empties, never the task's waker itself. One clock timer per deadline, however often it
/// is polled.
#[derive(Default)]
pub struct Timer {
    alarm: Option<Arc<Alarm>>,
}

impl Timer {
    /// Ready once `clock` reaches `at`; otherwise arranges for `cx` to be woken then.
    pub fn poll_at(&mut self, clock: &dyn Clock, at: Duration, cx: &mut Context<'_>) -> Poll<()> {
        if clock.now() >= at {
            alarm::disarm(&mut self.alarm);
            return Poll::Ready(());
        }
        alarm::arm(&mut self.alarm, at, cx.waker(), clock);
        Poll::Pending
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        alarm::disarm(&mut self.alarm);
    }
}

impl core::fmt::Debug for Timer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Timer")
            .field("armed", &self.alarm.is_some())
            .finish()
    }
}
