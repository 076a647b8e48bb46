//! Time-to-idle (sliding expiration): an entry not read for its `tti` is dropped even if its
//! ttl has not run out (moka's `time_to_idle`, Caffeine's `expireAfterAccess`).
//!
//! Only entries with a tti pay for it: they carry an [`Idle`] in their rare part, and every
//! other entry's hit path gains one branch on a pointer it reads anyway. A read does not
//! store its time on every hit (a write per hit would bounce a hot key's cache line between
//! cores): it stores it once per [`STEP`]-th of the tti, and the entry is dropped one step
//! later than the exact rule would, so an entry is never dropped before `tti` has passed
//! without a read, and always by `tti + tti / STEP`.

use core::time::Duration;

use crate::expiry::nanos;
use crate::sync::unchecked::Arc as StdArc;
use crate::sync::{AtomicU64, Ordering};

/// A read stores its time at most once per this share of the tti.
pub const STEP: u64 = 16;

/// A second tier is told of reads at most once per this share of the tti (see
/// [`IdleReads`]).
pub const TELL_STEP: u64 = 4;

/// Told, on a hit of an entry with a tti, at most once per `tti / TELL_STEP` per entry, with
/// the entry's key and tti: a shared tier keeps its copy's idle time with the fleet's reads
/// ([`Builder::idle_reads`](crate::Builder::idle_reads)). Runs on the hit path, under the
/// shard's read lock: it must only hand the key on (a channel, a spawned task).
pub type IdleReads = StdArc<dyn Fn(&str, Duration) + Send + Sync>;

/// An entry's idle clock.
pub(crate) struct Idle {
    /// The entry's time-to-idle, in nanoseconds (never 0).
    tti: u64,
    /// When a read last stored its time (the cache's clock, nanoseconds).
    last: AtomicU64,
    /// When a second tier was last told of a read (0: never since the entry was made).
    told: AtomicU64,
}

impl Idle {
    /// The clock of an entry made at `now` with this `tti` (`None` for none or zero).
    pub(crate) fn new(tti: Option<Duration>, now: u64) -> Option<Self> {
        let tti = nanos(tti?);
        (tti != 0).then(|| Self {
            tti,
            last: AtomicU64::new(now),
            told: AtomicU64::new(0),
        })
    }

    /// The entry's tti.
    pub(crate) fn tti(&self) -> Duration {
        Duration::from_nanos(self.tti)
    }

    /// Whether the entry has been idle too long at `now`.
    #[inline]
    pub(crate) fn expired(&self, now: u64) -> bool {
        let step = self.tti / STEP;
        now >= self
            .last
            .load(Ordering::Relaxed)
            .saturating_add(self.tti)
            .saturating_add(step)
    }

    /// A read at `now`: stores its time when a step has passed since the last stored one.
    /// True when a second tier is due to be told (a quarter of the tti since it last was).
    #[inline]
    pub(crate) fn read(&self, now: u64) -> bool {
        let last = self.last.load(Ordering::Relaxed);
        if now < last.saturating_add(self.tti / STEP) {
            return false;
        }
        self.last.store(now, Ordering::Relaxed);
        let told = self.told.load(Ordering::Relaxed);
        if told != 0 && now < told.saturating_add(self.tti / TELL_STEP) {
            return false;
        }
        // One reader of a step wins the telling; the others see the new time.
        self.told
            .compare_exchange(told, now.max(1), Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }
}

#[cfg(all(test, not(herdless_loom)))]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn never_before_tti_always_by_a_step_after() {
        let i = Idle::new(Some(Duration::from_millis(160)), 0).unwrap();
        // Reads every 5 ms for 100 ms: only those a step (10 ms) apart store their time.
        for t in (0..=100).step_by(5) {
            i.read(t * MS);
        }
        assert!(!i.expired(259 * MS), "within tti of the last read (100 ms)");
        assert!(i.expired(270 * MS), "a step past tti");
    }

    #[test]
    fn a_second_tier_is_told_once_per_quarter() {
        let i = Idle::new(Some(Duration::from_millis(160)), 0).unwrap();
        let told: Vec<u64> = (0..=200).filter(|t| i.read(t * MS)).collect();
        assert_eq!(told, vec![10, 50, 90, 130, 170]);
    }

    #[test]
    fn zero_or_none_is_no_idle_clock() {
        assert!(Idle::new(None, 0).is_none());
        assert!(Idle::new(Some(Duration::ZERO), 0).is_none());
    }
}
