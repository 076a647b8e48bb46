//! How long a shared entry lives. The writer of an entry jitters its TTL once, for the whole
//! fleet, so every process agrees on when it expires; the Rust [`TieredCache`](crate::TieredCache)
//! and the Python and Node tiers all write entries through [`Lifetimes::entry`].

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use herdless::backend::StoredEntry;
use rand_core::{Rng, SeedableRng};

use crate::wall::now_ms;

/// The lifetimes a cache writes shared entries with (its TTL options).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Lifetimes {
    /// Fresh time of a value, before jitter.
    pub ttl: Duration,
    /// Stale-while-revalidate window after the TTL.
    pub grace: Duration,
    /// Life of a cached absence, before jitter.
    pub negative_ttl: Duration,
    /// Fail-safe retention past the TTL, if on.
    pub max_stale: Option<Duration>,
    /// TTL jitter fraction, as in [`herdless::jitter`].
    pub jitter: f64,
    /// Time-to-idle of the entries, if any: a shared entry no process has read for this
    /// long is dropped by the tier (PROTOCOL.md, "Time-to-idle").
    pub tti: Option<Duration>,
}

/// The longest a shared entry may live (ttl, grace, negative ttl, fail-safe retention
/// each): 100 years. Longer cannot be honoured exactly (the scripts' numbers are doubles,
/// Redis's PX is bounded) and is refused instead of being wrapped or clamped silently.
pub const MAX_TTL: Duration = Duration::from_secs(100 * 365 * 86_400);

impl Default for Lifetimes {
    /// The engine's defaults (those of `herdless::Builder`).
    fn default() -> Self {
        Self::from(&herdless::Cache::<()>::builder().options())
    }
}

impl From<&herdless::Options> for Lifetimes {
    /// The lifetimes a cache with these options writes: a two-tier cache reads them from
    /// its L1 builder before it sets the L1's own jitter to 0.
    fn from(o: &herdless::Options) -> Self {
        Self {
            ttl: o.ttl,
            grace: o.grace,
            negative_ttl: o.negative_ttl,
            max_stale: o.max_stale,
            jitter: o.jitter,
            tti: o.tti,
        }
    }
}

impl Lifetimes {
    /// Checks the lifetimes against the engine's rules (as the L1 builder does) and against
    /// what the shared tier can keep ([`MAX_TTL`]).
    pub fn check(&self) -> Result<(), herdless::ConfigError> {
        let mut b = herdless::Cache::<()>::builder()
            .ttl(self.ttl)
            .grace(self.grace)
            .negative_ttl(self.negative_ttl)
            .jitter(self.jitter);
        if let Some(m) = self.max_stale {
            b = b.max_stale(m);
        }
        if let Some(t) = self.tti {
            b = b.tti(t);
        }
        b.build()?;
        let longest = [
            ("ttl", Some(self.ttl)),
            ("tti", self.tti),
            ("grace", Some(self.grace)),
            ("negative_ttl", Some(self.negative_ttl)),
            ("max_stale", self.max_stale),
        ];
        for (option, d) in longest {
            if d.is_some_and(|d| d > MAX_TTL) {
                return Err(herdless::ConfigError::TooLong {
                    option,
                    max: MAX_TTL,
                });
            }
        }
        Ok(())
    }

    /// A per-call TTL the shared tier can honour, or [`herdless::Error::TtlTooLong`].
    pub fn check_ttl(ttl: Option<Duration>) -> Result<(), herdless::Error> {
        match ttl {
            Some(t) if t > MAX_TTL => Err(herdless::Error::TtlTooLong {
                ttl: t,
                max: MAX_TTL,
            }),
            _ => Ok(()),
        }
    }

    /// The shared entry of a value just loaded or set (`None`: an absence), written under
    /// `epoch`, with its jittered fresh time. `ttl` overrides the cache's for a value.
    pub fn entry(
        &self,
        value: Option<Vec<u8>>,
        load_duration: Duration,
        epoch: u64,
        ttl: Option<Duration>,
    ) -> (StoredEntry, Duration) {
        self.entry_own(value, load_duration, epoch, ttl, &Own::default())
    }

    /// [`entry`](Self::entry) with the lifetimes and metadata its loader chose (`own`): its
    /// ttl (under a per-call `ttl`), grace and negative ttl replace the cache's, and the
    /// ttl and metadata are kept in the entry (PROTOCOL.md, entry format 2).
    pub fn entry_own(
        &self,
        value: Option<Vec<u8>>,
        load_duration: Duration,
        epoch: u64,
        ttl: Option<Duration>,
        own: &Own,
    ) -> (StoredEntry, Duration) {
        let (base, grace, retain) = match value {
            Some(_) => {
                let grace = own.grace.unwrap_or(self.grace);
                let base = ttl.or(own.ttl).unwrap_or(self.ttl);
                (base, grace, self.max_stale.unwrap_or(grace).max(grace))
            }
            // Absences are neither served stale nor kept for fail-safe, as in memory.
            None => (
                own.negative_ttl.unwrap_or(self.negative_ttl),
                Duration::ZERO,
                Duration::ZERO,
            ),
        };
        let base = base.min(MAX_TTL);
        let fresh = herdless::jitter::jittered(base, self.jitter, unit());
        let mut entry = new_entry(
            value,
            fresh,
            grace.min(MAX_TTL),
            retain.min(MAX_TTL),
            load_duration,
        );
        entry.epoch = epoch;
        entry.ttl = own.ttl.map(|t| t.min(MAX_TTL));
        entry.tti = own.tti.or(self.tti).map(|t| t.min(MAX_TTL));
        entry.meta = own.meta.clone();
        (entry, fresh)
    }
}

