//! `herdless.Cache.get` as a plain C method of the Python class (`METH_FASTCALL |
//! METH_KEYWORDS`), installed on it by [`install_get`]: `cache.get(key)` is the call most
//! programs make most, and pyo3's method machinery (its trampoline, its argument parser,
//! the `self` type check) cost more than the engine's own read of a hit.
//!
//! Two things make the call cheap:
//!
//! - the method is made for `herdless.Cache` itself, not for `_native.Cache`: CPython
//!   specialises a call of a method descriptor (a direct call of the C function, no bound
//!   method, no checks) only when `self` is exactly of the descriptor's class, which an
//!   instance of the Python subclass never is of the native one;
//! - the common call (one or two positional arguments, an exact `str` key) is answered
//!   here. Without a shared tier: the closed-engine check, then the L1's own read
//!   (`Cache::get_with`: the freshness check, time-to-idle, tags, the hit or miss counted
//!   once; `TwoTier::get` asks nothing more), an immutable or shared value handed out under
//!   the shard's read lock (a reference count bump, no `Arc` clone), a copied one copied
//!   after it. With one: the fleet engine's `TwoTier::get` (its miss asks the tier, counted
//!   once). Every other call (keywords, another key type) is passed on unchanged to
//!   `_native.Cache.get`.

use std::panic::{AssertUnwindSafe, catch_unwind};

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

use crate::cache::{Cache, check_open};
use crate::value::Taken;

/// The method's definition; the interpreter keeps a pointer to it for the process's life.
struct Def(ffi::PyMethodDef);

// SAFETY: never written after it is built; its pointers are to static data and code.
unsafe impl Sync for Def {}

static GET: Def = Def(ffi::PyMethodDef {
    ml_name: c"get".as_ptr(),
    ml_meth: ffi::PyMethodDefPointer {
        PyCFunctionFastWithKeywords: get,
    },
    ml_flags: ffi::METH_FASTCALL | ffi::METH_KEYWORDS,
    ml_doc: c"get($self, key, default=None)\n--\n\nThe value of `key` if fresh or within grace, else `default`; never loads. With\nRedis: from memory, else from Redis (one round trip; Redis failing reads as a miss).".as_ptr(),
});

/// `_native.Cache.get` (the pyo3 method): every call the fast path does not answer.
static NATIVE_GET: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// Makes `cls.get` the fast method for `cls` (the Python `herdless.Cache`, a subclass of
/// `_native.Cache`). Called once, when `herdless` is imported.
#[pyfunction]
pub(crate) fn _install_get(cls: &Bound<'_, PyType>) -> PyResult<()> {
    let py = cls.py();
    let native = py.get_type::<Cache>();
    if !cls.is_subclass(&native)? {
        return Err(PyTypeError::new_err(
            "_install_get: not a subclass of _native.Cache",
        ));
    }
    NATIVE_GET.get_or_try_init(py, || native.getattr("get").map(Bound::unbind))?;
    // SAFETY: `cls` is a live type object (the GIL is held); `GET` is static and never
    // written by the interpreter, which only reads a method definition.
    let descr = unsafe {
        let def = (&raw const GET.0).cast_mut();
        Bound::from_owned_ptr_or_err(py, ffi::PyDescr_NewMethod(cls.as_type_ptr(), def))?
    };
    cls.setattr("get", descr)
}

/// The method (`_PyCFunctionFastWithKeywords`): as pyo3's trampoline, a panic becomes a
/// `PanicException` and an error is raised.
///
/// # Safety
/// Called by the interpreter only, with the GIL held: `slf` an instance of the class the
/// descriptor was made for (a subclass of `_native.Cache`, checked by [`_install_get`]; the
/// interpreter checks `self` before calling a method descriptor), `args` holding `nargs`
/// positional arguments followed by one value per name of `kwnames` (a tuple, or null).
unsafe extern "C" fn get(
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: the interpreter calls this with the GIL held (module `gil_used`).
    let py = unsafe { Python::assume_attached() };
    // SAFETY: the contract above.
    let answer = catch_unwind(AssertUnwindSafe(|| unsafe {
        match fast(py, slf, args, nargs, kwnames) {
            Some(r) => r,
            None => slow(py, slf, args, nargs, kwnames),
        }
    }));
    let err = match answer {
        Ok(Ok(v)) => return v,
        Ok(Err(e)) => e,
        Err(payload) => crate::vectorcall::panic_error(payload),
    };
    err.restore(py);
    std::ptr::null_mut()
}

