//! `@cache.cached(...)` on a sync function: a native callable, so that a hit costs a key
//! written into a reusable buffer and one lookup, and a cached method bound to an instance.

use herdless::{Hit, Lookup};
use herdless_redis::call::CallOptions;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::cache::{Cache, call_options, check_open};
use crate::driver::Handle;
use crate::driver::threads::{get_or_load, get_or_load_from};
use crate::loader::Loader;
use crate::value::to_caller;

/// A sync function wrapped by `@cache.cached(...)`: calls are keyed and go through
/// `get_or_load`, natively, so a hit costs a key and a lookup.
#[pyclass(frozen, dict, module = "herdless", name = "CachedFunction")]
pub(crate) struct CachedFunction {
    /// Where the interpreter finds this callable's vectorcall ([`crate::vectorcall`]).
    vectorcall: pyo3::ffi::vectorcallfunc,
    cache: Handle,
    func: Py<PyAny>,
    keyer: KeyFn,
    /// Its calls' ttl and time-to-idle.
    options: CallOptions,
}

thread_local! {
    static KEY_BUFFER: std::cell::Cell<String> = const { std::cell::Cell::new(String::new()) };
}

/// Keys longer than this are not kept in the per-thread buffer (no memory held for outliers).
const MAX_KEY_BUFFER: usize = 4096;

/// This thread's key buffer, emptied. The key is written into it: a hit allocates nothing
/// for it. Taken out while in use, so a loader calling a cached function (on this thread)
/// gets a buffer of its own.
fn take_buffer() -> String {
    let mut key = KEY_BUFFER.with(|b| b.take());
    key.clear();
    key
}

/// Returns a key buffer to this thread, unless it grew too large to keep.
fn give_back(key: String) {
    if key.capacity() <= MAX_KEY_BUFFER {
        KEY_BUFFER.with(|b| b.set(key));
    }
}

enum KeyFn {
    Native(Py<crate::keys::Keyer>),
    Python(Py<PyAny>),
}

impl CachedFunction {
    /// The options of the calls it makes: its ttl and time-to-idle.
    fn options(&self) -> CallOptions {
        self.options.clone()
    }

