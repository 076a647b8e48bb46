//! What a call calls to load one value ([`Loader`]), apart from the drivers so that the
//! observer of loader calls (`observe`) and the drivers all use it, none leaning on another.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

/// What to call to load a value.
pub(crate) enum Loader {
    /// `loader()`.
    Call0(Py<PyAny>),
    /// `func(*args, **kwargs)` (the decorator: no closure is allocated per call).
    Call(Py<PyAny>, Py<PyTuple>, Option<Py<PyDict>>),
}

impl Loader {
    /// The loader as one callable of no arguments.
    pub(crate) fn into_callable(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match self {
            Loader::Call0(f) => Ok(f),
            Loader::Call(f, args, kwargs) => {
                let partial = py.import("functools")?.getattr("partial")?;
                let mut all = vec![f.into_bound(py)];
                all.extend(args.bind(py).iter());
                let all = PyTuple::new(py, all)?;
                Ok(partial
                    .call(all, kwargs.as_ref().map(|k| k.bind(py)))?
                    .unbind())
            }
        }
    }

    /// Calls the loader in `context` (a `contextvars.Context`): what it returned (an
    /// awaitable, for an async loader).
    pub(crate) fn call_in<'py>(
        &self,
        py: Python<'py>,
        context: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (f, args, kwargs) = match self {
            Loader::Call0(f) => (f, None, None),
            Loader::Call(f, args, kwargs) => (f, Some(args), kwargs.as_ref()),
        };
        let mut all = vec![f.bind(py).clone()];
        all.extend(args.into_iter().flat_map(|a| a.bind(py).iter()));
        context.call_method("run", PyTuple::new(py, all)?, kwargs.map(|k| k.bind(py)))
    }

    /// Calls a sync loader: its value.
    pub(crate) fn call<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let value = match self {
            Loader::Call0(f) => f.bind(py).call0(),
            Loader::Call(f, args, kwargs) => f
                .bind(py)
                .call(args.bind(py), kwargs.as_ref().map(|k| k.bind(py))),
        }?;
        // An async function given to the sync API: caching its coroutine (or future) would
        // hand every caller the same never-awaited object. Refused (a coroutine is closed,
        // so no "never awaited" warning follows).
        if value.hasattr("__await__")? {
            if value.get_type().name()? == "coroutine" {
                let _ = value.call_method0("close");
            }
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "the loader returned an awaitable: get_or_load and sync functions run sync \
                 loaders; use aget_or_load (or decorate the async function itself)",
            ));
        }
        Ok(value)
    }
}
