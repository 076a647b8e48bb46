//! The loader's context for Python loaders (core's `context` and `loaded`, in Python's
//! idiom): a loader that takes one positional parameter is handed a [`LoadContext`]
//! (`ctx.key`, `ctx.reason`, `ctx.previous`, `ctx.set_ttl(seconds)`, `ctx.meta = ...`,
//! `ctx.no_cache()`, `return ctx.not_modified()`, `ctx.cancelled` as a `threading.Event`),
//! and may answer a [`Loaded`]. What the answer means is decided by the engine; this module
//! only translates.

use std::time::Duration;

use herdless::{LoadContext as CoreContext, Loaded as CoreLoaded};
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple};

use crate::options::duration;
use crate::value::{PyValue, from_loader, to_caller};

/// What a Python loader is told about its load. Handed to a loader that takes one
/// positional parameter (`def load(ctx)` / `async def load(ctx)`).
#[pyclass(frozen, weakref, module = "herdless", name = "LoadContext")]
pub(crate) struct LoadContext {
    inner: CoreContext<PyValue>,
    choices: Mutex<Choices>,
    /// `ctx.cancelled`, made on first use. A once-cell, not a mutex: no Rust lock may be
    /// held across a Python call (the GIL can change hands inside it: a deadlock).
    event: PyOnceLock<Py<PyAny>>,
    /// Whether the watcher of `ctx.cancelled` was started.
    watching: std::sync::atomic::AtomicBool,
    /// Set when the loader returned: the watcher of `ctx.cancelled` stops.
    finished: std::sync::atomic::AtomicBool,
}

/// What the loader chose through the context's setters.
#[derive(Default)]
struct Choices {
    ttl: Option<Duration>,
    grace: Option<Duration>,
    negative_ttl: Option<Duration>,
    tti: Option<Duration>,
    meta: Option<String>,
    tags: Option<Vec<String>>,
    no_cache: bool,
}

