//! Thin, checked wrappers over the raw Node-API calls the binding makes.
//!
//! Node-API's own rule applies to everything here: a [`Js`] (an `napi_env`) and the
//! `napi_value`s made with it may only be used on that environment's JS thread, during the
//! callback that received them. The binding only builds a `Js` inside napi callbacks (class
//! methods, closures, the thread-safe wake-up), so every call below runs on that thread.

use std::ffi::c_char;
use std::ptr;

use napi::{Error, Result, Status, sys};

/// A JS value, valid during the current callback.
pub(crate) type Value = sys::napi_value;

/// The JS environment of the current callback.
#[derive(Clone, Copy)]
pub(crate) struct Js(pub(crate) sys::napi_env);

/// A thrown JS exception was left pending: napi-rs rethrows it as it is.
pub(crate) fn pending() -> Error {
    Error::new(Status::PendingException, String::new())
}

#[inline(always)]
fn check(env: sys::napi_env, status: sys::napi_status) -> Result<()> {
    match status {
        sys::Status::napi_ok => Ok(()),
        s => Err(failed_in(env, s)),
    }
}

/// [`failed`], knowing that a call that ran JS (a getter, a Proxy trap) and threw reports a
/// generic failure with the exception pending: that exception is what failed, and it must
/// be taken or rethrown, never left for the process.
#[cold]
#[inline(never)]
fn failed_in(env: sys::napi_env, status: sys::napi_status) -> Error {
    let mut pending_now = false;
    // SAFETY: `env` is the env of the running callback, on its thread.
    let asked = unsafe { sys::napi_is_exception_pending(env, &mut pending_now) };
    match asked == sys::Status::napi_ok && pending_now {
        true => pending(),
        false => failed(status),
    }
}

/// The error of a failed Node-API call (kept out of line: the hit paths only test `ok`).
#[cold]
#[inline(never)]
pub(crate) fn failed(status: sys::napi_status) -> Error {
    match status {
        sys::Status::napi_pending_exception => pending(),
        s => Error::new(
            Status::from(s),
            format!("a Node-API call failed ({:?})", Status::from(s)),
        ),
    }
}

macro_rules! napi_call {
    ($f:ident($env:expr $(, $arg:expr)* $(,)?)) => {
        // SAFETY: the module rule: `self.0` is the env of the running callback, on its thread.
        check($env, unsafe { sys::$f($env $(, $arg)*) })
    };
}

/// The type of a JS value, as `typeof` (plus `null`) tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Type {
    Undefined,
    Null,
    Boolean,
    Number,
    String,
    Symbol,
    Object,
    Function,
    External,
    BigInt,
}

impl Type {
    /// The name used in error messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Type::Undefined => "undefined",
            Type::Null => "null",
            Type::Boolean => "a boolean",
            Type::Number => "a number",
            Type::String => "a string",
            Type::Symbol => "a symbol",
            Type::Object => "an object",
            Type::Function => "a function",
            Type::External => "an external",
            Type::BigInt => "a bigint",
        }
    }
}

impl Js {
    pub(crate) fn raw(self) -> sys::napi_env {
        self.0
    }

    pub(crate) fn null(self) -> Result<Value> {
        let mut v = ptr::null_mut();
        napi_call!(napi_get_null(self.0, &mut v))?;
        Ok(v)
    }

    pub(crate) fn undefined(self) -> Result<Value> {
        let mut v = ptr::null_mut();
        napi_call!(napi_get_undefined(self.0, &mut v))?;
        Ok(v)
    }

    pub(crate) fn global(self) -> Result<Value> {
        let mut v = ptr::null_mut();
        napi_call!(napi_get_global(self.0, &mut v))?;
        Ok(v)
    }

    pub(crate) fn type_of(self, v: Value) -> Result<Type> {
        let mut t = 0;
        napi_call!(napi_typeof(self.0, v, &mut t))?;
        Ok(match t {
            sys::ValueType::napi_undefined => Type::Undefined,
            sys::ValueType::napi_null => Type::Null,
            sys::ValueType::napi_boolean => Type::Boolean,
            sys::ValueType::napi_number => Type::Number,
            sys::ValueType::napi_string => Type::String,
            sys::ValueType::napi_symbol => Type::Symbol,
            sys::ValueType::napi_function => Type::Function,
            sys::ValueType::napi_external => Type::External,
            sys::ValueType::napi_bigint => Type::BigInt,
            _ => Type::Object,
        })
    }

