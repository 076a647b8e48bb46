//! Tags in the fleet protocol (PROTOCOL.md, "Tags"): invalidations for the fleet, the
//! check of a tagged entry against its tags' records before it is served, and the marks a
//! writer gives its entry (a load that raced an invalidation of one of its tags is not
//! published).

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use herdless::LoadError;
use herdless::backend::{Acquired, StoredEntry, WriteOutcome};

use super::{Fleet, FleetLease, Judged};
use crate::metrics::inc;
use crate::tags::{Fate, Record, fate, judged, raced};
use crate::wall::now_ms;

/// This host's wall clock at `at`, in µs, rounded down (never after it: a start dated late
/// could pass an invalidation that came after it).
fn wall_us_at(at: Instant) -> u64 {
    let wall = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(wall.saturating_sub(at.elapsed()).as_micros()).unwrap_or(u64::MAX)
}

impl Fleet {
    /// Drops and losses of this process's subscription so far: read before a write whose
    /// value the L1 may keep, and given to [`keeps`](Self::keeps) after it.
    pub(crate) fn bus_generation(&self) -> u64 {
        self.tags.bus_generation()
    }

    /// Whether this process may keep a copy of `key` it wrote since `generation`: only
    /// while it hears of later changes to it, its subscription confirmed and not dropped
    /// meanwhile (PROTOCOL.md section 4). A write made unheard is still the fleet's; only
    /// the local copy is not kept.
    pub(crate) fn keeps(&self, key: &str, generation: u64) -> bool {
        self.tags.keeps(key, generation)
    }

    /// Whether copies of this tier's entries may be kept in a process's L1 at all: not on
    /// a tier that tells nobody of changes (memcached), whose every read asks the tier.
    pub(crate) fn holds_copies(&self) -> bool {
        self.tags.holds_copies()
    }

    /// What a write of `key` sent at bus `generation` answered, as this process's L1 takes
    /// it: written for the fleet but unheard here ([`keeps`](Self::keeps) says no) is
    /// `Superseded` for this process: served, never kept.
    pub(crate) fn heard(
        &self,
        key: &str,
        generation: u64,
        outcome: Result<WriteOutcome, herdless::Error>,
    ) -> Result<WriteOutcome, herdless::Error> {
        match outcome {
            Ok(WriteOutcome::Written { .. }) if !self.keeps(key, generation) => {
                Ok(WriteOutcome::Superseded)
            }
            other => other,
        }
    }

    /// Invalidates every entry carrying one of `tags`, for the whole fleet (`soft`: expires
    /// them instead: stale within their grace while one refresh runs), in O(1) per tag:
    /// one round trip per Cluster slot group of the tags and per
    /// [`TAGS_PER_ROUND_TRIP`](crate::tags::TAGS_PER_ROUND_TRIP) tags. The other processes
    /// are told; this process's own L1 is the caller's to drop. Answers each tag's stamp,
    /// in order; a failure after some round trips says how many tags were applied
    /// ([`Error::TagsPartlyApplied`](crate::Error::TagsPartlyApplied)).
    pub async fn invalidate_tags(
        &self,
        tags: &[String],
        soft: bool,
    ) -> Result<Vec<u64>, herdless::Error> {
        if tags.is_empty() {
            return Ok(Vec::new());
        }
        let records = self
            .tags
            .stamp_tags(tags, soft)
            .await
            .map_err(|e| self.failed(&tags[0], e))?;
        Ok(records
            .iter()
            .map(|r| if soft { r.expired } else { r.removed })
            .collect())
    }

