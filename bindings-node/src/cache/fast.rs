//! The hit paths as raw Node-API functions: each cache gets its own `get` and `getOrLoad`,
//! installed as own (non-enumerable) properties of the instance by the constructor.
//!
//! Why: a napi-rs class method finds its Rust object with `napi_unwrap`, which V8 answers
//! with a private-symbol lookup that is not inline-cached. Measured on this machine, that
//! machinery costs about 115 ns a call, more than the engine's whole lookup, against 16 ns
//! for a plain Node-API function. These functions carry their cache in the function's data
//! pointer instead. The prototype methods run the same code (they remain, and give
//! `index.d.ts` its types).

use std::ffi::c_void;
use std::ptr;
use std::rc::Rc;

use napi::{Result, Status, sys};

use crate::cache::{get_or_load_value, get_value, load_options};
use crate::driver::Inner;
use crate::errors::code;
use crate::js::{ErrorKind, Js, Value};

type Callback = unsafe extern "C" fn(sys::napi_env, sys::napi_callback_info) -> sys::napi_value;

/// A Node-API function `name` running `callback` for the cache `inner`.
fn function(js: Js, name: &str, callback: Callback, inner: &Rc<Inner>) -> Result<Value> {
    let data = Box::into_raw(Box::new(Rc::clone(inner)));
    let mut f = ptr::null_mut();
    // SAFETY: JS thread (a constructor call); `data` stays valid until the function's
    // finalizer, registered next, frees it.
    let status = unsafe {
        sys::napi_create_function(
            js.raw(),
            name.as_ptr().cast(),
            name.len() as isize,
            Some(callback),
            data.cast(),
            &mut f,
        )
    };
    if status != sys::Status::napi_ok {
        // SAFETY: not handed over.
        drop(unsafe { Box::from_raw(data) });
        return Err(napi::Error::new(
            Status::from(status),
            "cannot create a method",
        ));
    }
    // SAFETY: as above; on failure the box leaks (one Rc) rather than dangle.
    unsafe {
        sys::napi_add_finalizer(
            js.raw(),
            f,
            data.cast(),
            Some(free_data),
            ptr::null_mut(),
            ptr::null_mut(),
        )
    };
    Ok(f)
}

/// Defines `this.get` and `this.getOrLoad` for the cache `inner`.
pub(crate) fn install(js: Js, this: Value, inner: &Rc<Inner>) -> Result<()> {
    let methods: [(&str, Callback); 2] = [("get", fast_get), ("getOrLoad", fast_get_or_load)];
    for (name, callback) in methods {
        let f = function(js, name, callback, inner)?;
        let descriptor = sys::napi_property_descriptor {
            utf8name: ptr::null(),
            name: js.string(name)?,
            method: None,
            getter: None,
            setter: None,
            value: f,
            attributes: sys::PropertyAttributes::writable | sys::PropertyAttributes::configurable,
            data: ptr::null_mut(),
        };
        // SAFETY: JS thread; `descriptor` lives across the call.
        let status = unsafe { sys::napi_define_properties(js.raw(), this, 1, &descriptor) };
        if status != sys::Status::napi_ok {
            return Err(napi::Error::new(
                Status::from(status),
                "cannot define a method",
            ));
        }
    }
    Ok(())
}

/// The front's hit function `hit(slot)` for the cache `inner` (see `crate::front`).
pub(crate) fn front_hit(js: Js, inner: &Rc<Inner>) -> Result<Value> {
    function(js, "hit", fast_front_hit, inner)
}

/// The front's check of a `getOrLoad` options object, `frontable(options, names)` (see
/// [`fast_front_options`]).
pub(crate) fn front_options(js: Js, inner: &Rc<Inner>) -> Result<Value> {
    function(js, "frontable", fast_front_options, inner)
}

unsafe extern "C" fn free_data(_env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
    // SAFETY: the box made in `install`, finalized once with its function.
    drop(unsafe { Box::from_raw(data.cast::<Rc<Inner>>()) });
}