    pub(crate) fn bool(self, b: bool) -> Result<Value> {
        let mut v = ptr::null_mut();
        napi_call!(napi_get_boolean(self.0, b, &mut v))?;
        Ok(v)
    }

    pub(crate) fn number(self, n: f64) -> Result<Value> {
        let mut v = ptr::null_mut();
        napi_call!(napi_create_double(self.0, n, &mut v))?;
        Ok(v)
    }

    pub(crate) fn string(self, s: &str) -> Result<Value> {
        let mut v = ptr::null_mut();
        napi_call!(napi_create_string_utf8(
            self.0,
            s.as_ptr().cast::<c_char>(),
            s.len() as isize,
            &mut v
        ))?;
        Ok(v)
    }

    pub(crate) fn get_bool(self, v: Value) -> Result<bool> {
        let mut b = false;
        napi_call!(napi_get_value_bool(self.0, v, &mut b))?;
        Ok(b)
    }

    pub(crate) fn get_number(self, v: Value) -> Result<f64> {
        let mut n = 0.0;
        napi_call!(napi_get_value_double(self.0, v, &mut n))?;
        Ok(n)
    }

    /// A bigint as an i128 when it fits (`None` when it does not).
    pub(crate) fn get_bigint(self, v: Value) -> Result<Option<i128>> {
        let mut sign = 0;
        let mut words = [0u64; 2];
        let mut count = words.len();
        napi_call!(napi_get_value_bigint_words(
            self.0,
            v,
            &mut sign,
            &mut count,
            words.as_mut_ptr()
        ))?;
        if count > 2 {
            return Ok(None);
        }
        let magnitude = u128::from(words[0]) | (u128::from(words[1]) << 64);
        Ok(match sign {
            0 => i128::try_from(magnitude).ok(),
            _ => 0i128.checked_sub_unsigned(magnitude),
        })
    }

