//! An observer of loader calls (the OpenTelemetry integration's spans): asked only when a
//! loader is about to run, so a hit never meets it.

use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyString, PyTuple};

use crate::loader::Loader;

/// The cache's observer, if one is set: `observer(key, background, call)` runs the loader
/// by calling `call()` and returns what it returned (or a coroutine awaiting it).
#[derive(Clone, Default)]
pub(crate) struct Observer(Arc<Mutex<Option<Py<PyAny>>>>);

impl Observer {
    pub(crate) fn get(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.0.lock().as_ref().map(|o| o.clone_ref(py))
    }

    pub(crate) fn set(&self, observer: Option<Py<PyAny>>) {
        *self.0.lock() = observer;
    }

    /// `loader`, or a call of the observer that runs it, when there is one.
    pub(crate) fn wrap(
        &self,
        py: Python<'_>,
        key: &str,
        background: bool,
        loader: Loader,
    ) -> PyResult<Loader> {
        let Some(observer) = self.get(py) else {
            return Ok(loader);
        };
        let call = loader.into_callable(py)?;
        let args = PyTuple::new(
            py,
            [
                PyString::new(py, key).into_any(),
                PyBool::new(py, background).to_owned().into_any(),
                call.into_bound(py),
            ],
        )?;
        Ok(Loader::Call(observer, args.unbind(), None))
    }
}
