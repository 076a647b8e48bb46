//! Tags: `invalidate_tag(t)` drops every entry carrying `t` in O(1), whatever its key.
//!
//! One logical clock per cache counts tag invalidations. An entry keeps its tags (the
//! records, so a read needs no lookup) and `born`, the clock when its load began (for a
//! write: when it was written). Invalidating a tag stamps its record with the next tick:
//! `removed_at` (hard) or `expired_at` (soft). A read compares: a tag removed after the
//! entry's birth makes it dead, one expired after it makes it stale. No scan, ever.
//!
//! The records are bounded ([`Registry`]); their two edge cases:
//! - a tag without a record carries no entry, so its invalidation creates nothing; but a
//!   load already running may attach it later. So the latest such stamp is kept
//!   (`unknown_*`), and a record made later starts with it: that load is not stored.
//!   Conservative: a load racing the first use of an unrelated new tag may be dropped too;
//!   an older value is never stored.
//! - retiring a record (the bound) stamps it `removed_at = u64::MAX`: every entry holding it
//!   dies, so a forgotten tag never resurrects old entries. Its stamps join `unknown_*`, so
//!   a running load that attaches the name later still sees them.

use alloc::boxed::Box;
use alloc::collections::BTreeSet;
use alloc::vec::Vec;

use crate::error::Error;
use crate::registry::{Record, Registry};
use crate::sync::{Arc, AtomicBool, AtomicU64, Ordering};

/// The longest tag, in bytes: a name such as `product:42`, not a value. A longer one is
/// refused with [`Error::TagTooLong`](crate::Error::TagTooLong).
pub const MAX_TAG_BYTES: usize = 128;

/// The record of one tag.
pub(crate) struct Tag {
    name: Box<str>,
    /// Entries born before this are dead.
    removed_at: AtomicU64,
    /// Entries born before this are past their fresh time.
    expired_at: AtomicU64,
    used: AtomicBool,
}

impl Tag {
    /// The tag's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }
}

impl core::fmt::Debug for Tag {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("Tag").field(&self.name).finish()
    }
}

impl Record for Tag {
    fn name(&self) -> &str {
        &self.name
    }

    fn used(&self) -> &AtomicBool {
        &self.used
    }
}

/// What the tags of an entry born at some tick say about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fate {
    Alive,
    /// A tag was expired (soft) since: treated as past its fresh time.
    Expired,
    /// A tag was invalidated (hard) since: a miss.
    Removed,
}

/// The fate of an entry holding `tags`, born at `born`.
#[inline]
pub(crate) fn fate(tags: &[Arc<Tag>], born: u64) -> Fate {
    let mut fate = Fate::Alive;
    for t in tags {
        if t.removed_at.load(Ordering::Acquire) > born {
            return Fate::Removed;
        }
        if t.expired_at.load(Ordering::Acquire) > born {
            fate = Fate::Expired;
        }
    }
    fate
}

/// Whether one of `tags` was invalidated (hard) since `born`: an entry born then is dead.
pub(crate) fn removed_since(tags: &[Arc<Tag>], born: u64) -> bool {
    fate(tags, born) == Fate::Removed
}

/// Checks one tag's name.
pub(crate) fn check(tag: &str) -> Result<(), Error> {
    if tag.is_empty() {
        return Err(Error::EmptyTag);
    }
    if tag.len() > MAX_TAG_BYTES {
        return Err(Error::TagTooLong {
            len: tag.len(),
            max: MAX_TAG_BYTES,
        });
    }
    Ok(())
}

/// Checks an entry's tags and removes duplicates (keeping the first of each).
pub(crate) fn check_all(tags: &mut Vec<Box<str>>, max: usize) -> Result<(), Error> {
    for t in tags.iter() {
        check(t)?;
    }
    // Each name is looked up in an ordered set of the names before it: a list read from a
    // request (`invalidate_tags` passes no `max`) costs O(n log n), never O(n^2), and the
    // pass stops at the first distinct name past `max`.
    let count = tags.len();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let mut first = Vec::with_capacity(count);
    for t in tags.iter() {
        let new = seen.insert(&**t);
        if new && seen.len() > max {
            return Err(Error::TooManyTags { count, max });
        }
        first.push(new);
    }
    let mut first = first.into_iter();
    tags.retain(|_| first.next().unwrap_or(false));
    Ok(())
}

