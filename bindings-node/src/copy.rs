//! Value isolation (`copyValues`, on by default): the cache keeps its own copy of every
//! object it is given (`set`, a loader's answer, a value decoded from the shared tier) and
//! hands each caller a new copy of it, as the platform's caches do for their callers, so one
//! caller mutating an object it stored or read never changes what another caller reads (a
//! response object mutated after it was cached, a session read and edited).
//!
//! JSON-shaped data (plain objects and arrays over primitives and functions, within a depth
//! and a node budget) is copied node by node by `copy.js`, about ten times faster than
//! `structuredClone`; functions in it are shared, not copied. Anything else is copied by the
//! platform's `structuredClone` (`Map`, `Set`, `Date`, `RegExp`, typed arrays, errors; cycles
//! and shared references are kept); a `Buffer` is copied as a `Buffer`. An object
//! `structuredClone` cannot copy (a `Map` holding a function, a symbol) or would not give
//! back as the same type (a class instance would come back a plain object) is refused with
//! a `TypeError` (code `HERDLESS_UNCOPYABLE_VALUE`) rather than changed; class instances
//! nested in a `Map` or past the budget come back as plain objects (structured clone's
//! rule). Primitives are never copied. `copyValues: false` shares every object (callers
//! promise never to mutate what they store or read).

use napi::Result;

use crate::js::{ErrorKind, Js, Ref, Type, Value, code, throw_new};

/// The copiers of a cache: `copy.js`'s plain-data copier and `structuredClone`.
pub(crate) struct Copier {
    plain: Ref,
    clone: Ref,
}

/// The plain-data copier's source: a function expression.
const PLAIN_COPIER: &str = include_str!("copy.js");

/// How the cache's own copy of an object is handed out.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// By `copy.js`'s plain-data copier.
    Plain,
    /// By `structuredClone`.
    Clone,
    /// As a new `Buffer` of its bytes.
    Bytes,
}

impl Copier {
    /// The copier of a cache, on the JS thread that owns it.
    pub(crate) fn new(js: Js) -> Result<Self> {
        let f = js.get(js.global()?, "structuredClone")?;
        if js.type_of(f)? != Type::Function {
            return Err(napi::Error::from_reason(
                "herdless: this Node has no structuredClone (copyValues needs Node >= 17)",
            ));
        }
        let source = js.string(PLAIN_COPIER)?;
        let mut plain = std::ptr::null_mut();
        // SAFETY: JS thread; `source` is a string of this env, the out-pointer valid.
        let status = unsafe { napi::sys::napi_run_script(js.raw(), source, &mut plain) };
        if status != napi::sys::Status::napi_ok || js.type_of(plain)? != Type::Function {
            return Err(napi::Error::from_reason(
                "herdless: the plain-data copier did not compile",
            ));
        }
        Ok(Self {
            plain: js.reference(plain)?,
            clone: js.reference(f)?,
        })
    }

    /// The cache's own copy of `v`, an object a caller or a loader gave: it is never handed
    /// out itself. Throws a `TypeError` when `v` cannot be copied as it is.
    pub(crate) fn own(&self, js: Js, v: Value) -> Result<(Value, Kind)> {
        match js.call(self.plain.get(js)?, js.undefined()?, &[v])? {
            Ok(copy) if js.type_of(copy)? != Type::Undefined => return Ok((copy, Kind::Plain)),
            Ok(_) => {}
            // A getter or a Proxy trap threw while reading it.
            Err(e) => return Err(uncopyable(js, &crate::js::describe(js, e))),
        }
        let copy = match js.call(self.clone.get(js)?, js.undefined()?, &[v])? {
            Ok(copy) => copy,
            Err(e) => {
                let why = crate::js::describe(js, e);
                return Err(uncopyable(js, &why));
            }
        };
        if js.strict_equals(js.prototype(v)?, js.prototype(copy)?)? {
            return Ok((copy, Kind::Clone));
        }
        // A `Buffer` (a `Uint8Array` subclass) comes back a plain `Uint8Array`.
        if let Some(bytes) = js.bytes(v)? {
            return Ok((js.buffer(&bytes)?, Kind::Bytes));
        }
        Err(uncopyable(
            js,
            "an instance of a class would come back as a plain object",
        ))
    }

    /// A new copy, for one caller, of the cache's own copy `own`.
    pub(crate) fn hand_out(
        &self,
        js: Js,
        own: Value,
        kind: Kind,
    ) -> std::result::Result<Value, napi::sys::napi_status> {
        let copied = || -> Result<Value> {
            match kind {
                Kind::Plain => match js.call(self.plain.get(js)?, js.undefined()?, &[own])? {
                    // The cache's own copy is plain data within the budget: copied again.
                    Ok(copy) => Ok(copy),
                    Err(e) => Err(js.throw(e)),
                },
                Kind::Bytes => js.buffer(&js.bytes(own)?.unwrap_or_default()),
                Kind::Clone => match js.call(self.clone.get(js)?, js.undefined()?, &[own])? {
                    Ok(copy) => Ok(copy),
                    // The cache's own copy is plain data: only running out of memory fails.
                    Err(e) => Err(js.throw(e)),
                },
            }
        };
        copied().map_err(|e| e.status.into())
    }
}

fn uncopyable(js: Js, why: &str) -> napi::Error {
    throw_new(
        js,
        ErrorKind::Type,
        code::UNCOPYABLE_VALUE,
        &format!(
            "herdless: the value cannot be copied for the cache (copyValues): {why}; store \
             plain data, or create the cache with copyValues: false and never mutate values"
        ),
    )
}