impl LoadContext {
    pub(crate) fn new(inner: CoreContext<PyValue>) -> Self {
        Self {
            inner,
            choices: Mutex::default(),
            event: PyOnceLock::new(),
            watching: std::sync::atomic::AtomicBool::new(false),
            finished: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The loader returned `value`: the engine's answer, with what the loader set on the
    /// context where the answer itself sets nothing.
    pub(crate) fn answer(
        &self,
        value: Bound<'_, PyAny>,
        copy: bool,
    ) -> PyResult<CoreLoaded<PyValue>> {
        self.finished
            .store(true, std::sync::atomic::Ordering::Release);
        let mut loaded = to_loaded(value, copy)?;
        let c = self.choices.lock();
        if let (Some(t), None) = (c.ttl, loaded.ttl_set()) {
            loaded = loaded.ttl(t);
        }
        if let (Some(g), None) = (c.grace, loaded.grace_set()) {
            loaded = loaded.grace(g);
        }
        if let (Some(n), None) = (c.negative_ttl, loaded.negative_ttl_set()) {
            loaded = loaded.negative_ttl(n);
        }
        if let (Some(t), None) = (c.tti, loaded.tti_set()) {
            loaded = loaded.tti(t);
        }
        if let (Some(m), None) = (&c.meta, loaded.meta_set()) {
            loaded = loaded.meta(m.clone());
        }
        if let (Some(t), None) = (&c.tags, loaded.tags_set()) {
            loaded = loaded.tags(t.iter().cloned());
        }
        if c.no_cache {
            loaded = loaded.no_cache();
        }
        Ok(loaded)
    }

    /// The loader raised: the watcher of `ctx.cancelled` stops.
    pub(crate) fn finish(&self) {
        self.finished
            .store(true, std::sync::atomic::Ordering::Release);
    }
}

#[pymethods]
impl LoadContext {
    /// The key being loaded.
    #[getter]
    fn key(&self) -> &str {
        self.inner.key()
    }

    /// Why it loads: "first", "refresh", "early_refresh", "refresh_ahead" or "warm".
    #[getter]
    fn reason(&self) -> &'static str {
        self.inner.reason().as_str()
    }

    /// The value the load may replace, with its age and metadata, or None.
    #[getter]
    fn previous(&self, py: Python<'_>) -> PyResult<Option<Py<Previous>>> {
        self.inner
            .previous()
            .map(|p| {
                let previous = Previous {
                    value: to_caller(py, Some(p.value.clone()))?,
                    age: p.age.as_secs_f64(),
                    meta: p.meta.as_deref().map(str::to_owned),
                    tags: p.tags().iter().map(|t| String::from(&**t)).collect(),
                };
                Py::new(py, previous)
            })
            .transpose()
    }

    /// This entry's ttl, in seconds, instead of the cache's.
    fn set_ttl(&self, py: Python<'_>, seconds: Bound<'_, PyAny>) -> PyResult<()> {
        self.choices.lock().ttl = Some(duration(py, "ttl", &seconds, true)?);
        Ok(())
    }

    /// This entry's grace, in seconds, instead of the cache's.
    fn set_grace(&self, py: Python<'_>, seconds: Bound<'_, PyAny>) -> PyResult<()> {
        self.choices.lock().grace = Some(duration(py, "grace", &seconds, false)?);
        Ok(())
    }

    /// This absence's lifetime, in seconds, instead of the cache's negative ttl.
    fn set_negative_ttl(&self, py: Python<'_>, seconds: Bound<'_, PyAny>) -> PyResult<()> {
        let d = duration(py, "negative_ttl", &seconds, true)?;
        self.choices.lock().negative_ttl = Some(d);
        Ok(())
    }

    /// This entry's time-to-idle, in seconds, instead of the cache's: dropped once nobody
    /// has read it for this long, even within its ttl.
    fn set_tti(&self, py: Python<'_>, seconds: Bound<'_, PyAny>) -> PyResult<()> {
        self.choices.lock().tti = Some(duration(py, "tti", &seconds, true)?);
        Ok(())
    }

    /// The metadata kept with the entry (an ETag, a version), handed to the next load as
    /// `ctx.previous.meta`; at most 256 bytes.
    #[getter]
    fn get_meta(&self) -> Option<String> {
        self.choices.lock().meta.clone()
    }

    #[setter]
    fn set_meta(&self, meta: Option<String>) {
        self.choices.lock().meta = meta;
    }

    /// The entry's tags (an iterable of str), replacing any set before: each
    /// `cache.invalidate_tag(tag)` of one of them drops it. At most `max_tags_per_entry`
    /// distinct tags of 1 to 128 bytes each; the engine checks them when the loader returns
    /// (a bad one fails the load with `InvalidTag`).
    fn set_tags(&self, py: Python<'_>, tags: Bound<'_, PyAny>) -> PyResult<()> {
        let tags = crate::tags::tag_list(py, "tags", &tags, MAX_TAGS_READ)?;
        self.choices.lock().tags = Some(tags);
        Ok(())
    }

    /// Answer the callers and store nothing.
    fn no_cache(&self) {
        self.choices.lock().no_cache = true;
    }

    /// The answer "the previous value still holds" (an HTTP 304): `return ctx.not_modified()`.
    fn not_modified(&self, py: Python<'_>) -> PyResult<Py<Loaded>> {
        Py::new(py, Loaded::not_modified_answer())
    }

    /// Whether the load is no longer wanted (every caller left, the key was written, or
    /// the hard timeout passed): its result will not be stored.
    fn is_cancelled(&self) -> bool {
        self.inner.is_cancelled()
    }

    /// Blocks (the GIL released) until the load is no longer wanted (True) or `timeout`
    /// seconds passed (False).
    fn wait_cancelled(&self, py: Python<'_>, timeout: Bound<'_, PyAny>) -> PyResult<bool> {
        let timeout = duration(py, "timeout", &timeout, false)?;
        Ok(py.detach(|| self.inner.wait_cancelled(timeout)))
    }

    /// A `threading.Event` set once the load is no longer wanted (for sync loaders: check
    /// `ctx.cancelled.is_set()` between steps, or `ctx.cancelled.wait(t)`).
    #[getter]
    fn cancelled(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let me = slf.get();
        let e = me
            .event
            .get_or_try_init(py, || -> PyResult<Py<PyAny>> {
                Ok(py.import("threading")?.getattr("Event")?.call0()?.unbind())
            })?
            .clone_ref(py);
        if me.watching.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return Ok(e);
        }
        if me.inner.is_cancelled() {
            e.bind(py).call_method0("set")?;
        } else {
            // A daemon thread waits on the engine's signal (the GIL released) and sets the
            // event; it ends when the loader returns or the context is dropped.
            let weak = py.import("weakref")?.getattr("ref")?.call1((slf,))?;
            let watch = Py::new(py, Watch(weak.unbind()))?;
            let kwargs = PyDict::new(py);
            kwargs.set_item("target", watch)?;
            kwargs.set_item("name", "herdless-cancel-watch")?;
            kwargs.set_item("daemon", true)?;
            py.import("threading")?
                .getattr("Thread")?
                .call((), Some(&kwargs))?
                .call_method0("start")?;
        }
        Ok(e)
    }

