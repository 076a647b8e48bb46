//! Calling JS: functions, constructors, methods, and promises (made, settled, already
//! settled).

use std::ptr;

use napi::{Result, sys};

use super::errors::ErrorKind;
use super::values::{Js, Value, check};

impl Js {
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
}

/// A raw value returned from a closure made with `create_function_from_closure`.
pub(crate) struct RawValue(pub(crate) Value);

impl napi::bindgen_prelude::ToNapiValue for RawValue {
    unsafe fn to_napi_value(_env: sys::napi_env, val: Self) -> Result<sys::napi_value> {
        Ok(val.0)
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