    /// The records of `entry`'s tags, in order: those this process read less than
    /// `tag_check` ago (or heard of since) that are the records it was written under; the
    /// others read from the tier in one round trip (per Cluster slot group). A record known
    /// here that is not the entry's is read again: it may be older than the entry (a record
    /// made again after it was lost is announced to nobody).
    async fn records_of(&self, entry: &StoredEntry) -> Result<Vec<Option<Record>>, LoadError> {
        let cache = self.tags.stamp_cache();
        let mut out: Vec<Option<Option<Record>>> = entry
            .tags
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mark = entry.tag_marks.get(i)?;
                cache
                    .recent(t, self.opts.tag_check)
                    .filter(|r| r.is_some_and(|r| r.incarnation == mark.incarnation))
            })
            .collect();
        let missing: Vec<String> = entry
            .tags
            .iter()
            .zip(&out)
            .filter(|(_, r)| r.is_none())
            .map(|(t, _)| t.clone())
            .collect();
        if !missing.is_empty() {
            let fetched = self.tags.fetch_records(&missing).await?;
            let mut fetched = missing.iter().zip(fetched);
            for slot in out.iter_mut().filter(|r| r.is_none()) {
                if let Some((t, r)) = fetched.next() {
                    cache.learn(t, r);
                    *slot = Some(r);
                }
            }
        }
        Ok(out.into_iter().map(Option::flatten).collect())
    }

    /// `entry` as its tags leave it at `now_ms` (`None`: removed; expired, it is no longer
    /// fresh at `now_ms`); an untagged entry as it is, without a round trip.
    pub(super) async fn judge(
        &self,
        entry: StoredEntry,
        now_ms: u64,
    ) -> Result<Option<StoredEntry>, LoadError> {
        if entry.tags.is_empty() {
            return Ok(Some(entry));
        }
        let records = self.records_of(&entry).await?;
        if fate(&entry.tag_marks, &records) == Fate::Lost {
            inc(&self.metrics.tag_records_lost);
        }
        Ok(judged(entry, &records, now_ms))
    }

    /// An acquire's answer with its entry judged by its tags.
    pub(super) async fn judge_acquired(&self, a: Acquired) -> Result<Judged, LoadError> {
        let now = now_ms();
        let servable = |e: Option<StoredEntry>| e.filter(|e| e.is_servable(now));
        Ok(Judged::Ready(match a {
            Acquired::Fresh(e) => {
                let version = e.version;
                match self.judge(e, now).await? {
                    Some(e) if e.is_fresh(now) => Acquired::Fresh(e),
                    _ => return Ok(Judged::PastFresh(version)),
                }
            }
            Acquired::Locked {
                token,
                stale: Some(e),
            } => Acquired::Locked {
                token,
                stale: servable(self.judge(e, now).await?),
            },
            Acquired::Contended {
                stale: Some(e),
                remaining,
            } => Acquired::Contended {
                stale: servable(self.judge(e, now).await?),
                remaining,
            },
            other => other,
        }))
    }

    /// Caps the life of a tagged entry about to be written (its load began, or the write
    /// happens, at `began`) at `began + tag_retention`: every use of a tag keeps its record
    /// at least that long, so an entry outlives its records only if one is evicted (and it
    /// then reads as removed). An untagged entry carries no marks.
    pub(crate) fn date(&self, entry: &mut StoredEntry, began: Instant) {
        if entry.tags.is_empty() {
            entry.tag_marks.clear();
            return;
        }
        let start_ms = wall_us_at(began) / 1_000;
        let retention = u64::try_from(self.tags.tag_retention().as_millis()).unwrap_or(u64::MAX);
        let last = start_ms.saturating_add(retention);
        entry.retain_until_ms = entry.retain_until_ms.min(last);
        entry.stale_until_ms = entry.stale_until_ms.min(last);
        entry.fresh_until_ms = entry.fresh_until_ms.min(last);
    }

    /// Gives a tagged entry its marks from its tags' records, read (and made, if missing)
    /// for its commit (script `tag_use`, one round trip per Cluster slot group). For a load
    /// that began at `began`: `false` when one of its tags was removed after that (it must
    /// not be published), and a tag expired after it leaves the entry expired (its mark has
    /// not seen that expiry), as in memory. A write (`began` = `None`) happens now: its
    /// marks have seen every invalidation so far.
    async fn mark(
        &self,
        entry: &mut StoredEntry,
        began: Option<Instant>,
    ) -> Result<bool, LoadError> {
        let cache = self.tags.stamp_cache();
        // What was known before the records are read for the commit (which teaches them).
        let known: Vec<_> = entry.tags.iter().map(|t| cache.known(t)).collect();
        let records = self.tags.use_tags(&entry.tags).await?;
        for (t, r) in entry.tags.iter().zip(&records) {
            cache.learn(t, Some(*r));
        }
        let start = began.map(|b| (b, wall_us_at(b)));
        let mut marks = Vec::with_capacity(records.len());
        for (k, r) in known.iter().zip(&records) {
            let mut mark = r.mark();
            if let Some((b, us)) = start {
                if raced(k.as_ref(), r, b, us, false) {
                    return Ok(false);
                }
                if r.expired > r.removed && raced(k.as_ref(), r, b, us, true) {
                    mark.seen = r.expired - 1;
                }
            }
            marks.push(mark);
        }
        entry.tag_marks = marks;
        Ok(true)
    }

    /// Dates and marks an entry written now ([`set`](Self::set)).
    pub(super) async fn mark_write(
        &self,
        key: &str,
        entry: &mut StoredEntry,
    ) -> Result<(), herdless::Error> {
        self.date(entry, Instant::now());
        if !entry.tags.is_empty() {
            self.mark(entry, None)
                .await
                .map_err(|e| self.failed(key, e))?;
        }
        Ok(())
    }
}

impl FleetLease {
    /// Caps the life of a tagged entry this lease will publish, as
    /// [`publish_dated`](Self::publish_dated) does (the load began at `began`), so that
    /// its caller sees the life the fleet will keep it for.
    pub fn date(&self, entry: &mut StoredEntry, began: Instant) {
        self.fleet.date(entry, began);
    }

    /// Stores a loaded `entry` for the fleet, as [`publish`](Self::publish) does.
    ///
    /// A tagged entry's load began at `began` (when the loader started): its tags' records
    /// are read for the commit first (one round trip, script `tag_use`), which gives the
    /// entry its marks; if one of its tags was removed after `began` it is not published
    /// (`Superseded`, counted in `tag_rejected_commits`; the lock is released): a load that
    /// began before a tag invalidation never stores its older value.
    pub async fn publish_dated(
        self,
        mut entry: StoredEntry,
        began: Instant,
    ) -> Result<WriteOutcome, herdless::Error> {
        if entry.tags.is_empty() {
            return self.publish(entry).await;
        }
        self.fleet.date(&mut entry, began);
        match self.fleet.mark(&mut entry, Some(began)).await {
            Ok(true) => self.publish(entry).await,
            Ok(false) => {
                inc(&self.fleet.metrics.tag_rejected_commits);
                self.release().await?;
                Ok(WriteOutcome::Superseded)
            }
            Err(e) => {
                // Unchecked, it is not published: the lock is released (or runs out).
                let err = self.fleet.failed(&self.key, e);
                let _ = self.release().await;
                Err(err)
            }
        }
    }
}
