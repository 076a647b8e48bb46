//! What can go wrong with a key, and the bounds that keep hostile input cheap.

use alloc::string::String;
use core::fmt;

/// How deeply lists may nest in a key, both when building and when parsing. A binding that
/// turns its language's values into [`Param`](crate::Param)s checks the depth before it descends, so a
/// hostile nesting (or a cycle) fails cleanly instead of overflowing the stack.
pub const MAX_DEPTH: usize = 32;

/// The most values one key value may hold, counting every list item at every depth. A
/// binding counts while it converts, so lists that share sub-lists (`a = [b, b]`,
/// `b = [c, c]`, ...) cannot make it build an exponentially large value.
pub const MAX_VALUES: usize = 65_536;

/// Why a key could not be built or parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyError {
    /// The namespace is empty.
    EmptyNamespace,
    /// The namespace contains a reserved character (`:`, `%`, space, ...).
    InvalidNamespace {
        /// The namespace as given.
        namespace: String,
    },
    /// The entity was not set, or is empty.
    EmptyEntity,
    /// A parameter has an empty name.
    EmptyParamName,
    /// Two parameters have the same name.
    DuplicateParam {
        /// The repeated name.
        name: String,
    },
    /// A float is NaN or infinite.
    InvalidFloat,
    /// Lists are nested more than [`MAX_DEPTH`] deep.
    TooDeep,
    /// A key value holds more than [`MAX_VALUES`] values.
    TooManyValues,
    /// [`parse`](crate::key::parse) was given text that is not a canonical key.
    Malformed {
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::EmptyNamespace => f.write_str("cache key namespace is empty"),
            KeyError::InvalidNamespace { namespace } => write!(
                f,
                "cache key namespace {namespace:?} contains a reserved character"
            ),
            KeyError::EmptyEntity => f.write_str("cache key entity is missing or empty"),
            KeyError::EmptyParamName => f.write_str("cache key parameter has an empty name"),
            KeyError::DuplicateParam { name } => {
                write!(f, "cache key parameter {name:?} is given more than once")
            }
            KeyError::InvalidFloat => f.write_str("cache key value is a NaN or infinite float"),
            KeyError::TooDeep => write!(f, "cache key lists are nested more than {MAX_DEPTH} deep"),
            KeyError::TooManyValues => {
                write!(f, "a cache key value holds more than {MAX_VALUES} values")
            }
            KeyError::Malformed { reason } => write!(f, "malformed cache key: {reason}"),
        }
    }
}

impl core::error::Error for KeyError {}
