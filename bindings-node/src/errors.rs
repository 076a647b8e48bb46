//! Every error the binding gives JS, mapped in one place: an `Error` (or `TypeError` /
//! `RangeError` for bad arguments) with a stable `code`, so callers branch on `err.code`
//! rather than on messages. A loader's own rejection is not mapped: every waiter of that
//! load is rejected with the loader's original value.

use napi::Result;

// The binding's own errors (codes, `TypeError`s) are made by `js::errors`, below the values
// these map engine errors with.
use crate::js::{ErrorKind, Js, Value};
pub(crate) use crate::js::{code, throw_new, type_error};
use crate::value::{JsFailure, Table};

fn millis(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The JS value a failed call rejects (or throws) with.
pub(crate) fn to_js(js: Js, table: &Table, e: &herdless::Error) -> Result<Value> {
    use herdless::Error as E;
    if let E::Load(load) = e {
        if let Some(f) = load.downcast_ref::<JsFailure>() {
            return table.load(js, &f.value);
        }
        // A value the codec refused (`set` with a shared tier): a user codec's own
        // exception as it is; the built-in codecs' refusal as a bad argument.
        if let Some(c) = load.downcast_ref::<herdless_redis::CodecError>() {
            if let Some(f) = c.get().downcast_ref::<JsFailure>() {
                return table.load(js, &f.value);
            }
            let (kind, code) = match c.is_interrupted() {
                true => (ErrorKind::Error, code::ERROR),
                false => (ErrorKind::Type, code::INVALID_ARGUMENT),
            };
            let message = format!(
                "the value cannot be encoded by the cache's codec: {}",
                c.get()
            );
            return js.error(kind, code, &message);
        }
    }
    let (kind, code) = match e {
        E::EmptyKey => (ErrorKind::Type, code::EMPTY_KEY),
        E::KeyTooLong { .. } => (ErrorKind::Range, code::KEY_TOO_LONG),
        E::ZeroTtl => (ErrorKind::Range, code::ZERO_TTL),
        E::TtlTooLong { .. } => (ErrorKind::Range, code::INVALID_OPTION),
        E::ValueTooLarge { .. } => (ErrorKind::Range, code::VALUE_TOO_LARGE),
        E::WaitTimeout { .. } => (ErrorKind::Error, code::WAIT_TIMEOUT),
        E::LoadTimeout { .. } => (ErrorKind::Error, code::LOAD_TIMEOUT),
        E::Load(_) => (ErrorKind::Error, code::LOAD_FAILED),
        E::LoaderPanicked { .. } => (ErrorKind::Error, code::LOADER_PANICKED),
        E::TooManyFlights { .. } => (ErrorKind::Error, code::TOO_MANY_FLIGHTS),
        E::Backend(_) => (ErrorKind::Error, code::BACKEND),
        E::MetaTooLong { .. } => (ErrorKind::Range, code::META_TOO_LONG),
        E::NoPrevious => (ErrorKind::Error, code::NO_PREVIOUS),
        E::EmptyTag => (ErrorKind::Type, code::INVALID_TAG),
        E::TagTooLong { .. } => (ErrorKind::Range, code::INVALID_TAG),
        E::TooManyTags { .. } => (ErrorKind::Range, code::TOO_MANY_TAGS),
        E::Closed => (ErrorKind::Error, code::CLOSED),
        _ => (ErrorKind::Error, code::ERROR),
    };
    let err = js.error(kind, code, &e.to_string())?;
    // Structured details, so nobody parses messages.
    match e {
        E::KeyTooLong { len, max } => {
            js.set(err, "length", js.number(*len as f64)?)?;
            js.set(err, "max", js.number(*max as f64)?)?;
        }
        E::WaitTimeout { waited } => js.set(err, "waitedMs", js.number(millis(*waited))?)?,
        E::LoadTimeout { after } => js.set(err, "afterMs", js.number(millis(*after))?)?,
        E::TooManyFlights { max } => js.set(err, "max", js.number(*max as f64)?)?,
        E::MetaTooLong { len, max } => {
            js.set(err, "length", js.number(*len as f64)?)?;
            js.set(err, "max", js.number(*max as f64)?)?;
        }
        E::TtlTooLong { max, .. } => js.set(err, "maxMs", js.number(millis(*max))?)?,
        E::TagTooLong { len, max } => {
            js.set(err, "length", js.number(*len as f64)?)?;
            js.set(err, "max", js.number(*max as f64)?)?;
        }
        E::TooManyTags { count, max } => {
            js.set(err, "count", js.number(*count as f64)?)?;
            js.set(err, "max", js.number(*max as f64)?)?;
        }
        _ => {}
    }
    Ok(err)
}

/// Throws `e` mapped by [`to_js`]; returns the napi-rs error that says so.
pub(crate) fn throw(js: Js, table: &Table, e: &herdless::Error) -> napi::Error {
    match to_js(js, table, e) {
        Ok(v) => js.throw(v),
        Err(e) => e,
    }
}

/// Throws a key builder error: `TypeError` with [`code::INVALID_KEY`].
pub(crate) fn key_error(js: Js, e: &herdless::KeyError) -> napi::Error {
    throw_new(js, ErrorKind::Type, code::INVALID_KEY, &e.to_string())
}
