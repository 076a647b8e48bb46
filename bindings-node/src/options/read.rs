//! Reading one option: a number, a duration in milliseconds, a count, a string, checked with
//! a message that names it; unknown fields refused.

use std::time::Duration;

use napi::Result;

use crate::errors::{code, throw_new};
use crate::js::{ErrorKind, Js, StrRoom, Type, Value};

pub(super) fn bad(js: Js, kind: ErrorKind, message: &str) -> napi::Error {
    throw_new(js, kind, code::INVALID_OPTION, message)
}

/// Reads option `name` of `obj` as a number; `None` when absent (undefined).
pub(super) fn number(js: Js, obj: Value, name: &str) -> Result<Option<f64>> {
    let v = js.get(obj, name)?;
    match js.type_of(v)? {
        Type::Undefined => Ok(None),
        Type::Number => {
            let n = js.get_number(v)?;
            if n.is_finite() {
                Ok(Some(n))
            } else {
                Err(bad(
                    js,
                    ErrorKind::Range,
                    &format!("option `{name}` must be a finite number, got {n}"),
                ))
            }
        }
        t => Err(bad(
            js,
            ErrorKind::Type,
            &format!("option `{name}` must be a number, got {}", t.name()),
        )),
    }
}

/// A duration in milliseconds; `zero_ok` for the options where 0 means "off".
pub(super) fn duration(js: Js, obj: Value, name: &str, zero_ok: bool) -> Result<Option<Duration>> {
    let Some(ms) = number(js, obj, name)? else {
        return Ok(None);
    };
    if ms < 0.0 || (ms == 0.0 && !zero_ok) {
        let need = if zero_ok { ">= 0" } else { "> 0" };
        return Err(bad(
            js,
            ErrorKind::Range,
            &format!("option `{name}` must be a duration in milliseconds {need}, got {ms}"),
        ));
    }
    // `from_secs_f64` would panic past ~584 billion years, and a panic here aborts Node.
    Duration::try_from_secs_f64(ms / 1000.0)
        .map(Some)
        .map_err(|_| {
            bad(
                js,
                ErrorKind::Range,
                &format!("option `{name}` is too large: {ms} ms"),
            )
        })
}

pub(super) fn count(js: Js, obj: Value, name: &str) -> Result<Option<u64>> {
    let Some(n) = number(js, obj, name)? else {
        return Ok(None);
    };
    if n < 1.0 || n.fract() != 0.0 || n > 2f64.powi(53) {
        return Err(bad(
            js,
            ErrorKind::Range,
            &format!("option `{name}` must be an integer >= 1, got {n}"),
        ));
    }
    Ok(Some(n as u64))
}

/// Reads option `name` of `obj` as a boolean; `None` when absent (undefined).
pub(super) fn boolean(js: Js, obj: Value, name: &str) -> Result<Option<bool>> {
    let v = js.get(obj, name)?;
    match js.type_of(v)? {
        Type::Undefined => Ok(None),
        Type::Boolean => Ok(Some(js.get_bool(v)?)),
        t => Err(bad(
            js,
            ErrorKind::Type,
            &format!("option `{name}` must be a boolean, got {}", t.name()),
        )),
    }
}

pub(super) fn string(js: Js, obj: Value, name: &str) -> Result<Option<String>> {
    let v = js.get(obj, name)?;
    match js.type_of(v)? {
        Type::Undefined => Ok(None),
        Type::String => Ok(Some(js.get_string(v)?)),
        t => Err(bad(
            js,
            ErrorKind::Type,
            &format!("option `{name}` must be a string, got {}", t.name()),
        )),
    }
}

/// Refuses a field of an options object that is not in `known` (a misspelt option
/// silently ignored would be a bug nobody sees); `names` is the array of the object's own
/// enumerable string keys ([`Js::own_names`](crate::js::Js::own_names)).
pub(crate) fn known_fields(js: Js, names: Value, what: &str, known: &[&str]) -> Result<()> {
    for i in 0..js.array_len(names)? {
        // Read onto the stack: the JS front checks an options object per call.
        let mut room = StrRoom::new();
        let key = js.get_str(js.get_element(names, i)?, &mut room)?;
        let key = key.as_str();
        if !known.contains(&key) {
            return Err(bad(
                js,
                ErrorKind::Type,
                &format!(
                    "unknown {what} option `{key}` (known: {})",
                    known.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// A per-call TTL in milliseconds (`set`, `getOrLoad`, `wrap`, `warm` options).
pub(crate) fn ttl(js: Js, obj: Value) -> Result<Option<Duration>> {
    duration(js, obj, "ttl", false)
}

/// A per-write time-to-idle in milliseconds (`set` options). A positive value under a
/// nanosecond is refused here: `Loaded::tti` would take its zero for "the cache's own".
pub(crate) fn tti(js: Js, obj: Value) -> Result<Option<Duration>> {
    let d = duration(js, obj, "tti", false)?;
    if d.is_some_and(|d| d.is_zero()) {
        return Err(bad(
            js,
            ErrorKind::Range,
            "option `tti` must be at least one nanosecond",
        ));
    }
    Ok(d)
}

/// How long a lock call waits for the lock's holder, in milliseconds (0: it only tries).
pub(crate) fn timeout(js: Js, obj: Value) -> Result<Option<Duration>> {
    duration(js, obj, "timeout", true)
}
