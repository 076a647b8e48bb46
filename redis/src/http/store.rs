//! Where a [`CacheLayer`](super::CacheLayer) keeps responses: an in-memory
//! [`herdless::Cache`] (one process), or a [`TieredCache`] (the whole fleet: one handler
//! call per key for every process sharing the tier).

use std::future::Future;
use std::pin::Pin;

use herdless::{Error, Loaded};

use super::response::CachedResponse;
use crate::TieredCache;
use crate::codec::Codec;

/// What the cache holds for a request: a response kept for every caller, or the mark of
/// one that answered its own caller only (never stored: the callers that waited for it call
/// the handler themselves).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cached {
    /// A response every caller of the key is answered with.
    Response(CachedResponse),
    /// The response was its caller's alone (`Set-Cookie`, `Cache-Control: private`, too
    /// long, a status not kept...).
    Private,
}

/// A boxed future.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
/// The error of a response's load.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// The load of a response: the handler called, its answer made a [`Loaded`].
pub type PageLoader = Box<dyn FnOnce() -> BoxFuture<Result<Loaded<Cached>, BoxError>> + Send>;

/// A cache a [`CacheLayer`](super::CacheLayer) keeps responses in.
pub trait ResponseStore: Clone + Send + Sync + 'static {
    /// What the cache holds for `key` now, without loading (a tier that does not answer:
    /// nothing).
    fn peek(&self, key: &str) -> BoxFuture<Option<Cached>>;
    /// What the cache holds for `key`, loaded by `loader` when this caller leads (one
    /// leader per key at a time: in the process, or in the fleet for a tiered cache).
    fn get_or_load(
        &self,
        key: String,
        loader: PageLoader,
    ) -> BoxFuture<Result<Option<Cached>, Error>>;
}

impl ResponseStore for herdless::Cache<Cached> {
    fn peek(&self, key: &str) -> BoxFuture<Option<Cached>> {
        Box::pin(std::future::ready(self.get(key)))
    }

    fn get_or_load(
        &self,
        key: String,
        loader: PageLoader,
    ) -> BoxFuture<Result<Option<Cached>, Error>> {
        let cache = self.clone();
        Box::pin(async move { cache.get_or_load_with_async(&key, move |_| loader()).await })
    }
}

impl<C: Codec<Cached> + Send + Sync + 'static> ResponseStore for TieredCache<Cached, C> {
    fn peek(&self, key: &str) -> BoxFuture<Option<Cached>> {
        let (cache, key) = (self.clone(), key.to_owned());
        Box::pin(async move { cache.get_async(&key).await.ok().flatten() })
    }

    fn get_or_load(
        &self,
        key: String,
        loader: PageLoader,
    ) -> BoxFuture<Result<Option<Cached>, Error>> {
        let cache = self.clone();
        Box::pin(async move { cache.get_or_load_with_async(&key, move |_| loader()).await })
    }
}
