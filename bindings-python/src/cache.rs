//! `herdless._native.Cache`: the engine with Python objects as values. The pure-Python
//! `herdless.Cache` subclasses it and adds the asyncio driver, the decorator and `warm`;
//! everything on the hit path (`get`, `get_or_load`, a decorated sync function) is native.

use std::time::Duration;

use herdless::Lookup;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::errors::{config_error, map_error};
use crate::load::{Loader, get_or_load};
use crate::metrics::snapshot_to_dict;
use crate::options::{Options, duration, namespace};
use crate::steps::{Lead, Wait};
use crate::value::{PyValue, absent, from_loader, to_caller};

/// Lookup step kinds returned by `Cache._lookup`.
const HIT: u8 = 0;
const LEAD: u8 = 1;
const WAIT: u8 = 2;

/// A stampede-proof cache of Python objects.
#[pyclass(subclass, frozen, module = "herdless._native", name = "Cache")]
pub(crate) struct Cache {
    pub(crate) inner: herdless::Cache<PyValue>,
    namespace: Option<String>,
    hard_timeout: Option<Duration>,
    origin_budget: Option<usize>,
}

/// A per-call TTL in seconds, or None for the cache's.
pub(crate) fn call_ttl(
    py: Python<'_>,
    ttl: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<Duration>> {
    ttl.filter(|t| !t.is_none())
        .map(|t| duration(py, "ttl", t, true))
        .transpose()
}

#[pymethods]
impl Cache {
    #[new]
    #[pyo3(signature = (
        *, ttl=None, grace=None, jitter=None, beta=None, negative_ttl=None, wait_timeout=None,
        max_stale=None, failsafe_backoff=None, soft_timeout=None, hard_timeout=None,
        capacity=None, origin_budget=None, max_flights=None, max_key_len=None, namespace=None,
        redis=None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new<'py>(
        py: Python<'py>,
        ttl: Option<Bound<'py, PyAny>>,
        grace: Option<Bound<'py, PyAny>>,
        jitter: Option<Bound<'py, PyAny>>,
        beta: Option<Bound<'py, PyAny>>,
        negative_ttl: Option<Bound<'py, PyAny>>,
        wait_timeout: Option<Bound<'py, PyAny>>,
        max_stale: Option<Bound<'py, PyAny>>,
        failsafe_backoff: Option<Bound<'py, PyAny>>,
        soft_timeout: Option<Bound<'py, PyAny>>,
        hard_timeout: Option<Bound<'py, PyAny>>,
        capacity: Option<Bound<'py, PyAny>>,
        origin_budget: Option<Bound<'py, PyAny>>,
        max_flights: Option<Bound<'py, PyAny>>,
        max_key_len: Option<Bound<'py, PyAny>>,
        namespace: Option<Bound<'py, PyAny>>,
        redis: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Self> {
        let checked = Options {
            ttl,
            grace,
            jitter,
            beta,
            negative_ttl,
            wait_timeout,
            max_stale,
            failsafe_backoff,
            soft_timeout,
            hard_timeout,
            capacity,
            origin_budget,
            max_flights,
            max_key_len,
            namespace,
            redis,
        }
        .check(py)?;
        if let Some(url) = checked.redis {
            return Err(config_error(
                py,
                format!("`redis={url:?}`: the Redis backend is not available in this build yet"),
            ));
        }
        Ok(Self {
            inner: checked.cache,
            namespace: checked.namespace,
            hard_timeout: checked.hard_timeout,
            origin_budget: checked.origin_budget,
        })
    }

    /// The default namespace of keys made by the decorator, if one was given.
    #[getter]
    fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The origin budget (most loader calls at once), if one was given.
    #[getter]
    fn origin_budget(&self) -> Option<usize> {
        self.origin_budget
    }

    /// The value of `key` if fresh or within grace, else `default`; never loads.
    #[pyo3(signature = (key, default=None))]
    fn get(&self, py: Python<'_>, key: &str, default: Option<Py<PyAny>>) -> Py<PyAny> {
        match self.inner.get(key) {
            Some(v) => v.bind(py).unbind(),
            None => default.unwrap_or_else(|| py.None()),
        }
    }

    /// Stores `value` under `key` (`ABSENT`: caches an absence for `negative_ttl`).
    #[pyo3(signature = (key, value, *, ttl=None))]
    fn set(
        &self,
        py: Python<'_>,
        key: &str,
        value: Bound<'_, PyAny>,
        ttl: Option<Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let ttl = call_ttl(py, ttl.as_ref())?;
        let r = match (from_loader(value)?, ttl) {
            (Some(v), Some(ttl)) => self.inner.set_with_ttl(key, v, ttl),
            (Some(v), None) => self.inner.set(key, v),
            (None, None) => self.inner.set_absent(key),
            (None, Some(_)) => {
                return Err(config_error(
                    py,
                    "`ttl` does not apply to ABSENT: absences last `negative_ttl`".into(),
                ));
            }
        };
        r.map_err(|e| map_error(py, e))
    }

    /// Removes `key`; a load of it already running will not write its older result back.
    /// Returns whether an entry was removed.
    fn invalidate(&self, py: Python<'_>, key: &str) -> PyResult<bool> {
        self.inner.invalidate(key).map_err(|e| map_error(py, e))
    }

    /// Invalidates every key of `namespace` at once (O(1)); returns the new epoch.
    fn bump(&self, py: Python<'_>, namespace: Bound<'_, PyAny>) -> PyResult<u64> {
        let ns = self::namespace(py, "namespace", &namespace)?;
        Ok(self.inner.bump(&ns))
    }

    /// The value of `key`, calling `loader()` when it must be loaded; concurrent callers of
    /// one key share one call. See the README for the full contract.
    #[pyo3(signature = (key, loader, *, ttl=None))]
    fn get_or_load(
        &self,
        py: Python<'_>,
        key: &str,
        loader: Py<PyAny>,
        ttl: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let ttl = call_ttl(py, ttl.as_ref())?;
        get_or_load(&self.inner, py, key, || Loader::Call0(loader), ttl)
    }

    /// One step of the state machine, for the asyncio driver: `(0, value)` a hit,
    /// `(0, value, lead)` a hit whose refresh this caller runs in the background,
    /// `(1, lead)` load it, `(2, wait)` wait for the caller who does.
    /// `ttl` (seconds) is the TTL a load started here stores its value with.
    #[pyo3(signature = (key, ttl=None))]
    fn _lookup<'py>(
        &self,
        py: Python<'py>,
        key: &str,
        ttl: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let ttl = call_ttl(py, ttl.as_ref())?;
        let with_ttl = |mut guard: herdless::LoadGuard<PyValue>| {
            if let Some(ttl) = ttl {
                guard.set_ttl(ttl);
            }
            guard
        };
        match self.inner.lookup(key).map_err(|e| map_error(py, e))? {
            Lookup::Hit(hit) => {
                let value = to_caller(py, hit.value)?;
                // A busy origin skips the refresh (the guard is handed back) rather than
                // queueing it behind requests that need an answer.
                match hit.refresh.map(with_ttl) {
                    Some(mut guard) => {
                        if guard.try_begin() {
                            let lead = Lead::new(guard, self.inner.clone(), self.hard_timeout);
                            (HIT, value, lead).into_pyobject(py)
                        } else {
                            (HIT, value).into_pyobject(py)
                        }
                    }
                    None => (HIT, value).into_pyobject(py),
                }
            }
            Lookup::Lead(guard) => {
                let lead = Lead::new(with_ttl(guard), self.inner.clone(), self.hard_timeout);
                (LEAD, lead).into_pyobject(py)
            }
            Lookup::Wait(waiter) => (WAIT, Wait::new(waiter)).into_pyobject(py),
        }
    }

    /// Counters, histograms and sizes as plain data (see `herdless.Metrics`).
    fn _metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        snapshot_to_dict(py, &self.inner.metrics())
    }

    /// Metrics in Prometheus text exposition format.
    fn prometheus(&self) -> String {
        self.inner.prometheus()
    }

    /// Keys loading now (flight records); for tests and leak checks.
    fn _flights_in_progress(&self) -> usize {
        self.inner.flights_in_progress()
    }
}