/// The arguments (missing ones are `undefined`) and the cache of a fast call.
///
/// # Safety
/// `info` must be the callback info of a call of a function made by [`install`].
unsafe fn args<const N: usize>(
    js: Js,
    info: sys::napi_callback_info,
) -> ([Value; N], *const Rc<Inner>) {
    let mut argc = N;
    let mut argv = [ptr::null_mut(); N];
    let mut data = ptr::null_mut();
    // SAFETY: per the contract; Node-API fills absent arguments with `undefined`.
    unsafe {
        sys::napi_get_cb_info(
            js.raw(),
            info,
            &mut argc,
            argv.as_mut_ptr(),
            ptr::null_mut(),
            &mut data,
        )
    };
    (argv, data.cast_const().cast())
}

/// A result for Node-API: the value, or null with the exception pending.
fn finish(js: Js, r: Result<Value>) -> sys::napi_value {
    match r {
        Ok(v) => v,
        Err(e) => {
            if e.status != Status::PendingException {
                if let Ok(err) = js.error(ErrorKind::Error, code::ERROR, &e.reason) {
                    js.throw(err);
                }
            }
            ptr::null_mut()
        }
    }
}

unsafe extern "C" fn fast_get(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> sys::napi_value {
    let js = Js(env);
    // SAFETY: called by Node-API as a function made by `install`.
    let ([key], inner) = unsafe { args::<1>(js, info) };
    // SAFETY: the function is being called, so it is alive, and so is its data.
    let inner = unsafe { &*inner };
    finish(js, get_value(js, inner, key))
}

unsafe extern "C" fn fast_get_or_load(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> sys::napi_value {
    let js = Js(env);
    // SAFETY: called by Node-API as a function made by `install`.
    let ([key, loader, options], inner) = unsafe { args::<3>(js, info) };
    // SAFETY: the function is being called, so it is alive, and so is its data.
    let inner = unsafe { &*inner };
    finish(js, get_or_load_value(js, inner, key, loader, Some(options)))
}

unsafe extern "C" fn fast_front_hit(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> sys::napi_value {
    let js = Js(env);
    // SAFETY: called by Node-API as a function made by `front_hit`.
    let ([slot], inner) = unsafe { args::<1>(js, info) };
    // SAFETY: the function is being called, so it is alive, and so is its data.
    let inner = unsafe { &*inner };
    let mut n = 0u32;
    // SAFETY: JS thread; a non-number leaves `n` at 0 and the status unread: the JS front
    // only ever passes its slot numbers.
    unsafe { sys::napi_get_value_uint32(env, slot, &mut n) };
    // A closed cache serves nothing, not even the JS front's answers: the front then asks
    // the engine, which refuses the call.
    let hit = !inner.tt.is_closed() && inner.front.as_ref().is_some_and(|f| f.hit(&inner.l1, n));
    let mut v = ptr::null_mut();
    // SAFETY: JS thread.
    unsafe { sys::napi_get_boolean(env, hit, &mut v) };
    v
}

/// `frontable(options, names)`: whether a `getOrLoad` call with `options` may be answered by the
/// JS front, i.e. whether the engine would take the hit path for it: the options pass the
/// very checks of `getOrLoad` ([`load_options`]) and carry no `signal` (a call with one is
/// the engine's to answer, an aborted signal rejecting even a hit). Never throws: an
/// invalid object is `false`, and the call then goes to the engine, which rejects it.
unsafe extern "C" fn fast_front_options(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> sys::napi_value {
    let js = Js(env);
    // SAFETY: called by Node-API as a function made by `front_options`.
    let ([options, names], _) = unsafe { args::<2>(js, info) };
    // `names`: `Object.keys(options)`, which the front lists at a fraction of what Node-API's
    // key listing costs (same keys: own, enumerable, strings).
    let names = match js.is_array(names) {
        Ok(true) => Some(names),
        _ => None,
    };
    let ok = match load_options(js, Some(options), names) {
        Ok(o) => o.signal.is_none(),
        Err(_) => {
            // What the check threw is the engine's answer to give, at the call itself.
            let _ = js.take_exception();
            false
        }
    };
    let mut v = ptr::null_mut();
    // SAFETY: JS thread.
    unsafe { sys::napi_get_boolean(env, ok, &mut v) };
    v
}
