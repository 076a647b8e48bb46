//! What the fleet engine needs from the language that drives it: its codec, and a way to
//! tell its user something once.

use crate::codec::{Codec, CodecError};

/// The driver's side of the two-tier engine, called on the driver's own thread (with the
/// GIL held in Python, on the event loop in Node), never from the backend's runtime.
///
/// Every [`Codec`] is a host that says nothing; a binding implements it over its language's
/// codec (JSON, bytes, the user's) and its logger.
pub trait Host<V> {
    /// The bytes of `value`.
    fn encode(&self, value: &V) -> Result<Vec<u8>, CodecError>;
    /// The value of `bytes`.
    fn decode(&self, bytes: &[u8]) -> Result<V, CodecError>;
    /// Tells the user about something that needs their attention (once per cause: the
    /// engine decides when).
    fn warn(&self, warning: &Warning<'_>) {
        let _ = warning;
    }
}

impl<V, C: Codec<V> + ?Sized> Host<V> for C {
    fn encode(&self, value: &V) -> Result<Vec<u8>, CodecError> {
        Codec::encode(self, value)
    }
    fn decode(&self, bytes: &[u8]) -> Result<V, CodecError> {
        Codec::decode(self, bytes)
    }
}

/// Something the user of a cache should know, told through [`Host::warn`].
#[derive(Debug)]
#[non_exhaustive]
pub enum Warning<'a> {
    /// A loaded value of `namespace` cannot be encoded by the cache's codec: it is served
    /// in this process only, and the fleet lock was handed back with a "load locally"
    /// mark so that the other processes load for themselves at once instead of waiting.
    /// Told once per namespace; every such load is counted in
    /// [`RedisMetrics::unshareable_values`](crate::RedisMetrics::unshareable_values).
    Unshareable {
        /// The key whose value could not be encoded (the first of its namespace).
        key: &'a str,
        /// Why.
        error: &'a CodecError,
    },
}

impl std::fmt::Display for Warning<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Warning::Unshareable { key, error } => write!(
                f,
                "the value of {key:?} cannot be encoded by the cache's codec ({error}); \
                 values of its namespace that cannot be encoded are served in their process \
                 only, not shared through Redis (warned once per namespace)"
            ),
        }
    }
}
