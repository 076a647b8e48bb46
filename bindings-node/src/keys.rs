//! Canonical keys from JS values, through the core's `KeyBuilder` (the format is the wire
//! protocol shared with Rust and Python, so it is never re-implemented here).
//!
//! JS values map to key values as: string -> string; a number that is an integer (and safe)
//! -> integer (`#42`), any other finite number -> float (`#1.5e0`); bigint -> integer;
//! boolean -> `#true`/`#false`; null and undefined -> `#null`; an array -> a list, which the
//! format treats as a set (sorted, deduplicated). Anything else cannot be part of a key.

use std::borrow::Cow;

use herdless::key::{MAX_DEPTH, MAX_VALUES};
use herdless::{KeyBuilder, KeyError, Param};
use napi::bindgen_prelude::{Env, Unknown};
use napi::{JsValue, Result};
use napi_derive::napi;

use crate::errors::{code, key_error, throw_new, type_error};
use crate::js::{ErrorKind, Js, Type, Value};

/// The parts of a canonical key, for `buildKey`.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct KeyParts {
    /// The namespace: non-empty, no reserved character (`:`, `%`, space, ...).
    pub namespace: String,
    /// Schema version of the cached representation (default 1).
    pub version: Option<u32>,
    /// What is cached, e.g. `'user'`.
    pub entity: String,
    /// The id, if any.
    #[napi(ts_type = "KeyValue")]
    pub id: Option<()>,
    /// Named parameters; their order does not matter.
    #[napi(ts_type = "Record<string, KeyValue>")]
    pub params: Option<()>,
}

const MAX_SAFE: f64 = 9_007_199_254_740_991.0;

/// A JS value as a key value.
///
/// Request input reaches this (a wrapped function's arguments), so it never recurses past
/// [`MAX_DEPTH`] (a deep or circular array is refused before its next level is read) and
/// never converts more than [`MAX_VALUES`] values (arrays sharing sub-arrays cannot blow up).
pub(crate) fn param(js: Js, v: Value, what: &str) -> Result<Param<'static>> {
    let mut left = MAX_VALUES;
    value(js, v, what, 0, &mut left)
}

fn value(js: Js, v: Value, what: &str, depth: usize, left: &mut usize) -> Result<Param<'static>> {
    *left = match left.checked_sub(1) {
        Some(l) => l,
        None => return Err(key_error(js, &KeyError::TooManyValues)),
    };
    Ok(match js.type_of(v)? {
        Type::String => Param::Str(Cow::Owned(js.get_string(v)?)),
        Type::Number => {
            let n = js.get_number(v)?;
            if n.fract() == 0.0 && n.abs() <= MAX_SAFE {
                Param::Int(n as i128)
            } else {
                Param::Float(n)
            }
        }
        Type::BigInt => match js.get_bigint(v)? {
            Some(i) => Param::Int(i),
            None => {
                return Err(type_error(
                    js,
                    &format!("{what}: bigint too large for a key"),
                ));
            }
        },
        Type::Boolean => Param::Bool(js.get_bool(v)?),
        Type::Null | Type::Undefined => Param::Null,
        Type::Object if js.is_array(v)? => {
            if depth >= MAX_DEPTH {
                return Err(key_error(js, &KeyError::TooDeep));
            }
            // A sparse array's length is not memory: checked before anything is sized by it.
            let n = js.array_len(v)?;
            if n as usize > *left {
                return Err(key_error(js, &KeyError::TooManyValues));
            }
            let mut items = Vec::with_capacity(n as usize);
            for i in 0..n {
                items.push(value(js, js.get_element(v, i)?, what, depth + 1, left)?);
            }
            Param::List(items)
        }
        t => {
            return Err(type_error(
                js,
                &format!(
                    "{what} must be a string, number, bigint, boolean, null or an array of them, got {}",
                    t.name()
                ),
            ));
        }
    })
}