    /// The string `v`, read into `room` when it fits (the hit path allocates nothing).
    /// Fails with `napi_string_expected` when `v` is not a string.
    ///
    /// Read as UTF-16 and narrowed when it is all ASCII (most keys): V8 copies a string's
    /// code units much faster than it encodes UTF-8. Other strings are read as UTF-8 (lone
    /// surrogates become U+FFFD either way).
    #[inline(always)]
    pub(crate) fn get_str<'b>(self, v: Value, room: &'b mut StrRoom) -> Result<StrBuf<'b>> {
        let mut len = 0usize;
        napi_call!(napi_get_value_string_utf16(
            self.0,
            v,
            room.units.as_mut_ptr().cast::<u16>(),
            UNITS,
            &mut len
        ))?;
        // Node-API writes at most UNITS - 1 units and a terminator: a full buffer may be
        // truncated.
        if len + 1 < UNITS {
            // SAFETY: Node-API wrote `len` units at the start of `units`.
            let units =
                unsafe { std::slice::from_raw_parts(room.units.as_ptr().cast::<u16>(), len) };
            // One pass that narrows every unit and ORs them all: no early exit, so the
            // compiler vectorises it (an `all(..)` check ran a unit at a time).
            let mut any = 0u16;
            for (b, &u) in room.bytes[..len].iter_mut().zip(units) {
                any |= u;
                b.write(u as u8);
            }
            if any < 0x80 {
                // SAFETY: the loop wrote the first `len` bytes.
                let bytes =
                    unsafe { std::slice::from_raw_parts(room.bytes.as_ptr().cast::<u8>(), len) };
                return Ok(StrBuf::Ascii(bytes));
            }
        }
        self.get_str_utf8(v, room)
    }

    /// [`get_str`](Self::get_str) for strings that are not short ASCII.
    #[cold]
    fn get_str_utf8<'b>(self, v: Value, room: &'b mut StrRoom) -> Result<StrBuf<'b>> {
        let mut len = 0usize;
        napi_call!(napi_get_value_string_utf8(
            self.0,
            v,
            room.bytes.as_mut_ptr().cast::<c_char>(),
            BYTES,
            &mut len
        ))?;
        // napi writes at most BYTES - 1 bytes, and only whole characters (up to 4 bytes
        // each): a string that was cut short left fewer than 4 of them unused. (Testing for
        // exactly BYTES - 1 bytes, as before, took a cut non-ASCII key for a whole one.)
        if len + 4 < BYTES {
            // SAFETY: Node-API wrote `len` bytes at the start of `bytes`.
            let bytes =
                unsafe { std::slice::from_raw_parts(room.bytes.as_ptr().cast::<u8>(), len) };
            return Ok(StrBuf::Stack(bytes));
        }
        let mut full = 0usize;
        napi_call!(napi_get_value_string_utf8(
            self.0,
            v,
            ptr::null_mut(),
            0,
            &mut full
        ))?;
        let mut heap = vec![0u8; full + 1];
        napi_call!(napi_get_value_string_utf8(
            self.0,
            v,
            heap.as_mut_ptr().cast::<c_char>(),
            heap.len(),
            &mut len
        ))?;
        heap.truncate(len);
        Ok(StrBuf::Heap(heap))
    }

    /// The string `v` as an owned `String`.
    pub(crate) fn get_string(self, v: Value) -> Result<String> {
        let mut room = StrRoom::new();
        Ok(self.get_str(v, &mut room)?.as_str().to_owned())
    }

    pub(crate) fn get(self, obj: Value, name: &str) -> Result<Value> {
        let key = self.string(name)?;
        let mut v = ptr::null_mut();
        napi_call!(napi_get_property(self.0, obj, key, &mut v))?;
        Ok(v)
    }

    pub(crate) fn set(self, obj: Value, name: &str, value: Value) -> Result<()> {
        let key = self.string(name)?;
        napi_call!(napi_set_property(self.0, obj, key, value))
    }

    pub(crate) fn get_element(self, array: Value, i: u32) -> Result<Value> {
        let mut v = ptr::null_mut();
        napi_call!(napi_get_element(self.0, array, i, &mut v))?;
        Ok(v)
    }

    pub(crate) fn set_element(self, array: Value, i: u32, value: Value) -> Result<()> {
        napi_call!(napi_set_element(self.0, array, i, value))
    }

    pub(crate) fn object(self) -> Result<Value> {
        let mut v = ptr::null_mut();
        napi_call!(napi_create_object(self.0, &mut v))?;
        Ok(v)
    }

    pub(crate) fn array(self, len: usize) -> Result<Value> {
        let mut v = ptr::null_mut();
        napi_call!(napi_create_array_with_length(self.0, len, &mut v))?;
        Ok(v)
    }

    pub(crate) fn is_array(self, v: Value) -> Result<bool> {
        let mut b = false;
        napi_call!(napi_is_array(self.0, v, &mut b))?;
        Ok(b)
    }

    pub(crate) fn array_len(self, v: Value) -> Result<u32> {
        let mut n = 0;
        napi_call!(napi_get_array_length(self.0, v, &mut n))?;
        Ok(n)
    }

    /// The bytes of a `Buffer` or `Uint8Array`; `None` for anything else.
    pub(crate) fn bytes(self, v: Value) -> Result<Option<Vec<u8>>> {
        let mut is = false;
        napi_call!(napi_is_typedarray(self.0, v, &mut is))?;
        if !is {
            return Ok(None);
        }
        let (mut kind, mut len, mut data) = (0, 0usize, ptr::null_mut());
        let (mut buffer, mut offset) = (ptr::null_mut(), 0usize);
        napi_call!(napi_get_typedarray_info(
            self.0,
            v,
            &mut kind,
            &mut len,
            &mut data,
            &mut buffer,
            &mut offset
        ))?;
        if kind != sys::TypedarrayType::uint8_array {
            return Ok(None);
        }
        if len == 0 {
            return Ok(Some(Vec::new()));
        }
        // SAFETY: Node-API gave the view's data pointer and its length in bytes (uint8).
        Ok(Some(
            unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) }.to_vec(),
        ))
    }

    /// A new `Buffer` holding a copy of `bytes`.
    pub(crate) fn buffer(self, bytes: &[u8]) -> Result<Value> {
        let (mut data, mut v) = (ptr::null_mut(), ptr::null_mut());
        napi_call!(napi_create_buffer_copy(
            self.0,
            bytes.len(),
            bytes.as_ptr().cast(),
            &mut data,
            &mut v
        ))?;
        Ok(v)
    }

    pub(crate) fn prototype(self, v: Value) -> Result<Value> {
        let mut p = ptr::null_mut();
        napi_call!(napi_get_prototype(self.0, v, &mut p))?;
        Ok(p)
    }

    pub(crate) fn is_error(self, v: Value) -> Result<bool> {
        let mut b = false;
        napi_call!(napi_is_error(self.0, v, &mut b))?;
        Ok(b)
    }

    pub(crate) fn is_promise(self, v: Value) -> Result<bool> {
        let mut b = false;
        napi_call!(napi_is_promise(self.0, v, &mut b))?;
        Ok(b)
    }

    /// Own enumerable string keys of `obj`, as `Object.keys` gives them.
    pub(crate) fn keys(self, obj: Value) -> Result<Vec<String>> {
        let mut names = ptr::null_mut();
        napi_call!(napi_get_all_property_names(
            self.0,
            obj,
            sys::KeyCollectionMode::own_only,
            sys::KeyFilter::enumerable | sys::KeyFilter::skip_symbols,
            sys::KeyConversion::numbers_to_strings,
            &mut names
        ))?;
        let n = self.array_len(names)?;
        (0..n)
            .map(|i| self.get_string(self.get_element(names, i)?))
            .collect()
    }

    pub(crate) fn strict_equals(self, a: Value, b: Value) -> Result<bool> {
        let mut eq = false;
        napi_call!(napi_strict_equals(self.0, a, b, &mut eq))?;
        Ok(eq)
    }

    /// Calls `f` with `this` and `args`. `Err(exception)` when it threw (the exception is
    /// cleared, so the caller decides what becomes of it).
    pub(crate) fn call(
        self,
        f: Value,
        this: Value,
        args: &[Value],
    ) -> Result<std::result::Result<Value, Value>> {
        let mut v = ptr::null_mut();
        // SAFETY: the module rule; `args` outlives the call.
        let status =
            unsafe { sys::napi_call_function(self.0, this, f, args.len(), args.as_ptr(), &mut v) };
        match status {
            sys::Status::napi_ok => Ok(Ok(v)),
            sys::Status::napi_pending_exception => Ok(Err(self.take_exception()?)),
            s => check(self.0, s).map(|()| Ok(v)),
        }
    }

    /// `new ctor(...args)`, rethrowing what it throws.
    pub(crate) fn construct(self, ctor: Value, args: &[Value]) -> Result<Value> {
        let mut v = ptr::null_mut();
        // SAFETY: the module rule; `args` outlives the call.
        let status =
            unsafe { sys::napi_new_instance(self.0, ctor, args.len(), args.as_ptr(), &mut v) };
        check(self.0, status).map(|()| v)
    }

    /// Calls the method `name` of `obj`, rethrowing what it throws.
    pub(crate) fn call_method(self, obj: Value, name: &str, args: &[Value]) -> Result<Value> {
        let f = self.get(obj, name)?;
        match self.call(f, obj, args)? {
            Ok(v) => Ok(v),
            Err(e) => Err(self.throw(e)),
        }
    }

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

    /// A new pending promise and the deferred that settles it.
    pub(crate) fn promise(self) -> Result<(Deferred, Value)> {
        let (mut d, mut p) = (ptr::null_mut(), ptr::null_mut());
        napi_call!(napi_create_promise(self.0, &mut d, &mut p))?;
        Ok((
            Deferred {
                env: self.0,
                raw: d,
            },
            p,
        ))
    }

    /// A promise already resolved with `v`.
    pub(crate) fn resolved(self, v: Value) -> Result<Value> {
        let (d, p) = self.promise()?;
        d.settle(self, Ok(v))?;
        Ok(p)
    }

    /// A promise already rejected with `e`.
    pub(crate) fn rejected(self, e: Value) -> Result<Value> {
        let (d, p) = self.promise()?;
        d.settle(self, Err(e))?;
        Ok(p)
    }

    /// A raw strong reference to an object or function, for the value table (which deletes
    /// it with [`Js::delete_reference`]).
    pub(crate) fn raw_reference(self, v: Value) -> Result<sys::napi_ref> {
        let mut r = ptr::null_mut();
        napi_call!(napi_create_reference(self.0, v, 1, &mut r))?;
        Ok(r)
    }

    /// The value of a raw reference.
    #[inline]
    pub(crate) fn reference_value(self, r: sys::napi_ref) -> Result<Value> {
        let mut v = ptr::null_mut();
        napi_call!(napi_get_reference_value(self.0, r, &mut v))?;
        Ok(v)
    }

    /// [`reference_value`](Self::reference_value) for the hit path: the status instead of
    /// an `Error` (a `Result<Value, Error>` is returned through memory, this one in
    /// registers).
    #[inline(always)]
    pub(crate) fn reference_value_raw(
        self,
        r: sys::napi_ref,
    ) -> std::result::Result<Value, sys::napi_status> {
        let mut v = ptr::null_mut();
        // SAFETY: the module rule.
        match unsafe { sys::napi_get_reference_value(self.0, r, &mut v) } {
            sys::Status::napi_ok => Ok(v),
            s => Err(s),
        }
    }

    /// Deletes a raw reference.
    pub(crate) fn delete_reference(self, r: sys::napi_ref) {
        // A failure (env torn down) only means the references are going away with it.
        let _ = napi_call!(napi_delete_reference(self.0, r));
    }

    /// A reference to `v` that does not keep it alive.
    pub(crate) fn weak_reference(self, v: Value) -> Result<WeakRef> {
        let mut r = ptr::null_mut();
        napi_call!(napi_create_reference(self.0, v, 0, &mut r))?;
        Ok(WeakRef {
            env: self.0,
            raw: r,
        })
    }

    /// Gives `obj` a property holding `value`, keyed by a new symbol: not enumerable, not
    /// writable, reachable by no name (what the object keeps alive for the binding).
    pub(crate) fn hide(self, obj: Value, description: &str, value: Value) -> Result<()> {
        let mut key = ptr::null_mut();
        napi_call!(napi_create_symbol(
            self.0,
            self.string(description)?,
            &mut key
        ))?;
        let descriptor = sys::napi_property_descriptor {
            utf8name: ptr::null(),
            name: key,
            method: None,
            getter: None,
            setter: None,
            value,
            attributes: sys::PropertyAttributes::default,
            data: ptr::null_mut(),
        };
        napi_call!(napi_define_properties(self.0, obj, 1, &descriptor))
    }

    /// A strong reference keeping `v` alive while the [`Ref`] lives.
    pub(crate) fn reference(self, v: Value) -> Result<Ref> {
        let mut r = ptr::null_mut();
        napi_call!(napi_create_reference(self.0, v, 1, &mut r))?;
        Ok(Ref {
            env: self.0,
            raw: r,
        })
    }
}

