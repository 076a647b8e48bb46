//! How Python values cross the shared tier (`Cache(redis=..., codec=...)`), and the
//! binding's side of the fleet engine ([`PyHost`]: its codec and its logger).
//!
//! JSON by default (what the other languages read), extended so that what web handlers
//! return round-trips: `Decimal`, `datetime`, `date` and `UUID` are written as
//! `{"$type": "decimal", "$value": "12.30"}` (herdless/_json.py). Raw bytes, or the user's
//! object with `encode`/`decode`. Never pickle by default: a value read from Redis must not
//! be able to run code.

use std::cell::RefCell;

use herdless_redis::{CodecError, Host, Warning};
use pyo3::exceptions::{PyException, PyTypeError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyMemoryView, PyString};

use crate::errors::{PyLoadError, config_error, config_type_error};
use crate::value::PyValue;

/// How values become the bytes of a shared entry and back, and whether the memory tier
/// copies them ([`PyValue`]: `copy_values`).
pub(crate) struct Codec {
    format: Format,
    /// `copy_values`: mutable values are kept as their pickle, a new object per caller.
    pub(crate) copy_values: bool,
}

/// The bytes of a shared entry.
enum Format {
    /// UTF-8 JSON text, readable by every language's JSON codec.
    Json,
    /// The value is `bytes` (also accepted: `bytearray`, `memoryview`); read back as `bytes`.
    Bytes,
    /// An object with `encode(value) -> bytes` and `decode(bytes) -> value`.
    Custom(Py<PyAny>),
}

static JSON: PyOnceLock<(Py<PyAny>, Py<PyAny>)> = PyOnceLock::new();

/// `herdless._json.dumps` and `loads`.
fn json(py: Python<'_>) -> PyResult<&(Py<PyAny>, Py<PyAny>)> {
    JSON.get_or_try_init(py, || {
        let m = py.import("herdless._json")?;
        Ok((m.getattr("dumps")?.unbind(), m.getattr("loads")?.unbind()))
    })
}

fn bytes_of(v: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = v.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(b) = v.cast::<PyByteArray>() {
        return Ok(b.to_vec());
    }
    if v.is_instance_of::<PyMemoryView>() {
        return v.call_method0("tobytes")?.extract::<Vec<u8>>();
    }
    let ty = v.get_type().qualname()?;
    Err(PyTypeError::new_err(format!(
        "the bytes codec stores bytes, got {ty}"
    )))
}

impl Codec {
    /// The `codec=` option: `"json"` (default), `"bytes"`, or an object with
    /// `encode` and `decode`; `copy_values` as checked.
    pub(crate) fn from_option(
        py: Python<'_>,
        v: Option<&Bound<'_, PyAny>>,
        copy_values: bool,
    ) -> PyResult<Self> {
        Format::from_option(py, v).map(|format| Self {
            format,
            copy_values,
        })
    }

    /// The bytes of `value`.
    fn encode(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
        self.format.encode(py, value)
    }

    /// The value of `bytes`.
    fn decode<'py>(&self, py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        self.format.decode(py, bytes)
    }
}

