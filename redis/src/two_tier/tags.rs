//! Tags in the fleet engine: writes that carry them, and their invalidation for every
//! process (PROTOCOL.md, "Tags"). The L1 keeps an entry's tags too, so an invalidation
//! (here, or told by a notification) drops its copies in O(1).

use std::time::Duration;

use herdless::backend::WriteOutcome;
use herdless::driver::{self, SharedEntry};
use herdless::{Error, LoadError, Loaded};

use super::{Host, Pending, TwoTier, Versioned, fresh_left};
use crate::lifetimes::Own;
use crate::tags::MAX_TAGS_PER_INVALIDATION;

impl<V: Clone + Send + Sync + 'static> TwoTier<V> {
    /// The tags of a loader's answer or a write, checked as the L1 checks them (each 1 to
    /// [`herdless::MAX_TAG_BYTES`] bytes, at most `max_tags_per_entry`), without
    /// duplicates: what the shared entry carries.
    pub(crate) fn tags_of(&self, loaded: &Loaded<V>) -> Result<Vec<String>, Error> {
        let Some(tags) = loaded.tags_set() else {
            return Ok(Vec::new());
        };
        let mut tags = tags.to_vec();
        let max = self
            .l1()
            .options()
            .max_tags_per_entry
            .min(crate::wire::MAX_TAGS);
        driver::check_tags(&mut tags, max)?;
        Ok(tags.into_iter().map(String::from).collect())
    }

    /// Stores a value with the choices a loader has ([`Loaded`]: its own ttl, grace,
    /// negative ttl, metadata and [tags](Loaded::tags)) in this process and, with a shared
    /// tier, for the whole fleet, as [`set`](Self::set) does: a load already running
    /// anywhere will not overwrite it, the other processes drop their copies, and a tier
    /// that cannot be reached answers [`Error::Backend`] after the L1 copy is dropped.
    /// `Loaded::no_cache` writes nothing.
    ///
    /// Errors at once (nothing written): a bad key, a zero ttl, bad tags
    /// ([`Error::EmptyTag`], [`Error::TagTooLong`], [`Error::TooManyTags`]), metadata
    /// over [`herdless::MAX_META_BYTES`], "not modified" ([`Error::NoPrevious`]: a write has
    /// no previous value), or a value the host's codec cannot encode.
    pub fn set_with(
        &self,
        key: &str,
        loaded: Loaded<V>,
        host: &dyn Host<V>,
    ) -> Result<Pending<Result<(), Error>>, Error> {
        self.check_open()?;
        let l1 = self.l1();
        let Some(life) = self.shared_tier().copied() else {
            return Ok(Pending::ready(
                l1.set_with(key, loaded.map(Versioned::local)),
            ));
        };
        self.check_key(key)?;
        self.check_ttl(loaded.ttl_set())?;
        if loaded.is_not_modified() {
            return Err(Error::NoPrevious);
        }
        let len = loaded.meta_set().map_or(0, str::len);
        if len > herdless::MAX_META_BYTES {
            let max = herdless::MAX_META_BYTES;
            return Err(Error::MetaTooLong { len, max });
        }
        let tags = self.tags_of(&loaded)?;
        if !loaded.is_cached() {
            return Ok(Pending::ready(Ok(())));
        }
        let value: Option<V> = loaded.found().flatten().cloned();
        let bytes = match &value {
            Some(v) => Some(host.encode(v).map_err(|e| Error::Load(LoadError::new(e)))?),
            None => None,
        };
        let own = Own::of(&loaded);
        let (mut entry, _) = life.entry_own(bytes, Duration::ZERO, 0, None, &own);
        entry.tags = tags;
        let (fleet, tt, key) = (self.fleet().expect("shared"), self.clone(), key.to_owned());
        // Its life capped by the tags' retention (as the fleet keeps it).
        fleet.date(&mut entry, std::time::Instant::now());
        // The L1's tag clock before the tier is asked: an invalidation of a tag heard of
        // after it (it may have come after the write's marks, for the fleet a removal)
        // keeps the copy out of this L1, as out of every other process's.
        let born = driver::tag_clock(l1);
        Ok(Pending::new(async move {
            let (tags, tti) = (entry.tags.clone(), entry.tti);
            let fresh_until_ms = entry.fresh_until_ms;
            let generation = fleet.bus_generation();
            let outcome = fleet.set(&key, entry).await;
            match fleet.heard(&key, generation, outcome) {
                Ok(WriteOutcome::Written { version, .. }) => {
                    let shared = SharedEntry {
                        fresh: fresh_left(fresh_until_ms).max(Duration::from_nanos(1)),
                        ttl: own.ttl,
                        tti,
                        meta: own.meta.as_deref(),
                        tags: &tags,
                        born: Some(born),
                    };
                    let value = value.map(|v| Versioned::shared(v, version));
                    driver::set_shared_entry(tt.l1(), &key, value, shared)
                }
                // A newer write won the race in the tier (what every process reads), or this
                // one is unheard here: no copy is kept.
                Ok(WriteOutcome::Superseded) => {
                    let _ = tt.l1().invalidate(&key);
                    Ok(())
                }
                Err(e) => {
                    let _ = tt.l1().invalidate(&key);
                    Err(tt.or_closed(e))
                }
            }
        }))
    }

    /// Invalidates every entry carrying `tag`, in this process and, with a shared tier, in
    /// the whole fleet, in O(1): each becomes a miss for every reader, is never served
    /// again (not even as a fail-safe value), and a load that began before this call and
    /// answers with `tag` does not store its value. The default, because after a write
    /// nobody expects an older value; [`expire_tag`](Self::expire_tag) keeps stale copies.
    /// A bad tag is refused at once; a tier that cannot be reached answers
    /// [`Error::Backend`], after this process's L1 applied the invalidation.
    pub fn invalidate_tag(&self, tag: &str) -> Result<Pending<Result<(), Error>>, Error> {
        self.invalidate_tags([tag])
    }

    /// [`invalidate_tag`](Self::invalidate_tag) of several tags: one round trip per
    /// [`TAGS_PER_ROUND_TRIP`](crate::tags::TAGS_PER_ROUND_TRIP) tags on a single server
    /// (per slot group on a Cluster), each bounded by itself, so the cache's other calls go
    /// out between them. Every tag is checked before any is invalidated, and a list of more
    /// than [`crate::tags::MAX_TAGS_PER_INVALIDATION`] distinct
    /// tags is refused ([`Error::TooManyTags`]) with nothing invalidated. A tier that fails
    /// after some round trips answers [`Error::Backend`] saying how many were applied
    /// ([`crate::Error::TagsPartlyApplied`]); invalidating again is harmless.
    pub fn invalidate_tags<T: AsRef<str>>(
        &self,
        tags: impl IntoIterator<Item = T>,
    ) -> Result<Pending<Result<(), Error>>, Error> {
        self.stamp_tags(tags, false)
    }

    /// Expires every entry carrying `tag`, in this process and, with a shared tier, in
    /// the whole fleet, in O(1): each is treated as past its fresh time (served stale
    /// within its grace while one refresh runs; without grace, kept as the fail-safe value
    /// of its next load). Errors as [`invalidate_tag`](Self::invalidate_tag).
    pub fn expire_tag(&self, tag: &str) -> Result<Pending<Result<(), Error>>, Error> {
        self.expire_tags([tag])
    }

    /// [`expire_tag`](Self::expire_tag) of several tags, as
    /// [`invalidate_tags`](Self::invalidate_tags).
    pub fn expire_tags<T: AsRef<str>>(
        &self,
        tags: impl IntoIterator<Item = T>,
    ) -> Result<Pending<Result<(), Error>>, Error> {
        self.stamp_tags(tags, true)
    }

    fn stamp_tags<T: AsRef<str>>(
        &self,
        tags: impl IntoIterator<Item = T>,
        soft: bool,
    ) -> Result<Pending<Result<(), Error>>, Error> {
        self.check_open()?;
        let mut names: Vec<Box<str>> = tags.into_iter().map(|t| t.as_ref().into()).collect();
        // Checked (and deduplicated) before anything is invalidated anywhere; the bound
        // keeps one call's work (a script, a notice, a record learned per tag) in scale.
        driver::check_tags(&mut names, MAX_TAGS_PER_INVALIDATION)?;
        let l1 = self.l1();
        match soft {
            true => l1.expire_tags(&names)?,
            false => l1.invalidate_tags(&names)?,
        }
        let Some(fleet) = self.fleet() else {
            return Ok(Pending::ready(Ok(())));
        };
        let names: Vec<String> = names.into_iter().map(String::from).collect();
        let tt = self.clone();
        Ok(Pending::new(async move {
            let r = fleet.invalidate_tags(&names, soft).await;
            r.map(|_| ()).map_err(|e| tt.or_closed(e))
        }))
    }
}