/// What a context-aware loader chose for its entry ([`herdless::Loaded`]), as a shared
/// entry keeps it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Own {
    /// The entry's ttl instead of the cache's.
    pub ttl: Option<Duration>,
    /// Its grace instead of the cache's.
    pub grace: Option<Duration>,
    /// An absence's life instead of the cache's negative ttl.
    pub negative_ttl: Option<Duration>,
    /// Its time-to-idle instead of the cache's.
    pub tti: Option<Duration>,
    /// Its metadata (an ETag, a version).
    pub meta: Option<String>,
}

impl Own {
    /// What `loaded` chose.
    pub fn of<V>(loaded: &herdless::Loaded<V>) -> Self {
        Self {
            ttl: loaded.ttl_set(),
            grace: loaded.grace_set(),
            negative_ttl: loaded.negative_ttl_set(),
            tti: loaded.tti_set(),
            meta: loaded.meta_set().map(Into::into),
        }
    }
}

/// How long a shared entry is still fresh from now (zero once it is not).
pub fn fresh_for(entry: &StoredEntry) -> Duration {
    Duration::from_millis(entry.fresh_until_ms.saturating_sub(now_ms()))
}

/// Uniform in [0, 1) for jitter, from one generator per process (seeded from the OS, so
/// processes do not jitter in lock step).
fn unit() -> f64 {
    static RNG: OnceLock<Mutex<herdless::DefaultRng>> = OnceLock::new();
    let rng = RNG.get_or_init(|| Mutex::new(herdless::DefaultRng::seed_from_u64(seed())));
    let bits = rng.lock().unwrap_or_else(|e| e.into_inner()).next_u64() >> 11;
    bits as f64 / (1u64 << 53) as f64
}

fn seed() -> u64 {
    crate::wall::random_secret()
        .map(|s| u64::from_le_bytes(s[..8].try_into().expect("8 bytes")))
        .unwrap_or(0x9E37_79B9_7F4A_7C15)
}

/// A shared entry written now: fresh for `fresh`, then servable stale for `grace`, then
/// kept (fail-safe) until `retain` after its freshness ends (at least the grace), with the
/// load's duration. Version and epoch are assigned by the commit. Bindings draw the jitter
/// into `fresh` themselves (once per entry, see `herdless::jitter`).
pub fn new_entry(
    value: Option<Vec<u8>>,
    fresh: Duration,
    grace: Duration,
    retain: Duration,
    load_duration: Duration,
) -> StoredEntry {
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let fresh_until_ms = now_ms().saturating_add(ms(fresh).max(1));
    let stale_until_ms = fresh_until_ms.saturating_add(ms(grace));
    StoredEntry {
        value,
        fresh_until_ms,
        stale_until_ms,
        retain_until_ms: stale_until_ms.max(fresh_until_ms.saturating_add(ms(retain))),
        load_duration,
        version: 0,
        epoch: 0,
        ttl: None,
        tti: None,
        meta: None,
        tags: Vec::new(),
        tag_marks: Vec::new(),
    }
}

/// How long the tier keeps an entry's key (its `PX`) written or read at `now_ms`: until its
/// retention ends, and, with a time-to-idle, no longer than a quarter past it from now
/// (a process tells the tier of its own reads once per quarter of the tti: see
/// [`herdless::Builder::idle_reads`]), so that the fleet's copy outlives the last read
/// anywhere by `tti` at least and `tti * 5 / 4` at most.
pub fn key_life_ms(entry: &StoredEntry, now_ms: u64) -> u64 {
    let retain = entry.retain_until_ms.saturating_sub(now_ms).max(1);
    match entry.tti {
        Some(tti) => retain.min(idle_life_ms(tti)),
        None => retain,
    }
}

/// How long a read keeps an entry with time-to-idle `tti` in the tier from now.
pub fn idle_life_ms(tti: Duration) -> u64 {
    let ms = u64::try_from(tti.as_millis()).unwrap_or(u64::MAX).max(1);
    ms.saturating_add(ms / 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_get_grace_and_retention_absences_do_not() {
        let s = Duration::from_secs;
        let life = Lifetimes {
            ttl: s(60),
            grace: s(30),
            negative_ttl: s(10),
            max_stale: Some(s(600)),
            jitter: 0.0,
            tti: None,
        };
        let (e, fresh) = life.entry(Some(b"1".to_vec()), s(1), 7, None);
        assert_eq!(fresh, s(60));
        assert_eq!(e.epoch, 7);
        assert_eq!(e.stale_until_ms - e.fresh_until_ms, 30_000);
        assert_eq!(e.retain_until_ms - e.fresh_until_ms, 600_000);
        let (a, fresh) = life.entry(None, s(1), 7, Some(s(5)));
        assert_eq!(fresh, s(10), "an absence keeps negative_ttl");
        assert_eq!(a.retain_until_ms, a.fresh_until_ms);
        let (_, fresh) = life.entry(Some(vec![]), s(1), 7, Some(s(5)));
        assert_eq!(fresh, s(5));
        assert!(fresh_for(&e) > s(59));
    }

    #[test]
    fn jitter_spreads_within_its_band() {
        let life = Lifetimes {
            ttl: Duration::from_secs(300),
            grace: Duration::ZERO,
            negative_ttl: Duration::from_secs(10),
            max_stale: None,
            jitter: 0.25,
            tti: None,
        };
        let fresh: Vec<_> = (0..200)
            .map(|_| life.entry(Some(vec![]), Duration::ZERO, 0, None).1)
            .collect();
        let (lo, hi) = herdless::jitter::bounds(life.ttl, life.jitter);
        assert!(fresh.iter().all(|f| *f >= lo && *f <= hi));
        assert!(
            fresh.iter().max().unwrap().as_secs_f64() - fresh.iter().min().unwrap().as_secs_f64()
                > 40.0
        );
    }
}
