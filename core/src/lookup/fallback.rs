//! The fail-safe value a leader and its waiters hold while a load runs: an entry past grace,
//! within `max_stale`, answered instead of an error when the load fails or times out.

use core::time::Duration;

use crate::flight::Flight;

/// A fail-safe value and its retention deadline (`retain_until`, on the cache's clock): it is
/// never handed out past it, however long the load or the wait lasts.
pub(crate) struct Fallback<V> {
    value: Option<V>,
    until: Duration,
}

impl<V> Fallback<V> {
    pub(crate) fn new(fallback: Option<(V, Duration)>) -> Self {
        match fallback {
            Some((value, until)) => Self {
                value: Some(value),
                until,
            },
            None => Self {
                value: None,
                until: Duration::ZERO,
            },
        }
    }

    /// The value, while it is within its retention at `now`.
    pub(crate) fn get(&self, now: Duration) -> Option<&V> {
        self.value.as_ref().filter(|_| now < self.until)
    }

    /// Whether a value is held (whatever its retention).
    pub(crate) fn is_some(&self) -> bool {
        self.value.is_some()
    }

    /// Forgets the value once past its retention at `now`.
    pub(crate) fn expire(&mut self, now: Duration) {
        if now >= self.until {
            self.value = None;
        }
    }

    /// Takes the value without checking its retention (the caller did), counted as served.
    pub(crate) fn take_served(&mut self, flight: &Flight<V>) -> Option<V> {
        let v = self.value.take()?;
        flight.ns.counters().failsafe_served.inc();
        Some(v)
    }

    /// Takes the value if it is still within its retention at `now`, counted as served: what
    /// a failed load's leader and its waiters answer instead of the error.
    pub(crate) fn serve(&mut self, flight: &Flight<V>, now: Duration) -> Option<V> {
        if now >= self.until {
            self.value = None;
        }
        self.take_served(flight)
    }
}