    fn __repr__(&self) -> String {
        format!(
            "LoadContext(key={:?}, reason={:?})",
            self.inner.key(),
            self.inner.reason().as_str()
        )
    }
}

/// The watcher thread of `ctx.cancelled`. It holds the context weakly between its waits,
/// so it ends when the loader returned, or when nothing else holds the context any more (a
/// loader that raised or was given up on a path that does not report back).
#[pyclass(frozen, module = "herdless._native", name = "_CancelWatch")]
struct Watch(Py<PyAny>);

#[pymethods]
impl Watch {
    fn __call__(&self, py: Python<'_>) -> PyResult<()> {
        let step = Duration::from_millis(50);
        loop {
            let Ok(ctx) = self.0.bind(py).call0()?.cast_into::<LoadContext>() else {
                return Ok(()); // the context is gone
            };
            let me = ctx.get();
            if py.detach(|| me.inner.wait_cancelled(step)) {
                if let Some(e) = me.event.get(py) {
                    e.bind(py).call_method0("set")?;
                }
                return Ok(());
            }
            if me.finished.load(std::sync::atomic::Ordering::Acquire) {
                return Ok(());
            }
        }
    }
}

/// The entry a load may replace.
#[pyclass(frozen, module = "herdless", name = "Previous")]
pub(crate) struct Previous {
    /// The value (`ABSENT` never: an absence is not a previous value).
    #[pyo3(get)]
    value: Py<PyAny>,
    /// Seconds since it was stored.
    #[pyo3(get)]
    age: f64,
    /// The metadata its loader kept, or None.
    #[pyo3(get)]
    meta: Option<String>,
    /// Its tags (a load answering "not modified" keeps them unless it sets its own).
    #[pyo3(get)]
    tags: Vec<String>,
}

#[pymethods]
impl Previous {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Previous(value={}, age={}, meta={:?}, tags={:?})",
            self.value.bind(py).repr()?,
            self.age,
            self.meta,
            self.tags
        ))
    }
}

/// A loader's answer with this entry's own lifetimes (seconds), metadata and tags:
/// `Loaded(value, ttl=5.0, meta='"v7"', tags=["product:42"])`, `Loaded(value, tti=60.0)`,
/// `Loaded(ABSENT, negative_ttl=1.0)`,
/// `Loaded(value, no_cache=True)`, or `Loaded.not_modified()`.
#[pyclass(frozen, module = "herdless", name = "Loaded")]
pub(crate) struct Loaded {
    value: Option<Py<PyAny>>,
    ttl: Option<Duration>,
    grace: Option<Duration>,
    negative_ttl: Option<Duration>,
    tti: Option<Duration>,
    meta: Option<String>,
    tags: Option<Vec<String>>,
    no_cache: bool,
}

