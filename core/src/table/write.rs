//! Entries made and stored: their lifetimes (jitter, XFetch's quiet time), their weight, and
//! the writes that bypass the loader (`set`, `invalidate`, `clear`).

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::time::Duration;

use super::Table;
use super::shard::Shard;
use crate::entry::{Entry, Rare};
use crate::epoch::Namespace;
use crate::error::Error;
use crate::events::EventKind;
use crate::expiry::{LoadCode, Phase, Timing, nanos};
use crate::idle::Idle;
use crate::key::namespace_of;
use crate::loaded::{Answer, Extras, Keep, Loaded, MAX_META_BYTES};
use crate::rng::ShardRng;
use crate::store::MAX_WEIGHT;
use crate::store::{Dropped, Key};
use crate::sync::Arc;
use crate::tags::Tag;
use crate::{jitter, tags, xfetch};

impl<V: Clone> Table<V> {
    /// The weight of `key`'s `entry` against the capacity; an entry heavier than a shard's
    /// whole capacity (or than [`MAX_WEIGHT`], weights being kept in 32 bits) cannot be
    /// stored.
    pub(crate) fn weigh(&self, key: &str, entry: &Entry<V>) -> Result<u64, Error> {
        let cfg = &self.cfg;
        let weight = match (cfg.entry_overhead, &cfg.weigher, entry.value()) {
            // A byte bound: the key, the value and herdless's own bytes per entry.
            (Some(overhead), w, v) => {
                let value = match (w, v) {
                    (Some(w), Some(v)) => w(key, v),
                    _ => 0,
                };
                overhead
                    .saturating_add(key.len() as u64)
                    .saturating_add(value)
            }
            (None, Some(w), Some(v)) => w(key, v).max(1),
            _ => 1,
        };
        let max = self.shard_capacity.min(MAX_WEIGHT);
        if weight > max {
            return Err(Error::ValueTooLarge { weight, max });
        }
        Ok(weight)
    }