    /// A call with its arguments as a tuple and a dict (`tp_call`, a bound method, and a
    /// vectorcall the fast path does not key).
    fn call(
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
            check_open(py, &self.cache)?;
            return get_or_load(&self.cache, py, &key, loader, self.options());
        };
        let mut key = take_buffer();
        if let Err(e) = keyer.get().write_key(args, kwargs, &mut key) {
            give_back(key);
            return Err(e);
        }
        self.serve(py, key, || Ok(loader()))
    }

    /// A vectorcall: `args` holds `nargs` positional arguments, then one value per name
    /// of `names`. A call of positional arguments only is keyed from the array itself
    /// (its tuple is built only if a load needs it); any other goes through
    /// [`call`](Self::call), unchanged.
    pub(crate) fn vectorcall(
        &self,
        py: Python<'_>,
        args: &[*mut pyo3::ffi::PyObject],
        nargs: usize,
        names: Option<Borrowed<'_, '_, PyTuple>>,
    ) -> PyResult<Py<PyAny>> {
        // SAFETY (every `from_ptr` below): the interpreter lends `args` for this call.
        let arg = |i: usize| unsafe { Borrowed::from_ptr(py, args[i]) };
        match (&self.keyer, names) {
            (KeyFn::Native(keyer), None) if keyer.get().takes_positional(nargs) => {
                let mut key = take_buffer();
                if let Err(e) = keyer
                    .get()
                    .write_positional(py, nargs, |i| Ok(arg(i)), &mut key)
                {
                    give_back(key);
                    return Err(e);
                }
                let loader = || {
                    // Only a call that is not a plain hit needs the arguments as a tuple.
                    let tuple = PyTuple::new(py, (0..nargs).map(arg))?;
                    Ok(Loader::Call(self.func.clone_ref(py), tuple.unbind(), None))
                };
                self.serve(py, key, loader)
            }
            (_, names) => {
                let tuple = PyTuple::new(py, (0..nargs).map(arg))?;
                let kwargs = match names {
                    Some(names) => {
                        let d = PyDict::new(py);
                        for (j, name) in names.iter().enumerate() {
                            d.set_item(name, arg(nargs + j))?;
                        }
                        Some(d)
                    }
                    None => None,
                };
                self.call(py, &tuple, kwargs.as_ref())
            }
        }
    }

    /// Answers the call of `key` (this thread's buffer, given back here): a plain hit at
    /// once, anything else through the driver with what `loader` makes (made before the
    /// driver runs: it can fail, and only calls that are not plain hits get there).
    fn serve(
        &self,
        py: Python<'_>,
        key: String,
        loader: impl FnOnce() -> PyResult<Loader>,
    ) -> PyResult<Py<PyAny>> {
        if let Err(e) = check_open(py, &self.cache) {
            give_back(key);
            return Err(e);
        }
        match self.cache.tt.l1().lookup(&key) {
            // A plain hit is answered here, its answer built where it is returned: neither
            // the engine's answer nor ours is moved through the driver's loop or held while
            // the buffer goes back (large values, copied on the path most calls take).
            Ok(Lookup::Hit(Hit {
                value,
                refresh: None,
                ..
            })) => {
                give_back(key);
                to_caller(py, value.map(|v| v.value))
            }
            step => {
                let answer = loader().and_then(|loader| {
                    get_or_load_from(&self.cache, py, &key, step, || loader, self.options())
                });
                give_back(key);
                answer
            }
        }
    }

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
    /// from the call's arguments; `ttl` and `tti` seconds or None.
    #[new]
    #[pyo3(signature = (cache, func, keyer, ttl=None, tti=None))]
    fn new(
        py: Python<'_>,
        cache: &Bound<'_, Cache>,
        func: Py<PyAny>,
        keyer: Bound<'_, PyAny>,
        ttl: Option<Bound<'_, PyAny>>,
        tti: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let options = call_options(py, ttl.as_ref(), tti.as_ref())?;
        let keyer = match keyer.cast::<crate::keys::Keyer>() {
            Ok(k) => KeyFn::Native(k.clone().unbind()),
            Err(_) => KeyFn::Python(keyer.unbind()),
        };
        Ok(Self {
            vectorcall: crate::vectorcall::call::<CachedFunction>,
            cache: cache.get().handle.clone(),
            func,
            keyer,
            options,
        })
    }

    #[pyo3(signature = (*args, **kwargs))]
    fn __call__(
        slf: &Bound<'_, Self>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        // From the next call on, `f(...)` comes through `vectorcall` (no argument tuple).
        crate::vectorcall::enable(slf, &slf.get().vectorcall);
        slf.get().call(slf.py(), args, kwargs)
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
        self.cache.invalidate(py, &key)
    }

    /// `invalidate` for asyncio: an awaitable of whether an entry was removed (Redis
    /// awaited on the event loop).
    #[pyo3(signature = (*args, **kwargs))]
    fn ainvalidate<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let key = self.key_of(args, kwargs)?;
        crate::ops::invalidate(py, &self.cache, &key, crate::ops::How::Await)
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
        self.func.get().call(py, &self.with_obj(args)?, kwargs)
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

    /// `invalidate` for asyncio: an awaitable of whether an entry was removed.
    #[pyo3(signature = (*args, **kwargs))]
    fn ainvalidate<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.func
            .get()
            .ainvalidate(py, &self.with_obj(args)?, kwargs)
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

impl crate::vectorcall::Vectorcall for CachedFunction {
    fn vectorcall(
        &self,
        py: Python<'_>,
        args: &[*mut pyo3::ffi::PyObject],
        nargs: usize,
        names: Option<Borrowed<'_, '_, PyTuple>>,
    ) -> PyResult<Py<PyAny>> {
        CachedFunction::vectorcall(self, py, args, nargs, names)
    }
}
