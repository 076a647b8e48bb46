//! Values as the engine holds them: the Python objects themselves, shared, never copied or
//! serialised, and [`ABSENT`](Absent), the loader's way to say "there is nothing" (negative
//! caching), distinct from a cached `None`.

use std::sync::Arc;

use herdless_redis::Versioned;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

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
    obj: Arc<Py<PyAny>>,
}

/// What the L1 holds.
pub(crate) type Held = Versioned<PyValue>;

impl PyValue {
    pub(crate) fn new(obj: Py<PyAny>) -> Self {
        Self { obj: Arc::new(obj) }
    }

    pub(crate) fn bind<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        self.obj.bind(py).clone()
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

/// What a loader's return value means to the engine: `ABSENT` is an absence.
pub(crate) fn from_loader(obj: Bound<'_, PyAny>) -> PyResult<Option<PyValue>> {
    if obj.is(absent(obj.py())?) {
        Ok(None)
    } else {
        Ok(Some(PyValue::new(obj.unbind())))
    }
}

/// What a caller receives: the cached object, or `ABSENT` for a cached absence.
pub(crate) fn to_caller(py: Python<'_>, value: Option<PyValue>) -> PyResult<Py<PyAny>> {
    match value {
        Some(v) => Ok(v.bind(py).unbind()),
        None => Ok(absent(py)?.clone().into_any().unbind()),
    }
}
