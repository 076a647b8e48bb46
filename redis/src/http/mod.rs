//! HTTP: the cache key of a request ([`request_key`]) and which responses may answer
//! other callers ([`keeps`]), decided once for every language's web integrations, and
//! (feature `tower`) a [`tower`](https://docs.rs/tower) layer that caches responses of axum /
//! hyper services through herdless (`CacheLayer`).

#[cfg(feature = "tower")]
mod body;
#[cfg(feature = "tower")]
mod codec;
mod keep;
mod key;
#[cfg(feature = "tower")]
mod layer;
#[cfg(feature = "tower")]
mod response;
#[cfg(feature = "tower")]
mod store;

#[cfg(feature = "tower")]
pub use body::CacheBody;
#[cfg(feature = "tower")]
pub use codec::ResponseCodec;
pub use keep::keeps;
pub use key::{HTTP_NAMESPACE, LONG_QUERY, canonical_query, request_key};
#[cfg(feature = "tower")]
pub use layer::{CacheLayer, CacheService};
#[cfg(feature = "tower")]
pub use response::{CachedResponse, Policy};
#[cfg(feature = "tower")]
pub use store::{BoxError, BoxFuture, Cached, PageLoader, ResponseStore};
