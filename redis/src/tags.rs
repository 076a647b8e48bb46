//! Entry tags on the shared tier (PROTOCOL.md, "Tags"): each tag's invalidation stamps
//! live in one Redis key of their own; an entry carries its tags and `born_ms`, and a
//! reader compares them. This process keeps the stamps it learned (its stamp cache) so that
//! a hit on a hot tagged key stays one round trip: a tag is fetched again only when it is
//! unknown or was fetched more than `tag_check` ago, and notifications update it between.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use herdless::backend::{BackendFuture, StoredEntry};

/// One tag's stamps: when it was last removed (hard) and expired (soft), Unix ms; 0: never.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamps {
    /// The last hard invalidation.
    pub removed: u64,
    /// The last soft invalidation.
    pub expired: u64,
}

impl Stamps {
    /// The stamps of a tag key's text, `"<removed_ms>:<expired_ms>"` (each 1 to 16
    /// digits); `None` for anything else (corrupt).
    pub fn parse(raw: &[u8]) -> Option<Self> {
        let s = std::str::from_utf8(raw).ok()?;
        let (r, x) = s.split_once(':')?;
        let num = |t: &str| {
            (!t.is_empty() && t.len() <= 16 && t.bytes().all(|b| b.is_ascii_digit()))
                .then(|| t.parse().ok())
                .flatten()
        };
        Some(Self {
            removed: num(r)?,
            expired: num(x)?,
        })
    }

    /// The later of each field.
    fn max(self, o: Self) -> Self {
        Self {
            removed: self.removed.max(o.removed),
            expired: self.expired.max(o.expired),
        }
    }
}

/// What its tags say about an entry born at `born_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// No tag of it was invalidated since its birth.
    Alive,
    /// A tag was expired (soft) at or after its birth: past its fresh time.
    Expired,
    /// A tag was removed (hard) at or after its birth: nothing of it is served.
    Removed,
}

/// The fate of an entry born at `born_ms` whose tags have `stamps`.
pub fn fate(born_ms: u64, stamps: impl IntoIterator<Item = Stamps>) -> Fate {
    let mut fate = Fate::Alive;
    for s in stamps {
        if s.removed >= born_ms {
            return Fate::Removed;
        }
        if s.expired >= born_ms {
            fate = Fate::Expired;
        }
    }
    fate
}

/// `entry` as its tags' `stamps` leave it at `now_ms`: `None` when removed; expired, it is
/// past its fresh time (stale within its own grace, kept for fail-safe when it has none),
/// as the in-memory engine treats an entry whose tag was expired.
pub fn judged(mut entry: StoredEntry, stamps: &[Stamps], now_ms: u64) -> Option<StoredEntry> {
    match fate(entry.born_ms, stamps.iter().copied()) {
        Fate::Alive => Some(entry),
        Fate::Removed => None,
        Fate::Expired => {
            let until = entry.fresh_until_ms.min(now_ms);
            if entry.stale_until_ms <= entry.fresh_until_ms {
                entry.stale_until_ms = until;
            }
            entry.fresh_until_ms = until;
            Some(entry)
        }
    }
}

/// One tag as this process knows it.
#[derive(Clone, Copy, Debug)]
struct Known {
    stamps: Stamps,
    /// When the stamps were last read from the tier (or written by this process).
    fetched: Instant,
    /// When they last changed here (a fetch, a notice, an own invalidation).
    changed: Instant,
}

/// The most tags a process remembers; past it the cache starts over (every tag is fetched
/// again: a cost, never a wrong answer).
const MAX_KNOWN_TAGS: usize = 100_000;

/// The stamps this process learned, per tag.
#[derive(Debug, Default)]
pub(crate) struct StampCache {
    known: Mutex<HashMap<String, Known>>,
}

impl StampCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Known>> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The stamps of `tag` if they were read from the tier less than `max_age` ago (never
    /// with a zero `max_age`).
    pub(crate) fn recent(&self, tag: &str, max_age: Duration) -> Option<Stamps> {
        let k = *self.lock().get(tag)?;
        (k.fetched.elapsed() < max_age).then_some(k.stamps)
    }

    /// The stamps of `tag` known here since before `at` (unchanged since): invalidations
    /// that happened before a load that began at `at`.
    pub(crate) fn known_before(&self, tag: &str, at: Instant) -> Option<Stamps> {
        let k = *self.lock().get(tag)?;
        (k.changed <= at).then_some(k.stamps)
    }

    /// Stamps read from the tier (or written by this process) just now.
    pub(crate) fn learn(&self, tag: &str, stamps: Stamps) {
        let now = Instant::now();
        let mut known = self.lock();
        if known.len() >= MAX_KNOWN_TAGS && !known.contains_key(tag) {
            known.clear();
        }
        match known.get_mut(tag) {
            Some(k) => {
                let merged = k.stamps.max(stamps);
                if merged != k.stamps {
                    k.changed = now;
                }
                k.stamps = merged;
                k.fetched = now;
            }
            None => {
                known.insert(
                    tag.to_owned(),
                    Known {
                        stamps,
                        fetched: now,
                        changed: now,
                    },
                );
            }
        }
    }

    /// Another process's invalidation of `tag` at `stamp`. An unknown tag stays unknown
    /// (its other field is not known): its next use fetches it.
    pub(crate) fn notice(&self, tag: &str, stamp: u64, soft: bool) {
        if let Some(k) = self.lock().get_mut(tag) {
            let field = if soft {
                &mut k.stamps.expired
            } else {
                &mut k.stamps.removed
            };
            if stamp > *field {
                *field = stamp;
                k.changed = Instant::now();
            }
        }
    }

    /// Forgets everything (notifications may have been lost).
    pub(crate) fn clear(&self) {
        self.lock().clear();
    }
}

