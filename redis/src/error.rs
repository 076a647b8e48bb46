//! Errors of the Redis tier. At the [`Backend`](herdless::backend::Backend) seam they travel inside
//! [`herdless::LoadError`] (downcast to [`Error`] to inspect them); the tiered cache answers
//! [`herdless::Error`], whose `Backend` variant carries them.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// What went wrong talking to Redis.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Error {
    /// Redis answered with an error, or the connection failed.
    Redis(Arc<redis::RedisError>),
    /// An operation took longer than the configured operation timeout.
    Timeout {
        /// The operation.
        op: &'static str,
        /// The timeout.
        after: Duration,
    },
    /// A reply of an unexpected shape (a script of another protocol version?).
    Protocol(&'static str),
    /// The blocking API was called on one of the backend's own runtime threads, where it
    /// would wait for itself. Use the async API there.
    BlockingInRuntime,
    /// An invalid option.
    Config(String),
    /// The OS random source failed (lock tokens must be unguessable, so there is no fallback).
    Random(String),
    /// An entry larger than `max_entry_bytes` was not written.
    EntryTooLarge {
        /// Size of the encoded entry, in bytes.
        bytes: usize,
        /// The configured limit.
        max: usize,
    },
    /// The subscription connection is down (its resubscription not yet confirmed): what a
    /// read would hand the L1 could not hear of later changes, so the read is refused.
    Unsubscribed,
    /// A tag invalidation sent in several round trips failed after some of them: the first
    /// `applied` of its `tags` were invalidated (or expired) for the fleet, the others are
    /// unknown (the failed round trip) or not sent. Invalidating them again is harmless.
    TagsPartlyApplied {
        /// Tags invalidated for the fleet before the failure.
        applied: usize,
        /// Tags of the call.
        tags: usize,
        /// Why the rest failed.
        cause: Box<Error>,
    },
    /// The backend was closed ([`RedisBackend::close`](crate::RedisBackend::close)): its
    /// connections and runtime are gone.
    Closed,
    /// memcached answered with an error, or the connection failed (the client's message).
    Memcached(Arc<String>),
    /// The shared tier cannot do this (entry tags on memcached): refused, nothing done.
    Unsupported(&'static str),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Redis(e) => write!(f, "redis: {e}"),
            Self::Timeout { op, after } => write!(f, "redis {op} timed out after {after:?}"),
            Self::Protocol(what) => write!(f, "unexpected redis reply: {what}"),
            Self::BlockingInRuntime => f.write_str(
                "the blocking herdless-redis API was called on the backend's own runtime thread; use the async API",
            ),
            Self::Config(why) => write!(f, "invalid herdless-redis option: {why}"),
            Self::Random(why) => write!(f, "OS random source failed: {why}"),
            Self::EntryTooLarge { bytes, max } => write!(
                f,
                "the entry is {bytes} bytes; `max_entry_bytes` allows {max}: not written"
            ),
            Self::Unsubscribed => f.write_str(
                "the redis subscription is down: a copy read now could not be kept coherent",
            ),
            Self::TagsPartlyApplied {
                applied,
                tags,
                cause,
            } => write!(
                f,
                "{applied} of {tags} tags were invalidated for the fleet, then: {cause}"
            ),
            Self::Closed => f.write_str("the shared tier was closed"),
            Self::Memcached(why) => write!(f, "memcached: {why}"),
            Self::Unsupported(what) => write!(f, "not supported by this shared tier: {what}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Redis(e) => Some(&**e),
            Self::TagsPartlyApplied { cause, .. } => Some(&**cause),
            _ => None,
        }
    }
}

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        Self::Redis(Arc::new(e))
    }
}

impl From<Error> for herdless::LoadError {
    fn from(e: Error) -> Self {
        herdless::LoadError::new(e)
    }
}

impl From<Error> for herdless::Error {
    fn from(e: Error) -> Self {
        herdless::Error::Backend(e.into())
    }
}
