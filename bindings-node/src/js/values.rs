//! JS values: reading and making them (numbers, strings, objects, arrays, bytes), their
//! types, and the checked status of every Node-API call.

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
pub(super) fn check(env: sys::napi_env, status: sys::napi_status) -> Result<()> {
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
        let mut v = ptr::null_mut();
        if let Some(i) = OFTEN.iter().position(|n| *n == name) {
            let key = self.often(i)?;
            napi_call!(napi_get_property(self.0, obj, key, &mut v))?;
            return Ok(v);
        }
        // A short name is handed over as a C string: Node-API makes it an internalized
        // string, which V8 looks up directly, where a plain string made by `string` is
        // internalized again at each lookup (an options check read 3-4 names per call).
        let mut room = [0u8; 32];
        if name.len() < room.len() && !name.as_bytes().contains(&0) {
            room[..name.len()].copy_from_slice(name.as_bytes());
            napi_call!(napi_get_named_property(
                self.0,
                obj,
                room.as_ptr().cast::<c_char>(),
                &mut v
            ))?;
            return Ok(v);
        }
        let key = self.string(name)?;
        napi_call!(napi_get_property(self.0, obj, key, &mut v))?;
        Ok(v)
    }

    /// The JS string of `OFTEN[i]`, from this environment's array of them (made at the
    /// first use on this thread, then held for the life of the environment).
    fn often(self, i: usize) -> Result<Value> {
        let (env, held) = OFTEN_HELD.get();
        let mut array = ptr::null_mut();
        if env == self.0 && !held.is_null() {
            napi_call!(napi_get_reference_value(self.0, held, &mut array))?;
        }
        if array.is_null() {
            array = self.array(OFTEN.len())?;
            for (j, n) in OFTEN.iter().enumerate() {
                self.set_element(array, j as u32, self.string(n)?)?;
            }
            let mut r = ptr::null_mut();
            // Never deleted: it must not outlive its environment, and is freed with it.
            napi_call!(napi_create_reference(self.0, array, 1, &mut r))?;
            OFTEN_HELD.set((self.0, r));
        }
        self.get_element(array, i as u32)
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
        let names = self.own_names(obj)?;
        let n = self.array_len(names)?;
        (0..n)
            .map(|i| self.get_string(self.get_element(names, i)?))
            .collect()
    }

    /// The array of `obj`'s own enumerable string keys (what [`keys`](Self::keys) reads).
    pub(crate) fn own_names(self, obj: Value) -> Result<Value> {
        let mut names = ptr::null_mut();
        napi_call!(napi_get_all_property_names(
            self.0,
            obj,
            sys::KeyCollectionMode::own_only,
            sys::KeyFilter::enumerable | sys::KeyFilter::skip_symbols,
            sys::KeyConversion::numbers_to_strings,
            &mut names
        ))?;
        Ok(names)
    }

    pub(crate) fn strict_equals(self, a: Value, b: Value) -> Result<bool> {
        let mut eq = false;
        napi_call!(napi_strict_equals(self.0, a, b, &mut eq))?;
        Ok(eq)
    }
}

/// Property names read at every call with options (`getOrLoad`'s, through the JS front):
/// [`Js::get`] looks them up by strings made once. Made anew at each lookup, a name costs
/// V8 an internalization (hash and string-table probe), most of such a call's check.
const OFTEN: [&str; 3] = ["ttl", "tti", "signal"];

thread_local! {
    /// The environment whose array of [`OFTEN`] names is held, and its reference.
    static OFTEN_HELD: std::cell::Cell<(sys::napi_env, sys::napi_ref)> =
        const { std::cell::Cell::new((ptr::null_mut(), ptr::null_mut())) };
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