/// A raw value returned from a closure made with `create_function_from_closure`.
pub(crate) struct RawValue(pub(crate) Value);

impl napi::bindgen_prelude::ToNapiValue for RawValue {
    unsafe fn to_napi_value(_env: sys::napi_env, val: Self) -> Result<sys::napi_value> {
        Ok(val.0)
    }
}

/// Which constructor builds an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    Error,
    Type,
    Range,
}

/// UTF-16 units read by [`Js::get_str`] without allocating: keys up to this long (less one)
/// that are ASCII, the common case.
const UNITS: usize = 128;
/// UTF-8 bytes read without allocating, for other strings.
const BYTES: usize = 256;

/// Stack room for [`Js::get_str`]. Left uninitialised (nothing is read before Node-API or
/// the narrowing writes it): zeroing it cost the hit path a few ns per call.
pub(crate) struct StrRoom {
    units: [std::mem::MaybeUninit<u16>; UNITS],
    bytes: [std::mem::MaybeUninit<u8>; BYTES],
}

impl StrRoom {
    #[inline]
    pub(crate) fn new() -> Self {
        Self {
            units: [const { std::mem::MaybeUninit::uninit() }; UNITS],
            bytes: [const { std::mem::MaybeUninit::uninit() }; BYTES],
        }
    }
}