/// The common call answered here (see the module docs); `None`: pass it on.
///
/// # Safety
/// As [`get`].
unsafe fn fast(
    py: Python<'_>,
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> Option<PyResult<*mut ffi::PyObject>> {
    if !kwnames.is_null() || !(1..=2).contains(&nargs) {
        return None;
    }
    // SAFETY: `slf` is a `_native.Cache` (its subclass's instance), frozen: `get` borrows it.
    let cache = unsafe { Borrowed::from_ptr(py, slf).cast_unchecked::<Cache>() };
    let cache = cache.get();
    // SAFETY: `args` holds `nargs` borrowed objects.
    let (key, default) = unsafe {
        let default = match nargs {
            2 => *args.add(1),
            _ => ffi::Py_None(),
        };
        (*args, default)
    };
    // SAFETY: `key` is a live object; its UTF-8 is cached in it and lives as long as it.
    let key = unsafe {
        if ffi::PyUnicode_CheckExact(key) == 0 {
            return None;
        }
        let mut len: ffi::Py_ssize_t = 0;
        let data = ffi::PyUnicode_AsUTF8AndSize(key, &mut len);
        if data.is_null() {
            // Not encodable (lone surrogates): pyo3's method raises its own error.
            ffi::PyErr_Clear();
            return None;
        }
        std::str::from_utf8_unchecked(std::slice::from_raw_parts(data.cast::<u8>(), len as usize))
    };
    if cache.shared {
        // A miss in memory asks the shared tier: the fleet engine's `get`, with pyo3's own
        // account of the attached thread (a read of the tier releases the GIL and drops
        // Python objects).
        return Some(Python::attach(|py| {
            // SAFETY: `default` is a live borrowed object.
            let default = (nargs == 2).then(|| {
                unsafe { Borrowed::from_ptr(py, default) }
                    .to_owned()
                    .unbind()
            });
            crate::ops::get(py, &cache.handle, key, default, crate::ops::How::Block)
                .map(Bound::into_ptr)
        }));
    }
    if let Err(e) = check_open(py, &cache.handle) {
        return Some(Err(e));
    }
    // No shared tier: the L1's answer is the answer (`TwoTier::get` asks nothing else).
    let answer = match cache
        .handle
        .tt
        .l1()
        .get_with(key, |held| held.value.take(py))
    {
        Some(Taken::Object(obj)) => Ok(obj.into_ptr()),
        Some(Taken::Copy(value)) => value.bind(py).map(Bound::into_ptr),
        None => {
            // SAFETY: `default` is a live borrowed object; the caller gets a new reference.
            unsafe { ffi::Py_IncRef(default) };
            Ok(default)
        }
    };
    Some(answer)
}

/// Any other call: `_native.Cache.get(self, *args, **kwargs)`.
///
/// # Safety
/// As [`get`].
unsafe fn slow(
    py: Python<'_>,
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> PyResult<*mut ffi::PyObject> {
    let native = NATIVE_GET
        .get(py)
        .ok_or_else(|| PyTypeError::new_err("herdless: Cache.get is not installed"))?;
    // SAFETY: as [`get`]: every pointer is a live borrowed object.
    unsafe {
        let nargs = nargs as usize;
        let names = Borrowed::from_ptr_or_opt(py, kwnames).map(|n| n.cast_unchecked::<PyTuple>());
        let nkw = names.as_ref().map_or(0, |n| n.len());
        let all = std::slice::from_raw_parts(args, nargs + nkw);
        let mut positional = Vec::with_capacity(nargs + 1);
        positional.push(Borrowed::from_ptr(py, slf));
        positional.extend(all[..nargs].iter().map(|&a| Borrowed::from_ptr(py, a)));
        let positional = PyTuple::new(py, positional)?;
        let kwargs = match &names {
            Some(names) => {
                let d = PyDict::new(py);
                for (name, &value) in names.iter().zip(&all[nargs..]) {
                    d.set_item(name, Borrowed::from_ptr(py, value))?;
                }
                Some(d)
            }
            None => None,
        };
        let r = native.bind(py).call(positional, kwargs.as_ref())?;
        Ok(r.into_ptr())
    }
}