impl Loaded {
    fn not_modified_answer() -> Self {
        Self {
            value: None,
            ttl: None,
            grace: None,
            negative_ttl: None,
            tti: None,
            meta: None,
            tags: None,
            no_cache: false,
        }
    }
}

#[pymethods]
impl Loaded {
    #[new]
    #[pyo3(signature = (value, *, ttl=None, grace=None, negative_ttl=None, tti=None, meta=None, tags=None, no_cache=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        value: Py<PyAny>,
        ttl: Option<Bound<'_, PyAny>>,
        grace: Option<Bound<'_, PyAny>>,
        negative_ttl: Option<Bound<'_, PyAny>>,
        tti: Option<Bound<'_, PyAny>>,
        meta: Option<String>,
        tags: Option<Bound<'_, PyAny>>,
        no_cache: bool,
    ) -> PyResult<Self> {
        let d = |name, v: Option<Bound<'_, PyAny>>, positive| {
            v.map(|v| duration(py, name, &v, positive)).transpose()
        };
        Ok(Self {
            value: Some(value),
            ttl: d("ttl", ttl, true)?,
            grace: d("grace", grace, false)?,
            negative_ttl: d("negative_ttl", negative_ttl, true)?,
            tti: d("tti", tti, true)?,
            meta,
            tags: tags
                .filter(|t| !t.is_none())
                .map(|t| crate::tags::tag_list(py, "tags", &t, MAX_TAGS_READ))
                .transpose()?,
            no_cache,
        })
    }

    /// "The previous value still holds": it is kept and its lifetime restarts.
    #[staticmethod]
    #[pyo3(signature = (*, ttl=None, meta=None, tags=None))]
    fn not_modified(
        py: Python<'_>,
        ttl: Option<Bound<'_, PyAny>>,
        meta: Option<String>,
        tags: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let mut l = Self::not_modified_answer();
        l.ttl = ttl.map(|t| duration(py, "ttl", &t, true)).transpose()?;
        l.meta = meta;
        l.tags = tags
            .filter(|t| !t.is_none())
            .map(|t| crate::tags::tag_list(py, "tags", &t, MAX_TAGS_READ))
            .transpose()?;
        Ok(l)
    }

    /// This answer with `tags` unless it sets its own (the decorator's `tags=`).
    fn _or_tags(&self, py: Python<'_>, tags: Bound<'_, PyAny>) -> PyResult<Self> {
        let tags = match &self.tags {
            Some(own) => own.clone(),
            None => crate::tags::tag_list(py, "tags", &tags, MAX_TAGS_READ)?,
        };
        Ok(Self {
            value: self.value.as_ref().map(|v| v.clone_ref(py)),
            ttl: self.ttl,
            grace: self.grace,
            negative_ttl: self.negative_ttl,
            tti: self.tti,
            meta: self.meta.clone(),
            tags: Some(tags),
            no_cache: self.no_cache,
        })
    }

    /// Whether this answers "not modified".
    #[getter]
    fn is_not_modified(&self) -> bool {
        self.value.is_none()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(match &self.value {
            None => "Loaded.not_modified()".to_owned(),
            Some(v) => format!("Loaded({})", v.bind(py).repr()?),
        })
    }
}

/// Tags read from an answer made before the cache is known (`Loaded(...)`): more than any
/// `max_tags_per_entry` allows is refused by the engine anyway, this only bounds the reading.
const MAX_TAGS_READ: usize = 4096;

