//! The shared tier's operations of `Cache` (`get`, `set`, `invalidate`, `bump`, tag
//! invalidation): each is started once by the engine, then waited for the caller's way:
//! blocking with the GIL released (the sync methods, [`How::Block`]) or as an asyncio
//! future completed on the loop (their `a...` twins, [`How::Await`]: no thread, no
//! executor). Same arguments, same answers, same exceptions either way; on the memory
//! tier (or an L1 hit) the answer is there at once.

use std::future::Future;
use std::time::Duration;

use herdless::Error;
use herdless_redis::two_tier::{Get, Read};
use pyo3::IntoPyObjectExt;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::asyncio::awaitable;
use crate::codec::PyHost;
use crate::driver::Handle;
use crate::driver::block::block_on;
use crate::errors::{config_error, map_error};
use crate::value::{PyValue, from_loader};

/// How the caller waits for an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum How {
    /// On this thread, the GIL released (the answer itself is returned).
    Block,
    /// On the running event loop (an asyncio future of the answer is returned).
    Await,
}

/// `pending`'s output, converted by `finish`, waited for as `wait` says.
fn wait<'py, F, T>(
    py: Python<'py>,
    how: How,
    mut pending: F,
    finish: impl FnOnce(Python<'_>, T) -> PyResult<Py<PyAny>> + Send + 'static,
) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = T> + Unpin + Send + 'static,
    T: Send + 'static,
{
    match how {
        How::Block => {
            let out = block_on(py, &mut pending)?;
            Ok(finish(py, out)?.into_bound(py))
        }
        How::Await => awaitable(py, pending, finish),
    }
}

/// The engine's answer of an operation, as Python sees it.
fn done<T: for<'py> IntoPyObject<'py>>(py: Python<'_>, r: Result<T, Error>) -> PyResult<Py<PyAny>> {
    let v = r.map_err(|e| map_error(py, e))?;
    v.into_py_any(py)
}

/// The engine's answer of a write that answers nothing: `None`.
fn written(py: Python<'_>, r: Result<(), Error>) -> PyResult<Py<PyAny>> {
    r.map_err(|e| map_error(py, e))?;
    Ok(py.None())
}

/// `Cache.get`: from memory, else one read of the shared tier (a failing tier is a miss).
pub(crate) fn get<'py>(
    py: Python<'py>,
    handle: &Handle,
    key: &str,
    default: Option<Py<PyAny>>,
    how: How,
) -> PyResult<Bound<'py, PyAny>> {
    let answer = |py: Python<'_>, found: Option<PyValue>, default: Option<Py<PyAny>>| {
        Ok(match found {
            Some(v) => v.bind(py)?.unbind(),
            None => default.unwrap_or_else(|| py.None()),
        })
    };
    match handle.tt.get(key).map_err(|e| map_error(py, e))? {
        // Answered from memory: no wait to set up (a blocking wait releases the GIL and asks
        // `threading` which thread this is, several times the cost of the hit itself).
        Get::Ready(v) if how == How::Block => Ok(answer(py, v, default)?.into_bound(py)),
        Get::Ready(v) => wait(py, how, std::future::ready(()), move |py, ()| {
            answer(py, v, default)
        }),
        Get::Tier(pending) => {
            let codec = handle.codec.clone();
            wait(py, how, pending, move |py, read: Read<PyValue>| {
                let host = PyHost::new(py, &codec);
                let found = read.finish(&host);
                if let Some(err) = host.take_interrupt() {
                    return Err(err);
                }
                let found = found.map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
                answer(py, found, default)
            })
        }
    }
}

/// What a `set` asks beside the value: its own ttl, time-to-idle and tags.
#[derive(Default)]
pub(crate) struct SetArgs {
    pub(crate) ttl: Option<Duration>,
    pub(crate) tti: Option<Duration>,
    pub(crate) tags: Option<Vec<String>>,
}

/// `Cache.set`: `value` (`ABSENT`: an absence) under `key`, with `ttl` and `tags`.
pub(crate) fn set<'py>(
    py: Python<'py>,
    handle: &Handle,
    key: &str,
    value: Bound<'_, PyAny>,
    args: SetArgs,
    how: How,
) -> PyResult<Bound<'py, PyAny>> {
    let value = from_loader(value, handle.codec.copy_values)?;
    let SetArgs { ttl, tti, tags } = args;
    if value.is_none() && ttl.is_some() {
        return Err(config_error(
            py,
            "`ttl` does not apply to ABSENT: absences last `negative_ttl`".into(),
        ));
    }
    let tt = &handle.tt;
    let host = PyHost::new(py, &handle.codec);
    let write = match (value, tags) {
        (value, tags) if tags.is_some() || tti.is_some() => {
            let mut loaded = herdless::Loaded::from(value);
            if let Some(tags) = tags {
                loaded = loaded.tags(tags);
            }
            if let Some(t) = ttl {
                loaded = loaded.ttl(t);
            }
            if let Some(t) = tti {
                loaded = loaded.tti(t);
            }
            tt.set_with(key, loaded, &host)
        }
        (Some(v), _) => tt.set(key, v, ttl, &host),
        (None, _) => tt.set_absent(key),
    };
    if let Some(err) = host.take_interrupt() {
        return Err(err);
    }
    let pending = write.map_err(|e| map_error(py, e))?;
    wait(py, how, pending, written)
}

/// `Cache.invalidate`: whether an entry was removed.
pub(crate) fn invalidate<'py>(
    py: Python<'py>,
    handle: &Handle,
    key: &str,
    how: How,
) -> PyResult<Bound<'py, PyAny>> {
    let pending = handle.tt.invalidate(key).map_err(|e| map_error(py, e))?;
    wait(py, how, pending, done)
}

/// `Cache.bump`: the namespace's new epoch.
pub(crate) fn bump<'py>(
    py: Python<'py>,
    handle: &Handle,
    namespace: &str,
    how: How,
) -> PyResult<Bound<'py, PyAny>> {
    wait(py, how, handle.tt.bump(namespace), done)
}

/// `Cache.invalidate_tags` (`soft=False`) or its soft form (`soft=True`: expire).
pub(crate) fn stamp<'py>(
    py: Python<'py>,
    handle: &Handle,
    tags: &[String],
    soft: bool,
    how: How,
) -> PyResult<Bound<'py, PyAny>> {
    let started = match soft {
        true => handle.tt.expire_tags(tags),
        false => handle.tt.invalidate_tags(tags),
    };
    let pending = started.map_err(|e| map_error(py, e))?;
    wait(py, how, pending, written)
}