    /// An entry written at `now`: a value lives its (jittered) TTL, then grace, then
    /// `max_stale` for fail-safe; an absence lives its jittered `negative_ttl` only. `keep`
    /// may set a TTL, and the loader's own lifetimes and metadata (kept in the entry); `None`
    /// chooses nothing (a plain load's: no `Keep` made, moved and compared with a default).
    /// The jitter is drawn from `rng`, the storing shard's, when the table's generator says
    /// so (see [`SharedRng::per_shard`](crate::rng::SharedRng::per_shard)).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn make_entry(
        &self,
        rng: &mut ShardRng,
        value: Option<V>,
        ns: Arc<Namespace>,
        epoch: u64,
        load_nanos: u64,
        now: u64,
        keep: Option<Keep>,
        (tags, born): (Box<[Arc<Tag>]>, u64),
    ) -> Entry<V> {
        let cfg = &self.cfg;
        let extras = keep.as_ref().map(|k| &k.extras);
        // The grace (the loader's own or the cache's) and `max_stale` are not stored: the
        // entry makes its later deadlines from them (`Entry::ends`).
        let ttl = if value.is_some() {
            let own = keep.as_ref().and_then(|k| k.ttl);
            own.or(extras.and_then(|e| e.ttl)).unwrap_or(cfg.ttl)
        } else {
            // Absences are neither served stale nor kept for fail-safe: they are cheap to
            // re-check and a real write must be able to replace them quickly.
            let ttl = extras.and_then(|e| e.negative_ttl);
            ttl.unwrap_or(cfg.negative_ttl)
        };
        let ttl = jitter::jittered_nanos(ttl, cfg.jitter, || match self.rng.per_shard() {
            true => rng.unit(),
            false => self.unit(),
        });
        let timing = Timing {
            written: now,
            fresh_until: now.saturating_add(ttl),
        };
        // XFetch's reach from the delta as the entry keeps it (rounded down), so the quiet
        // time never rules out a read the exact test on that delta would let draw.
        let load_nanos = LoadCode::new(load_nanos).nanos();
        let quiet_until = match value {
            Some(_) => {
                let xfetch = timing
                    .fresh_until
                    .saturating_sub(xfetch::reach_nanos(load_nanos, cfg.beta));
                xfetch.min(self.ahead_at(&timing))
            }
            None => timing.fresh_until,
        };
        let idle = Idle::new(extras.and_then(|e| e.tti).or(cfg.tti), now);
        let rare = match keep {
            Some(keep) => Rare::of(keep.extras, tags, born, idle),
            None if tags.is_empty() && idle.is_none() => {
                // An empty slice owns no allocation: forgotten, not dropped through a call.
                core::mem::forget(tags);
                None
            }
            None => Rare::of(Extras::default(), tags, born, idle),
        };
        Entry::new(value, (ns, epoch), timing, quiet_until, load_nanos, rare)
    }

    /// Checks the tag names of `keep` (removing duplicates) against the bounds.
    pub(crate) fn check_tags(&self, keep: &mut Keep) -> Result<(), Error> {
        let Some(names) = keep.extras.tags.take() else {
            return Ok(());
        };
        let mut names = Vec::from(names);
        tags::check_all(&mut names, self.cfg.max_tags_per_entry)?;
        keep.extras.tags = Some(names.into_boxed_slice());
        Ok(())
    }

    /// Takes the (checked) tag names out of `keep` and turns them into their records.
    pub(crate) fn resolve_tags(&self, keep: &mut Keep) -> Box<[Arc<Tag>]> {
        match keep.extras.tags.take() {
            Some(names) => {
                let retired = self.tags.counts().retired;
                let tags = self.tags.resolve(&names);
                // Making room retired a tag: its entries are gone, a write.
                if self.tags.counts().retired != retired {
                    self.namespaces.writes.advance();
                }
                tags
            }
            None => Box::default(),
        }
    }

    /// Stores `entry` in `shard` in place of `key`'s old one, evicting to stay within the
    /// shard's capacity; what it replaced or evicted goes to `dropped`, to be dropped
    /// outside the lock. A new key the admission filter refuses is not stored (it goes to
    /// `dropped` and `admission_rejections` counts it); whoever asked for it was answered
    /// or is told `Ok` all the same. `vacant`: the shard is known to hold no entry of `key`
    /// (a load begun on a miss that is still the key's flight), so none is searched for.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn store(
        &self,
        shard: &mut Shard<V>,
        hash: u64,
        key: Key,
        entry: Entry<V>,
        weight: u64,
        now: u64,
        dropped: &mut Dropped<V>,
        vacant: bool,
    ) {
        // `insert` takes out `key`'s old entry itself, into `dropped` with the evicted ones.
        let on_evict = |key: &str, e: &Entry<V>| {
            e.ns.counters().evictions.inc();
            // No listener (most caches): no event, so no phase to tell its kind.
            if !self.listening() {
                return;
            }
            // SIEVE takes a dead entry first: that one expired, nothing pushed it out.
            let kind = match e.phase(now, &self.life) {
                Phase::Dead => EventKind::Expired,
                _ => EventKind::Evicted,
            };
            self.emit(&e.ns, kind, key, None);
        };
        let stored = shard
            .store
            .insert_into(hash, key, entry, weight, now, dropped, on_evict, vacant);
        // A refused entry is the last one `insert` put in `dropped`.
        if !stored {
            if let Some(refused) = dropped.last() {
                refused.ns.counters().admission_rejections.inc();
            }
        }
        // Advanced even on a refusal: a `set` still superseded the key's load, and a
        // generation that moves without a change only costs a copy a re-read.
        self.namespaces.writes.advance();
    }

    /// `set`, `set_with_ttl` and `set_absent`: stores now, and keeps a load of `key` already
    /// running from overwriting it.
    pub(crate) fn write(
        &self,
        key: &str,
        value: Option<V>,
        ttl: Option<Duration>,
    ) -> Result<(), Error> {
        let keep = Keep {
            ttl,
            ..Keep::default()
        };
        self.write_keep(key, value, keep, None)
    }

    /// [`write`](Self::write) with the lifetimes, metadata and tags a loader chose (a value
    /// read from a shared tier keeps them).
    pub(crate) fn write_keep(
        &self,
        key: &str,
        value: Option<V>,
        mut keep: Keep,
        born: Option<u64>,
    ) -> Result<(), Error> {
        self.check_key(key)?;
        if keep.ttl == Some(Duration::ZERO) {
            return Err(Error::ZeroTtl);
        }
        self.check_tags(&mut keep)?;
        let born = born.unwrap_or_else(|| self.tags.now());
        let tags = self.resolve_tags(&mut keep);
        if tags::removed_since(&tags, born) {
            // A shared tier's entry older than an invalidation of one of its tags.
            return Ok(());
        }
        let hash = self.hash(key);
        let ns = self.namespaces.get(namespace_of(key));
        let n = nanos(self.now());
        let mut dropped = Dropped::new();
        {
            let mut shard = self.shard(hash).write();
            if let Some(f) = shard.flight(hash, key) {
                f.supersede();
            }
            // Keep the measured load time so XFetch still knows how expensive the key is.
            let load_nanos = shard
                .store
                .get(hash, key)
                .map_or(0, |o| o.entry.load_nanos());
            // Not `ns.epoch()`: `ns` may have been retired since it was looked up.
            let (ns, epoch) = self.namespaces.live(ns);
            let entry = self.make_entry(
                &mut shard.rng,
                value,
                ns,
                epoch,
                load_nanos,
                n,
                Some(keep),
                (tags, born),
            );
            let weight = self.weigh(key, &entry)?;
            self.store(
                &mut shard,
                hash,
                Key::new(key),
                entry,
                weight,
                n,
                &mut dropped,
                false,
            );
        }
        drop(dropped);
        self.deliver_events();
        self.detect(n);
        Ok(())
    }

    /// `set_with`: a write with a loader's choices.
    pub(crate) fn write_loaded(&self, key: &str, loaded: Loaded<V>) -> Result<(), Error> {
        let Loaded {
            answer,
            extras,
            store,
        } = loaded;
        let value = match answer {
            Answer::Value(v) => v,
            Answer::NotModified => return Err(Error::NoPrevious),
        };
        if let Some(len) = extras.meta.as_ref().map(|m| m.len()) {
            if len > MAX_META_BYTES {
                let max = MAX_META_BYTES;
                return Err(Error::MetaTooLong { len, max });
            }
        }
        let mut keep = Keep {
            extras,
            ..Keep::default()
        };
        if !store {
            return self.check_tags(&mut keep);
        }
        self.write_keep(key, value, keep, None)
    }

    /// `invalidate_tags` (`hard`) and `expire_tags`: every tag checked, then all stamped
    /// with one tick.
    pub(crate) fn stamp_tags<T: AsRef<str>>(
        &self,
        names: impl IntoIterator<Item = T>,
        hard: bool,
    ) -> Result<(), Error> {
        let names: Vec<T> = names.into_iter().collect();
        let names: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
        for name in &names {
            tags::check(name)?;
        }
        self.tags.stamp(&names, hard);
        self.namespaces.writes.advance();
        Ok(())
    }

    /// Removes `key`'s entry, and keeps a load of it already running from writing back its
    /// (possibly older) result. Whether an entry was removed.
    pub(crate) fn invalidate(&self, key: &str) -> Result<bool, Error> {
        self.check_key(key)?;
        let hash = self.hash(key);
        let removed = {
            let mut shard = self.shard(hash).write();
            if let Some(f) = shard.flight(hash, key) {
                f.supersede();
            }
            shard.store.remove(hash, key)
        };
        self.namespaces.writes.advance();
        Ok(removed.is_some())
    }

    /// Drops every entry whose value (`None`: a cached absence) `keep` refuses, and marks
    /// every load in progress as superseded (its result is not stored). A scan of the whole
    /// table, shard by shard.
    pub(crate) fn retain(&self, keep: impl Fn(Option<&V>) -> bool) {
        for shard in self.shards.iter() {
            let dropped = {
                let mut shard = shard.write();
                for f in shard.flights.iter() {
                    f.supersede();
                }
                shard.store.retain(&keep)
            };
            drop(dropped);
        }
        self.namespaces.writes.advance();
    }

    /// Drops every entry and supersedes every load in progress.
    pub(crate) fn clear(&self) {
        for shard in self.shards.iter() {
            let old = {
                let mut shard = shard.write();
                for f in shard.flights.iter() {
                    f.supersede();
                }
                shard.store.take()
            };
            drop(old);
        }
        self.namespaces.writes.advance();
    }
}
