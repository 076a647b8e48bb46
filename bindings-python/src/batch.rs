//! `Cache.get_or_load_many`: the blocking driver of the fleet engine's batch
//! ([`Many`]) for Python callers. Everything is decided by the engine; this calls the
//! Python loader once per loader call the engine asks for (with the list of keys it must
//! load, answered by a mapping), blocks with the GIL released for the shared tier and for
//! keys other callers load, and runs batched refreshes on a daemon thread.

use herdless::LoadError;
use herdless_redis::two_tier::{Many, ManyAnswer, ManyStep};
use parking_lot::Mutex;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::block::block_on;
use crate::blocking::Handle;
use crate::codec::PyHost;
use crate::context::to_loaded;
use crate::errors::{PyLoadError, herdless_err, map_error};
use crate::shutdown::Busy;
use crate::value::{PyValue, to_caller};

/// The values of `keys` in their order; see `Cache.get_or_load_many` (python/herdless).
/// Any key that failed raises one `BatchError` carrying every key's answer.
pub(crate) fn get_or_load_many(
    handle: &Handle,
    py: Python<'_>,
    keys: Vec<String>,
    loader: Py<PyAny>,
) -> PyResult<Py<PyList>> {
    let many = handle.tt.get_many(&keys);
    let answers = drive(py, handle, many, &loader)?;
    to_values(py, &keys, answers)
}

/// Each key's answer as the caller gets it: the list of values, or one `BatchError`
/// carrying every key's answer when any key failed.
pub(crate) fn to_values(
    py: Python<'_>,
    keys: &[String],
    answers: Vec<ManyAnswer<PyValue>>,
) -> PyResult<Py<PyList>> {
    let values = PyList::empty(py);
    let errors = PyDict::new(py);
    for (key, answer) in keys.iter().zip(answers) {
        match answer {
            Ok(v) => values.append(to_caller(py, v)?)?,
            Err(e) => {
                let exc = map_error(py, e).into_value(py);
                values.append(&exc)?;
                errors.set_item(key, exc)?;
            }
        }
    }
    if errors.is_empty() {
        return Ok(values.unbind());
    }
    let message = format!("{} of the {} keys failed", errors.len(), keys.len());
    let attrs = [("errors", errors.into_any()), ("values", values.into_any())];
    Err(herdless_err(py, "BatchError", message, &attrs))
}

/// Does what each step of the batch says, to its answers.
fn drive(
    py: Python<'_>,
    handle: &Handle,
    mut many: Many<PyValue>,
    loader: &Py<PyAny>,
) -> PyResult<Vec<ManyAnswer<PyValue>>> {
    // The exit waits for the whole batch, not only its loader calls and waits (see
    // `shutdown` and `blocking::drive`).
    let _busy = Busy::enter()?;
    loop {
        match many.step() {
            ManyStep::Done(answers) => return Ok(answers),
            ManyStep::Tier(mut pending) => {
                // A KeyboardInterrupt here drops the batch, which hands its keys over.
                let reply = block_on(py, &mut pending)?;
                let host = PyHost::new(py, &handle.codec);
                many.resume(reply, &host);
                if let Some(err) = host.take_interrupt() {
                    return Err(err);
                }
            }
            ManyStep::Wait(i, mut waiter) => {
                let waited = block_on(py, &mut waiter)?;
                many.waited(i, waited);
            }
            ManyStep::Refresh(background) => spawn(py, handle, *background, loader.clone_ref(py)),
            ManyStep::Load(keys) => {
                let busy = Busy::enter()?;
                let called = call(py, loader, &keys, handle.codec.copy_values);
                drop(busy);
                let host = PyHost::new(py, &handle.codec);
                match called {
                    Ok(found) => many.loaded_with(Ok(found), &host),
                    Err(err) if err.is_instance_of::<PyException>(py) => {
                        many.loaded_with(Err(LoadError::new(PyLoadError::new(py, err))), &host);
                    }
                    // Any other BaseException is about this thread, not the load: the keys
                    // are handed over (dropping the batch) and it is re-raised.
                    Err(err) => return Err(err),
                }
                if let Some(err) = host.take_interrupt() {
                    return Err(err);
                }
            }
        }
    }
}