/// A sync function wrapped by `@cache.cached(...)`: calls are keyed and go through
/// `get_or_load`, natively, so a hit costs a key and a lookup.
#[pyclass(frozen, dict, module = "herdless", name = "CachedFunction")]
pub(crate) struct CachedFunction {
    cache: herdless::Cache<PyValue>,
    func: Py<PyAny>,
    keyer: KeyFn,
    ttl: Option<Duration>,
}

thread_local! {
    static KEY_BUFFER: std::cell::Cell<String> = const { std::cell::Cell::new(String::new()) };
}

/// Keys longer than this are not kept in the per-thread buffer (no memory held for outliers).
const MAX_KEY_BUFFER: usize = 4096;

enum KeyFn {
    Native(Py<crate::keys::Keyer>),
    Python(Py<PyAny>),
}

impl CachedFunction {
    fn key_of(
        &self,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<String> {
        match &self.keyer {
            KeyFn::Native(k) => k.get().key(args, kwargs),
            KeyFn::Python(f) => {
                let py = args.py();
                let key = f.bind(py).call(args, kwargs)?;
                key.extract::<String>().map_err(|_| {
                    pyo3::exceptions::PyTypeError::new_err(
                        "the `key` function of @cached must return a str",
                    )
                })
            }
        }
    }
}

#[pymethods]
impl CachedFunction {
    /// `cache` is a `Cache`; `keyer` a `Keyer` or any callable returning the key (a str)
    /// from the call's arguments; `ttl` seconds or None.
    #[new]
    #[pyo3(signature = (cache, func, keyer, ttl=None))]
    fn new(
        py: Python<'_>,
        cache: &Bound<'_, Cache>,
        func: Py<PyAny>,
        keyer: Bound<'_, PyAny>,
        ttl: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let keyer = match keyer.cast::<crate::keys::Keyer>() {
            Ok(k) => KeyFn::Native(k.clone().unbind()),
            Err(_) => KeyFn::Python(keyer.unbind()),
        };
        Ok(Self {
            cache: cache.get().inner.clone(),
            func,
            keyer,
            ttl: call_ttl(py, ttl.as_ref())?,
        })
    }

