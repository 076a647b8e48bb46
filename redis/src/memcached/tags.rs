//! Tags on memcached: not offered. A tag's invalidation needs a record every reader checks
//! and a notice to every process, and memcached has neither scripts to keep the record
//! and the entries in step nor a bus; a tagged write or tag invalidation is refused with
//! [`Error::Unsupported`] rather than half done.

use std::time::Duration;

use herdless::backend::BackendFuture;

use super::MemcachedBackend;
use crate::error::Error;
use crate::tags::{Record, StampCache, TagTier};

/// What a tag operation answers here.
fn refused<'a, T: Send + 'a>() -> BackendFuture<'a, T> {
    Box::pin(async {
        Err(Error::Unsupported("entry tags need a Redis tier; memcached has none").into())
    })
}

impl TagTier for MemcachedBackend {
    fn fetch_records<'a>(&'a self, _tags: &'a [String]) -> BackendFuture<'a, Vec<Option<Record>>> {
        refused()
    }

    fn stamp_tags<'a>(
        &'a self,
        _tags: &'a [String],
        _soft: bool,
    ) -> BackendFuture<'a, Vec<Record>> {
        refused()
    }

    fn use_tags<'a>(&'a self, _tags: &'a [String]) -> BackendFuture<'a, Vec<Record>> {
        refused()
    }

    fn stamp_cache(&self) -> &StampCache {
        &self.inner.stamps
    }

    fn bus_generation(&self) -> u64 {
        0
    }

    /// Never: no notice of another process's change reaches this one, so no copy written
    /// here may be kept in its first tier.
    fn keeps(&self, _key: &str, _generation: u64) -> bool {
        false
    }

    fn holds_copies(&self) -> bool {
        false
    }

    fn tag_retention(&self) -> Duration {
        crate::tags::DEFAULT_TAG_RETENTION
    }
}
