//! Typed errors. [`Error`] is what a call answers; [`ConfigError`] is what a bad option
//! answers when the cache is built. Both are `Clone`, so every waiter of one failed load gets
//! the same error, the loader's own error included (shared behind an `Arc`).

use alloc::boxed::Box;
use alloc::string::String;
use core::fmt;
use core::time::Duration;

// Never loom's: an immutable error needs no model checking, and loom's Arc cannot hold a
// `dyn Error`.
use crate::sync::unchecked::Arc;

/// The error a loader returned, shared by every waiter of that load.
///
/// The original error is kept, so a binding can re-raise it in its own language and a Rust
/// caller can downcast it.
#[derive(Clone)]
pub struct LoadError(Arc<dyn core::error::Error + Send + Sync + 'static>);

impl LoadError {
    /// Wraps a loader's error.
    pub fn new<E: core::error::Error + Send + Sync + 'static>(error: E) -> Self {
        Self(Arc::new(error))
    }

    /// Wraps an already boxed error.
    pub fn from_boxed(error: Box<dyn core::error::Error + Send + Sync + 'static>) -> Self {
        Self(Arc::from(error))
    }

    /// The original error.
    pub fn get(&self) -> &(dyn core::error::Error + Send + Sync + 'static) {
        &*self.0
    }

    /// The original error, if it is an `E`.
    pub fn downcast_ref<E: core::error::Error + 'static>(&self) -> Option<&E> {
        self.0.downcast_ref::<E>()
    }
}

impl fmt::Debug for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

/// What went wrong with a cache call.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Error {
    /// The key is empty.
    EmptyKey,
    /// The key is longer than the configured `max_key_len`.
    KeyTooLong {
        /// Length of the key, in bytes.
        len: usize,
        /// The configured limit, in bytes.
        max: usize,
    },
    /// A per-call TTL of zero was given.
    ZeroTtl,
    /// The value weighs more than the whole capacity of its shard and cannot be stored.
    ValueTooLarge {
        /// Weight the weigher gave the value.
        weight: u64,
        /// The most one entry may weigh.
        max: u64,
    },
    /// A waiter waited `wait_timeout` for a load and had no stale value to fall back to.
    WaitTimeout {
        /// How long it waited.
        waited: Duration,
    },
    /// The loader ran past its hard timeout; its result, if any, is discarded.
    LoadTimeout {
        /// The hard timeout that was exceeded.
        after: Duration,
    },
    /// The loader failed; every waiter of that load receives the same error.
    Load(LoadError),
    /// The loader panicked; every waiter of that load receives this error, and the next call
    /// starts a new load.
    LoaderPanicked {
        /// The panic message, when it was a string.
        message: Option<String>,
    },
    /// Too many different keys are loading at once (`max_flights`): a flood of distinct keys
    /// is refused instead of growing memory without bound.
    TooManyFlights {
        /// The configured limit.
        max: usize,
    },
    /// The shared tier (e.g. Redis) failed and nothing could be served from memory.
    Backend(LoadError),
    /// A loader's [`Loaded::meta`](crate::Loaded::meta) is longer than
    /// [`MAX_META_BYTES`](crate::MAX_META_BYTES): the load fails (nothing is stored).
    MetaTooLong {
        /// Its length, in bytes.
        len: usize,
        /// The limit, in bytes.
        max: usize,
    },
    /// A loader answered [`Loaded::not_modified`](crate::Loaded::not_modified) but there
    /// was no previous value to keep: the load fails.
    NoPrevious,
    /// A per-call TTL longer than the tier can keep an entry.
    TtlTooLong {
        /// The TTL asked for.
        ttl: Duration,
        /// The longest the tier accepts.
        max: Duration,
    },
    /// A tag is empty.
    EmptyTag,
    /// A tag is longer than [`MAX_TAG_BYTES`](crate::MAX_TAG_BYTES).
    TagTooLong {
        /// Its length, in bytes.
        len: usize,
        /// The limit, in bytes.
        max: usize,
    },
    /// An entry was given more distinct tags than
    /// [`Builder::max_tags_per_entry`](crate::Builder::max_tags_per_entry), or one call that
    /// invalidates tags more than its bound (a shared tier's, e.g. herdless-redis's
    /// `MAX_TAGS_PER_INVALIDATION`): nothing was stored or invalidated.
    TooManyTags {
        /// How many tags it was given, duplicates included (more than `max` distinct).
        count: usize,
        /// The limit.
        max: usize,
    },
    /// The cache was closed (a binding's `close()`, `herdless_redis`'s `TwoTier::close`):
    /// it answers no more calls, and a call in flight that still needed it answers this.
    Closed,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::EmptyKey => f.write_str("the cache key is empty"),
            Error::KeyTooLong { len, max } => {
                write!(f, "the cache key is {len} bytes long; the limit is {max}")
            }
            Error::ZeroTtl => f.write_str("a TTL must be positive"),
            Error::ValueTooLarge { weight, max } => {
                write!(
                    f,
                    "the value weighs {weight}; one entry may weigh at most {max}"
                )
            }
            Error::WaitTimeout { waited } => write!(
                f,
                "gave up waiting for a load after {waited:?} and no stale value was available"
            ),
            Error::LoadTimeout { after } => {
                write!(f, "the loader exceeded its hard timeout of {after:?}")
            }
            Error::Load(e) => write!(f, "the loader failed: {e}"),
            Error::LoaderPanicked { message: Some(m) } => write!(f, "the loader panicked: {m}"),
            Error::LoaderPanicked { message: None } => f.write_str("the loader panicked"),
            Error::TooManyFlights { max } => {
                write!(
                    f,
                    "more than {max} keys are loading at once; request refused"
                )
            }
            Error::Backend(e) => write!(f, "the shared cache tier failed: {e}"),
            Error::MetaTooLong { len, max } => {
                write!(
                    f,
                    "the loader's metadata is {len} bytes long; the limit is {max}"
                )
            }
            Error::NoPrevious => f.write_str(
                "the loader answered 'not modified' but there was no previous value to keep",
            ),
            Error::TtlTooLong { ttl, max } => {
                write!(
                    f,
                    "a TTL of {ttl:?} is longer than the {max:?} the tier can keep"
                )
            }
            Error::EmptyTag => f.write_str("a tag is empty"),
            Error::TagTooLong { len, max } => {
                write!(f, "a tag is {len} bytes long; the limit is {max}")
            }
            Error::TooManyTags { count, max } => {
                write!(
                    f,
                    "{count} tags given, more than {max} distinct; the limit is {max}"
                )
            }
            Error::Closed => f.write_str("the cache is closed"),
        }
    }
}