/// A string read by [`Js::get_str`].
pub(crate) enum StrBuf<'b> {
    /// Checked to be ASCII when read.
    Ascii(&'b [u8]),
    Stack(&'b [u8]),
    Heap(Vec<u8>),
}

impl StrBuf<'_> {
    pub(crate) fn as_str(&self) -> &str {
        let bytes = match self {
            // SAFETY: ASCII is UTF-8.
            StrBuf::Ascii(b) => return unsafe { std::str::from_utf8_unchecked(b) },
            StrBuf::Stack(b) => b,
            StrBuf::Heap(v) => v.as_slice(),
        };
        // Node-API writes valid UTF-8 (lone surrogates become U+FFFD).
        std::str::from_utf8(bytes).unwrap_or_default()
    }
}

/// The resolving half of a promise: settled exactly once, on the JS thread. One dropped
/// unsettled (a bug, or the engine going away) rejects its promise rather than leaving it
/// pending forever. Not `Send` (raw pointers), so it never leaves the JS thread.
pub(crate) struct Deferred {
    env: sys::napi_env,
    raw: sys::napi_deferred,
}

impl Deferred {
    pub(crate) fn settle(self, js: Js, outcome: std::result::Result<Value, Value>) -> Result<()> {
        let raw = self.raw;
        std::mem::forget(self);
        match outcome {
            Ok(v) => napi_call!(napi_resolve_deferred(js.0, raw, v)),
            Err(e) => napi_call!(napi_reject_deferred(js.0, raw, e)),
        }
    }
}

