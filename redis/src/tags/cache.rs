//! This process's stamp cache: the tag records it read or wrote, kept current by the
//! other processes' notices, and what a leader asks before its commit: did an invalidation
//! of one of its tags happen after its load began?

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::Record;

/// One tag as this process knows it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Known {
    /// Its record (`None`: there was none, or it was not one).
    record: Option<Record>,
    /// When it was last read from the tier (or written by this process).
    fetched: Instant,
    /// Since when this process has known this incarnation (or this absence).
    since: Instant,
    /// When its `removed` stamp last rose here (a read, a notice, an own invalidation).
    removed_rose: Instant,
    /// When its `expired` stamp last rose here.
    expired_rose: Instant,
}

impl Known {
    fn new(record: Option<Record>, now: Instant) -> Self {
        Self {
            record,
            fetched: now,
            since: now,
            removed_rose: now,
            expired_rose: now,
        }
    }
}

/// The most tags a process remembers; past it the cache starts over (every tag is read
/// again: a cost, never a wrong answer).
const MAX_KNOWN_TAGS: usize = 100_000;

/// The records this process learned, per tag.
#[derive(Debug, Default)]
pub(crate) struct StampCache {
    known: Mutex<HashMap<String, Known>>,
}

impl StampCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Known>> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The record of `tag` (`Some(None)`: known to be missing) if it was read from the
    /// tier less than `max_age` ago (never with a zero `max_age`).
    pub(crate) fn recent(&self, tag: &str, max_age: Duration) -> Option<Option<Record>> {
        let k = *self.lock().get(tag)?;
        (k.fetched.elapsed() < max_age).then_some(k.record)
    }

    /// What this process knows of `tag` now.
    pub(crate) fn known(&self, tag: &str) -> Option<Known> {
        self.lock().get(tag).copied()
    }

    /// A record read from the tier (or written by this process) just now; `None`: there
    /// is none (or it is not one).
    pub(crate) fn learn(&self, tag: &str, record: Option<Record>) {
        let now = Instant::now();
        let mut known = self.lock();
        if known.len() >= MAX_KNOWN_TAGS && !known.contains_key(tag) {
            known.clear();
        }
        let Some(k) = known.get_mut(tag) else {
            known.insert(tag.to_owned(), Known::new(record, now));
            return;
        };
        match (k.record, record) {
            (Some(old), Some(new)) if old.incarnation == new.incarnation => {
                if new.removed > old.removed {
                    k.removed_rose = now;
                }
                if new.expired > old.expired {
                    k.expired_rose = now;
                }
                k.record = Some(Record {
                    incarnation: old.incarnation,
                    removed: old.removed.max(new.removed),
                    expired: old.expired.max(new.expired),
                });
                k.fetched = now;
            }
            (None, None) => k.fetched = now,
            // Another record: what this process knew of the old one says nothing of it.
            _ => *k = Known::new(record, now),
        }
    }

    /// Another process's invalidation of `tag` at `stamp`. An unknown tag stays unknown
    /// (its record is not known); one known to have no record is forgotten (an
    /// invalidation made one): its next use reads it.
    pub(crate) fn notice(&self, tag: &str, stamp: u64, soft: bool) {
        let mut known = self.lock();
        let Some(k) = known.get_mut(tag) else { return };
        let Some(r) = &mut k.record else {
            known.remove(tag);
            return;
        };
        let (field, rose) = match soft {
            true => (&mut r.expired, &mut k.expired_rose),
            false => (&mut r.removed, &mut k.removed_rose),
        };
        if stamp > *field {
            *field = stamp;
            *rose = Instant::now();
        }
    }

    /// Forgets everything (notifications may have been lost).
    pub(crate) fn clear(&self) {
        self.lock().clear();
    }
}

