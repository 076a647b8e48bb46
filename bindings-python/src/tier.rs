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
use herdless_redis::{Fleet, FleetOptions, RedisBackend, now_ms};
use parking_lot::Mutex;
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

/// The lifetimes the tier writes shared entries with (the cache's options).
pub(crate) struct Lifetimes {
    pub(crate) ttl: Duration,
    pub(crate) grace: Duration,
    pub(crate) negative_ttl: Duration,
    pub(crate) max_stale: Option<Duration>,
    pub(crate) jitter: f64,
}

/// The connection to the fleet.
pub(crate) struct Tier {
    pub(crate) backend: RedisBackend,
    pub(crate) fleet: Fleet,
    pub(crate) codec: Codec,
    life: Lifetimes,
    rng: Mutex<u64>,
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
        backend.listen(Arc::new(move |n: Notice<'_>| on_notice(&l1, n)));
        let seed = u64::from(std::process::id())
            ^ now_ms().rotate_left(21)
            ^ (&backend as *const RedisBackend as u64);
        Ok(Self {
            fleet: backend.fleet(fleet),
            backend,
            codec,
            life,
            rng: Mutex::new(seed | 1),
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

    fn unit(&self) -> f64 {
        // xorshift64*: jitter needs spread, not secrecy.
        let mut s = self.rng.lock();
        *s ^= *s >> 12;
        *s ^= *s << 25;
        *s ^= *s >> 27;
        let x = s.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (x >> 11) as f64 / (1u64 << 53) as f64
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
        let now = now_ms();
        let base = if value.is_some() {
            ttl.unwrap_or(self.life.ttl)
        } else {
            self.life.negative_ttl
        };
        let fresh = herdless::jitter::jittered(base, self.life.jitter, self.unit());
        let (grace, retain) = if value.is_some() {
            let g = self.life.grace;
            (g, self.life.max_stale.map_or(g, |m| m.max(g)))
        } else {
            (Duration::ZERO, Duration::ZERO)
        };
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let fresh_until_ms = now.saturating_add(ms(fresh).max(1));
        let stale_until_ms = fresh_until_ms.saturating_add(ms(grace));
        let entry = StoredEntry {
            value,
            fresh_until_ms,
            stale_until_ms,
            retain_until_ms: fresh_until_ms.saturating_add(ms(retain)),
            load_duration: took,
            version: 0,
            epoch,
        };
        (entry, fresh)
    }

    /// How long a shared entry is still fresh from now.
    pub(crate) fn fresh_for(e: &StoredEntry) -> Duration {
        Duration::from_millis(e.fresh_until_ms.saturating_sub(now_ms()))
    }
}

/// Keeps the L1 coherent with other processes' changes (runs on the backend's thread; it
/// never needs the GIL: dropped values are released by pyo3 later).
fn on_notice(l1: &herdless::Cache<PyValue>, n: Notice<'_>) {
    match n {
        // A waiting local leader reads the new entry itself.
        Notice::Written { awaited: true, .. } | Notice::Released { .. } => {}
        Notice::Written { key, .. } | Notice::Invalidated { key } => {
            let _ = l1.invalidate(key);
        }
        Notice::Bumped { namespace, .. } => {
            l1.bump(namespace);
        }
        // Messages may have been lost: every L1 copy may be outdated.
        Notice::Lost => {
            for ns in l1.metrics().namespaces {
                l1.bump(&ns.namespace);
            }
        }
    }
}
