//! Entry tags on the shared tier (PROTOCOL.md, "Tags"): each tag has a record in a Redis
//! key of its own (an incarnation and the stamps of its last invalidations); an entry
//! carries its tags and, per tag, a [`TagMark`]: which record it was written under and the
//! last invalidation of it that it has seen. A reader compares each mark with the tag's
//! record, tag by tag: no clock of one tag, host or Cluster node is ever compared with
//! another's. This process keeps the records it learned (its stamp cache) so that a hit on
//! a hot tagged key stays one round trip: a record is read again only when it is unknown,
//! was read more than `tag_check` ago, or is not the one the entry was written under;
//! notifications update it between.

use std::time::Duration;

use herdless::backend::{BackendFuture, StoredEntry};

mod cache;

pub use herdless::backend::TagMark;

pub(crate) use cache::{StampCache, raced};

/// One tag's record, `"<incarnation>:<removed>:<expired>"`: the incarnation (16 lowercase
/// hex digits, not all 0), then the stamps of its last hard (removed) and soft (expired)
/// invalidation, microseconds on the clock of the Redis server that holds the record (1 to
/// 16 decimal digits each; 0: none since the record was made).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// Made with the record, random: a record lost and made again is another one.
    pub incarnation: u64,
    /// The stamp of the last hard invalidation.
    pub removed: u64,
    /// The stamp of the last soft invalidation.
    pub expired: u64,
}

impl Record {
    /// The record of a tag key's text; `None` for anything else (not a record).
    pub fn parse(raw: &[u8]) -> Option<Self> {
        let s = std::str::from_utf8(raw).ok()?;
        let mut parts = s.split(':');
        let (i, r, x) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || i.len() != 16 {
            return None;
        }
        let lower_hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
        if !i.bytes().all(lower_hex) {
            return None;
        }
        let incarnation = u64::from_str_radix(i, 16).ok().filter(|&i| i != 0)?;
        let num = |t: &str| {
            (!t.is_empty() && t.len() <= 16 && t.bytes().all(|b| b.is_ascii_digit()))
                .then(|| t.parse().ok())
                .flatten()
        };
        Some(Self {
            incarnation,
            removed: num(r)?,
            expired: num(x)?,
        })
    }

    /// The record's text, as [`parse`](Self::parse) reads it.
    pub fn text(&self) -> String {
        format!(
            "{:016x}:{}:{}",
            self.incarnation, self.removed, self.expired
        )
    }

    /// The mark of an entry written under this record: it has seen every invalidation so
    /// far (the two stamps are one increasing sequence, so their maximum is the last).
    pub fn mark(&self) -> TagMark {
        TagMark {
            incarnation: self.incarnation,
            seen: self.removed.max(self.expired),
        }
    }
}

/// An incarnation in the text of scripts' arguments: 16 lowercase hex digits.
pub(crate) fn incarnation_text(i: u64) -> String {
    format!("{i:016x}")
}

/// Parses an incarnation as the scripts answer it (`None`: not one).
pub(crate) fn parse_incarnation(s: &str) -> Option<u64> {
    (s.len() == 16)
        .then(|| u64::from_str_radix(s, 16).ok())
        .flatten()
        .filter(|&i| i != 0)
}

/// `n` fresh incarnations from the OS random source, none 0: one per tag whose record a
/// script may have to make.
pub(crate) fn incarnations(n: usize) -> Result<Vec<u64>, crate::Error> {
    let mut bytes = vec![0u8; n * 8];
    getrandom::fill(&mut bytes).map_err(|e| crate::Error::Random(e.to_string()))?;
    Ok(bytes
        .chunks_exact(8)
        .map(|c| u64::from_be_bytes(c.try_into().expect("8 bytes")).max(1))
        .collect())
}

/// What its tags say about an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// No tag of it was invalidated since it was written.
    Alive,
    /// A tag was expired (soft) since: past its fresh time.
    Expired,
    /// A tag was removed (hard) since: nothing of it is served.
    Removed,
    /// A tag's record is gone (evicted, expired), is not a record, or is another
    /// incarnation than the one it was written under: what the record held is unknown, so
    /// it is removed too, and counted (`tag_records_lost`).
    Lost,
}

