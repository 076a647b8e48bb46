//! The `Cache` class: the engine's API in Node's idiom.
//!
//! The class and what its methods share (arguments, options, the answer of a load); its
//! methods are grouped by what they do: [`read`], [`write`], [`invalidate`], [`load`],
//! [`lock`] (and the `FleetLock` it resolves to), [`observe`] and [`lifecycle`] (the
//! constructor, `close`), beside the fast paths of [`fast`].

use std::rc::Rc;

use napi::Result;
use napi_derive::napi;

use crate::call::{Answer, CallOptions, Outcome, aborted, rejecting};
use crate::driver::check_open;
use crate::driver::{EResult, Inner};
use crate::errors::{self, code, type_error};
use crate::js::{self, ErrorKind, Js, StrBuf, StrRoom, Type, Value};
use crate::keys::well_formed;
use crate::options;
use crate::value::Table;

/// A stampede-proof cache of JS values under string keys.
///
/// Each caller gets its own copy of a stored object (`copyValues`, on by default; off, a
/// hit returns the very object that was stored). Concurrent `getOrLoad` calls of one key
/// share one loader call; the others wait without blocking the event loop.
#[napi(custom_finalize)]
pub struct Cache {
    pub(crate) inner: Rc<Inner>,
    /// The native memory reported to V8 for this cache (see `crate::lifecycle`).
    pub(crate) external: self::memory::External,
}

/// Reads a key argument into `room`, or throws a `TypeError`.
#[inline(always)]
fn key_arg<'b>(js: Js, key: Value, room: &'b mut StrRoom) -> Result<StrBuf<'b>> {
    match js.get_str(key, room) {
        // Node-API turns a lone surrogate into U+FFFD, which would fold different keys
        // ('k:\ud800', 'k:\udfff', 'k:\ufffd') onto one: such keys are refused. Only a key
        // that reads back with U+FFFD pays for the check.
        Ok(s) if !matches!(s, StrBuf::Ascii(_)) && s.as_str().contains('\u{FFFD}') => {
            well_formed(js, key, "key")?;
            Ok(s)
        }
        Ok(s) => Ok(s),
        Err(_) => Err(not_a_key(js, key)),
    }
}

#[cold]
fn not_a_key(js: Js, key: Value) -> napi::Error {
    let got = js.type_of(key).map_or("an unknown value", Type::name);
    type_error(js, &format!("the key must be a string, got {got}"))
}

/// Checks that `v` is an options object with only `known` fields (or undefined): `None`
/// for undefined.
fn options_arg(js: Js, v: Option<Value>, what: &str, known: &[&str]) -> Result<Option<Value>> {
    options_arg_named(js, v, None, what, known)
}

/// [`options_arg`], given the object's own enumerable string keys when they are known
/// (`names`: an array, e.g. `Object.keys(v)`; else they are asked of Node-API).
fn options_arg_named(
    js: Js,
    v: Option<Value>,
    names: Option<Value>,
    what: &str,
    known: &[&str],
) -> Result<Option<Value>> {
    let Some(v) = v else {
        return Ok(None);
    };
    match js.type_of(v)? {
        Type::Undefined => Ok(None),
        Type::Object if !js.is_array(v)? => {
            let names = match names {
                Some(n) => n,
                None => js.own_names(v)?,
            };
            options::known_fields(js, names, what, known)?;
            Ok(Some(v))
        }
        t => Err(errors::throw_new(
            js,
            ErrorKind::Type,
            code::INVALID_OPTION,
            &format!("{what} options must be an object, got {}", t.name()),
        )),
    }
}

/// The `{ signal, ttl, tti }` options of one call.
pub(crate) fn call_options(js: Js, opts: Option<Value>) -> Result<CallOptions> {
    let Some(obj) = opts else {
        return Ok(CallOptions::default());
    };
    let ttl = options::ttl(js, obj)?;
    let tti = options::tti(js, obj)?;
    let signal = js.get(obj, "signal")?;
    let signal = match js.type_of(signal)? {
        Type::Undefined => None,
        Type::Object if js.type_of(js.get(signal, "addEventListener")?)? == Type::Function => {
            Some(signal)
        }
        t => {
            return Err(errors::throw_new(
                js,
                ErrorKind::Type,
                code::INVALID_OPTION,
                &format!("option `signal` must be an AbortSignal, got {}", t.name()),
            ));
        }
    };
    Ok(CallOptions {
        ttl,
        tti,
        tags: None,
        signal,
    })
}

