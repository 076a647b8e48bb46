//! The Redis tier (`Cache(redis="redis://...")`): the in-memory engine stays the first tier
//! (L1) and does the in-process single-flight; its one local leader per key drives the
//! fleet protocol of `herdless-redis` ([`Fleet`], PROTOCOL.md), so Python, Rust and Node
//! processes sharing a Redis make one loader call per key between them.
//!
//! Values cross Redis through a [`Codec`]: JSON by default (what the other languages read),
//! raw bytes, or the user's object with `encode`/`decode`. Never pickle by default: a value
//! read from Redis must not be able to run code.

use std::sync::Arc;
use std::time::Duration;

use herdless::backend::{Backend, Notice, StoredEntry};
use herdless_redis::{Fleet, FleetOptions, RedisBackend};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyMemoryView, PyString};

use crate::errors::{config_error, config_type_error, herdless_err};
use crate::value::PyValue;

/// How values become the bytes of a shared entry and back.
pub(crate) enum Codec {
    /// UTF-8 JSON text (`json.dumps`/`json.loads`), readable by every language's JSON codec.
    Json,
    /// The value is `bytes` (also accepted: `bytearray`, `memoryview`); read back as `bytes`.
    Bytes,
    /// An object with `encode(value) -> bytes` and `decode(bytes) -> value`.
    Custom(Py<PyAny>),
}

static JSON: PyOnceLock<(Py<PyAny>, Py<PyAny>)> = PyOnceLock::new();

fn json(py: Python<'_>) -> PyResult<&(Py<PyAny>, Py<PyAny>)> {
    JSON.get_or_try_init(py, || {
        let m = py.import("json")?;
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
    /// `encode` and `decode`.
    pub(crate) fn from_option(py: Python<'_>, v: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let Some(v) = v.filter(|v| !v.is_none()) else {
            return Ok(Codec::Json);
        };
        if let Ok(s) = v.cast::<PyString>() {
            return match s.to_str()? {
                "json" => Ok(Codec::Json),
                "bytes" => Ok(Codec::Bytes),
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
            return Ok(Codec::Custom(v.clone().unbind()));
        }
        Err(config_type_error(
            py,
            "`codec` must be \"json\", \"bytes\" or an object with encode(value) -> bytes and decode(bytes) -> value".into(),
        ))
    }

    /// The bytes of `value`.
    pub(crate) fn encode(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
        match self {
            Codec::Json => {
                let kwargs = PyDict::new(py);
                kwargs.set_item("separators", (",", ":"))?;
                kwargs.set_item("ensure_ascii", false)?;
                kwargs.set_item("allow_nan", false)?;
                let text = json(py)?.0.bind(py).call((value,), Some(&kwargs))?;
                Ok(text.cast::<PyString>()?.to_str()?.as_bytes().to_vec())
            }
            Codec::Bytes => bytes_of(value),
            Codec::Custom(c) => bytes_of(&c.bind(py).call_method1("encode", (value,))?),
        }
    }

    /// The value of `bytes`.
    pub(crate) fn decode<'py>(&self, py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Codec::Json => {
                let text = std::str::from_utf8(bytes)
                    .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
                json(py)?.1.bind(py).call1((text,))
            }
            Codec::Bytes => Ok(PyBytes::new(py, bytes).into_any()),
            Codec::Custom(c) => c
                .bind(py)
                .call_method1("decode", (PyBytes::new(py, bytes),)),
        }
    }
}

pub(crate) use herdless_redis::Lifetimes;

/// The connection to the fleet.
pub(crate) struct Tier {
    pub(crate) backend: RedisBackend,
    pub(crate) fleet: Fleet,
    pub(crate) codec: Codec,
    life: Lifetimes,
    /// The process that connected: the backend's threads do not survive a fork.
    pid: u32,
}

impl Tier {
    /// Refuses to use the connection in a forked child, where the backend's runtime threads
    /// do not exist (its calls would never finish).
    pub(crate) fn check_fork(&self, py: Python<'_>) -> PyResult<()> {
        if std::process::id() == self.pid {
            return Ok(());
        }
        Err(herdless_err(
            py,
            "BackendError",
            "this Cache's Redis connection was made before os.fork(): create the Cache in each \
             worker process (e.g. in a post-fork hook)"
                .into(),
            &[],
        ))
    }

    /// Connects (lazily: this succeeds while Redis is down) and keeps `l1` coherent with the
    /// fleet's writes, invalidations and bumps.
    pub(crate) fn connect(
        url: &str,
        prefix: Option<&str>,
        fleet: FleetOptions,
        codec: Codec,
        life: Lifetimes,
        l1: &herdless::Cache<PyValue>,
    ) -> Result<Self, herdless_redis::Error> {
        let mut b = RedisBackend::builder(url);
        if let Some(p) = prefix {
            b = b.prefix(p);
        }
        let backend = b.build()?;
        let l1 = l1.clone();
        backend.listen(Arc::new(move |n: Notice<'_>| {
            herdless_redis::apply_notice(&l1, n)
        }));
        Ok(Self {
            fleet: backend.fleet(fleet),
            backend,
            codec,
            life,
            pid: std::process::id(),
        })
    }

    /// A value read from a shared entry (`None`: a cached absence). `Err`: bytes this
    /// codec cannot read (another codec's): the caller loads locally and leaves Redis alone.
    pub(crate) fn decode(&self, py: Python<'_>, e: &StoredEntry) -> PyResult<Option<PyValue>> {
        match &e.value {
            None => Ok(None),
            Some(b) => {
                let v = self.codec.decode(py, b)?;
                Ok(Some(PyValue::new(v.unbind()).with_version(e.version)))
            }
        }
    }

    /// The shared entry of a value just loaded or set (jittered once, here, for the whole
    /// fleet), and how long it is fresh. `ttl` overrides the cache's for a value.
    pub(crate) fn entry(
        &self,
        value: Option<Vec<u8>>,
        took: Duration,
        epoch: u64,
        ttl: Option<Duration>,
    ) -> (StoredEntry, Duration) {
        self.life.entry(value, took, epoch, ttl)
    }

    /// How long a shared entry is still fresh from now.
    pub(crate) fn fresh_for(e: &StoredEntry) -> Duration {
        herdless_redis::fresh_for(e)
    }
}
