//! Soft and hard expiry: when an entry is fresh, stale (servable at once while
//! one refresh runs), kept only as a fail-safe fallback, or dead.
//!
//! Times are nanoseconds on the cache's [`Clock`](crate::Clock), stored as `u64` to keep
//! entries small.

use core::time::Duration;

/// Converts a clock reading to the nanoseconds stored in entries (saturating).
#[inline]
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The life of one entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Timing {
    /// When the entry was written.
    pub(crate) written: u64,
    /// Served as fresh before this.
    pub(crate) fresh_until: u64,
    /// Served as stale (with one background refresh) before this: `fresh_until + grace`.
    pub(crate) stale_until: u64,
    /// Kept as a fail-safe fallback before this: `fresh_until + max_stale` (or
    /// `stale_until` when fail-safe is off). Nothing is ever served past it.
    pub(crate) retain_until: u64,
}

/// Where an entry is in its life at a given moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    Fresh,
    Stale,
    /// Past grace: served only when a load fails or times out (fail-safe).
    FailSafe,
    Dead,
}

impl Timing {
    /// The timing of an entry written at `now` with the (already jittered) `ttl`.
    pub(crate) fn new(
        now: u64,
        ttl: Duration,
        grace: Duration,
        max_stale: Option<Duration>,
    ) -> Self {
        let fresh_until = now.saturating_add(nanos(ttl));
        let stale_until = fresh_until.saturating_add(nanos(grace));
        let retain_until = match max_stale {
            Some(m) => fresh_until.saturating_add(nanos(m)).max(stale_until),
            None => stale_until,
        };
        Self {
            written: now,
            fresh_until,
            stale_until,
            retain_until,
        }
    }

    #[inline]
    pub(crate) fn phase(&self, now: u64) -> Phase {
        if now < self.fresh_until {
            Phase::Fresh
        } else if now < self.stale_until {
            Phase::Stale
        } else if now < self.retain_until {
            Phase::FailSafe
        } else {
            Phase::Dead
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_follow_each_other_and_nothing_outlives_retain() {
        let s = Duration::from_secs;
        let t = Timing::new(0, s(60), s(30), Some(s(600)));
        assert_eq!(t.phase(0), Phase::Fresh);
        assert_eq!(t.phase(nanos(s(60))), Phase::Stale);
        assert_eq!(t.phase(nanos(s(90))), Phase::FailSafe);
        assert_eq!(t.phase(nanos(s(660))), Phase::Dead);
        let no_failsafe = Timing::new(0, s(60), s(30), None);
        assert_eq!(no_failsafe.phase(nanos(s(90))), Phase::Dead);
        // max_stale shorter than grace never shortens the grace window.
        let short = Timing::new(0, s(60), s(30), Some(s(10)));
        assert_eq!(short.retain_until, short.stale_until);
    }
}
