//! Soft and hard expiry: when an entry is fresh, stale (servable at once while
//! one refresh runs), kept only as a fail-safe fallback, or dead.
//!
//! Times are nanoseconds on the cache's [`Clock`](crate::Clock). An entry stores only its
//! write time and fresh deadline; its stale and retention deadlines follow from the cache's
//! grace and `max_stale` ([`Lifetimes`], the same for every entry but a loader's own grace),
//! and the two durations it keeps for XFetch are packed in small codes ([`LoadCode`],
//! [`QuietCode`]): every entry pays for them, and a node of a `u64` value is 72 bytes.

use core::time::Duration;

/// Converts a clock reading to the nanoseconds stored in entries (saturating).
#[inline]
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// When an entry was written and until when it is fresh; the deadlines after it are
/// [`Lifetimes::ends`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Timing {
    /// When the entry was written.
    pub(crate) written: u64,
    /// Served as fresh before this.
    pub(crate) fresh_until: u64,
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
    /// The timing of an entry written at `now` with the (already jittered) `ttl` (the tests';
    /// the engine builds it from nanoseconds).
    #[cfg(test)]
    pub(crate) fn new(now: u64, ttl: Duration) -> Self {
        Self {
            written: now,
            fresh_until: now.saturating_add(nanos(ttl)),
        }
    }
}

/// The cache's lifetimes past an entry's fresh time, in nanoseconds: an entry's stale and
/// retention deadlines are made from them when asked, not stored in every entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Lifetimes {
    /// The cache's grace (a loader may choose its own for its entry).
    pub(crate) grace: u64,
    /// The cache's `max_stale`, when fail-safe is on.
    pub(crate) max_stale: Option<u64>,
}

/// An entry's deadlines after its fresh time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ends {
    /// Served as stale (with one background refresh) before this: `fresh_until + grace`.
    pub(crate) stale_until: u64,
    /// Kept as a fail-safe fallback before this: `fresh_until + max_stale` (or
    /// `stale_until` when fail-safe is off). Nothing is ever served past it.
    pub(crate) retain_until: u64,
}

impl Lifetimes {
    /// The lifetimes of a cache with this `grace` and `max_stale`.
    pub(crate) fn new(grace: Duration, max_stale: Option<Duration>) -> Self {
        Self {
            grace: nanos(grace),
            max_stale: max_stale.map(nanos),
        }
    }

    /// The deadlines of an entry fresh until `fresh_until`: a value's (`own_grace`: its
    /// loader's grace, if it chose one), or an absence's (`value` false), which is neither
    /// served stale nor kept for fail-safe.
    #[inline]
    pub(crate) fn ends(&self, fresh_until: u64, value: bool, own_grace: Option<Duration>) -> Ends {
        if !value {
            return Ends {
                stale_until: fresh_until,
                retain_until: fresh_until,
            };
        }
        let grace = own_grace.map_or(self.grace, nanos);
        let stale_until = fresh_until.saturating_add(grace);
        let retain_until = match self.max_stale {
            Some(m) => fresh_until.saturating_add(m).max(stale_until),
            None => stale_until,
        };
        Ends {
            stale_until,
            retain_until,
        }
    }
}

/// The phase at `now` of an entry fresh until `fresh_until` with these `ends`.
#[inline]
pub(crate) fn phase(now: u64, fresh_until: u64, ends: impl FnOnce() -> Ends) -> Phase {
    if now < fresh_until {
        return Phase::Fresh;
    }
    let ends = ends();
    if now < ends.stale_until {
        Phase::Stale
    } else if now < ends.retain_until {
        Phase::FailSafe
    } else {
        Phase::Dead
    }
}

/// A load's duration (XFetch's delta) in 32 bits: a binary float of 27 bits of mantissa
/// and 5 of exponent, rounded down. Exact below 2^27 ns (134 ms) and for round durations
/// beyond (250 ms, 3 s); otherwise within 1 part in 10^8; at most ~9 years.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LoadCode(u32);

const LOAD_BITS: u32 = 27;

impl LoadCode {
    /// The code of `nanos`, rounded down (clamped to the largest code).
    pub(crate) fn new(nanos: u64) -> Self {
        let (m, e) = float_down(nanos, LOAD_BITS, 31);
        Self(m as u32 | (e << LOAD_BITS))
    }

    /// The nanoseconds it stands for.
    #[inline]
    pub(crate) fn nanos(self) -> u64 {
        u64::from(self.0 & ((1 << LOAD_BITS) - 1)) << (self.0 >> LOAD_BITS)
    }
}

/// When XFetch and refresh-ahead are out of reach, as a distance after the write time in
/// 16 bits: a binary float of 10 bits of mantissa and 6 of exponent, rounded down, so the
/// point it stands for is never later than the exact one (only earlier, by at most 1/1024
/// of the distance: a read then takes the exact test, which decides as before).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct QuietCode(u16);

