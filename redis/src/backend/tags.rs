//! Tags on Redis (PROTOCOL.md, "Tags"): reads of the records (`MGET`), invalidations
//! (script `tag`) and a writer's use of its tags (script `tag_use`), one pipeline per
//! Cluster slot group and at most [`TAGS_PER_ROUND_TRIP`] tags per round trip.

use std::collections::HashMap;
use std::time::Duration;

use herdless::LoadError;
use herdless::backend::BackendFuture;

use super::{RedisBackend, ms_arg};
use crate::error::Error;
use crate::keys;
use crate::metrics::inc;
use crate::scripts::SCRIPTS;
use crate::tags::{
    self, Record, StampCache, TAGS_PER_ROUND_TRIP, TagTier, incarnation_text, parse_incarnation,
};

/// What the `tag` and `tag_use` scripts answer: incarnation, removed, expired, corrupt.
type RecordReply = (String, u64, u64, i64);

impl RedisBackend {
    /// Listens to the tags channel (once): before this process relies on tag records it
    /// learned, it must hear of later invalidations. On a single server the one pattern
    /// subscription covers it; on a Cluster it is one sharded subscription, never dropped.
    pub(super) async fn subscribe_tags(&self) -> Result<(), Error> {
        let inner = &self.inner;
        if inner.sharded {
            let channel = keys::tags_channel(&inner.prefix);
            inner
                .tags_subscription
                .get_or_try_init(|| inner.sub.ssubscribe(&channel))
                .await?;
        } else {
            let pattern = keys::channel_pattern(&inner.prefix);
            let (cell, _) = inner.hub.subscription(&pattern, usize::MAX);
            cell.get_or_try_init(|| inner.sub.psubscribe(&pattern))
                .await?;
        }
        Ok(())
    }

    /// `tags`' indices grouped by Cluster slot (one group on a single server), each group
    /// cut into round trips of at most [`TAGS_PER_ROUND_TRIP`].
    fn round_trips(&self, tags: &[String]) -> Vec<Vec<usize>> {
        let mut group_of: HashMap<u16, usize> = HashMap::new();
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for (i, t) in tags.iter().enumerate() {
            let slot = match self.inner.sharded {
                true => keys::slot(&keys::tag_key(&self.inner.prefix, t)),
                false => 0,
            };
            let g = *group_of.entry(slot).or_insert_with(|| {
                groups.push(Vec::new());
                groups.len() - 1
            });
            groups[g].push(i);
        }
        groups
            .iter()
            .flat_map(|g| g.chunks(TAGS_PER_ROUND_TRIP).map(<[usize]>::to_vec))
            .collect()
    }

    /// The records a script answered, counting the corrupt ones it replaced.
    fn records(&self, replies: Vec<RecordReply>) -> Result<Vec<Record>, Error> {
        replies
            .into_iter()
            .map(|(incarnation, removed, expired, corrupt)| {
                if corrupt == 1 {
                    inc(&self.inner.metrics.corrupt_entries);
                }
                let incarnation = parse_incarnation(&incarnation)
                    .ok_or(Error::Protocol("a tag script answered no incarnation"))?;
                Ok(Record {
                    incarnation,
                    removed,
                    expired,
                })
            })
            .collect()
    }

    /// One round trip of the `tag` script on `members` of `tags`: their records after.
    async fn stamp_round_trip(
        &self,
        tags: &[String],
        members: &[usize],
        soft: bool,
    ) -> Result<Vec<Record>, Error> {
        let inner = &self.inner;
        let channel = keys::tags_channel(&inner.prefix);
        let fresh = tags::incarnations(members.len())?;
        let mut live = inner.cmd.live().await?;
        let mut pipe = redis::pipe();
        pipe.load_script(&SCRIPTS.tag).ignore();
        for (&i, incarnation) in members.iter().zip(fresh) {
            let mut inv = SCRIPTS.tag.key(keys::tag_key(&inner.prefix, &tags[i]));
            inv.arg(if soft { "1" } else { "0" })
                .arg(ms_arg(inner.tag_retention))
                // A script may publish only on its keys' slot: on a Cluster the notices
                // follow in a pipeline of their own.
                .arg(if inner.sharded { "" } else { channel.as_str() })
                .arg(&inner.hub.origin)
                .arg("0")
                .arg(&tags[i])
                .arg(incarnation_text(incarnation));
            pipe.invoke_script(&inv);
        }
        let replies: Vec<RecordReply> = pipe.query_async(&mut live).await?;
        self.records(replies)
    }

