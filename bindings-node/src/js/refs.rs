//! References: JS values kept alive (or watched) by Rust across callbacks, and values
//! hidden on an object for the binding.

use std::ptr;

use napi::{Result, sys};

use super::values::{Js, Value};

impl Js {
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
