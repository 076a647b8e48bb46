//! XFetch probabilistic early refresh (Vattani, Chierichetti, Lowenstein, VLDB 2015).
//!
//! A reader refreshes early when `now - delta * beta * ln(u) >= expiry`, u uniform in (0, 1],
//! delta the measured duration of the last load of that key. Expensive keys (large delta)
//! refresh earlier; a hot key is refreshed by one lucky reader before it ever expires.
//! beta = 1 is the paper's optimum; 0 disables it.

use core::time::Duration;

/// `-ln(u)` never exceeds this for u drawn with 53 bits (u >= 2^-53): 53 * ln 2.
const MAX_EXP_DRAW: f64 = 36.737;

/// True when no draw could trigger a refresh yet, so the hit path can skip the random draw:
/// the gap to expiry is larger than the largest possible `delta * beta * -ln(u)`.
#[inline]
pub fn out_of_reach(gap: Duration, delta: Duration, beta: f64) -> bool {
    beta <= 0.0 || delta.is_zero() || gap.as_secs_f64() > delta.as_secs_f64() * beta * MAX_EXP_DRAW
}

/// How long before expiry, in nanoseconds, a draw can first trigger a refresh: a read at
/// least this far (plus one nanosecond) from expiry is [`out_of_reach`]. Rounded up with a
/// margin, so that an integer compare against it never rules out a read the exact test would
/// let draw.
pub(crate) fn reach_nanos(delta_nanos: u64, beta: f64) -> u64 {
    if beta <= 0.0 || delta_nanos == 0 {
        return 0;
    }
    let reach = delta_nanos as f64 * beta * MAX_EXP_DRAW * (1.0 + 1e-9) + 1.0;
    if reach >= u64::MAX as f64 {
        return u64::MAX;
    }
    // `ceil` of a positive value below 2^64, without the general `libm::ceil` call.
    let down = reach as u64;
    if (down as f64) < reach {
        down + 1
    } else {
        down
    }
}

/// The XFetch decision for a reader `gap` before expiry, with `u` uniform in (0, 1].
#[inline]
pub fn should_refresh(gap: Duration, delta: Duration, beta: f64, u: f64) -> bool {
    if beta <= 0.0 || delta.is_zero() {
        return false;
    }
    let u = u.clamp(f64::MIN_POSITIVE, 1.0);
    delta.as_secs_f64() * beta * -libm::log(u) >= gap.as_secs_f64()
}

/// Probability that one read `gap` before expiry refreshes early: `exp(-gap / (delta*beta))`.
pub fn probability(gap: Duration, delta: Duration, beta: f64) -> f64 {
    if beta <= 0.0 || delta.is_zero() {
        return 0.0;
    }
    libm::exp(-gap.as_secs_f64() / (delta.as_secs_f64() * beta))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refresh_is_certain_at_expiry_and_rare_far_from_it() {
        let delta = Duration::from_millis(200);
        assert!(should_refresh(Duration::ZERO, delta, 1.0, 1.0));
        assert!(!should_refresh(Duration::from_secs(60), delta, 1.0, 0.5));
        assert!(!should_refresh(Duration::ZERO, delta, 0.0, 0.001));
        assert!(out_of_reach(Duration::from_secs(60), delta, 1.0));
        assert!(!out_of_reach(Duration::from_secs(1), delta, 1.0));
    }

    #[test]
    fn probability_grows_towards_expiry_and_with_beta() {
        let delta = Duration::from_millis(100);
        let far = probability(Duration::from_secs(1), delta, 1.0);
        let near = probability(Duration::from_millis(100), delta, 1.0);
        assert!(near > far);
        assert!(probability(Duration::from_secs(1), delta, 2.0) > far);
        // Nothing out of reach can ever fire, for any u.
        let gap = Duration::from_secs_f64(0.1 * MAX_EXP_DRAW + 0.001);
        assert!(out_of_reach(gap, delta, 1.0));
        assert!(!should_refresh(gap, delta, 1.0, 2f64.powi(-53)));
    }

    #[test]
    fn beyond_the_integer_reach_every_read_is_out_of_reach() {
        let mut d: u64 = 1;
        while d < u64::MAX / 7 {
            for beta in [0.001, 0.5, 1.0, 1.7, 3.0, 1e6] {
                let reach = reach_nanos(d, beta);
                if reach < u64::MAX {
                    let gap = Duration::from_nanos(reach + 1);
                    assert!(
                        out_of_reach(gap, Duration::from_nanos(d), beta),
                        "{d} {beta}"
                    );
                }
            }
            d = d * 3 + 1;
        }
        assert_eq!(reach_nanos(0, 1.0), 0);
        assert_eq!(reach_nanos(1_000, 0.0), 0);
    }
}