/// Whether an invalidation (hard; with `soft`, an expiry) of a tag may have happened after
/// a load that began at `began` (`began_us` on this host's wall clock), given what this
/// process knew of the tag when the load ended (`known`, before the record was read for the
/// commit) and the record read for the commit (`now`).
///
/// Known since before the load began: exactly whether its stamp rose here since the start,
/// or differs now from what was known (a notice not yet arrived, a record made again).
/// Otherwise the record's stamp, on its Redis server's clock, is compared with the start on
/// this host's: the only comparison of two clocks, shifted by their skew (NTP).
pub(crate) fn raced(
    known: Option<&Known>,
    now: &Record,
    began: Instant,
    began_us: u64,
    soft: bool,
) -> bool {
    let field = |r: &Record| if soft { r.expired } else { r.removed };
    let before = known
        .filter(|k| k.since <= began)
        .and_then(|k| Some((k, k.record?)));
    if let Some((k, before)) = before {
        let rose = if soft { k.expired_rose } else { k.removed_rose };
        return rose > began
            || before.incarnation != now.incarnation
            || field(now) > field(&before);
    }
    field(now) >= began_us
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(incarnation: u64, removed: u64, expired: u64) -> Record {
        Record {
            incarnation,
            removed,
            expired,
        }
    }

    #[test]
    fn the_cache_keeps_the_latest_record_and_when_it_changed() {
        let c = StampCache::default();
        c.notice("a", 5, false);
        assert_eq!(c.recent("a", Duration::from_secs(1)), None, "unknown stays");
        c.learn("a", Some(rec(1, 5, 0)));
        c.notice("a", 7, true);
        assert_eq!(
            c.recent("a", Duration::from_secs(1)),
            Some(Some(rec(1, 5, 7)))
        );
        c.learn("a", Some(rec(1, 0, 0)));
        assert_eq!(
            c.recent("a", Duration::from_secs(1)),
            Some(Some(rec(1, 5, 7)))
        );
        c.learn("a", Some(rec(2, 0, 0)));
        assert_eq!(
            c.recent("a", Duration::from_secs(1)),
            Some(Some(rec(2, 0, 0))),
            "another incarnation replaces what was known"
        );
        assert_eq!(c.recent("a", Duration::ZERO), None);
        c.learn("b", None);
        assert_eq!(c.recent("b", Duration::from_secs(1)), Some(None));
        c.notice("b", 9, false);
        assert!(
            c.known("b").is_none(),
            "an invalidation made a record: read it"
        );
        c.clear();
        assert_eq!(c.recent("a", Duration::from_secs(1)), None);
    }

    #[test]
    fn a_load_races_what_happened_after_its_start() {
        let c = StampCache::default();
        c.learn("t", Some(rec(1, 100, 0)));
        let began = Instant::now();
        let known = c.known("t");
        // Known before, unchanged: whatever the clocks say.
        assert!(!raced(known.as_ref(), &rec(1, 100, 0), began, 50, false));
        assert!(!raced(known.as_ref(), &rec(1, 100, 0), began, 50, true));
        // Changed since (not heard of yet), or made again.
        assert!(raced(
            known.as_ref(),
            &rec(1, 101, 0),
            began,
            u64::MAX,
            false
        ));
        assert!(raced(known.as_ref(), &rec(2, 0, 0), began, u64::MAX, false));
        assert!(!raced(
            known.as_ref(),
            &rec(1, 100, 7),
            began,
            u64::MAX,
            false
        ));
        assert!(raced(
            known.as_ref(),
            &rec(1, 100, 7),
            began,
            u64::MAX,
            true
        ));
        // Heard of after the start (a notice, or this process's own invalidation).
        std::thread::sleep(Duration::from_millis(2));
        c.notice("t", 150, false);
        let heard = c.known("t");
        assert!(raced(
            heard.as_ref(),
            &rec(1, 150, 0),
            began,
            u64::MAX,
            false
        ));
        // Not known before the start: the clock rule.
        let late = Instant::now();
        c.learn("u", Some(rec(3, 500, 0)));
        let u = c.known("u");
        assert!(raced(u.as_ref(), &rec(3, 500, 0), late, 500, false));
        assert!(!raced(u.as_ref(), &rec(3, 500, 0), late, 501, false));
        assert!(!raced(None, &rec(3, 0, 0), late, 1, false));
        c.learn("v", None);
        assert!(!raced(
            c.known("v").as_ref(),
            &rec(4, 0, 0),
            Instant::now(),
            1,
            false
        ));
    }
}