impl core::error::Error for Error {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Error::Load(e) | Error::Backend(e) => Some(e.get()),
            _ => None,
        }
    }
}

/// A cache option that was out of range when the cache was built.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ConfigError {
    /// A duration that must be positive was zero.
    ZeroDuration {
        /// The option's name.
        option: &'static str,
    },
    /// `jitter` must be in [0, 1).
    JitterOutOfRange(f64),
    /// `beta` must be finite and >= 0.
    InvalidBeta(f64),
    /// A count that must be positive was zero.
    Zero {
        /// The option's name.
        option: &'static str,
    },
    /// Two options contradict each other.
    Inconsistent {
        /// What is wrong, in words.
        reason: &'static str,
    },
    /// A duration longer than it can be honoured (e.g. than Redis can keep a key).
    TooLong {
        /// The option's name.
        option: &'static str,
        /// The longest accepted.
        max: Duration,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::ZeroDuration { option } => write!(f, "`{option}` must be positive"),
            ConfigError::JitterOutOfRange(j) => {
                write!(f, "`jitter` must be in [0, 1), got {j}")
            }
            ConfigError::InvalidBeta(b) => write!(f, "`beta` must be finite and >= 0, got {b}"),
            ConfigError::Zero { option } => write!(f, "`{option}` must be at least 1"),
            ConfigError::Inconsistent { reason } => f.write_str(reason),
            ConfigError::TooLong { option, max } => {
                write!(f, "`{option}` must be at most {max:?}")
            }
        }
    }
}

impl core::error::Error for ConfigError {}

/// The error types a loader may return: anything that converts into a boxed error.
pub(crate) fn load_error<E: Into<Box<dyn core::error::Error + Send + Sync>>>(e: E) -> LoadError {
    LoadError::from_boxed(e.into())
}

/// The message of a panic payload, when it is a string.
#[cfg(feature = "std")]
pub(crate) fn panic_message(payload: &(dyn core::any::Any + Send)) -> Option<String> {
    payload
        .downcast_ref::<&str>()
        .map(|s| String::from(*s))
        .or_else(|| payload.downcast_ref::<String>().cloned())
}