/// Whether `v` is a plain object: `{...}` or `Object.create(null)`, not an array, a `Date`,
/// a `Map` or a class instance (whose own properties do not describe them).
pub(crate) fn is_plain_object(js: Js, v: Value) -> Result<bool> {
    if js.type_of(v)? != Type::Object || js.is_array(v)? {
        return Ok(false);
    }
    let proto = js.prototype(v)?;
    if js.type_of(proto)? == Type::Null {
        return Ok(true);
    }
    let object_proto = js.get(js.get(js.global()?, "Object")?, "prototype")?;
    js.strict_equals(proto, object_proto)
}

/// Adds every own enumerable property of `obj` as a parameter.
pub(crate) fn params(js: Js, mut b: KeyBuilder, obj: Value) -> Result<KeyBuilder> {
    for name in js.keys(obj)? {
        let p = param(js, js.get(obj, &name)?, &format!("key parameter `{name}`"))?;
        b = b.param(&name, p);
    }
    Ok(b)
}

/// Builds the key, or throws a `TypeError` with code `HERDLESS_INVALID_KEY`.
pub(crate) fn build(js: Js, b: &KeyBuilder) -> Result<String> {
    b.build().map_err(|e| key_error(js, &e))
}

fn required_string(js: Js, obj: Value, name: &str) -> Result<String> {
    let v = js.get(obj, name)?;
    match js.type_of(v)? {
        Type::String => js.get_string(v),
        t => Err(type_error(
            js,
            &format!("key part `{name}` must be a string, got {}", t.name()),
        )),
    }
}

/// The `version` of key parts or wrap options: an integer in [0, 2^32).
pub(crate) fn version(js: Js, obj: Value) -> Result<Option<u32>> {
    let v = js.get(obj, "version")?;
    match js.type_of(v)? {
        Type::Undefined => Ok(None),
        Type::Number => {
            let n = js.get_number(v)?;
            if n.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&n) {
                Ok(Some(n as u32))
            } else {
                Err(throw_new(
                    js,
                    ErrorKind::Range,
                    code::INVALID_KEY,
                    &format!("key `version` must be an integer in [0, 2^32), got {n}"),
                ))
            }
        }
        t => Err(type_error(
            js,
            &format!("key `version` must be a number, got {}", t.name()),
        )),
    }
}

/// `buildKey(parts)`: see [`KeyParts`].
pub(crate) fn build_from_parts(js: Js, parts: Value) -> Result<String> {
    if !is_plain_object(js, parts)? {
        return Err(type_error(js, "buildKey expects an object of key parts"));
    }
    let mut b = KeyBuilder::new(&required_string(js, parts, "namespace")?)
        .entity(&required_string(js, parts, "entity")?);
    if let Some(v) = version(js, parts)? {
        b = b.version(v);
    }
    let id = js.get(parts, "id")?;
    if js.type_of(id)? != Type::Undefined {
        b = b.id(param(js, id, "key `id`")?);
    }
    let p = js.get(parts, "params")?;
    match js.type_of(p)? {
        Type::Undefined => {}
        _ if is_plain_object(js, p)? => b = params(js, b, p)?,
        t => {
            return Err(type_error(
                js,
                &format!("key `params` must be an object, got {}", t.name()),
            ));
        }
    }
    build(js, &b)
}

/// `buildKey({ namespace, entity, version?, id?, params? })`: the canonical key (the
/// format shared with Rust and Python). Throws a `TypeError` with code
/// `HERDLESS_INVALID_KEY` for an invalid part.
#[napi(ts_args_type = "parts: KeyParts")]
pub fn build_key(env: &Env, parts: Unknown) -> Result<String> {
    build_from_parts(Js(env.raw()), parts.raw())
}

/// Refuses a key, namespace or tag that is not valid Unicode (a lone surrogate).
#[cold]
pub(crate) fn well_formed(js: Js, s: Value, what: &str) -> Result<()> {
    let ok = js.call_method(s, "isWellFormed", &[])?;
    if js.get_bool(ok)? {
        Ok(())
    } else {
        Err(type_error(
            js,
            &format!(
                "the {what} has a lone surrogate (it is not valid Unicode, so it cannot be a {what})"
            ),
        ))
    }
}