/// What a loader's return value means: a [`Loaded`], or a plain value (`ABSENT`: absent).
/// `copy`: the cache's `copy_values`.
pub(crate) fn to_loaded(value: Bound<'_, PyAny>, copy: bool) -> PyResult<CoreLoaded<PyValue>> {
    let Ok(l) = value.cast::<Loaded>() else {
        return Ok(CoreLoaded::from(from_loader(value, copy)?));
    };
    let py = value.py();
    let l = l.get();
    let mut loaded = match &l.value {
        None => CoreLoaded::not_modified(),
        Some(v) => CoreLoaded::from(from_loader(v.bind(py).clone(), copy)?),
    };
    if let Some(t) = l.ttl {
        loaded = loaded.ttl(t);
    }
    if let Some(g) = l.grace {
        loaded = loaded.grace(g);
    }
    if let Some(n) = l.negative_ttl {
        loaded = loaded.negative_ttl(n);
    }
    if let Some(t) = l.tti {
        loaded = loaded.tti(t);
    }
    if let Some(m) = &l.meta {
        loaded = loaded.meta(m.clone());
    }
    if let Some(t) = &l.tags {
        loaded = loaded.tags(t.iter().cloned());
    }
    if l.no_cache {
        loaded = loaded.no_cache();
    }
    Ok(loaded)
}

/// Whether `loader` takes the context: exactly one required positional parameter. Decided
/// once per code object (every lambda of one source line shares it), else per call.
pub(crate) fn takes_context(loader: &Bound<'_, PyAny>) -> PyResult<bool> {
    static SEEN: PyOnceLock<Py<PyDict>> = PyOnceLock::new();
    let py = loader.py();
    let seen = SEEN.get_or_init(py, || PyDict::new(py).unbind()).bind(py);
    let cache_key = match loader.getattr("__code__") {
        Ok(code) => Some(PyTuple::new(py, [code, loader.get_type().into_any()])?),
        Err(_) => None,
    };
    if let Some(k) = &cache_key {
        if let Some(known) = seen.get_item(k)? {
            return known.extract();
        }
    }
    let takes = arity(loader).unwrap_or(false);
    if let Some(k) = cache_key {
        // Bounded: one entry per loader's code, not per call.
        if seen.len() < 4096 {
            seen.set_item(k, takes)?;
        }
    }
    Ok(takes)
}

/// Exactly one required positional parameter. Optional ones and `*args` do not count: a
/// `functools.partial` of a function with defaults left, or a builtin such as `list`,
/// keeps being called with no argument.
fn arity(loader: &Bound<'_, PyAny>) -> PyResult<bool> {
    let py = loader.py();
    let inspect = py.import("inspect")?;
    let params = inspect
        .call_method1("signature", (loader,))?
        .getattr("parameters")?
        .call_method0("values")?;
    let kind = inspect.getattr("Parameter")?;
    let empty = kind.getattr("empty")?;
    let positional = [
        kind.getattr("POSITIONAL_ONLY")?,
        kind.getattr("POSITIONAL_OR_KEYWORD")?,
    ];
    let mut required = 0;
    for p in params.try_iter()? {
        let p = p?;
        let k = p.getattr("kind")?;
        let is_positional = positional[0].eq(&k)? || positional[1].eq(&k)?;
        if is_positional && p.getattr("default")?.is(&empty) {
            required += 1;
        }
    }
    Ok(required == 1)
}

/// `Cache(on_event=fn)`: the engine's events as `fn(kind, key, error)` (`kind` one of
/// "evict", "expire", "load_error", "failsafe"; `error` the load's error text or None),
/// called off the engine's locks and never on the hit path; an exception it raises is
/// reported as unraisable, and the event is lost.
pub(crate) fn listener(
    f: Bound<'_, PyAny>,
) -> PyResult<impl Fn(herdless::Event) + Send + Sync + 'static> {
    if !f.is_callable() {
        return Err(pyo3::exceptions::PyTypeError::new_err(
            "`on_event` must be a callable of (kind, key, error)",
        ));
    }
    let f = f.unbind();
    Ok(move |e: herdless::Event| {
        // Events come from the engine's threads too: counted, and dropped at exit.
        crate::shutdown::attach(|py| {
            let error = e.error.map(|e| e.to_string());
            if let Err(err) = f.call1(py, (e.kind.as_str(), &*e.key, error)) {
                err.write_unraisable(py, Some(f.bind(py)));
            }
        });
    })
}
