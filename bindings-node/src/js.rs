//! Thin, checked wrappers over the raw Node-API calls the binding makes.
//!
//! Node-API's own rule applies to everything here: a [`Js`] (an `napi_env`) and the
//! `napi_value`s made with it may only be used on that environment's JS thread, during the
//! callback that received them. The binding only builds a `Js` inside napi callbacks (class
//! methods, closures, the thread-safe wake-up), so every call below runs on that thread.
//!
//! [`values`] reads and makes values, [`calls`] calls JS and settles promises, [`errors`]
//! throws (and holds the binding's error codes), [`refs`] keeps values across callbacks.

/// A checked Node-API call: `Err` (with a pending exception taken into account) unless it
/// returned `napi_ok`.
macro_rules! napi_call {
    ($f:ident($env:expr $(, $arg:expr)* $(,)?)) => {
        // SAFETY: the module rule: `self.0` is the env of the running callback, on its thread.
        $crate::js::values::check($env, unsafe { napi::sys::$f($env $(, $arg)*) })
    };
}

mod calls;
pub(crate) mod errors;
mod refs;
pub(crate) mod values;

pub(crate) use self::calls::{Deferred, RawValue};
pub(crate) use self::errors::{ErrorKind, code, describe, throw_new, type_error};
pub(crate) use self::refs::{Ref, WeakRef};
pub(crate) use self::values::{Js, StrBuf, StrRoom, Type, Value, failed};