    /// The Cluster's notices of `records` of `members` of `tags` (one pipeline: they all go
    /// to the tags channel's slot).
    async fn publish_round_trip(
        &self,
        tags: &[String],
        members: &[usize],
        records: &[Record],
        soft: bool,
    ) -> Result<(), Error> {
        let inner = &self.inner;
        let channel = keys::tags_channel(&inner.prefix);
        let kind = if soft { 'x' } else { 't' };
        let mut pipe = redis::pipe();
        for (&i, r) in members.iter().zip(records) {
            let stamp = if soft { r.expired } else { r.removed };
            let message = format!("{kind}:{}:{stamp}:{}", inner.hub.origin, tags[i]);
            pipe.cmd("SPUBLISH").arg(&channel).arg(message).ignore();
        }
        let mut live = inner.cmd.live().await?;
        let () = pipe.query_async(&mut live).await?;
        Ok(())
    }
}

impl TagTier for RedisBackend {
    fn fetch_records<'a>(&'a self, tags: &'a [String]) -> BackendFuture<'a, Vec<Option<Record>>> {
        self.op("tag_stamps", async move {
            self.subscribe_tags().await?;
            let mut out = vec![None; tags.len()];
            for members in self.round_trips(tags) {
                let mut live = self.inner.cmd.live().await?;
                let mut mget = redis::cmd("MGET");
                for &i in &members {
                    mget.arg(keys::tag_key(&self.inner.prefix, &tags[i]));
                }
                inc(&self.inner.metrics.tag_fetches);
                // A key of another type reads as nil: no record, as a deleted one.
                let raw: Vec<Option<Vec<u8>>> = mget.query_async(&mut live).await?;
                for (&i, raw) in members.iter().zip(raw) {
                    out[i] = raw.and_then(|b| {
                        let r = Record::parse(&b);
                        if r.is_none() {
                            inc(&self.inner.metrics.corrupt_entries);
                        }
                        r
                    });
                }
            }
            Ok(out)
        })
    }

    fn stamp_tags<'a>(&'a self, tags: &'a [String], soft: bool) -> BackendFuture<'a, Vec<Record>> {
        Box::pin(async move {
            let partly = |applied: usize, e: Error| -> LoadError {
                match applied {
                    0 => e.into(),
                    _ => Error::TagsPartlyApplied {
                        applied,
                        tags: tags.len(),
                        cause: Box::new(e),
                    }
                    .into(),
                }
            };
            self.run("tag", self.subscribe_tags())
                .await
                .map_err(|e| partly(0, e))?;
            let mut out = vec![Record::default(); tags.len()];
            let mut applied = 0;
            // Each round trip bounded by itself: a long list is never cut by one timeout
            // after it was applied, and the cache's other calls go out between them.
            for members in self.round_trips(tags) {
                let records = self
                    .run("tag", self.stamp_round_trip(tags, &members, soft))
                    .await
                    .map_err(|e| partly(applied, e))?;
                for (&i, r) in members.iter().zip(&records) {
                    inc(&self.inner.metrics.tag_invalidations);
                    self.inner.hub.stamps.learn(&tags[i], Some(*r));
                    // The caches of this process over the same keys hear it at once.
                    let (kind, stamp) = if soft {
                        ('x', r.expired)
                    } else {
                        ('t', r.removed)
                    };
                    crate::local::tell(&*self.inner.hub, kind, stamp, &tags[i]);
                    out[i] = *r;
                }
                applied += members.len();
                if self.inner.sharded {
                    self.run(
                        "tag",
                        self.publish_round_trip(tags, &members, &records, soft),
                    )
                    .await
                    .map_err(|e| partly(applied, e))?;
                }
            }
            Ok(out)
        })
    }

    fn use_tags<'a>(&'a self, tags: &'a [String]) -> BackendFuture<'a, Vec<Record>> {
        self.op("tag_use", async move {
            // The writer keeps a copy: it hears of later invalidations first.
            self.subscribe_tags().await?;
            let inner = &self.inner;
            let fresh = tags::incarnations(tags.len())?;
            let mut out = vec![Record::default(); tags.len()];
            for members in self.round_trips(tags) {
                let mut live = inner.cmd.live().await?;
                let mut pipe = redis::pipe();
                pipe.load_script(&SCRIPTS.tag_use).ignore();
                for &i in &members {
                    let mut inv = SCRIPTS.tag_use.key(keys::tag_key(&inner.prefix, &tags[i]));
                    inv.arg(incarnation_text(fresh[i]))
                        .arg(ms_arg(inner.tag_retention));
                    pipe.invoke_script(&inv);
                }
                inc(&inner.metrics.tag_fetches);
                let replies: Vec<RecordReply> = pipe.query_async(&mut live).await?;
                for (&i, r) in members.iter().zip(self.records(replies)?) {
                    out[i] = r;
                }
            }
            Ok(out)
        })
    }

    fn stamp_cache(&self) -> &StampCache {
        &self.inner.hub.stamps
    }

    fn bus_generation(&self) -> u64 {
        self.inner.hub.generation()
    }

    fn keeps(&self, key: &str, generation: u64) -> bool {
        self.inner.hub.keeps(key, generation)
    }

    fn tag_retention(&self) -> Duration {
        self.inner.tag_retention
    }
}
