//! `Cache.get_or_load_many`'s Python side: the loader's answer read as each key's answer
//! ([`key_answers`]), a sync batch loader's call ([`call`]), and the batch's answers as the
//! caller gets them ([`to_values`]). The batch itself is the call machine's
//! ([`herdless_redis::call::CallMany`]), driven by [`super::threads`] and [`super::event_loop`].

use herdless_redis::two_tier::ManyAnswer;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::context::to_loaded;
use crate::errors::{herdless_err, map_error};
use crate::value::{PyValue, to_caller};

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

/// One loader call: `loader(keys)` answers a mapping of key to value (`ABSENT`: absent; a
/// `Loaded(...)`: that key's own ttl, tags, meta, or no_cache, as a single load's); keys it
/// leaves out are absent, keys it was not asked for are ignored.
pub(crate) fn call(
    py: Python<'_>,
    loader: &Py<PyAny>,
    keys: Vec<String>,
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
