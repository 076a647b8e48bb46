//! JS errors: the pending exception, throwing, and the binding's own errors (an `Error`,
//! `TypeError` or `RangeError` with a stable `code`).

use std::ptr;

use napi::{Error, Result};

use super::values::{Js, Type, Value, pending};

/// Error codes, part of the public API (documented in the README).
pub(crate) mod code {
    pub(crate) const INVALID_OPTION: &str = "HERDLESS_INVALID_OPTION";
    pub(crate) const INVALID_ARGUMENT: &str = "HERDLESS_INVALID_ARGUMENT";
    pub(crate) const INVALID_KEY: &str = "HERDLESS_INVALID_KEY";
    pub(crate) const EMPTY_KEY: &str = "HERDLESS_EMPTY_KEY";
    pub(crate) const KEY_TOO_LONG: &str = "HERDLESS_KEY_TOO_LONG";
    pub(crate) const ZERO_TTL: &str = "HERDLESS_ZERO_TTL";
    pub(crate) const VALUE_TOO_LARGE: &str = "HERDLESS_VALUE_TOO_LARGE";
    pub(crate) const WAIT_TIMEOUT: &str = "HERDLESS_WAIT_TIMEOUT";
    pub(crate) const LOAD_TIMEOUT: &str = "HERDLESS_LOAD_TIMEOUT";
    pub(crate) const LOAD_FAILED: &str = "HERDLESS_LOAD_FAILED";
    pub(crate) const LOADER_PANICKED: &str = "HERDLESS_LOADER_PANICKED";
    pub(crate) const TOO_MANY_FLIGHTS: &str = "HERDLESS_TOO_MANY_FLIGHTS";
    pub(crate) const BACKEND: &str = "HERDLESS_BACKEND";
    pub(crate) const BATCH: &str = "HERDLESS_BATCH";
    pub(crate) const META_TOO_LONG: &str = "HERDLESS_META_TOO_LONG";
    pub(crate) const NO_PREVIOUS: &str = "HERDLESS_NO_PREVIOUS";
    pub(crate) const INVALID_TAG: &str = "HERDLESS_INVALID_TAG";
    pub(crate) const TOO_MANY_TAGS: &str = "HERDLESS_TOO_MANY_TAGS";
    pub(crate) const UNCOPYABLE_VALUE: &str = "HERDLESS_UNCOPYABLE_VALUE";
    pub(crate) const CLOSED: &str = "HERDLESS_CLOSED";
    pub(crate) const LOCK_TIMEOUT: &str = "HERDLESS_LOCK_TIMEOUT";
    pub(crate) const NOT_HELD: &str = "HERDLESS_NOT_HELD";
    pub(crate) const ERROR: &str = "HERDLESS_ERROR";
}

impl Js {
    /// Clears and returns the pending exception.
    pub(crate) fn take_exception(self) -> Result<Value> {
        let mut e = ptr::null_mut();
        napi_call!(napi_get_and_clear_last_exception(self.0, &mut e))?;
        Ok(e)
    }

    /// Throws `value`; returns the error that tells napi-rs an exception is pending.
    pub(crate) fn throw(self, value: Value) -> Error {
        match napi_call!(napi_throw(self.0, value)) {
            Ok(()) => pending(),
            Err(e) => e,
        }
    }

    /// A new `Error`, `TypeError` or `RangeError` with `code` and `message`.
    pub(crate) fn error(self, kind: ErrorKind, code: &str, message: &str) -> Result<Value> {
        let (code, msg) = (self.string(code)?, self.string(message)?);
        let mut v = ptr::null_mut();
        match kind {
            ErrorKind::Error => napi_call!(napi_create_error(self.0, code, msg, &mut v)),
            ErrorKind::Type => napi_call!(napi_create_type_error(self.0, code, msg, &mut v)),
            ErrorKind::Range => napi_call!(napi_create_range_error(self.0, code, msg, &mut v)),
        }?;
        Ok(v)
    }
}

/// Which constructor builds an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    Error,
    Type,
    Range,
}

/// Throws a new `TypeError`/`RangeError`/`Error` with `code`.
pub(crate) fn throw_new(js: Js, kind: ErrorKind, code: &str, message: &str) -> napi::Error {
    match js.error(kind, code, message) {
        Ok(v) => js.throw(v),
        Err(e) => e,
    }
}

/// A bad argument: `TypeError` with [`code::INVALID_ARGUMENT`].
pub(crate) fn type_error(js: Js, message: &str) -> napi::Error {
    throw_new(js, ErrorKind::Type, code::INVALID_ARGUMENT, message)
}

/// The message of a thrown value, for Rust-side display only.
pub(crate) fn describe(js: Js, e: Value) -> String {
    let text = || -> Result<String> {
        // An `Error`, or an error-like object (a `DOMException` such as `DataCloneError`).
        if js.is_error(e)? || js.type_of(e)? == Type::Object {
            let m = js.get(e, "message")?;
            if js.type_of(m)? == Type::String {
                return js.get_string(m);
            }
        }
        Ok(match js.type_of(e)? {
            Type::String => js.get_string(e)?,
            t => format!("a rejection with {}", t.name()),
        })
    };
    text().unwrap_or_else(|e| {
        // A `message` getter that threw: its exception is not this error's.
        if e.status == napi::Status::PendingException {
            let _ = js.take_exception();
        }
        "a rejection".into()
    })
}
