//! Python as a language of the engine's call machine ([`herdless_redis::call`]), which
//! decides every call from its key to its answer; this only calls loaders and waits the
//! Python way, in two runtimes:
//!
//! - [`threads`]: the sync calls (`get_or_load`, the decorator's sync path,
//!   `get_or_load_many`) driven on the calling thread, parked with the GIL released
//!   ([`block`]), background jobs on daemon threads;
//! - [`event_loop`]: the asyncio calls (`aget_or_load`, async decorated functions,
//!   `aget_or_load_many`) driven on the running event loop through the bridge of
//!   [`crate::asyncio`], loaders' awaitables run as tasks of the loop;
//! - [`group`]: the first step of `aget_or_load`, and the herds of asyncio callers of a
//!   key that wait together for one load (polled together when it ends);
//! - [`batch`]: what both do with a batch loader's answer.
//!
//! Shared by both: the cache's [`Handle`], how a loader call ends ([`called`], [`loaded`])
//! and how a background failure is told ([`log_failure`]). Node's driver is the same
//! machine on the JS thread (`bindings-node/src/driver/`).

/// `impl Host<PyValue>` for a runtime that carries the cache's [`PyHost`](crate::codec::PyHost)
/// in its `host` field: both runtimes are the codec that way.
macro_rules! host_via_field {
    ($runtime:ty) => {
        impl herdless_redis::Host<PyValue> for $runtime {
            fn encode(&self, value: &PyValue) -> Result<Vec<u8>, herdless_redis::CodecError> {
                self.host.encode(value)
            }
            fn decode(&self, bytes: &[u8]) -> Result<PyValue, herdless_redis::CodecError> {
                self.host.decode(bytes)
            }
            fn warn(&self, warning: &herdless_redis::Warning<'_>) {
                self.host.warn(warning)
            }
        }
    };
}

pub(crate) mod batch;
pub(crate) mod block;
pub(crate) mod event_loop;
pub(crate) mod group;
pub(crate) mod threads;

use herdless::{LoadError, Loaded};
use herdless_redis::call::Called;
use herdless_redis::two_tier::{Load, TwoTier};
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::codec::Codec;
use crate::context::{LoadContext, takes_context, to_loaded};
use crate::driver::block::block_on;
use crate::errors::{PyLoadError, map_error};
use crate::loader::Loader;
use crate::observe::Observer;
use crate::value::PyValue;

/// What the binding holds of a cache: the fleet engine over its L1, and the codec of its
/// shared tier (JSON when there is none: it is then never used).
#[derive(Clone)]
pub(crate) struct Handle {
    pub(crate) tt: TwoTier<PyValue>,
    pub(crate) codec: std::sync::Arc<Codec>,
    /// Sees each loader call (spans), when set.
    pub(crate) observer: Observer,
}

impl Handle {
    /// Removes `key` here and, with a shared tier, in the whole fleet.
    pub(crate) fn invalidate(&self, py: Python<'_>, key: &str) -> PyResult<bool> {
        let mut pending = self.tt.invalidate(key).map_err(|e| map_error(py, e))?;
        block_on(py, &mut pending)?.map_err(|e| map_error(py, e))
    }

    /// `loader` ready to call for `load`: a `loader(ctx)` gets its context bound as its
    /// argument, then the observer (if any) wraps it; the context is returned to read the
    /// answer with.
    pub(crate) fn prepare(
        &self,
        py: Python<'_>,
        loader: Loader,
        load: &Load<PyValue>,
    ) -> PyResult<(Loader, Option<Py<LoadContext>>)> {
        let (loader, ctx) = match loader {
            Loader::Call0(f) if takes_context(f.bind(py))? => {
                let ctx = Py::new(py, LoadContext::new(load.context()))?;
                let args = PyTuple::new(py, [ctx.clone_ref(py).into_any()])?.unbind();
                (Loader::Call(f, args, None), Some(ctx))
            }
            loader => (loader, None),
        };
        let loader = self
            .observer
            .wrap(py, load.key(), load.is_background(), loader)?;
        Ok((loader, ctx))
    }
}

/// A one-key loader's answer `value`, read with its context (what the loader set on it).
pub(crate) fn loaded(
    value: Bound<'_, PyAny>,
    ctx: Option<&Py<LoadContext>>,
    copy: bool,
) -> PyResult<Loaded<PyValue>> {
    match ctx {
        Some(ctx) => ctx.get().answer(value, copy),
        None => to_loaded(value, copy),
    }
}

/// How a loader call ended, the Python way: an `Exception` is the load's result; any other
/// `BaseException` (KeyboardInterrupt, a task's cancellation) is about the caller, not the
/// load.
pub(crate) fn called<T>(py: Python<'_>, r: PyResult<T>) -> Called<T, PyErr> {
    match r {
        Ok(v) => Called::Answered(Ok(v)),
        Err(err) if err.is_instance_of::<PyException>(py) => {
            Called::Answered(Err(LoadError::new(PyLoadError::new(py, err))))
        }
        Err(err) => Called::Interrupted(err),
    }
}

/// Logs a background job's failure on the `herdless` logger (nobody awaits it). At exit
/// nobody is left to read it, and logging takes locks (see `shutdown`): nothing is logged.
pub(crate) fn log_failure(py: Python<'_>, key: &str, err: PyErr) {
    if crate::shutdown::shutting_down() {
        return;
    }
    let log = || -> PyResult<()> {
        let kwargs = PyDict::new(py);
        kwargs.set_item("exc_info", err.into_value(py))?;
        let logger = py
            .import("logging")?
            .call_method1("getLogger", ("herdless",))?;
        // A batch's job has no one key.
        match key {
            "" => logger.call_method(
                "warning",
                ("background batch refresh failed",),
                Some(&kwargs),
            ),
            _ => logger.call_method(
                "warning",
                ("background refresh of %r failed", key),
                Some(&kwargs),
            ),
        }?;
        Ok(())
    };
    // A logging failure must not fail the job's thread.
    let _ = log();
}
