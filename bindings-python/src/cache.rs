//! `herdless._native.Cache`: the engine with Python objects as values. The pure-Python
//! `herdless.Cache` subclasses it and adds the async methods, the decorator and `warm`;
//! everything on the hit path (`get`, `get_or_load`, a decorated sync function) is native.

use std::time::Duration;

use herdless::HitState;
use herdless_redis::BuildError;
use herdless_redis::call::CallOptions;
use herdless_redis::two_tier::TwoTier;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::driver::Handle;
use crate::driver::threads::get_or_load;
use crate::errors::{config_error, map_error};
use crate::loader::Loader;
use crate::metrics::{redis_to_dict, snapshot_to_dict};
use crate::ops::{self, How};
use crate::options::{Options, duration, namespace};
use crate::tags::tag_list;
use crate::value::{absent, to_caller};

/// A stampede-proof cache of Python objects.
#[pyclass(subclass, frozen, module = "herdless._native", name = "Cache")]
pub(crate) struct Cache {
    pub(crate) handle: Handle,
    namespace: Option<String>,
    origin_budget: Option<usize>,
    /// With a shared tier (`redis=`): a miss in memory asks it.
    pub(crate) shared: bool,
}

/// What `_peek` answers: value, state, age, fresh_until, stale_until, load_duration, tags.
type PeekTuple = (Py<PyAny>, &'static str, f64, f64, f64, f64, Vec<String>);

impl Cache {
    /// The most tags one entry may carry (the engine's `max_tags_per_entry`).
    fn max_tags_per_entry(&self) -> usize {
        self.handle.tt.l1().options().max_tags_per_entry
    }

    /// `set`'s `ttl` and `tags`, checked.
    fn set_args(
        &self,
        py: Python<'_>,
        ttl: Option<Bound<'_, PyAny>>,
        tti: Option<Bound<'_, PyAny>>,
        tags: Option<Bound<'_, PyAny>>,
    ) -> PyResult<ops::SetArgs> {
        let ttl = call_ttl(py, ttl.as_ref())?;
        let tti = tti
            .filter(|t| !t.is_none())
            .map(|t| duration(py, "tti", &t, true))
            .transpose()?;
        let tags = match tags.filter(|t| !t.is_none()) {
            Some(t) => Some(tag_list(py, "tags", &t, self.max_tags_per_entry())?),
            None => None,
        };
        Ok(ops::SetArgs { ttl, tti, tags })
    }
}

/// The one tag of `invalidate_tag`.
fn one_tag(py: Python<'_>, tag: &Bound<'_, PyAny>) -> PyResult<String> {
    let tag = tag
        .cast::<pyo3::types::PyString>()
        .map_err(|_| crate::errors::config_type_error(py, "`tag` must be a str".into()))?;
    Ok(crate::tags::tag_text(py, "tag", tag)?.to_owned())
}

/// A batch's keys: a list of str (a bare str is one key, refused).
fn batch_keys(keys: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if keys.is_instance_of::<pyo3::types::PyString>() {
        return Err(pyo3::exceptions::PyTypeError::new_err(
            "`keys` is a list of keys, not one key: use get_or_load for one",
        ));
    }
    keys.extract()
}

/// Raises `CacheClosed` once the cache is closed: the engine's answer
/// (`TwoTier::check_open`), checked first by the calls that read the L1 themselves.
#[inline]
pub(crate) fn check_open(py: Python<'_>, handle: &Handle) -> PyResult<()> {
    handle.tt.check_open().map_err(|e| map_error(py, e))
}

/// A call's options: its ttl and time-to-idle in seconds (None: the cache's).
pub(crate) fn call_options(
    py: Python<'_>,
    ttl: Option<&Bound<'_, PyAny>>,
    tti: Option<&Bound<'_, PyAny>>,
) -> PyResult<CallOptions> {
    let tti = tti
        .filter(|t| !t.is_none())
        .map(|t| duration(py, "tti", t, true))
        .transpose()?;
    Ok(CallOptions::default().ttl(call_ttl(py, ttl)?).tti(tti))
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
        *, ttl=None, tti=None, grace=None, jitter=None, beta=None, negative_ttl=None, wait_timeout=None,
        max_stale=None, failsafe_backoff=None, soft_timeout=None, hard_timeout=None,
        capacity=None, origin_budget=None, max_flights=None, max_batch=None, max_key_len=None,
        max_namespaces=None,
        namespace=None,
        redis=None, redis_prefix=None, codec=None, lease=None, detector_tick=None,
        detector=None, refresh_ahead=None, on_event=None, copy_values=None, admission=None,
        memcached=None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new<'py>(
        py: Python<'py>,
        ttl: Option<Bound<'py, PyAny>>,
        tti: Option<Bound<'py, PyAny>>,
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
        max_batch: Option<Bound<'py, PyAny>>,
        max_key_len: Option<Bound<'py, PyAny>>,
        max_namespaces: Option<Bound<'py, PyAny>>,
        namespace: Option<Bound<'py, PyAny>>,
        redis: Option<Bound<'py, PyAny>>,
        redis_prefix: Option<Bound<'py, PyAny>>,
        codec: Option<Bound<'py, PyAny>>,
        lease: Option<Bound<'py, PyAny>>,
        detector_tick: Option<Bound<'py, PyAny>>,
        detector: Option<Bound<'py, PyAny>>,
        refresh_ahead: Option<f64>,
        on_event: Option<Bound<'py, PyAny>>,
        copy_values: Option<Bound<'py, PyAny>>,
        admission: Option<Bound<'py, PyAny>>,
        memcached: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Self> {
        let checked = Options {
            ttl,
            tti,
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
            max_batch,
            max_key_len,
            max_namespaces,
            namespace,
            redis,
            redis_prefix,
            codec,
            lease,
            detector_tick,
            detector,
            copy_values,
            admission,
            memcached,
        }
        .check(py)?;
        let shared = checked.redis.is_some();
        let (mut builder, tier) = (checked.builder, checked.redis);
        if let Some(share) = refresh_ahead {
            builder = builder.refresh_ahead(share);
        }
        if let Some(listener) = on_event {
            builder = builder.listener(crate::context::listener(listener)?);
        }
        let tt = py
            .detach(|| TwoTier::build(builder, tier))
            .map_err(|e| match e {
                BuildError::Tier(e) => config_error(py, format!("`redis`: {e}")),
                e => config_error(py, e.to_string()),
            })?;
        Ok(Self {
            handle: Handle {
                tt,
                codec: std::sync::Arc::new(checked.codec),
                observer: Default::default(),
            },
            namespace: checked.namespace,
            origin_budget: checked.origin_budget,
            shared,
        })
    }

    /// The default namespace of keys made by the decorator, if one was given.
    #[getter]
    fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The ttl jitter fraction (`jitter`): a stored ttl is spread by up to half of it either
    /// way. With a shared tier, the jitter its entries are written with (the L1 has none).
    #[getter]
    fn jitter(&self) -> f64 {
        self.handle.tt.lifetimes().jitter
    }

    /// The longest accepted key, in bytes (`max_key_len`).
    #[getter]
    fn max_key_len(&self) -> usize {
        self.handle.tt.l1().options().max_key_len
    }

    /// The origin budget (most loader calls at once), if one was given.
    #[getter]
    fn origin_budget(&self) -> Option<usize> {
        self.origin_budget
    }

    /// The value of `key` if fresh or within grace, else `default`; never loads. With
    /// Redis: from memory, else from Redis (one round trip; Redis failing reads as a miss).
    #[pyo3(signature = (key, default=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &str,
        default: Option<Py<PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        ops::get(py, &self.handle, key, default, How::Block)
    }

    /// `get` for asyncio: an awaitable of the answer; the read of Redis is awaited on the
    /// event loop (no thread), an answer from memory is ready at once.
    #[pyo3(signature = (key, default=None))]
    fn aget<'py>(
        &self,
        py: Python<'py>,
        key: &str,
        default: Option<Py<PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        ops::get(py, &self.handle, key, default, How::Await)
    }

    /// Stores `value` under `key` (`ABSENT`: caches an absence for `negative_ttl`), with
    /// its own `ttl` and `tti` (seconds) and `tags` (an iterable of str) if given. With Redis: for the whole fleet (a load running
    /// anywhere will not overwrite it, and other processes drop their copies).
    #[pyo3(signature = (key, value, *, ttl=None, tti=None, tags=None))]
    fn set<'py>(
        &self,
        py: Python<'py>,
        key: &str,
        value: Bound<'_, PyAny>,
        ttl: Option<Bound<'_, PyAny>>,
        tti: Option<Bound<'_, PyAny>>,
        tags: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let args = self.set_args(py, ttl, tti, tags)?;
        ops::set(py, &self.handle, key, value, args, How::Block)
    }

    /// `set` for asyncio: an awaitable, done once the write is (Redis awaited on the loop).
    #[pyo3(signature = (key, value, *, ttl=None, tti=None, tags=None))]
    fn aset<'py>(
        &self,
        py: Python<'py>,
        key: &str,
        value: Bound<'_, PyAny>,
        ttl: Option<Bound<'_, PyAny>>,
        tti: Option<Bound<'_, PyAny>>,
        tags: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let args = self.set_args(py, ttl, tti, tags)?;
        ops::set(py, &self.handle, key, value, args, How::Await)
    }

    /// Removes `key` (with Redis: in the whole fleet); a load of it already running will
    /// not write its older result back. Returns whether an entry was removed.
    fn invalidate<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyAny>> {
        ops::invalidate(py, &self.handle, key, How::Block)
    }

    /// `invalidate` for asyncio: an awaitable of whether an entry was removed.
    fn ainvalidate<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyAny>> {
        ops::invalidate(py, &self.handle, key, How::Await)
    }

    /// Invalidates every key of `namespace` at once, in O(1) (with Redis: in the whole
    /// fleet); returns the new epoch.
    fn bump<'py>(
        &self,
        py: Python<'py>,
        namespace: Bound<'_, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let ns = self::namespace(py, "namespace", &namespace)?;
        ops::bump(py, &self.handle, &ns, How::Block)
    }

    /// `bump` for asyncio: an awaitable of the new epoch.
    fn abump<'py>(
        &self,
        py: Python<'py>,
        namespace: Bound<'_, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let ns = self::namespace(py, "namespace", &namespace)?;
        ops::bump(py, &self.handle, &ns, How::Await)
    }

    /// Drops every entry carrying `tag`, in O(1) (with Redis: in the whole fleet). Hard by
    /// default: those entries become misses, never served again (not even on a failed
    /// load), and a load that began before this call does not store its older value.
    /// `soft=True` expires them instead: served stale within their grace while one refresh
    /// runs, kept as fail-safe values.
    #[pyo3(signature = (tag, *, soft=false))]
    fn invalidate_tag<'py>(
        &self,
        py: Python<'py>,
        tag: Bound<'_, PyAny>,
        soft: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let tag = one_tag(py, &tag)?;
        ops::stamp(py, &self.handle, &[tag], soft, How::Block)
    }

    /// `invalidate_tag` for asyncio: an awaitable, done once the tag is invalidated.
    #[pyo3(signature = (tag, *, soft=false))]
    fn ainvalidate_tag<'py>(
        &self,
        py: Python<'py>,
        tag: Bound<'_, PyAny>,
        soft: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let tag = one_tag(py, &tag)?;
        ops::stamp(py, &self.handle, &[tag], soft, How::Await)
    }

    /// `invalidate_tag` of each of `tags` (an iterable of str), at once: one round trip
    /// with Redis per 256 tags. Every tag is checked before any is invalidated; more than
    /// 10,000 distinct tags raise `TooManyTags` (nothing invalidated).
    #[pyo3(signature = (tags, *, soft=false))]
    fn invalidate_tags<'py>(
        &self,
        py: Python<'py>,
        tags: Bound<'_, PyAny>,
        soft: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let tags = tag_list(py, "tags", &tags, usize::MAX)?;
        ops::stamp(py, &self.handle, &tags, soft, How::Block)
    }

    /// `invalidate_tags` for asyncio: an awaitable, done once the tags are invalidated.
    #[pyo3(signature = (tags, *, soft=false))]
    fn ainvalidate_tags<'py>(
        &self,
        py: Python<'py>,
        tags: Bound<'_, PyAny>,
        soft: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let tags = tag_list(py, "tags", &tags, usize::MAX)?;
        ops::stamp(py, &self.handle, &tags, soft, How::Await)
    }

    /// The value of `key`, calling `loader()` when it must be loaded; concurrent callers of
    /// one key share one call. See the README for the full contract.
    #[pyo3(signature = (key, loader, *, ttl=None, tti=None))]
    fn get_or_load(
        &self,
        py: Python<'_>,
        key: &str,
        loader: Py<PyAny>,
        ttl: Option<Bound<'_, PyAny>>,
        tti: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        check_open(py, &self.handle)?;
        let options = call_options(py, ttl.as_ref(), tti.as_ref())?;
        get_or_load(&self.handle, py, key, || Loader::Call0(loader), options)
    }

    /// The values of `keys`, in their order, loading the misses with one call of
    /// `loader(keys)` (see `herdless.Cache.get_or_load_many`).
    fn get_or_load_many(
        &self,
        py: Python<'_>,
        keys: Bound<'_, PyAny>,
        loader: Py<PyAny>,
    ) -> PyResult<Py<pyo3::types::PyList>> {
        check_open(py, &self.handle)?;
        let keys = batch_keys(&keys)?;
        crate::driver::threads::get_or_load_many(&self.handle, py, keys, loader)
    }

    /// `get_or_load_many` for asyncio (see `herdless.Cache.aget_or_load_many`): an
    /// awaitable of the values, the batch driven on the running loop.
    fn _aget_or_load_many<'py>(
        &self,
        py: Python<'py>,
        keys: Bound<'_, PyAny>,
        loader: Py<PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        check_open(py, &self.handle)?;
        let keys = batch_keys(&keys)?;
        crate::driver::event_loop::aget_or_load_many(py, &self.handle, keys, loader)
    }

    /// The first step of `aget_or_load` (and of an async decorated function): `_Done` for
    /// a plain hit, else the call's asyncio future when `loader` is given, a `_Call` to run
    /// with the loader (`await call.run(loader)`) when it is not.
    /// `ttl` and `tti` (seconds) are those a load started by the call stores its value with.
    #[pyo3(signature = (key, ttl=None, tti=None, loader=None))]
    fn _lookup(
        &self,
        py: Python<'_>,
        key: &str,
        ttl: Option<Bound<'_, PyAny>>,
        tti: Option<Bound<'_, PyAny>>,
        loader: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        check_open(py, &self.handle)?;
        let options = call_options(py, ttl.as_ref(), tti.as_ref())?;
        crate::driver::group::lookup(py, &self.handle, key, options, loader)
    }

    /// Closes the cache now: with Redis, its connections (commands, subscription) and its
    /// thread are released at once; its entries in this process are dropped. Idempotent.
    /// Afterwards every call that reads or writes entries raises `CacheClosed`; `metrics`,
    /// `prometheus`, `alerts` and `hot_keys` still answer. A loader already running
    /// finishes and its callers get its value (stored nowhere); a load or a write still
    /// waiting for Redis (or for `origin_budget`) raises `CacheClosed`, and a `get`
    /// answers a miss.
    fn close(&self) {
        self.handle.tt.close();
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.handle.tt.is_closed()
    }

    /// `with Cache(...) as cache:` closes the cache when the block ends.
    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// Closes the cache (`close()`); never swallows the block's exception.
    #[pyo3(signature = (exc_type, exc_value, traceback, /))]
    fn __exit__(
        &self,
        exc_type: Option<Bound<'_, PyAny>>,
        exc_value: Option<Bound<'_, PyAny>>,
        traceback: Option<Bound<'_, PyAny>>,
    ) {
        let _ = (exc_type, exc_value, traceback);
        self.close();
    }

    /// Raises `CacheClosed` once the cache is closed (the engine's answer, as in every
    /// language); for the pure-Python methods that do not reach the engine at once.
    fn _check_open(&self, py: Python<'_>) -> PyResult<()> {
        check_open(py, &self.handle)
    }

    /// Counters, histograms and sizes as plain data (see `herdless.Metrics`).
    fn _metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = snapshot_to_dict(py, &self.handle.tt.l1().metrics())?;
        if self.shared {
            d.set_item("redis", redis_to_dict(py, &self.handle.tt.tier_metrics())?)?;
        }
        Ok(d)
    }

    /// The observer of loader calls (`herdless.contrib.opentelemetry`), if any.
    #[getter]
    fn _load_observer(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.handle.observer.get(py)
    }

    /// Sets (or, with None, removes) the observer of loader calls: each load calls
    /// `observer(key, background, call)` instead of the loader, and `call()` runs the loader.
    fn _set_load_observer(&self, observer: Option<Py<PyAny>>) {
        self.handle.observer.set(observer);
    }

    /// Metrics in Prometheus text exposition format.
    fn prometheus(&self) -> String {
        self.handle.tt.prometheus()
    }

    /// `key`'s entry in this process's memory, touching nothing, as `(value, state, age,
    /// fresh_until, stale_until, load_duration, tags)` (seconds; the two ends on the cache's
    /// clock), or None when there is none (see `herdless.Cache.peek`).
    fn _peek(&self, py: Python<'_>, key: &str) -> PyResult<Option<PeekTuple>> {
        check_open(py, &self.handle)?;
        let Some(p) = self.handle.tt.l1().peek(key) else {
            return Ok(None);
        };
        let state = match p.state {
            HitState::Fresh => "fresh",
            HitState::Stale => "stale",
            HitState::FailSafe => "fail_safe",
        };
        Ok(Some((
            to_caller(py, p.value.map(|v| v.value))?,
            state,
            p.age.as_secs_f64(),
            p.fresh_until.as_secs_f64(),
            p.stale_until.as_secs_f64(),
            p.load_duration.as_secs_f64(),
            p.tags.into_iter().map(String::from).collect(),
        )))
    }

    /// Keys loading now (flight records); for tests and leak checks.
    fn _flights_in_progress(&self) -> usize {
        herdless::driver::flights_in_progress(self.handle.tt.l1())
    }

    /// The stampede detector's findings as plain data (see `herdless.Alert`).
    fn _alerts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyList>> {
        crate::detector::alerts(py, &self.handle.tt.l1().alerts())
    }

    /// The `n` most accessed keys as `(key, count, misses)` (see `herdless.HotKey`).
    fn _hot_keys(&self, n: usize) -> Vec<(String, u64, u64)> {
        crate::detector::hot_keys(self.handle.tt.l1().hot_keys(n))
    }

    /// The `n` hottest keys as JSON, for `import_hot_keys` in the next instance.
    #[pyo3(signature = (n=1000))]
    fn export_hot_keys(&self, n: usize) -> String {
        self.handle.tt.l1().export_hot_keys(n)
    }

    /// Reads an export into the tracker; the keys as `(key, count, misses)`, hottest first.
    fn _import_hot_keys(&self, py: Python<'_>, json: &str) -> PyResult<Vec<(String, u64, u64)>> {
        match self.handle.tt.l1().import_hot_keys(json) {
            Ok(keys) => Ok(crate::detector::hot_keys(keys)),
            Err(e) => Err(crate::errors::herdless_err(
                py,
                "HotKeysFormatError",
                e.to_string(),
                &[],
            )),
        }
    }
}

/// `herdless.ABSENT`, for module setup.
pub(crate) fn absent_object(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    Ok(absent(py)?.clone().into_any())
}