/// What a shared tier offers for tags, beside the core's `Backend`.
pub(crate) trait TagTier: Send + Sync {
    /// The stamps of `tags` as stored now, in order: one round trip (per Cluster slot
    /// group). A record that is not one reads as "invalidated now" (counted corrupt).
    fn fetch_stamps<'a>(&'a self, tags: &'a [String]) -> BackendFuture<'a, Vec<Stamps>>;

    /// Invalidates (`soft`: expires) each of `tags` for the fleet at `now_ms` (script
    /// `tag`) and tells the other processes; the stamps afterwards, in order.
    fn stamp_tags<'a>(
        &'a self,
        tags: &'a [String],
        soft: bool,
        now_ms: u64,
    ) -> BackendFuture<'a, Vec<Stamps>>;

    /// This process's stamp cache (notifications update it).
    fn stamp_cache(&self) -> &StampCache;

    /// How long a tag's record is kept after its last invalidation (a tagged entry lives
    /// at most this long after its birth).
    fn tag_retention(&self) -> Duration;
}

/// The default of `tag_retention`: one day.
pub const DEFAULT_TAG_RETENTION: Duration = Duration::from_secs(86_400);

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(born_ms: u64, grace: u64) -> StoredEntry {
        let mut e = crate::fleet::new_entry(
            Some(b"v".to_vec()),
            Duration::from_secs(60),
            Duration::from_millis(grace),
            Duration::from_secs(600),
            Duration::ZERO,
        );
        e.tags = vec!["a".into()];
        e.born_ms = born_ms;
        e
    }

    #[test]
    fn a_stamp_at_or_after_the_birth_decides() {
        let s = |removed, expired| Stamps { removed, expired };
        assert_eq!(fate(10, [s(9, 9)]), Fate::Alive);
        assert_eq!(fate(10, [s(10, 0)]), Fate::Removed);
        assert_eq!(fate(10, [s(0, 10), s(0, 0)]), Fate::Expired);
        assert_eq!(fate(10, [s(0, 11), s(12, 0)]), Fate::Removed);
        let now = crate::backend::now_ms();
        assert!(judged(entry(now, 0), &[s(now, 0)], now).is_none());
        let stale = judged(entry(now, 5_000), &[s(0, now)], now).unwrap();
        assert!(!stale.is_fresh(now + 1) && stale.is_servable(now + 1));
        let no_grace = judged(entry(now, 0), &[s(0, now)], now).unwrap();
        assert!(!no_grace.is_servable(now + 1), "kept for fail-safe only");
        assert!(no_grace.retain_until_ms > now);
    }

    #[test]
    fn records_parse_strictly() {
        assert_eq!(
            Stamps::parse(b"12:0"),
            Some(Stamps {
                removed: 12,
                expired: 0
            })
        );
        for bad in [
            &b""[..],
            b"12",
            b"1:x",
            b":1",
            b"1:-1",
            b"99999999999999999:1",
            b"\xff:1",
        ] {
            assert_eq!(Stamps::parse(bad), None);
        }
    }

    #[test]
    fn the_cache_keeps_the_latest_stamps_and_when_they_changed() {
        let c = StampCache::default();
        let before = Instant::now();
        c.notice("a", 5, false);
        assert_eq!(
            c.recent("a", Duration::from_secs(1)),
            None,
            "unknown stays unknown"
        );
        c.learn(
            "a",
            Stamps {
                removed: 5,
                expired: 0,
            },
        );
        assert_eq!(c.known_before("a", before), None);
        let after = Instant::now();
        assert!(c.known_before("a", after).is_some());
        c.notice("a", 7, true);
        assert_eq!(
            c.recent("a", Duration::from_secs(1)),
            Some(Stamps {
                removed: 5,
                expired: 7
            })
        );
        c.learn("a", Stamps::default());
        assert_eq!(c.recent("a", Duration::from_secs(1)).unwrap().removed, 5);
        assert_eq!(c.recent("a", Duration::ZERO), None);
        c.clear();
        assert_eq!(c.recent("a", Duration::from_secs(1)), None);
    }
}
