//! Canonical, injective cache keys: the same logical request always builds the same key, and
//! different requests never share one.
//!
//! [`KeyBuilder`](crate::KeyBuilder) turns a logical request into one string. The same logical request always
//! gives the same key, and two different requests never give the same key. [`parse`] is the
//! inverse of [`KeyBuilder::build`](crate::KeyBuilder::build). It accepts only canonical keys, so if `parse(k)` succeeds,
//! `k` is exactly the key some builder produces.
//!
//! # Format (wire protocol; the Python and Node bindings mirror it byte for byte)
//!
//! ```text
//! {namespace}:v{version}:{entity}[:{id}][?{name}={value}&{name}={value}...]
//! ```
//!
//! * `namespace`: required and non-empty, written raw. It may not contain a reserved character
//!   (see below), so the text before the first `:` ([`namespace_of`]) is exactly the namespace
//!   that was given, and the engine uses that text for `bump(namespace)` and for metrics.
//! * `version`: the schema version of the cached representation, in decimal with no leading
//!   zeros. The default is `1`.
//! * `entity`: a required, non-empty string, escaped.
//! * `id`: an optional value. If there is no id, the key has no third `:` (a listing page is
//!   `shop:v1:products?page=#2`). An id that is the empty string gives a trailing `:`.
//! * parameters: when there is at least one, `?` comes next, then `name=value` pairs joined by
//!   `&`. The pairs are sorted by escaped name in byte order. Names are non-empty and unique.
//!   An empty string value (`?q=`) is different from leaving the parameter out.
//!
//! ## Escaping
//!
//! The reserved characters are `%` `:` `?` `&` `=` `,` `#` `[` `]`, space, and the ASCII
//! control characters (U+0000 to U+001F and U+007F). Inside every string (entity, parameter
//! name, string value), each reserved character is written as `%XX`, where `XX` is the two-digit
//! uppercase hex of its byte. Every other character, non-ASCII included, is written raw as UTF-8.
//!
//! ## Values (typed: the integer `1`, the float `1.0` and the string `"1"` are three keys)
//!
//! | type | canonical text | examples |
//! |------|----------------|----------|
//! | string | the escaped text, untagged | `en`, `a%3Ab`, nothing (empty) |
//! | integer, any width | `#`, then decimal with no `+` and no leading zeros | `#42`, `#-7` |
//! | float | `#`, then the shortest round-trip scientific form (Rust `{:e}`) | `#1e0`, `#-2.5e-3` |
//! | bool / null | `#true`, `#false` / `#null` | |
//! | list (a set) | `#[`, elements sorted (byte order), deduplicated, `,`-joined, `]` | `#[#1,a]` |
//!
//! "Byte order" is the order of the UTF-8 bytes (not UTF-16 code units). Strings are compared
//! exactly as given: no Unicode normalisation, no case folding, no trimming.
//!
//! Strings escape `#`, so a value is typed exactly when it starts with `#`. A float is written as
//! the shortest decimal that round-trips: an optional `-`, one digit (non-zero unless the value
//! is 0), then `.` and the remaining digits if there are any (no trailing zeros), then `e` and
//! the exponent in decimal with no `+` and no leading zeros. So `1234.5` is `#1.2345e3`, which is
//! JavaScript's `toExponential()` without the `+`. `-0.0` is written as `0e0`. NaN and the
//! infinities are rejected. `#[]` is the empty list. A list whose only element is the empty
//! string is written `#[,]`, to tell it apart from the empty list. Lists nest up to 32 deep.
//!
//! ```
//! use herdless::KeyBuilder;
//! use herdless::key::parse;
//!
//! let key = KeyBuilder::new("shop").entity("products").param("page", 2).build().unwrap();
//! assert_eq!(key, "shop:v1:products?page=#2");
//! let parsed = parse(&key).unwrap();
//! assert_eq!((parsed.entity.as_str(), parsed.id), ("products", None));
//! ```

// `KeyBuilder`, `Param` and `KeyError` are public at the crate root, the rest of the format
// here: one path each.
pub(crate) mod builder;
pub(crate) mod error;
mod escape;
pub(crate) mod param;
mod parse;
#[cfg(test)]
mod tests;

pub use self::error::{MAX_DEPTH, MAX_VALUES};
pub(crate) use self::parse::in_namespace;
pub use self::parse::{ParsedKey, namespace_of, parse};
