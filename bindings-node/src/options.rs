//! `new Cache(options)`: the core's options in Node's idiom (durations in milliseconds),
//! each checked with a message that names it: a wrong type is a `TypeError`, a value out of
//! range a `RangeError`, both with code `HERDLESS_INVALID_OPTION`.
//!
//! [`shape`] declares them for index.d.ts, [`parse`] reads them (with [`detector`] and
//! [`front`], through the checked readers of [`read`]).

pub mod detector;
pub mod front;
pub mod parse;
pub mod read;
pub mod shape;

pub(crate) use self::parse::{Parsed, parse};
pub(crate) use self::read::{known_fields, timeout, tti, ttl};