    #[pyo3(signature = (*args, **kwargs))]
    fn __call__(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let loader = || {
            Loader::Call(
                self.func.clone_ref(py),
                args.clone().unbind(),
                kwargs.map(|k| k.clone().unbind()),
            )
        };
        let KeyFn::Native(keyer) = &self.keyer else {
            let key = self.key_of(args, kwargs)?;
            return get_or_load(&self.cache, py, &key, loader, self.ttl);
        };
        // The key is written into this thread's reusable buffer: a hit allocates nothing
        // for it. Taken out while in use, so a loader calling a cached function (on this
        // thread) gets a buffer of its own.
        let mut key = KEY_BUFFER.with(|b| b.take());
        key.clear();
        let result = keyer
            .get()
            .write_key(args, kwargs, &mut key)
            .and_then(|()| get_or_load(&self.cache, py, &key, loader, self.ttl));
        if key.capacity() <= MAX_KEY_BUFFER {
            KEY_BUFFER.with(|b| b.set(key));
        }
        result
    }

    /// The cache key of a call with these arguments.
    #[pyo3(signature = (*args, **kwargs))]
    fn key(
        &self,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<String> {
        self.key_of(args, kwargs)
    }

    /// Invalidates the cached result of a call with these arguments.
    #[pyo3(signature = (*args, **kwargs))]
    fn invalidate(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<bool> {
        let key = self.key_of(args, kwargs)?;
        self.cache.invalidate(&key).map_err(|e| map_error(py, e))
    }

    /// Binds as a method: `obj.f(x)` calls `f(obj, x)`, and `obj.f.key(x)` is `f.key(obj, x)`.
    fn __get__<'py>(
        slf: &Bound<'py, Self>,
        obj: Option<Bound<'py, PyAny>>,
        owner: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = owner;
        match obj {
            Some(obj) if !obj.is_none() => {
                let bound = BoundCachedFunction {
                    func: slf.clone().unbind(),
                    obj: obj.unbind(),
                };
                Ok(Bound::new(slf.py(), bound)?.into_any())
            }
            _ => Ok(slf.clone().into_any()),
        }
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("<cached {}>", self.func.bind(py).repr()?))
    }
}

/// A `CachedFunction` bound to an instance (a cached method accessed through an object).
#[pyclass(frozen, module = "herdless", name = "BoundCachedFunction")]
pub(crate) struct BoundCachedFunction {
    func: Py<CachedFunction>,
    obj: Py<PyAny>,
}

impl BoundCachedFunction {
    /// `(obj, *args)`.
    fn with_obj<'py>(&self, args: &Bound<'py, PyTuple>) -> PyResult<Bound<'py, PyTuple>> {
        let py = args.py();
        let mut all = Vec::with_capacity(args.len() + 1);
        all.push(self.obj.bind(py).clone());
        all.extend(args.iter());
        PyTuple::new(py, all)
    }
}

#[pymethods]
impl BoundCachedFunction {
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        self.func.get().__call__(py, &self.with_obj(args)?, kwargs)
    }

    /// The cache key of a call with these arguments.
    #[pyo3(signature = (*args, **kwargs))]
    fn key(
        &self,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<String> {
        self.func.get().key_of(&self.with_obj(args)?, kwargs)
    }

    /// Invalidates the cached result of a call with these arguments.
    #[pyo3(signature = (*args, **kwargs))]
    fn invalidate(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<bool> {
        self.func
            .get()
            .invalidate(py, &self.with_obj(args)?, kwargs)
    }

    /// The cached function.
    #[getter]
    fn __func__(&self, py: Python<'_>) -> Py<CachedFunction> {
        self.func.clone_ref(py)
    }

    /// The instance it is bound to.
    #[getter]
    fn __self__(&self, py: Python<'_>) -> Py<PyAny> {
        self.obj.clone_ref(py)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "<bound cached {} of {}>",
            self.func.get().func.bind(py).repr()?,
            self.obj.bind(py).repr()?
        ))
    }
}

/// `herdless.ABSENT`, for module setup.
pub(crate) fn absent_object(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    Ok(absent(py)?.clone().into_any())
}