/// The tags of one cache: the records, the clock, the counters.
pub(crate) struct Tags {
    registry: Registry<Tag>,
    clock: AtomicU64,
    /// The latest hard stamp of a tag that had no record (or whose record was retired).
    unknown_removed: AtomicU64,
    /// The same, soft.
    unknown_expired: AtomicU64,
    invalidations: AtomicU64,
    expirations: AtomicU64,
    retired: AtomicU64,
}

/// Tag counters at one moment.
pub(crate) struct TagCounts {
    pub(crate) records: u64,
    pub(crate) invalidations: u64,
    pub(crate) expirations: u64,
    pub(crate) retired: u64,
}

impl Tags {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            registry: Registry::new(max),
            clock: AtomicU64::new(0),
            unknown_removed: AtomicU64::new(0),
            unknown_expired: AtomicU64::new(0),
            invalidations: AtomicU64::new(0),
            expirations: AtomicU64::new(0),
            retired: AtomicU64::new(0),
        }
    }

    /// The clock now: the `born` of a load beginning or a write happening now.
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.clock.load(Ordering::Acquire)
    }

    /// The record of `name`, made on first use (see the module's rules).
    pub(crate) fn get(&self, name: &str) -> Arc<Tag> {
        let make = |name: &str| Tag {
            name: name.into(),
            removed_at: AtomicU64::new(self.unknown_removed.load(Ordering::Acquire)),
            expired_at: AtomicU64::new(self.unknown_expired.load(Ordering::Acquire)),
            used: AtomicBool::new(true),
        };
        self.registry.get(name, make, |t| {
            let removed = t.removed_at.swap(u64::MAX, Ordering::AcqRel);
            self.unknown_removed.fetch_max(removed, Ordering::AcqRel);
            let expired = t.expired_at.load(Ordering::Acquire);
            self.unknown_expired.fetch_max(expired, Ordering::AcqRel);
            self.retired.fetch_add(1, Ordering::Relaxed);
        })
    }

    /// The records of checked tag names.
    pub(crate) fn resolve(&self, names: &[Box<str>]) -> Box<[Arc<Tag>]> {
        names.iter().map(|n| self.get(n)).collect()
    }

    /// Invalidates (`hard`) or expires every entry carrying one of `names` (checked), all
    /// with one stamp; returns it.
    pub(crate) fn stamp(&self, names: &[&str], hard: bool) -> u64 {
        let stamp = self.clock.fetch_add(1, Ordering::AcqRel) + 1;
        for name in names {
            // Under the registry's lock: no record of `name` can be made between finding
            // none and raising `unknown_*`, so a new record always starts with this stamp.
            self.registry.with(name, |t| match (t, hard) {
                (Some(t), true) => t.removed_at.fetch_max(stamp, Ordering::AcqRel),
                (Some(t), false) => t.expired_at.fetch_max(stamp, Ordering::AcqRel),
                (None, true) => self.unknown_removed.fetch_max(stamp, Ordering::AcqRel),
                (None, false) => self.unknown_expired.fetch_max(stamp, Ordering::AcqRel),
            });
        }
        let counter = if hard {
            &self.invalidations
        } else {
            &self.expirations
        };
        counter.fetch_add(names.len() as u64, Ordering::Relaxed);
        stamp
    }

    pub(crate) fn counts(&self) -> TagCounts {
        TagCounts {
            records: self.registry.len() as u64,
            invalidations: self.invalidations.load(Ordering::Relaxed),
            expirations: self.expirations.load(Ordering::Relaxed),
            retired: self.retired.load(Ordering::Relaxed),
        }
    }
}
