//! Vectorcall (PEP 590) for a frozen pyclass ([`Vectorcall`]: `CachedFunction`): `f(42)`
//! reaches the binding with the
//! caller's argument array, not a tuple built (and freed, GC-tracked) for the call.
//!
//! A `#[pyclass]` gets only `tp_call` from pyo3, and the 3.11 limited API has no way to
//! declare vectorcall (`Py_TPFLAGS_HAVE_VECTORCALL` and `__vectorcalloffset__` entered it
//! in 3.12). The protocol itself is the same in every CPython since 3.8: the type's
//! `tp_vectorcall_offset` names where in the instance the function pointer is, and the
//! `Py_TPFLAGS_HAVE_VECTORCALL` flag turns it on. Both fields are set on the class once,
//! after checking that the type object is laid out as assumed (its `tp_flags` and
//! `tp_call` read at their offsets equal what `PyType_GetFlags` and `PyType_GetSlot`
//! answer); when the check fails (an interpreter laid out otherwise) nothing is written
//! and calls keep going through `tp_call`, which behaves the same.

use std::ffi::{c_char, c_ulong, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// A frozen pyclass called through vectorcall: its [`call`] reaches
/// [`vectorcall`](Self::vectorcall) with the caller's argument array. One class per
/// process (the class is switched over once, see [`enable`]).
pub(crate) trait Vectorcall:
    pyo3::PyClass<Frozen = pyo3::pyclass::boolean_struct::True> + Sync
{
    /// A call of `self` with `args` (`nargs` positional ones, then one value per name of
    /// `names`).
    fn vectorcall(
        &self,
        py: Python<'_>,
        args: &[*mut ffi::PyObject],
        nargs: usize,
        names: Option<Borrowed<'_, '_, PyTuple>>,
    ) -> PyResult<Py<PyAny>>;
}

/// `Py_TPFLAGS_HAVE_VECTORCALL` (pyo3-ffi names it only for 3.12+ under the limited API;
/// the bit is the same since 3.8).
const HAVE_VECTORCALL: c_ulong = 1 << 11;

/// `PY_VECTORCALL_ARGUMENTS_OFFSET`: a flag bit of `nargsf`, not a count.
const ARGUMENTS_OFFSET: usize = 1 << (usize::BITS - 1);

/// The head of CPython's `PyTypeObject`, up to `tp_flags` (the same in 3.8 to 3.14 on
/// 64- and 32-bit builds without free threading, which abi3 excludes).
#[repr(C)]
struct TypeHead {
    _ob_refcnt: isize,
    _ob_type: *mut c_void,
    _ob_size: isize,
    _tp_name: *const c_char,
    _tp_basicsize: isize,
    _tp_itemsize: isize,
    _tp_dealloc: *mut c_void,
    tp_vectorcall_offset: isize,
    /// `tp_getattr` to `tp_as_buffer`; `tp_call` is the ninth.
    slots: [*mut c_void; 13],
    tp_flags: c_ulong,
}

/// Index of `tp_call` in [`TypeHead::slots`].
const TP_CALL: usize = 8;

/// Set once the class is vectorcall-enabled (or found not to be enableable).
static TRIED: AtomicBool = AtomicBool::new(false);

/// Turns vectorcall on for `T`'s class, once: `field` is where `obj` (an instance)
/// holds its [`call`] pointer. Idempotent; runs with the GIL held (abi3 builds are never
/// free-threaded), so no other thread reads the type half-written.
pub(crate) fn enable<T: Vectorcall>(obj: &Bound<'_, T>, field: *const ffi::vectorcallfunc) {
    if TRIED.load(Ordering::Relaxed) || TRIED.swap(true, Ordering::Relaxed) {
        return;
    }
    let offset = field as isize - obj.as_ptr() as isize;
    let tp = obj.as_any().get_type();
    let tp = tp.as_type_ptr();
    // SAFETY: `tp` is a live heap type object (the GIL is held and `obj` keeps it alive);
    // the head is only written after both reads agree with the interpreter's own answers.
    unsafe {
        let head = tp.cast::<TypeHead>();
        let flags = ffi::PyType_GetFlags(tp);
        let call = ffi::PyType_GetSlot(tp, ffi::Py_tp_call);
        let laid_out_as_assumed = (*head).tp_flags == flags
            && (*head).slots[TP_CALL] == call
            && !call.is_null()
            && (*head).tp_vectorcall_offset == 0
            && offset > 0;
        if !laid_out_as_assumed {
            return;
        }
        (*head).tp_vectorcall_offset = offset;
        (*head).tp_flags = flags | HAVE_VECTORCALL;
        ffi::PyType_Modified(tp);
    }
}

/// The vectorcall of a `T` (`vectorcallfunc`): what pyo3's trampoline does for `tp_call`
/// (a panic becomes a `PanicException`, an error is raised), around
/// [`Vectorcall::vectorcall`].
///
/// # Safety
/// Called by the interpreter only, with the GIL held: `callable` a `T`,
/// `args` holding `nargsf`'s count of positional arguments followed by one value per name
/// of `kwnames` (a tuple of str, or null).
pub(crate) unsafe extern "C" fn call<T: Vectorcall>(
    callable: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargsf: usize,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: the interpreter calls this with the GIL held (module `gil_used`).
    let py = unsafe { Python::assume_attached() };
    let answer = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the contract above; every pointer is borrowed for the call's length.
        unsafe {
            let slf = Borrowed::from_ptr(py, callable).cast_unchecked::<T>();
            let nargs = nargsf & !ARGUMENTS_OFFSET;
            let names = Borrowed::from_ptr_or_opt(py, kwnames)
                .map(|n| n.cast_unchecked::<PyTuple>())
                .filter(|n| n.len() > 0);
            let given = nargs + names.as_ref().map_or(0, |n| n.len());
            let all: &[*mut ffi::PyObject] = match given {
                0 => &[],
                n => std::slice::from_raw_parts(args, n),
            };
            slf.get().vectorcall(py, all, nargs, names)
        }
    }));
    let err = match answer {
        Ok(Ok(v)) => return v.into_ptr(),
        Ok(Err(e)) => e,
        Err(payload) => panic_error(payload),
    };
    err.restore(py);
    std::ptr::null_mut()
}

/// A panic as pyo3 raises it (`pyo3_runtime.PanicException`, with the panic's message).
#[cold]
pub(crate) fn panic_error(payload: Box<dyn std::any::Any + Send>) -> PyErr {
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "panic from Rust code".to_owned());
    pyo3::panic::PanicException::new_err((message,))
}
