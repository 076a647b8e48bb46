//! Tags on the in-memory tier: the `tag` and `tag_use` scripts of PROTOCOL.md on the
//! store's data, and reads of the records as `MGET` does them.

use std::time::Duration;

use herdless::backend::BackendFuture;

use super::MemoryBackend;
use crate::error::Error;
use crate::memory::{Data, PREFIX, Slot, ms};
use crate::metrics::inc;
use crate::tags::{Record, StampCache, TAGS_PER_ROUND_TRIP, TagTier};
use crate::wall::now_ms;

/// A tag's record in the store's data, as the scripts' `tag_record` reads it: `None` for
/// none, a key of another type (deleted, as `get` does) or text that is not a record; and
/// whether it was corrupt.
fn tag_record(d: &mut Data, name: &str, now: u64) -> (Option<Record>, bool) {
    match d.get(name, now) {
        (None, bad) => (None, bad),
        (Some(b), _) => match Record::parse(&b) {
            Some(r) => (Some(r), false),
            None => (None, true),
        },
    }
}

/// The `tag` script of PROTOCOL.md on the store's data (stamps on the store's clock, in
/// µs): the record after, and whether the one found was corrupt.
fn stamp_tag(d: &mut Data, name: &str, soft: bool, fresh: u64, px: u64) -> (Record, bool) {
    let now = now_ms();
    let (found, corrupt) = tag_record(d, name, now);
    let mut r = found.unwrap_or(Record {
        incarnation: fresh,
        removed: 0,
        expired: 0,
    });
    let stamp = crate::wall::now_us().max(r.removed.max(r.expired) + 1);
    match soft {
        true => r.expired = stamp,
        false => r.removed = stamp,
    }
    d.set(name, r.text().into_bytes(), Some(px), now);
    (r, corrupt)
}

/// The `tag_use` script of PROTOCOL.md on the store's data.
fn use_tag(d: &mut Data, name: &str, fresh: u64, px: u64) -> (Record, bool) {
    let now = now_ms();
    let (found, corrupt) = tag_record(d, name, now);
    let r = match found {
        Some(r) => {
            if d.pttl(name, now) < i64::try_from(px).unwrap_or(i64::MAX) {
                let (slot, _) = d.keys.remove(name).expect("a live record");
                d.keys
                    .insert(name.to_owned(), (slot, now.saturating_add(px)));
            }
            r
        }
        None => {
            let r = Record {
                incarnation: fresh,
                removed: 0,
                expired: 0,
            };
            d.set(name, r.text().into_bytes(), Some(px), now);
            r
        }
    };
    (r, corrupt)
}

impl TagTier for MemoryBackend {
    fn fetch_records<'a>(&'a self, tags: &'a [String]) -> BackendFuture<'a, Vec<Option<Record>>> {
        let owned = tags.to_vec();
        let metrics = self.inner.metrics.clone();
        inc(&metrics.tag_fetches);
        self.op("tag_stamps", move |s, now| {
            let mut d = s.data();
            owned
                .iter()
                .map(|t| {
                    // MGET: another type reads as nothing.
                    let name = crate::keys::tag_key(PREFIX, t);
                    match d.live(&name, now) {
                        Some(Slot::Str(b)) => Record::parse(b).or_else(|| {
                            inc(&metrics.corrupt_entries);
                            None
                        }),
                        _ => None,
                    }
                })
                .collect()
        })
    }

    fn stamp_tags<'a>(&'a self, tags: &'a [String], soft: bool) -> BackendFuture<'a, Vec<Record>> {
        Box::pin(async move {
            let mut out = Vec::with_capacity(tags.len());
            // One operation per round trip, as Redis's pipelines: other calls run between.
            for chunk in tags.chunks(TAGS_PER_ROUND_TRIP) {
                let records = self.stamp_chunk(chunk.to_vec(), soft).await;
                match records {
                    Ok(records) => out.extend(records),
                    Err(e) if out.is_empty() => return Err(e),
                    Err(e) => {
                        let cause = match e.downcast_ref::<Error>() {
                            Some(e) => e.clone(),
                            None => Error::Protocol("the store failed"),
                        };
                        return Err(Error::TagsPartlyApplied {
                            applied: out.len(),
                            tags: tags.len(),
                            cause: Box::new(cause),
                        }
                        .into());
                    }
                }
            }
            Ok(out)
        })
    }

    fn use_tags<'a>(&'a self, tags: &'a [String]) -> BackendFuture<'a, Vec<Record>> {
        let owned = tags.to_vec();
        let (metrics, px) = (self.inner.metrics.clone(), ms(self.inner.tag_retention));
        let fresh = match crate::tags::incarnations(tags.len()) {
            Ok(fresh) => fresh,
            Err(e) => return Box::pin(async move { Err(e.into()) }),
        };
        inc(&metrics.tag_fetches);
        self.op("tag_use", move |s, _| {
            let mut d = s.data();
            owned
                .iter()
                .zip(fresh)
                .map(|(t, i)| {
                    let name = crate::keys::tag_key(PREFIX, t);
                    let (r, corrupt) = use_tag(&mut d, &name, i, px);
                    if corrupt {
                        inc(&metrics.corrupt_entries);
                    }
                    r
                })
                .collect()
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

impl MemoryBackend {
    /// One round trip of [`TagTier::stamp_tags`]: the `tag` script on each of `tags`.
    fn stamp_chunk(&self, tags: Vec<String>, soft: bool) -> BackendFuture<'_, Vec<Record>> {
        let origin = self.origin().to_owned();
        let (metrics, hub) = (self.inner.metrics.clone(), self.inner.hub.clone());
        let px = ms(self.inner.tag_retention);
        let fresh = match crate::tags::incarnations(tags.len()) {
            Ok(fresh) => fresh,
            Err(e) => return Box::pin(async move { Err(e.into()) }),
        };
        self.op("tag", move |s, _| {
            let mut out = Vec::with_capacity(tags.len());
            for (t, i) in tags.iter().zip(fresh) {
                let (record, corrupt) = {
                    let name = crate::keys::tag_key(PREFIX, t);
                    stamp_tag(&mut s.data(), &name, soft, i, px)
                };
                if corrupt {
                    inc(&metrics.corrupt_entries);
                }
                inc(&metrics.tag_invalidations);
                hub.stamps.learn(t, Some(record));
                let (kind, stamp) = match soft {
                    true => ('x', record.expired),
                    false => ('t', record.removed),
                };
                s.publish(kind, &origin, stamp, t);
                out.push(record);
            }
            out
        })
    }
}
