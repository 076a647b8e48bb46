//! Values as the engine holds them, and [`ABSENT`](Absent), the loader's way to say "there
//! is nothing" (negative caching), distinct from a cached `None`.
//!
//! A value is isolated from its callers (`copy_values=True`, the default), as the platform's
//! own caches do (Django's LocMemCache pickles): a mutable object is kept as its pickle, made
//! when it is stored and read back into a new object for each caller, so mutating the object
//! given to `set` (or returned by `get`) never changes what another caller reads. Immutable
//! objects (`None`, `bool`, `int`, `float`, `complex`, `str`, `bytes`, and tuples and
//! frozensets of those) are shared as they are: nobody can change them, and the hit path
//! stays one reference bump. `copy_values=False` shares every object (callers promise never
//! to mutate a value after storing it or reading it).

use std::sync::Arc;

use herdless_redis::Versioned;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyBytes, PyComplex, PyFloat, PyFrozenSet, PyInt, PyString, PyTuple};

/// How a value is kept: shared, or as its pickle.
enum Kept {
    /// An immutable object (or any object, with `copy_values=False`).
    Shared(Py<PyAny>),
    /// The pickle of a mutable object: each reader gets a new object.
    Pickled(Py<PyBytes>),
}

/// A cached Python object.
///
/// Cloning shares it with an `Arc` bump, so the engine copies values between entries, flights
/// and waiters without the GIL. The object's own reference is released when the last clone
/// drops: at once on a thread attached to the interpreter, otherwise (an eviction or a waiter
/// on a thread without the GIL) pyo3 defers the decrement to the next time any thread
/// attaches, which every call into this module does. Dropping without the GIL is therefore
/// sound and never blocks.
///
/// The L1 holds it as a [`Versioned`] (the shared entry's version travels beside it).
#[derive(Clone)]
pub(crate) struct PyValue {
    obj: Arc<Kept>,
}

/// What the L1 holds.
pub(crate) type Held = Versioned<PyValue>;

/// How deep a tuple or frozenset is looked into before its value is taken as mutable
/// (and copied): bounds the check of a value whatever its nesting.
const IMMUTABLE_DEPTH: usize = 4;

/// Whether nobody can change `v` (nor anything it holds): exact builtin types only, since a
/// subclass may carry a mutable `__dict__`.
fn immutable(v: &Bound<'_, PyAny>, depth: usize) -> bool {
    if v.is_none()
        || v.is_exact_instance_of::<PyString>()
        || v.is_exact_instance_of::<PyInt>()
        || v.is_exact_instance_of::<PyFloat>()
        || v.is_exact_instance_of::<PyBool>()
        || v.is_exact_instance_of::<PyBytes>()
        || v.is_exact_instance_of::<PyComplex>()
    {
        return true;
    }
    if depth == 0 {
        return false;
    }
    if let Ok(t) = v.cast_exact::<PyTuple>() {
        return t.iter().all(|item| immutable(&item, depth - 1));
    }
    if let Ok(s) = v.cast_exact::<PyFrozenSet>() {
        return s.iter().all(|item| immutable(&item, depth - 1));
    }
    false
}

/// `pickle.dumps`, `pickle.loads` and `pickle.HIGHEST_PROTOCOL` (as Django's LocMemCache).
struct Pickle {
    dumps: Py<PyAny>,
    loads: Py<PyAny>,
    protocol: Py<PyAny>,
}

static PICKLE: PyOnceLock<Pickle> = PyOnceLock::new();

fn pickle(py: Python<'_>) -> PyResult<&Pickle> {
    PICKLE.get_or_try_init(py, || {
        let m = py.import("pickle")?;
        Ok(Pickle {
            dumps: m.getattr("dumps")?.unbind(),
            loads: m.getattr("loads")?.unbind(),
            protocol: m.getattr("HIGHEST_PROTOCOL")?.unbind(),
        })
    })
}

impl PyValue {
    /// `obj` as the cache keeps it: with `copy`, a mutable object is pickled now (an
    /// unpicklable one raises the pickler's error, e.g. `pickle.PicklingError` or
    /// `TypeError`), so that later changes to it are not the cache's.
    pub(crate) fn new(obj: Bound<'_, PyAny>, copy: bool) -> PyResult<Self> {
        let kept = if !copy || immutable(&obj, IMMUTABLE_DEPTH) {
            Kept::Shared(obj.unbind())
        } else {
            let py = obj.py();
            let p = pickle(py)?;
            let data = p.dumps.bind(py).call1((obj, p.protocol.bind(py)))?;
            Kept::Pickled(data.cast_into::<PyBytes>()?.unbind())
        };
        Ok(Self {
            obj: Arc::new(kept),
        })
    }

    /// The value for one caller: the shared object, or a new object read from the pickle.
    pub(crate) fn bind<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match &*self.obj {
            Kept::Shared(o) => Ok(o.bind(py).clone()),
            Kept::Pickled(data) => pickle(py)?.loads.bind(py).call1((data.bind(py),)),
        }
    }
}

/// The type of `herdless.ABSENT`: a loader returns it to say the thing does not exist.
///
/// The absence is cached for `negative_ttl` and handed back as `ABSENT` to every caller, so a
/// decorated function behaves the same whether the answer came from the origin or the cache.
/// It is falsy and a singleton: test it with `is ABSENT`.
#[pyclass(frozen, module = "herdless", name = "Absent")]
pub(crate) struct Absent;

#[pymethods]
impl Absent {
    fn __repr__(&self) -> &'static str {
        "herdless.ABSENT"
    }

    fn __bool__(&self) -> bool {
        false
    }

    /// Pickles as a reference to the singleton.
    fn __reduce__(&self) -> &'static str {
        "ABSENT"
    }
}

static ABSENT: PyOnceLock<Py<Absent>> = PyOnceLock::new();

/// The `ABSENT` singleton.
pub(crate) fn absent(py: Python<'_>) -> PyResult<&Bound<'_, Absent>> {
    ABSENT
        .get_or_try_init(py, || Py::new(py, Absent))
        .map(|a| a.bind(py))
}

/// What a loader's return value means to the engine: `ABSENT` is an absence. `copy`: the
/// cache's `copy_values`.
pub(crate) fn from_loader(obj: Bound<'_, PyAny>, copy: bool) -> PyResult<Option<PyValue>> {
    if obj.is(absent(obj.py())?) {
        Ok(None)
    } else {
        PyValue::new(obj, copy).map(Some)
    }
}

/// What a caller receives: the cached value (its own copy of a mutable one), or `ABSENT`
/// for a cached absence.
pub(crate) fn to_caller(py: Python<'_>, value: Option<PyValue>) -> PyResult<Py<PyAny>> {
    match value {
        Some(v) => Ok(v.bind(py)?.unbind()),
        None => Ok(absent(py)?.clone().into_any().unbind()),
    }
}