/// The fate of an entry whose tags have `marks`, their `records` now (in the same order;
/// `None`: no record).
pub fn fate(marks: &[TagMark], records: &[Option<Record>]) -> Fate {
    if marks.len() != records.len() {
        return Fate::Lost;
    }
    let mut fate = Fate::Alive;
    for (m, r) in marks.iter().zip(records) {
        let Some(r) = r.filter(|r| r.incarnation == m.incarnation) else {
            return Fate::Lost;
        };
        if r.removed > m.seen {
            fate = Fate::Removed;
        } else if r.expired > m.seen && fate == Fate::Alive {
            fate = Fate::Expired;
        }
    }
    fate
}

/// `entry` as its tags' `records` leave it at `now_ms`: `None` when removed (or lost);
/// expired, it is past its fresh time (stale within its own grace, kept for fail-safe when
/// it has none), as the in-memory engine treats an entry whose tag was expired.
pub fn judged(
    mut entry: StoredEntry,
    records: &[Option<Record>],
    now_ms: u64,
) -> Option<StoredEntry> {
    match fate(&entry.tag_marks, records) {
        Fate::Alive => Some(entry),
        Fate::Removed | Fate::Lost => None,
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

/// What a shared tier offers for tags, beside the core's `Backend`.
pub(crate) trait TagTier: Send + Sync {
    /// The records of `tags` as stored now, in order (`None`: no record, a key of another
    /// type, or text that is not a record, counted corrupt): one round trip per Cluster
    /// slot group, writing nothing.
    fn fetch_records<'a>(&'a self, tags: &'a [String]) -> BackendFuture<'a, Vec<Option<Record>>>;

    /// Invalidates (`soft`: expires) each of `tags` for the fleet (script `tag`) and tells
    /// the other processes; the records afterwards, in order. At most
    /// [`TAGS_PER_ROUND_TRIP`] per round trip, each round trip bounded by itself, so other
    /// calls are sent between them; a failure after some of them answers
    /// [`Error::TagsPartlyApplied`](crate::Error::TagsPartlyApplied). This process's stamp
    /// cache learns each record as it is written.
    fn stamp_tags<'a>(&'a self, tags: &'a [String], soft: bool) -> BackendFuture<'a, Vec<Record>>;

    /// A writer's use of `tags` just before its commit (script `tag_use`): each record is
    /// made if missing, replaced (another incarnation) if it is not one, and kept at least
    /// `tag_retention`; the records, in order. The stamp cache is the caller's to update.
    fn use_tags<'a>(&'a self, tags: &'a [String]) -> BackendFuture<'a, Vec<Record>>;

    /// This process's stamp cache (notifications update it).
    fn stamp_cache(&self) -> &StampCache;

    /// Drops and losses of this process's subscription so far (read before a write).
    fn bus_generation(&self) -> u64;

    /// Whether a copy of `key` written since `generation` may be kept: its notices reach
    /// this process now and its subscription did not drop since (PROTOCOL.md section 4).
    fn keeps(&self, key: &str, generation: u64) -> bool;

    /// Whether this tier tells a process of the other processes' changes at all, so that a
    /// copy it read may be kept in its L1 (the default); memcached does not.
    fn holds_copies(&self) -> bool {
        true
    }

    /// How long a tag's record is kept after its last invalidation or use (a tagged entry
    /// lives at most this long after its birth, so it never outlives its record unless the
    /// record is evicted).
    fn tag_retention(&self) -> Duration;
}

/// The default of `tag_retention`: one day.
pub const DEFAULT_TAG_RETENTION: Duration = Duration::from_secs(86_400);

/// The most tags one `invalidate_tags` / `expire_tags` call takes; a longer list is
/// refused ([`herdless::Error::TooManyTags`]) before anything is invalidated. It bounds
/// the work of one call (a script, a notice and a stamp cache entry per tag).
pub const MAX_TAGS_PER_INVALIDATION: usize = 10_000;

/// The most tag scripts sent in one round trip (one pipeline): a long invalidation is sent
/// in pieces, so the cache's other calls on the same connection go out between them.
pub const TAGS_PER_ROUND_TRIP: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(marks: &[TagMark], grace: u64) -> StoredEntry {
        let mut e = crate::lifetimes::new_entry(
            Some(b"v".to_vec()),
            Duration::from_secs(60),
            Duration::from_millis(grace),
            Duration::from_secs(600),
            Duration::ZERO,
        );
        e.tags = (0..marks.len()).map(|i| format!("t{i}")).collect();
        e.tag_marks = marks.to_vec();
        e
    }

    fn rec(incarnation: u64, removed: u64, expired: u64) -> Option<Record> {
        Some(Record {
            incarnation,
            removed,
            expired,
        })
    }

    fn mark(incarnation: u64, seen: u64) -> TagMark {
        TagMark { incarnation, seen }
    }

    #[test]
    fn each_tag_is_compared_with_its_own_record_only() {
        // Stamps of one tag far ahead of another's change nothing (other nodes, other
        // clocks, a burst of invalidations).
        let marks = [mark(1, 9_000_000), mark(2, 10)];
        assert_eq!(
            fate(&marks, &[rec(1, 9_000_000, 0), rec(2, 10, 3)]),
            Fate::Alive
        );
        assert_eq!(
            fate(&marks, &[rec(1, 9_000_000, 0), rec(2, 11, 0)]),
            Fate::Removed
        );
        assert_eq!(
            fate(&marks, &[rec(1, 0, 9_000_001), rec(2, 0, 0)]),
            Fate::Expired
        );
        assert_eq!(
            fate(&marks, &[rec(1, 0, 9_000_001), rec(2, 11, 0)]),
            Fate::Removed
        );
    }

    #[test]
    fn a_lost_or_other_record_removes_what_it_carried() {
        let marks = [mark(1, 5)];
        assert_eq!(fate(&marks, &[None]), Fate::Lost);
        assert_eq!(fate(&marks, &[rec(7, 0, 0)]), Fate::Lost, "made again");
        assert_eq!(fate(&marks, &[]), Fate::Lost);
        let now = crate::wall::now_ms();
        assert!(judged(entry(&marks, 0), &[None], now).is_none());
        assert!(judged(entry(&marks, 0), &[rec(1, 6, 0)], now).is_none());
        let stale = judged(entry(&marks, 5_000), &[rec(1, 0, 6)], now).unwrap();
        assert!(!stale.is_fresh(now + 1) && stale.is_servable(now + 1));
        let no_grace = judged(entry(&marks, 0), &[rec(1, 0, 6)], now).unwrap();
        assert!(!no_grace.is_servable(now + 1), "kept for fail-safe only");
        assert!(no_grace.retain_until_ms > now);
    }

    #[test]
    fn records_parse_strictly_and_spell_one_way() {
        let r = Record {
            incarnation: 0xabc,
            removed: 12,
            expired: 0,
        };
        assert_eq!(r.text(), "0000000000000abc:12:0");
        assert_eq!(Record::parse(r.text().as_bytes()), Some(r));
        assert_eq!(r.mark(), mark(0xabc, 12));
        for bad in [
            &b""[..],
            b"12:0",
            b"0:0",
            b"0000000000000000:1:1",
            b"0000000000000ABC:1:1",
            b"000000000000abc:1:1",
            b"0000000000000abc:1",
            b"0000000000000abc:1:x",
            b"0000000000000abc::1",
            b"0000000000000abc:1:1:1",
            b"0000000000000abc:99999999999999999:1",
            b"\xff:1:1",
        ] {
            assert_eq!(Record::parse(bad), None, "{bad:?}");
        }
        assert_eq!(parse_incarnation("0000000000000abc"), Some(0xabc));
        assert_eq!(parse_incarnation("0000000000000000"), None);
        assert_eq!(incarnation_text(0xabc), "0000000000000abc");
        let fresh = incarnations(64).unwrap();
        assert!(fresh.iter().all(|&i| i != 0));
        assert_eq!(fresh.len(), 64);
    }
}