const QUIET_BITS: u32 = 10;

impl QuietCode {
    /// The code of `quiet_until` for an entry written at `written`; a point before the
    /// write counts from the write (no read of the entry comes earlier).
    pub(crate) fn new(written: u64, quiet_until: u64) -> Self {
        let (m, e) = float_down(quiet_until.saturating_sub(written), QUIET_BITS, 54);
        Self(m as u16 | ((e as u16) << QUIET_BITS))
    }

    /// The point it stands for, for an entry written at `written`.
    #[inline]
    pub(crate) fn until(self, written: u64) -> u64 {
        let m = u64::from(self.0 & ((1 << QUIET_BITS) - 1));
        // At most `quiet_until - written` (rounded down): never overflows.
        written + (m << (self.0 >> QUIET_BITS))
    }
}

/// `x` as `m << e` with `m < 2^bits`, `e <= max_e`, rounded down; the largest such value
/// when `x` is beyond them.
fn float_down(x: u64, bits: u32, max_e: u32) -> (u64, u32) {
    let e = (64 - x.leading_zeros()).saturating_sub(bits);
    if e > max_e {
        return ((1 << bits) - 1, max_e);
    }
    (x >> e, e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing_phase(t: Timing, life: Lifetimes, value: bool, now: u64) -> Phase {
        phase(now, t.fresh_until, || life.ends(t.fresh_until, value, None))
    }

    #[test]
    fn phases_follow_each_other_and_nothing_outlives_retain() {
        let s = Duration::from_secs;
        let t = Timing::new(0, s(60));
        let life = Lifetimes::new(s(30), Some(s(600)));
        assert_eq!(timing_phase(t, life, true, 0), Phase::Fresh);
        assert_eq!(timing_phase(t, life, true, nanos(s(60))), Phase::Stale);
        assert_eq!(timing_phase(t, life, true, nanos(s(90))), Phase::FailSafe);
        assert_eq!(timing_phase(t, life, true, nanos(s(660))), Phase::Dead);
        let no_failsafe = Lifetimes::new(s(30), None);
        assert_eq!(
            timing_phase(t, no_failsafe, true, nanos(s(90))),
            Phase::Dead
        );
        // max_stale shorter than grace never shortens the grace window.
        let short = Lifetimes::new(s(30), Some(s(10))).ends(t.fresh_until, true, None);
        assert_eq!(short.retain_until, short.stale_until);
        // A loader's own grace replaces the cache's; an absence has neither.
        let own = life.ends(t.fresh_until, true, Some(s(5)));
        assert_eq!(own.stale_until, nanos(s(65)));
        assert_eq!(timing_phase(t, life, false, nanos(s(60))), Phase::Dead);
    }

    #[test]
    fn deadlines_saturate_into_never() {
        let t = Timing::new(5, Duration::MAX);
        assert_eq!(t.fresh_until, u64::MAX);
        let life = Lifetimes::new(Duration::MAX, Some(Duration::MAX));
        let ends = life.ends(nanos(Duration::from_secs(1)), true, None);
        assert_eq!((ends.stale_until, ends.retain_until), (u64::MAX, u64::MAX));
    }

    #[test]
    fn a_load_code_is_exact_for_short_and_round_durations_and_never_rounds_up() {
        let ms = |n: u64| n * 1_000_000;
        for n in [0, 1, 999, (1 << 27) - 1, ms(250), ms(3_000), ms(60_000)] {
            assert_eq!(LoadCode::new(n).nanos(), n);
        }
        let mut x = 1u64;
        while x < u64::MAX / 3 {
            x = x * 3 + 1;
            let back = LoadCode::new(x).nanos();
            assert!(back <= x, "{x} -> {back}");
            if x < 1 << 58 {
                assert!(x - back <= x >> 26, "{x} -> {back}");
            }
        }
        assert_eq!(LoadCode::new(u64::MAX).nanos(), ((1 << 27) - 1) << 31);
    }

    #[test]
    fn a_quiet_code_is_never_later_than_its_point_and_close_to_it() {
        let mut written = 0u64;
        let mut gap = 1u64;
        while gap < u64::MAX / 5 {
            gap = gap * 5 + 3;
            written = written.wrapping_mul(7).wrapping_add(gap) % (1 << 62);
            let until = written.saturating_add(gap);
            let back = QuietCode::new(written, until).until(written);
            assert!(
                back <= until && back >= written,
                "{written} + {gap} -> {back}"
            );
            assert!(
                until - back <= (until - written) >> 9,
                "{written} + {gap} -> {back}"
            );
        }
        assert_eq!(QuietCode::new(10, 3).until(10), 10);
        assert_eq!(QuietCode::new(0, u64::MAX).until(0), 1023 << 54);
        assert_eq!(QuietCode::new(7, 7 + 1023).until(7), 7 + 1023);
    }
}
