//! The sawtooth: miss spikes that repeat with a period, usually the TTL's (keys written
//! together expire together, once per TTL). Each namespace keeps the start times of its last
//! spikes; a series whose intervals agree (or one interval that matches the TTL) is periodic.

use alloc::string::String;
use core::time::Duration;

const KEEP: usize = 6;

/// One spike: when it started and the key it was on, if one dominated.
#[derive(Clone, Default)]
struct Spike {
    at: u64,
    key: Option<String>,
}

/// The recent spikes of one namespace.
#[derive(Default)]
pub(crate) struct Series {
    spikes: [Spike; KEEP],
    len: usize,
}

/// A periodic series found.
pub(crate) struct Periodic {
    pub(crate) period: Duration,
    pub(crate) spikes: u32,
    pub(crate) ttl: Option<Duration>,
    /// The key every spike of the series was on, if the same.
    pub(crate) key: Option<String>,
}

fn close(a: u64, b: u64, tick: u64) -> bool {
    let tol = (a.max(b) / 10).max(2 * tick);
    a.abs_diff(b) <= tol
}

impl Series {
    pub(crate) fn push(&mut self, at: u64, key: Option<String>) {
        if self.len == KEEP {
            self.spikes.rotate_left(1);
            self.len -= 1;
        }
        self.spikes[self.len] = Spike { at, key };
        self.len += 1;
    }

    /// The period of the latest spikes: two or more equal intervals, or one that matches a
    /// TTL. Intervals shorter than three ticks are one spike seen twice, not a period.
    pub(crate) fn periodic(&self, tick: u64, ttls: &[Duration]) -> Option<Periodic> {
        if self.len < 2 {
            return None;
        }
        let s = &self.spikes[..self.len];
        let last = s[s.len() - 1].at - s[s.len() - 2].at;
        if last < 3 * tick {
            return None;
        }
        // Extend back while the intervals agree with the last one.
        let mut n = 1;
        while n + 1 < s.len() && close(s[s.len() - 1 - n].at - s[s.len() - 2 - n].at, last, tick) {
            n += 1;
        }
        let first = s.len() - 1 - n;
        let period = (s[s.len() - 1].at - s[first].at) / n as u64;
        let ttl = ttls.iter().copied().find(|t| {
            close(
                u64::try_from(t.as_nanos()).unwrap_or(u64::MAX),
                period,
                tick,
            )
        });
        if n < 2 && ttl.is_none() {
            return None;
        }
        let key = s[first].key.clone().filter(|k| {
            s[first..]
                .iter()
                .all(|x| x.key.as_deref() == Some(k.as_str()))
        });
        Some(Periodic {
            period: Duration::from_nanos(period),
            spikes: (n + 1) as u32,
            ttl,
            key,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn equal_intervals_or_one_matching_the_ttl() {
        let ttl = [Duration::from_secs(60)];
        let mut s = Series::default();
        s.push(10 * S, None);
        assert!(s.periodic(S, &ttl).is_none());
        s.push(70 * S, None);
        let p = s.periodic(S, &ttl).expect("one interval equal to the TTL");
        assert_eq!(p.ttl, Some(Duration::from_secs(60)));
        let mut s = Series::default();
        s.push(10 * S, Some("a:1".into()));
        s.push(47 * S, Some("a:1".into()));
        assert!(s.periodic(S, &ttl).is_none(), "37 s is not the TTL");
        s.push(85 * S, Some("a:1".into()));
        let p = s.periodic(S, &ttl).expect("two equal intervals");
        assert_eq!((p.spikes, p.ttl, p.key.as_deref()), (3, None, Some("a:1")));
        s.push(86 * S, None);
        assert!(s.periodic(S, &ttl).is_none(), "one spike seen twice");
        let mut s = Series::default();
        for t in [0, 13, 50, 95] {
            s.push(t * S, None);
        }
        assert!(s.periodic(S, &ttl).is_none(), "irregular");
    }
}