/// The options of one `getOrLoad` call, checked: also the JS front's check of an options
/// object (`crate::fast`), so that both take the same verdict from the same code.
pub(crate) fn load_options(
    js: Js,
    opts: Option<Value>,
    names: Option<Value>,
) -> Result<CallOptions> {
    let known = ["signal", "ttl", "tti"];
    call_options(js, options_arg_named(js, opts, names, "getOrLoad", &known)?)
}

/// `cache.get(key)`: shared by the method and the fast path (`crate::fast`).
#[inline]
pub(crate) fn get_value(js: Js, inner: &Inner, key: Value) -> Result<Value> {
    check_open(js, inner)?;
    let mut room = StrRoom::new();
    let key = key_arg(js, key, &mut room)?;
    if let Some(f) = &inner.front {
        f.begin(js, &inner.l1)?;
    }
    // Read in place: no clone and drop of the value's handle (two atomic operations) per hit.
    match inner.l1.get_with(key.as_str(), |v| {
        (inner.table.read(js, &v.value), Table::copied(&v.value))
    }) {
        Some((Ok(v), copied)) => {
            // A copied value is each reader's own: the front must not hand one out twice.
            if let (Some(f), false) = (&inner.front, copied) {
                f.fill(js, &inner.l1, key.as_str(), None)?;
            }
            Ok(v)
        }
        Some((Err(status), _)) => Err(js::failed(status)),
        None => js.undefined(),
    }
}

/// `cache.getOrLoad(key, loader, options)`: shared by the method and the fast path. Never
/// throws: errors reject the returned promise.
pub(crate) fn get_or_load_value(
    js: Js,
    inner: &Rc<Inner>,
    key: Value,
    loader: Value,
    opts: Option<Value>,
) -> Result<Value> {
    let r = get_or_load_impl(js, inner, key, loader, opts);
    rejecting(js, r)
}

fn get_or_load_impl(
    js: Js,
    inner: &Rc<Inner>,
    key: Value,
    loader: Value,
    opts: Option<Value>,
) -> Result<Value> {
    check_open(js, inner)?;
    let mut room = StrRoom::new();
    let key = key_arg(js, key, &mut room)?;
    if js.type_of(loader)? != Type::Function {
        return Err(type_error(js, "the loader must be a function"));
    }
    let options = load_options(js, opts, None)?;
    // An already aborted caller is answered before the engine sees it: no hit, miss or
    // flight of a call that never waits.
    if let Some(reason) = aborted(js, options.signal)? {
        return js.rejected(reason);
    }
    if let Some(f) = &inner.front {
        f.begin(js, &inner.l1)?;
    }
    let first = inner.l1.lookup(key.as_str());
    if options.signal.is_none() {
        // The hit path: no call record, no loader reference.
        if let Some((v, copied)) = inner.hit_now(js, &first)? {
            if let (Some(f), false) = (&inner.front, copied) {
                f.fill(js, &inner.l1, key.as_str(), Some(v))?;
            }
            return js.resolved(v);
        }
    }
    let (deferred, promise) = js.promise()?;
    let answer = Answer::Promise(deferred);
    inner.start_load(js, key.as_str(), loader, options, answer, first)?;
    Ok(promise)
}

/// Settles with the engine's answer: `ok` of the value, or the mapped error.
fn answer<T>(
    js: Js,
    inner: &Inner,
    r: EResult<T>,
    ok: impl FnOnce(T) -> Result<Value>,
) -> Result<Outcome> {
    match r {
        Ok(v) => Ok(Ok(ok(v)?)),
        Err(e) => Ok(Err(errors::to_js(js, &inner.table, &e)?)),
    }
}

// Declared in the order of the class's members in index.d.ts: napi-rs writes them in the
// order rustc expands them, which is this one (each alone, or rustfmt would sort them).
pub mod read;

pub mod write;

pub mod invalidate;

pub mod load;

pub mod lock;

pub mod observe;

// The constructor and `close` close the class in index.d.ts.
pub mod lifecycle;

pub(crate) mod fast;
mod memory;
