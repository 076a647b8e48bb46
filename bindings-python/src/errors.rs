//! Errors, mapped once: every engine error becomes an exception of `herdless.errors` (one
//! hierarchy under `HerdlessError`), and a loader's own exception travels through the engine
//! inside a [`PyLoadError`] so that every waiter re-raises the very object the loader raised.

use std::fmt;

use herdless::{Error, KeyError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTraceback};

static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The exception class `name` of `herdless.errors` (a pure-Python module, so that classes can
/// inherit from both `HerdlessError` and a builtin such as `ValueError`).
fn class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    ERRORS
        .get_or_try_init(py, || py.import("herdless.errors").map(Bound::unbind))?
        .bind(py)
        .getattr(name)
}

/// A `herdless.errors.<class>` exception with `message` and keyword attributes.
pub(crate) fn herdless_err(
    py: Python<'_>,
    class_name: &str,
    message: String,
    attrs: &[(&str, Bound<'_, PyAny>)],
) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let kwargs = PyDict::new(py);
        for (k, v) in attrs {
            kwargs.set_item(k, v)?;
        }
        let exc = class(py, class_name)?.call((message,), Some(&kwargs))?;
        Ok(PyErr::from_value(exc))
    };
    build().unwrap_or_else(|e| e)
}

/// A bad option value (`ConfigError`, a `ValueError`).
pub(crate) fn config_error(py: Python<'_>, message: String) -> PyErr {
    herdless_err(py, "ConfigError", message, &[])
}

/// An option of the wrong type (`ConfigTypeError`, a `TypeError`).
pub(crate) fn config_type_error(py: Python<'_>, message: String) -> PyErr {
    herdless_err(py, "ConfigTypeError", message, &[])
}

/// A key that cannot be built (`KeyBuildError`, a `ValueError`).
pub(crate) fn key_error(py: Python<'_>, e: KeyError) -> PyErr {
    herdless_err(py, "KeyBuildError", e.to_string(), &[])
}

/// A value a key cannot hold (`UnsupportedKeyValue`, a `TypeError`).
pub(crate) fn unsupported_key_value(py: Python<'_>, message: String) -> PyErr {
    herdless_err(py, "UnsupportedKeyValue", message, &[])
}

/// The one mapping from engine errors to exceptions.
pub(crate) fn map_error(py: Python<'_>, e: Error) -> PyErr {
    let secs = |d: std::time::Duration| d.as_secs_f64().into_pyobject(py).map(Bound::into_any);
    let int = |n: usize| n.into_pyobject(py).map(Bound::into_any);
    let message = e.to_string();
    let attempt = || -> PyResult<PyErr> {
        Ok(match e {
            Error::Load(load) => {
                // A loader's exception, or a codec's (a value `set` could not encode).
                let original = load.downcast_ref::<PyLoadError>().or_else(|| {
                    load.downcast_ref::<herdless_redis::CodecError>()
                        .and_then(|c| c.get().downcast_ref::<PyLoadError>())
                });
                match original {
                    Some(original) => original.raise(py),
                    None => herdless_err(py, "HerdlessError", message, &[]),
                }
            }
            Error::EmptyKey => herdless_err(py, "EmptyKey", message, &[]),
            Error::KeyTooLong { len, max } => herdless_err(
                py,
                "KeyTooLong",
                message,
                &[("length", int(len)?), ("limit", int(max)?)],
            ),
            Error::WaitTimeout { waited } => {
                herdless_err(py, "WaitTimeout", message, &[("waited", secs(waited)?)])
            }
            Error::LoadTimeout { after } => {
                herdless_err(py, "LoadTimeout", message, &[("after", secs(after)?)])
            }
            Error::LoaderPanicked { .. } => herdless_err(py, "LoaderPanicked", message, &[]),
            Error::TooManyFlights { max } => {
                herdless_err(py, "TooManyFlights", message, &[("limit", int(max)?)])
            }
            Error::Backend(_) => herdless_err(py, "BackendError", message, &[]),
            Error::NoPrevious => herdless_err(py, "NoPrevious", message, &[]),
            Error::MetaTooLong { .. } => herdless_err(py, "MetaTooLong", message, &[]),
            Error::EmptyTag => herdless_err(py, "EmptyTag", message, &[]),
            Error::TagTooLong { len, max } => herdless_err(
                py,
                "TagTooLong",
                message,
                &[("length", int(len)?), ("limit", int(max)?)],
            ),
            Error::TooManyTags { count, max } => herdless_err(
                py,
                "TooManyTags",
                message,
                &[("count", int(count)?), ("limit", int(max)?)],
            ),
            Error::ZeroTtl | Error::TtlTooLong { .. } => config_error(py, message),
            Error::Closed => herdless_err(py, "CacheClosed", message, &[]),
            _ => herdless_err(py, "HerdlessError", message, &[]),
        })
    };
    attempt().unwrap_or_else(|err| err)
}

/// A loader's exception, carried through the engine to every waiter of its load.
///
/// Waiters re-raise the same exception object (so `except ValueError` works unchanged and
/// `exc is` the leader's exception), each with the traceback the loader raised it with.
pub(crate) struct PyLoadError {
    exc: Py<PyAny>,
    traceback: Option<Py<PyTraceback>>,
    /// `Type: message`, captured with the GIL so that `Display` never needs it.
    text: String,
}

impl PyLoadError {
    /// Wraps the exception a loader raised.
    pub(crate) fn new(py: Python<'_>, err: PyErr) -> Self {
        let traceback = err.traceback(py).map(Bound::unbind);
        let value = err.into_value(py).into_bound(py).into_any();
        Self::from_parts(value, traceback)
    }

    fn from_parts(exc: Bound<'_, PyAny>, traceback: Option<Py<PyTraceback>>) -> Self {
        let type_name = exc
            .get_type()
            .qualname()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "exception".into());
        let text = match exc.str() {
            Ok(s) if !s.is_empty().unwrap_or(true) => format!("{type_name}: {s}"),
            _ => type_name,
        };
        Self {
            exc: exc.unbind(),
            traceback,
            text,
        }
    }

    /// The exception object.
    pub(crate) fn value<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        self.exc.bind(py).clone()
    }

    /// The original exception, ready to raise, its traceback reset to the loader's.
    pub(crate) fn raise(&self, py: Python<'_>) -> PyErr {
        let exc = self.exc.bind(py);
        if let Some(tb) = &self.traceback {
            // Restoring the loader's frames: a waiter's traceback then reads "waiter's call,
            // then the loader", not the frames of whichever thread raised it last.
            let _ = exc.setattr("__traceback__", tb.bind(py));
        }
        PyErr::from_value(exc.clone())
    }
}

impl fmt::Debug for PyLoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Display for PyLoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for PyLoadError {}