impl Format {
    fn from_option(py: Python<'_>, v: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let Some(v) = v.filter(|v| !v.is_none()) else {
            return Ok(Format::Json);
        };
        if let Ok(s) = v.cast::<PyString>() {
            return match s.to_str()? {
                "json" => Ok(Format::Json),
                "bytes" => Ok(Format::Bytes),
                other => Err(config_error(
                    py,
                    format!(
                        "`codec` must be \"json\", \"bytes\" or an object with encode/decode, got {other:?}"
                    ),
                )),
            };
        }
        let callable = |name: &str| v.getattr(name).is_ok_and(|f| f.is_callable());
        if callable("encode") && callable("decode") {
            return Ok(Format::Custom(v.clone().unbind()));
        }
        Err(config_type_error(
            py,
            "`codec` must be \"json\", \"bytes\" or an object with encode(value) -> bytes and decode(bytes) -> value".into(),
        ))
    }

    /// The bytes of `value`.
    fn encode(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
        match self {
            Format::Json => {
                let text = json(py)?.0.bind(py).call1((value,))?;
                Ok(text.cast::<PyString>()?.to_str()?.as_bytes().to_vec())
            }
            Format::Bytes => bytes_of(value),
            Format::Custom(c) => bytes_of(&c.bind(py).call_method1("encode", (value,))?),
        }
    }

    /// The value of `bytes`.
    fn decode<'py>(&self, py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Format::Json => {
                let text = std::str::from_utf8(bytes)
                    .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
                json(py)?.1.bind(py).call1((text,))
            }
            Format::Bytes => Ok(PyBytes::new(py, bytes).into_any()),
            Format::Custom(c) => c
                .bind(py)
                .call_method1("decode", (PyBytes::new(py, bytes),)),
        }
    }
}

/// The binding's side of the fleet engine, for one call, with the GIL held: the cache's
/// codec, and the `herdless` logger for warnings.
///
/// A codec that raises an `Exception` refuses the value (unshareable) or the bytes
/// (unreadable: a miss); any other `BaseException` (KeyboardInterrupt, SystemExit) is about
/// this thread, not the value: it is kept here, the engine hands the load over, and the
/// driver re-raises it ([`take_interrupt`](Self::take_interrupt)).
pub(crate) struct PyHost<'a, 'py> {
    py: Python<'py>,
    codec: &'a Codec,
    interrupt: RefCell<Option<PyErr>>,
}

impl<'a, 'py> PyHost<'a, 'py> {
    pub(crate) fn new(py: Python<'py>, codec: &'a Codec) -> Self {
        Self {
            py,
            codec,
            interrupt: RefCell::new(None),
        }
    }

    /// The interruption a codec call raised, if any.
    pub(crate) fn take_interrupt(&self) -> Option<PyErr> {
        self.interrupt.borrow_mut().take()
    }

    /// What a caller re-raises for the engine's `interrupted` step: the interruption a
    /// codec call raised (a bare `RuntimeError` only if none was kept).
    pub(crate) fn raise(&self, interrupted: CodecError) -> PyErr {
        self.take_interrupt().unwrap_or_else(|| {
            pyo3::exceptions::PyRuntimeError::new_err(format!("herdless: {interrupted}"))
        })
    }

    fn refuse(&self, err: PyErr) -> CodecError {
        if err.is_instance_of::<PyException>(self.py) {
            return CodecError::new(PyLoadError::new(self.py, err));
        }
        let text = err.to_string();
        *self.interrupt.borrow_mut() = Some(err);
        CodecError::interrupted(text)
    }
}

impl Host<PyValue> for PyHost<'_, '_> {
    fn encode(&self, value: &PyValue) -> Result<Vec<u8>, CodecError> {
        value
            .bind(self.py)
            .and_then(|v| self.codec.encode(self.py, &v))
            .map_err(|e| self.refuse(e))
    }

    fn decode(&self, bytes: &[u8]) -> Result<PyValue, CodecError> {
        // Copied like a value given to `set`: the caller who read it may mutate it.
        self.codec
            .decode(self.py, bytes)
            .and_then(|v| PyValue::new(v, self.codec.copy_values))
            .map_err(|e| self.refuse(e))
    }

    fn warn(&self, warning: &Warning<'_>) {
        let log = || -> PyResult<()> {
            let kwargs = PyDict::new(self.py);
            if let Warning::Unshareable { error, .. } = warning {
                if let Some(original) = error.get().downcast_ref::<PyLoadError>() {
                    kwargs.set_item("exc_info", original.value(self.py))?;
                }
            }
            self.py
                .import("logging")?
                .call_method1("getLogger", ("herdless",))?
                .call_method("warning", ("%s", warning.to_string()), Some(&kwargs))?;
            Ok(())
        };
        // A logging failure must not fail the load.
        let _ = log();
    }
}