/// One loader call: `loader(keys)` answers a mapping of key to value (`ABSENT`: absent; a
/// `Loaded(...)`: that key's own ttl, tags, meta, or no_cache, as a single load's); keys it
/// leaves out are absent, keys it was not asked for are ignored.
fn call(
    py: Python<'_>,
    loader: &Py<PyAny>,
    keys: &[String],
    copy: bool,
) -> PyResult<Vec<(String, herdless::Loaded<PyValue>)>> {
    let found = loader.bind(py).call1((PyList::new(py, keys)?,))?;
    if found.hasattr("__await__")? {
        if found.get_type().name()? == "coroutine" {
            let _ = found.call_method0("close");
        }
        return Err(pyo3::exceptions::PyTypeError::new_err(
            "the batch loader returned an awaitable: get_or_load_many runs sync loaders; \
             use aget_or_load_many for an async one",
        ));
    }
    key_answers(&found, copy)
}

/// A batch loader's answer: a mapping of key to value (`ABSENT`: absent; a `Loaded(...)`:
/// that key's own answer); keys that are not str are ignored (nobody asked for them).
pub(crate) fn key_answers(
    found: &Bound<'_, PyAny>,
    copy: bool,
) -> PyResult<Vec<(String, herdless::Loaded<PyValue>)>> {
    let items = found.call_method0("items").map_err(|_| {
        pyo3::exceptions::PyTypeError::new_err(format!(
            "a batch loader answers a mapping of key to value, got {}",
            found
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })?;
    let mut out = Vec::new();
    for item in items.try_iter()? {
        let (key, value): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item?.extract()?;
        // Keys the loader invented are not the batch's: only string keys can be asked for.
        if let Ok(key) = key.extract::<String>() {
            out.push((key, to_loaded(value, copy)?));
        }
    }
    Ok(out)
}

/// A batch of refreshes handed to a background thread: the thread's `target`.
#[pyclass(frozen, module = "herdless._native", name = "_BatchRefresh")]
pub(crate) struct BatchRefresh {
    job: Mutex<Option<RefreshJob>>,
}

/// What a refresh thread runs: the batch of refreshes, with the batch's loader.
type RefreshJob = (Handle, Many<PyValue>, Py<PyAny>);

#[pymethods]
impl BatchRefresh {
    /// Runs the refreshes; a failure is logged (there is no caller to raise it to).
    fn __call__(&self, py: Python<'_>) -> PyResult<()> {
        let Some((handle, many, loader)) = self.job.lock().take() else {
            return Ok(());
        };
        if let Err(err) = drive(py, &handle, many, &loader) {
            // At exit nobody is left to read the warning, and logging takes locks (which
            // may release the GIL inside this call: see `shutdown`).
            if crate::shutdown::shutting_down() {
                return Ok(());
            }
            if !err.is_instance_of::<PyException>(py) {
                return Err(err);
            }
            let kwargs = PyDict::new(py);
            kwargs.set_item("exc_info", err.into_value(py))?;
            py.import("logging")?
                .call_method1("getLogger", ("herdless",))?
                .call_method(
                    "warning",
                    ("background batch refresh failed",),
                    Some(&kwargs),
                )?;
        }
        Ok(())
    }
}

/// Runs a batch of refreshes on a new daemon thread. No thread (at interpreter shutdown):
/// the batch is dropped, which hands its keys over.
fn spawn(py: Python<'_>, handle: &Handle, many: Many<PyValue>, loader: Py<PyAny>) {
    let job = BatchRefresh {
        job: Mutex::new(Some((handle.clone(), many, loader))),
    };
    let _ = crate::blocking::start_refresh_thread(py, job);
}