impl Drop for Deferred {
    fn drop(&mut self) {
        let js = Js(self.env);
        let message = "herdless: the call was dropped without an answer";
        if let Ok(e) = js.error(ErrorKind::Error, "HERDLESS_INTERNAL", message) {
            // SAFETY: as for `Ref`: a `Deferred` never leaves its JS thread.
            unsafe { sys::napi_reject_deferred(self.env, self.raw, e) };
        }
    }
}

/// A strong reference to a JS value, owned by Rust.
///
/// Neither `Send` nor `Sync` (it holds raw pointers), so the compiler keeps it on the JS
/// thread that made it, where dropping it deletes the reference.
pub(crate) struct Ref {
    env: sys::napi_env,
    raw: sys::napi_ref,
}

impl Ref {
    pub(crate) fn get(&self, js: Js) -> Result<Value> {
        let mut v = ptr::null_mut();
        napi_call!(napi_get_reference_value(js.0, self.raw, &mut v))?;
        Ok(v)
    }
}

/// A reference that does not keep its value alive (see [`Js::weak_reference`]).
pub(crate) struct WeakRef {
    env: sys::napi_env,
    raw: sys::napi_ref,
}

impl WeakRef {
    /// The value, unless it was collected.
    pub(crate) fn get(&self, js: Js) -> Result<Option<Value>> {
        let mut v = ptr::null_mut();
        napi_call!(napi_get_reference_value(js.0, self.raw, &mut v))?;
        Ok((!v.is_null()).then_some(v))
    }
}

impl Drop for WeakRef {
    fn drop(&mut self) {
        // SAFETY: as for `Ref`: never leaves the JS thread of `env` (it is !Send).
        unsafe { sys::napi_delete_reference(self.env, self.raw) };
    }
}

impl Drop for Ref {
    fn drop(&mut self) {
        // SAFETY: a `Ref` never leaves the JS thread of `env` (it is !Send). A failure
        // (env torn down) only means the references are going away with it.
        unsafe { sys::napi_delete_reference(self.env, self.raw) };
    }
}
