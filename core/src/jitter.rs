//! TTL jitter: every stored TTL becomes `ttl * (1 + j * (u - 0.5))`, u uniform
//! in [0, 1).
//!
//! Keys written together (a restart, a batch import) would otherwise expire together and
//! send the origin one load per key at the same instant. `j` is the full width of the band,
//! so a TTL lands in `[ttl * (1 - j/2), ttl * (1 + j/2))`: 300 s with j = 0.25 gives
//! [262.5 s, 337.5 s). (Read as a half-width, "±25 %" of 300 s is [225 s, 375 s]: that is
//! j = 0.5 here.)

use core::time::Duration;

/// `ttl` spread by the fraction `j` using the uniform draw `u` in [0, 1).
#[inline]
pub fn jittered(ttl: Duration, j: f64, u: f64) -> Duration {
    if j == 0.0 {
        return ttl;
    }
    let factor = 1.0 + j * (u - 0.5);
    // A TTL near `Duration::MAX` means "forever": stretching it saturates, never panics.
    Duration::try_from_secs_f64((ttl.as_secs_f64() * factor).max(0.0)).unwrap_or(Duration::MAX)
}

/// [`jittered`] in nanoseconds (saturated at `u64::MAX`, "forever"), for the engine's own
/// entries: the same formula without a `Duration` made from seconds in floating point (a
/// store's costliest arithmetic), and no draw at all when `j` is 0 (`u` is asked only then).
#[inline]
pub(crate) fn jittered_nanos(ttl: Duration, j: f64, u: impl FnOnce() -> f64) -> u64 {
    let Ok(n) = u64::try_from(ttl.as_nanos()) else {
        // Past 584 years: the `Duration` form, saturated as it always was.
        let u = if j == 0.0 { 0.5 } else { u() };
        return u64::try_from(jittered(ttl, j, u).as_nanos()).unwrap_or(u64::MAX);
    };
    if j == 0.0 {
        return n;
    }
    let t = n as f64 * (1.0 + j * (u() - 0.5));
    // Truncated towards zero (an `as` cast saturates: past `u64::MAX` is "forever").
    t as u64
}

/// The interval every jittered TTL falls in: `[ttl * (1 - j/2), ttl * (1 + j/2)]`
/// (saturating at `Duration::MAX`, like [`jittered`]).
pub fn bounds(ttl: Duration, j: f64) -> (Duration, Duration) {
    let scaled = |f: f64| {
        Duration::try_from_secs_f64((ttl.as_secs_f64() * f).max(0.0)).unwrap_or(Duration::MAX)
    };
    (scaled(1.0 - j / 2.0), scaled(1.0 + j / 2.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stays_within_bounds_and_is_monotonic_in_u() {
        let ttl = Duration::from_secs(300);
        let (lo, hi) = bounds(ttl, 0.25);
        let mut last = Duration::ZERO;
        for i in 0..1000 {
            let u = i as f64 / 1000.0;
            let t = jittered(ttl, 0.25, u);
            assert!(t >= lo && t <= hi, "{t:?} outside [{lo:?}, {hi:?}]");
            assert!(t >= last);
            last = t;
        }
        assert_eq!(jittered(ttl, 0.0, 0.9), ttl);
        assert_eq!(jittered(Duration::MAX, 0.5, 0.99), Duration::MAX);
        // Near `Duration::MAX`, `bounds` saturates too (a case core/tests/properties.rs found).
        assert_eq!(bounds(Duration::MAX, 0.0).1, Duration::MAX);
    }

    #[test]
    fn in_nanoseconds_it_agrees_with_the_duration_form() {
        let ttl = Duration::from_secs(300);
        for i in 0..1000 {
            let u = i as f64 / 1000.0;
            let d = jittered(ttl, 0.25, u).as_nanos() as i128;
            let n = jittered_nanos(ttl, 0.25, || u) as i128;
            // The same point, up to the rounding of a float of seconds (~60 ns here).
            assert!((d - n).abs() <= 100, "{d} against {n} at u = {u}");
        }
        let nanos = Duration::from_nanos;
        assert_eq!(jittered_nanos(nanos(7), 0.0, || unreachable!()), 7);
        assert_eq!(jittered_nanos(nanos(u64::MAX), 0.5, || 0.99), u64::MAX);
        // "Forever" stays forever, however the draw shortens it.
        assert_eq!(jittered_nanos(Duration::MAX, 0.5, || 0.0), u64::MAX);
        assert_eq!(
            jittered_nanos(Duration::MAX, 0.0, || unreachable!()),
            u64::MAX
        );
    }
}
