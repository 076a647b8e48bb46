//! Tags of a [`TieredCache`]: writes that carry them and their invalidation for the whole
//! fleet, as the fleet engine decides them ([`TwoTier::set_with`](crate::TwoTier::set_with),
//! [`TwoTier::invalidate_tags`](crate::TwoTier::invalidate_tags)). A loader attaches tags
//! through [`Loaded::tags`] in [`get_or_load_with`](TieredCache::get_or_load_with).

use herdless::{Error, Loaded};

use super::TieredCache;
use crate::codec::Codec;
use crate::runtime::block_on;

impl<V, C> TieredCache<V, C>
where
    V: Clone + Send + Sync + 'static,
    C: Codec<V> + 'static,
{
    /// Stores a value with a loader's choices (its ttl, grace, metadata and
    /// [tags](Loaded::tags)) for the whole fleet, as [`set_async`](Self::set_async) does.
    ///
    /// ```no_run
    /// # use herdless_redis::{Json, RedisBackend, TieredCache};
    /// # let backend = RedisBackend::builder("redis://127.0.0.1:6379").build()?;
    /// # let cache: TieredCache<String, Json> = TieredCache::builder(backend, Json).build()?;
    /// use herdless::Loaded;
    /// let page = Loaded::value("<h1>Lamp</h1>".to_string()).tags(["product:42", "seller:7"]);
    /// cache.set_with("page:/lamp", page)?;
    /// cache.invalidate_tag("seller:7")?; // every process drops the page
    /// assert_eq!(cache.get("page:/lamp")?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn set_with_async(&self, key: &str, loaded: Loaded<V>) -> Result<(), Error> {
        self.tt.set_with(key, loaded, &*self.codec)?.await
    }

    /// [`set_with_async`](Self::set_with_async), blocking.
    pub fn set_with(&self, key: &str, loaded: Loaded<V>) -> Result<(), Error> {
        block_on(self.set_with_async(key, loaded))?
    }

    /// Invalidates every entry carrying `tag` in the whole fleet, in O(1) (the default,
    /// hard: nothing older is served again, not even as fail-safe; a load that began
    /// before does not store). On a Redis error this process's copies are dropped anyway
    /// and the error returned.
    pub async fn invalidate_tag_async(&self, tag: &str) -> Result<(), Error> {
        self.tt.invalidate_tag(tag)?.await
    }

    /// [`invalidate_tag_async`](Self::invalidate_tag_async), blocking.
    pub fn invalidate_tag(&self, tag: &str) -> Result<(), Error> {
        block_on(self.invalidate_tag_async(tag))?
    }

    /// [`invalidate_tag_async`](Self::invalidate_tag_async) of several tags: one round
    /// trip per 256 tags on a single server, each bounded by itself; at most
    /// [`MAX_TAGS_PER_INVALIDATION`](crate::tags::MAX_TAGS_PER_INVALIDATION) distinct tags
    /// (more are refused with [`Error::TooManyTags`](herdless::Error::TooManyTags), nothing
    /// invalidated).
    pub async fn invalidate_tags_async(&self, tags: &[&str]) -> Result<(), Error> {
        self.tt.invalidate_tags(tags)?.await
    }

    /// [`invalidate_tags_async`](Self::invalidate_tags_async), blocking.
    pub fn invalidate_tags(&self, tags: &[&str]) -> Result<(), Error> {
        block_on(self.invalidate_tags_async(tags))?
    }

    /// Expires every entry carrying `tag` in the whole fleet, in O(1) (soft: served stale
    /// within grace while one refresh runs, kept as a fail-safe value).
    pub async fn expire_tag_async(&self, tag: &str) -> Result<(), Error> {
        self.tt.expire_tag(tag)?.await
    }

    /// [`expire_tag_async`](Self::expire_tag_async), blocking.
    pub fn expire_tag(&self, tag: &str) -> Result<(), Error> {
        block_on(self.expire_tag_async(tag))?
    }

    /// [`expire_tag_async`](Self::expire_tag_async) of several tags.
    pub async fn expire_tags_async(&self, tags: &[&str]) -> Result<(), Error> {
        self.tt.expire_tags(tags)?.await
    }

    /// [`expire_tags_async`](Self::expire_tags_async), blocking.
    pub fn expire_tags(&self, tags: &[&str]) -> Result<(), Error> {
        block_on(self.expire_tags_async(tags))?
    }
}
