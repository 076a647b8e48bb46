//! The façade: [`Cache`] and every one of its public methods, declared and documented here
//! once, each delegating to the subsystem that does the work (the state machine in
//! `lookup`, its drivers `blocking` and `asynchronous`, pre-warming in `warm`, the hot-key
//! tracker, the detector, the metrics), all over the sharded table in `table`. Nothing
//! below this file knows about `Cache`: dependencies run façade -> subsystems -> table ->
//! leaves.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::future::Future;
use core::time::Duration;

use crate::asynchronous;
use crate::batch;
use crate::clock::Clock;
use crate::config::{Builder, Options};
use crate::context::LoadContext;
use crate::detector::{self, Alert};
use crate::entry::Peek;
use crate::error::{ConfigError, Error};
use crate::hotkeys::{self, HotKey, HotKeysJsonError};
use crate::loaded::Loaded;
use crate::lookup::{self, Lookup, Refresh, Retry};
use crate::metrics::MetricsSnapshot;
use crate::sync::Arc;
use crate::table::Table;
use crate::warm::{self, WarmReport};

/// A stampede-proof cache of `V` values under string keys.
///
/// Cloning is cheap and shares the cache. See the [crate documentation](crate) for how the
/// state machine ([`Cache::lookup`]) and the convenience APIs fit together.
pub struct Cache<V> {
    pub(crate) table: Arc<Table<V>>,
}

impl<V> Clone for Cache<V> {
    fn clone(&self) -> Self {
        Self {
            table: self.table.clone(),
        }
    }
}

impl<V> core::fmt::Debug for Cache<V> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Cache").finish_non_exhaustive()
    }
}

impl<V: Clone + Send + Sync + 'static> Builder<V> {
    /// Checks every option and builds the cache.
    pub fn build(self) -> Result<Cache<V>, ConfigError> {
        Ok(Cache {
            table: Arc::new(Table::new(self.into_parts()?)),
        })
    }
}

#[cfg(feature = "std")]
impl<V: Clone + Send + Sync + 'static> Default for Cache<V> {
    fn default() -> Self {
        Self::new()
    }
}

// Construction and configuration.
impl<V: Clone + Send + Sync + 'static> Cache<V> {
    /// A builder with the default options.
    pub fn builder() -> Builder<V> {
        Builder::default()
    }

    /// A cache with the default options.
    #[cfg(feature = "std")]
    pub fn new() -> Self {
        Self::builder()
            .build()
            .expect("the default options are valid")
    }

    /// The options the cache was built with.
    pub fn options(&self) -> Options {
        self.table.cfg.options()
    }

    /// The cache's clock.
    pub fn clock(&self) -> &dyn Clock {
        &*self.table.clock
    }

    /// The table, for the tier drivers' hooks ([`crate::driver`]).
    pub(crate) fn table(&self) -> &Arc<Table<V>> {
        &self.table
    }
}

// Reading and loading.
impl<V: Clone + Send + Sync + 'static> Cache<V> {
    /// Decides what a caller of `key` does now: take a value ([`Lookup::Hit`], possibly with
    /// a background refresh to run), load it ([`Lookup::Lead`]) or wait for the caller who
    /// does ([`Lookup::Wait`]). This is the state machine every API and binding drives.
    #[inline]
    pub fn lookup(&self, key: &str) -> Result<Lookup<V>, Error> {
        lookup::lookup(&self.table, key, Refresh::IfSpawner)
    }

    /// [`lookup`](Self::lookup) after a [`Waited::Retry`](crate::Waited::Retry): the same
    /// decision, with the caller's `wait_timeout` still counted from its first arrival.
    pub fn lookup_again(&self, key: &str, retry: Retry) -> Result<Lookup<V>, Error> {
        lookup::lookup_again(&self.table, key, retry, Refresh::IfSpawner)
    }

    /// A value that is fresh or within grace, without loading or refreshing anything.
    /// A cached absence reads as `None`, like a miss; so does an empty or too-long key (the
    /// calls that can fail report those as errors).
    #[inline]
    pub fn get(&self, key: &str) -> Option<V> {
        self.table.get_with(key, V::clone)
    }

    /// [`get`](Self::get) without cloning the value: `read` sees it in place and its answer
    /// is returned. `read` runs under the shard's read lock, so it must be quick and must
    /// not call into this cache.
    #[inline]
    pub fn get_with<R>(&self, key: &str, read: impl FnOnce(&V) -> R) -> Option<R> {
        self.table.get_with(key, read)
    }

    /// `key`'s entry as it is, without side effects: nothing is counted, sampled, marked as
    /// used for eviction, refreshed or loaded. Tells a cached absence
    /// ([`Peek::value`] `None`) from a miss (`None`), and gives the entry's state (fresh,
    /// stale, or kept for fail-safe only), age, expiry and measured load duration. `None`
    /// too for an entry past its retention or of a bumped namespace, and for a bad key.
    ///
    /// ```
    /// use herdless::{Cache, HitState};
    /// let cache = Cache::<u32>::new();
    /// assert!(cache.peek("n:1").is_none());
    /// cache.set_absent("n:1")?;
    /// let seen = cache.peek("n:1").expect("a cached absence");
    /// assert_eq!((seen.value, seen.state), (None, HitState::Fresh));
    /// # Ok::<(), herdless::Error>(())
    /// ```
    pub fn peek(&self, key: &str) -> Option<Peek<V>> {
        self.table.peek(key)
    }

    /// The value of `key`, loading it with `loader` if needed; concurrent callers of one key
    /// share one load.
    ///
    /// The loader answers `Ok(Some(v))`, `Ok(None)` for "absent" (cached for
    /// `negative_ttl`), or an error (never cached; every waiter gets it). It runs on this
    /// thread when this caller leads, or on the cache's spawner for a
    /// stale-while-revalidate or XFetch refresh, hence `Send + 'static`
    /// ([`get_or_load_scoped`](Self::get_or_load_scoped) takes a loader that borrows).
    ///
    /// # Panics
    /// A panic of the loader is re-raised here after every waiter received
    /// [`Error::LoaderPanicked`]; the next call loads again.
    ///
    /// ```
    /// let cache = herdless::Cache::<String>::new();
    /// let v = cache.get_or_load("user:42", || Ok::<_, std::io::Error>(Some("Ada".to_string())));
    /// assert_eq!(v.unwrap().as_deref(), Some("Ada"));
    /// ```
    #[cfg(feature = "std")]
    pub fn get_or_load<F, E>(&self, key: &str, loader: F) -> Result<Option<V>, Error>
    where
        F: FnOnce() -> Result<Option<V>, E> + Send + 'static,
        E: Into<Box<dyn core::error::Error + Send + Sync>>,
    {
        crate::blocking::get_or_load(&self.table, key, loader)
    }

    /// [`get_or_load`](Self::get_or_load) with a loader that is told its [`LoadContext`]
    /// (the key, why it loads, the previous value with its age and metadata, a
    /// cancellation signal) and answers a [`Loaded`]: a value or an absence with this
    /// entry's own ttl, grace, negative ttl and metadata, or "not modified" (keep the
    /// previous value and restart its lifetime), or "do not cache".
    ///
    /// A loader that fails after its load was withdrawn (the key was written or
    /// invalidated meanwhile, or every caller left) answers nobody: its caller and the
    /// waiters look up again (and, after a write, find the new value).
    ///
    /// # Panics
    /// As [`get_or_load`](Self::get_or_load).
    ///
    /// ```
    /// use core::time::Duration;
    /// use herdless::{Cache, Loaded};
    /// let cache = Cache::<String>::new();
    /// let doc = cache.get_or_load_with("doc:7", |ctx| {
    ///     // An HTTP client would send `If-None-Match: <meta>` here and map a 304 to
    ///     // `Loaded::not_modified()`.
    ///     let etag = ctx.previous().and_then(|p| p.meta.clone());
    ///     assert!(etag.is_none()); // a first load
    ///     let (text, draft) = ("hello".to_string(), true);
    ///     let ttl = if draft { Duration::from_secs(5) } else { Duration::from_secs(3600) };
    ///     Ok::<_, std::io::Error>(Loaded::value(text).ttl(ttl).meta("\"v1\""))
    /// })?;
    /// assert_eq!(doc.as_deref(), Some("hello"));
    /// assert_eq!(cache.peek("doc:7").unwrap().meta.as_deref(), Some("\"v1\""));
    /// # Ok::<(), herdless::Error>(())
    /// ```
    #[cfg(feature = "std")]
    pub fn get_or_load_with<F, E>(&self, key: &str, loader: F) -> Result<Option<V>, Error>
    where
        F: FnOnce(LoadContext<V>) -> Result<Loaded<V>, E> + Send + 'static,
        E: Into<Box<dyn core::error::Error + Send + Sync>>,
    {
        crate::blocking::get_or_load_with(&self.table, key, loader)
    }

    /// [`get_or_load_async`](Self::get_or_load_async) with a context-aware loader, as
    /// [`get_or_load_with`](Self::get_or_load_with). Dropping the returned future drops
    /// the loader's (the load is handed to a waiter, if any); the context's
    /// [`cancelled`](LoadContext::cancelled) future tells a loader that runs on (a
    /// background refresh, a load past its soft timeout) that its result is no longer
    /// wanted.
    ///
    /// # Panics
    /// As [`get_or_load_async`](Self::get_or_load_async).
    pub async fn get_or_load_with_async<F, Fut, E>(
        &self,
        key: &str,
        loader: F,
    ) -> Result<Option<V>, Error>
    where
        F: FnOnce(LoadContext<V>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<Loaded<V>, E>> + Send + 'static,
        E: Into<Box<dyn core::error::Error + Send + Sync>>,
    {
        asynchronous::get_or_load_with(&self.table, key, loader).await
    }

    /// [`get_or_load`](Self::get_or_load) with a loader that may borrow from the caller
    /// (neither `Send` nor `'static`): it runs on this thread when this caller leads, and
    /// nowhere else. So a stale hit is served without starting a refresh from here: another
    /// caller's `get_or_load` refreshes it, or the first caller past grace loads it.
    ///
    /// # Panics
    /// As [`get_or_load`](Self::get_or_load).
    ///
    /// ```
    /// let cache = herdless::Cache::<usize>::new();
    /// let rows = vec!["a", "b", "c"]; // borrowed by the loader, not moved into it
    /// let n = cache.get_or_load_scoped("rows:count", || Ok::<_, std::io::Error>(Some(rows.len())));
    /// assert_eq!(n.unwrap(), Some(3));
    /// ```
    #[cfg(feature = "std")]
    pub fn get_or_load_scoped<F, E>(&self, key: &str, loader: F) -> Result<Option<V>, Error>
    where
        F: FnOnce() -> Result<Option<V>, E>,
        E: Into<Box<dyn core::error::Error + Send + Sync>>,
    {
        crate::blocking::get_or_load_scoped(&self.table, key, loader)
    }

    /// The value of `key`, loading it with the async `loader` if needed; concurrent callers
    /// of one key share one load. Works on any executor.
    ///
    /// Same contract as [`get_or_load`](Self::get_or_load). The leader enforces the loader
    /// timeouts: at the soft timeout, if a fail-safe value exists, it answers with it and
    /// the load finishes in the background (on the spawner); at the hard timeout the loader
    /// future is dropped and the load fails with [`Error::LoadTimeout`].
    ///
    /// # Panics
    /// With `std`, a panic of the loader is re-raised here after every waiter received
    /// [`Error::LoaderPanicked`].
    pub async fn get_or_load_async<F, Fut, E>(
        &self,
        key: &str,
        loader: F,
    ) -> Result<Option<V>, Error>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<Option<V>, E>> + Send + 'static,
        E: Into<Box<dyn core::error::Error + Send + Sync>>,
    {
        asynchronous::get_or_load(&self.table, key, loader).await
    }
}

// Batch loads: many keys, one loader call for their misses.
impl<V: Clone + Send + Sync + 'static> Cache<V> {
    /// The values of `keys`, in their order (duplicates allowed), loading the true misses
    /// with one call of `loader`; each key stays single-flight with every other caller.
    ///
    /// Each distinct key is looked up as by [`get_or_load`](Self::get_or_load): a hit is
    /// served; a key another caller is loading (a single `get_or_load` or another batch) is
    /// waited for; the rest, the keys this call leads, go to `loader` in one call (several
    /// when there are more than [`max_batch`](crate::Builder::max_batch)), and callers of
    /// any of them elsewhere wait for that call. The loader answers `(key, Some(v))` for a
    /// value and `(key, None)` for an absence, as a map or any list of pairs; a key it
    /// omits is absent too (both cached for `negative_ttl`); a key it was not asked for is
    /// ignored. An error of the loader is the error of every key of that call (never
    /// cached; their waiters get it too).
    ///
    /// Every answer is typed per key: `Ok(Some(v))`, `Ok(None)` (absent), or that key's
    /// [`Error`] (its load failed or timed out with no fail-safe value, its wait timed out,
    /// the key is invalid, ...). The other policies apply per key: stale and XFetch hits
    /// are served and their refreshes batched into one background loader call (hence
    /// `Send + Sync + 'static`), fail-safe values answer failed keys, a key written or
    /// invalidated while the loader runs keeps its new state. A loader call takes one unit
    /// of the origin budget, however many keys it loads; `batch_loads` counts the calls and
    /// `loads` their keys.
    ///
    /// # Panics
    /// A panic of the loader is re-raised here after the waiters of its keys received
    /// [`Error::LoaderPanicked`]; the keys of calls not yet made are handed over.
    ///
    /// ```
    /// use std::collections::HashMap;
    /// let cache = herdless::Cache::<String>::new();
    /// cache.set("user:1", "Ada".to_string())?;
    /// let answers = cache.get_or_load_many(["user:1", "user:2", "user:3"], |misses: &[String]| {
    ///     assert_eq!(misses, ["user:2", "user:3"]); // the hit is not asked for
    ///     Ok::<_, std::io::Error>(HashMap::from([("user:2".to_string(), Some("Bo".to_string()))]))
    /// });
    /// assert_eq!(answers[0].as_ref().unwrap().as_deref(), Some("Ada"));
    /// assert_eq!(answers[1].as_ref().unwrap().as_deref(), Some("Bo"));
    /// assert_eq!(answers[2].as_ref().unwrap(), &None, "omitted: absent");
    /// # Ok::<(), herdless::Error>(())
    /// ```
    #[cfg(feature = "std")]
    pub fn get_or_load_many<I, F, R, E>(&self, keys: I, loader: F) -> Vec<Result<Option<V>, Error>>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
        F: Fn(&[String]) -> Result<R, E> + Send + Sync + 'static,
        R: IntoIterator<Item = (String, Option<V>)>,
        E: Into<Box<dyn core::error::Error + Send + Sync>>,
    {
        batch::get_or_load_many(&self.table, keys, loader)
    }

    /// [`get_or_load_many`](Self::get_or_load_many) with an async loader, on any executor:
    /// the loader gets the keys it loads and its future answers as the blocking loader
    /// does. A loader call past the hard timeout is dropped and its keys answer
    /// [`Error::LoadTimeout`] (or their fail-safe values). Dropping this future hands the
    /// keys it leads over to their waiters.
    ///
    /// # Panics
    /// With `std`, as [`get_or_load_many`](Self::get_or_load_many).
    pub async fn get_or_load_many_async<I, F, Fut, R, E>(
        &self,
        keys: I,
        loader: F,
    ) -> Vec<Result<Option<V>, Error>>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
        F: Fn(Vec<String>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, E>> + Send + 'static,
        R: IntoIterator<Item = (String, Option<V>)>,
        E: Into<Box<dyn core::error::Error + Send + Sync>>,
    {
        batch::get_or_load_many_async(&self.table, keys, loader).await
    }
}

// Writing.
impl<V: Clone + Send + Sync + 'static> Cache<V> {
    /// Stores `value` under `key` now. A load of `key` already running will not overwrite it.
    pub fn set(&self, key: &str, value: V) -> Result<(), Error> {
        self.table.write(key, Some(value), None)
    }

    /// [`set`](Self::set) with its own TTL instead of the cache's (jitter still applies).
    pub fn set_with_ttl(&self, key: &str, value: V, ttl: Duration) -> Result<(), Error> {
        self.table.write(key, Some(value), Some(ttl))
    }

    /// Caches "absent" under `key` for `negative_ttl`.
    pub fn set_absent(&self, key: &str) -> Result<(), Error> {
        self.table.write(key, None, None)
    }

    /// A write with a loader's choices ([`Loaded`]: ttl, grace, negative ttl, metadata,
    /// [tags](Loaded::tags)); a load of `key` already running will not overwrite it.
    /// `no_cache` writes nothing; `not_modified` is refused ([`Error::NoPrevious`]); so are
    /// bad tags or metadata, and nothing is written.
    ///
    /// ```
    /// use herdless::{Cache, Loaded};
    /// let cache = Cache::<String>::new();
    /// let page = Loaded::value("<h1>Lamp</h1>".to_string()).tags(["product:42", "seller:7"]);
    /// cache.set_with("page:/lamp", page)?;
    /// cache.invalidate_tag("seller:7")?;
    /// assert_eq!(cache.get("page:/lamp"), None);
    /// # Ok::<(), herdless::Error>(())
    /// ```
    pub fn set_with(&self, key: &str, loaded: Loaded<V>) -> Result<(), Error> {
        self.table.write_loaded(key, loaded)
    }

    /// [`set`](Self::set) of a value carrying `tags` (see [`set_with`](Self::set_with)).
    pub fn set_tagged(&self, key: &str, value: V, tags: &[&str]) -> Result<(), Error> {
        self.set_with(key, Loaded::value(value).tags(tags.iter().copied()))
    }
}

// Pre-warming.
impl<V: Clone + Send + Sync + 'static> Cache<V> {
    /// Loads `keys` that are not fresh with `loader`, `concurrency` at a time (never more
    /// than the origin budget), on scoped threads; returns what happened to each key.
    ///
    /// A loader error or panic fails that key only (waiters of that load get the error, as
    /// with [`get_or_load`](Self::get_or_load)); the warm-up goes on.
    ///
    /// ```
    /// let cache = herdless::Cache::<u64>::new();
    /// let report = cache.warm(["n:1", "n:2"], 4, |key: &str| {
    ///     Ok::<_, std::io::Error>(Some(key.len() as u64))
    /// });
    /// assert_eq!(report.loaded, 2);
    /// assert_eq!(cache.get("n:1"), Some(3));
    /// ```
    #[cfg(feature = "std")]
    pub fn warm<I, F, E>(&self, keys: I, concurrency: usize, loader: F) -> WarmReport
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
        F: Fn(&str) -> Result<Option<V>, E> + Sync,
        E: Into<Box<dyn core::error::Error + Send + Sync>>,
    {
        warm::warm(&self.table, keys, concurrency, loader, warm::ignore)
    }

    /// [`warm`](Self::warm), calling `progress` with the report so far after each key.
    #[cfg(feature = "std")]
    pub fn warm_with_progress<I, F, E>(
        &self,
        keys: I,
        concurrency: usize,
        loader: F,
        progress: impl Fn(&WarmReport) + Sync,
    ) -> WarmReport
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
        F: Fn(&str) -> Result<Option<V>, E> + Sync,
        E: Into<Box<dyn core::error::Error + Send + Sync>>,
    {
        warm::warm(&self.table, keys, concurrency, loader, progress)
    }

    /// [`warm`](Self::warm) with an async loader, on any executor: `concurrency` loads at
    /// a time (never more than the origin budget), all in the calling task.
    ///
    /// # Panics
    /// With `std`, a panic of the loader is re-raised here after that load's waiters
    /// received [`Error::LoaderPanicked`].
    pub async fn warm_async<I, F, Fut, E>(
        &self,
        keys: I,
        concurrency: usize,
        loader: F,
    ) -> WarmReport
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
        F: Fn(String) -> Fut + Sync,
        Fut: Future<Output = Result<Option<V>, E>> + Send + 'static,
        E: Into<Box<dyn core::error::Error + Send + Sync>>,
    {
        warm::warm_async(&self.table, keys, concurrency, loader, warm::ignore).await
    }

    /// [`warm_async`](Self::warm_async), calling `progress` with the report so far after
    /// each key.
    pub async fn warm_async_with_progress<I, F, Fut, E>(
        &self,
        keys: I,
        concurrency: usize,
        loader: F,
        progress: impl Fn(&WarmReport) + Sync,
    ) -> WarmReport
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
        F: Fn(String) -> Fut + Sync,
        Fut: Future<Output = Result<Option<V>, E>> + Send + 'static,
        E: Into<Box<dyn core::error::Error + Send + Sync>>,
    {
        warm::warm_async(&self.table, keys, concurrency, loader, progress).await
    }

    /// The `n` most accessed keys, most first (empty when the tracker is off). Counts are
    /// estimates: fresh hits are sampled, and so is a new key's entry into a full tracker
    /// (see [`Builder::hot_key_sample`](crate::Builder::hot_key_sample)).
    pub fn hot_keys(&self, n: usize) -> Vec<HotKey> {
        self.table.hot.as_ref().map_or_else(Vec::new, |h| h.top(n))
    }

    /// The `n` hottest keys as JSON, for [`import_hot_keys`](Self::import_hot_keys) in the
    /// next instance (e.g. written to a file at shutdown or fetched from a live peer).
    pub fn export_hot_keys(&self, n: usize) -> String {
        hotkeys::to_json(&self.hot_keys(n))
    }

    /// Reads an export into this cache's tracker (their counts add to what it counted) and
    /// returns the keys, hottest first, ready for [`warm`](Self::warm).
    pub fn import_hot_keys(&self, json: &str) -> Result<Vec<HotKey>, HotKeysJsonError> {
        let mut keys = hotkeys::from_json(json)?;
        if let Some(h) = &self.table.hot {
            for k in &keys {
                h.add(&k.key, self.table.hash(&k.key), k.count);
            }
        }
        keys.sort_by_key(|k| core::cmp::Reverse(k.count));
        Ok(keys)
    }
}

// Observing.
impl<V: Clone + Send + Sync + 'static> Cache<V> {
    /// Counters, histograms and sizes at this moment.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.table.metrics()
    }

    /// [`metrics`](Self::metrics) in Prometheus text exposition format, then the gauge
    /// `herdless_alerts_active{namespace, kind, cause}` of the [`alerts`](Self::alerts).
    pub fn prometheus(&self) -> String {
        self.metrics().to_prometheus() + &detector::alerts_gauge(&self.alerts())
    }

    /// The stampede detector's findings, oldest first: active alerts and those that held
    /// within the detector's `hold` time. Empty when the detector is off.
    ///
    /// Closes any tick that ended by now on the cache's clock, so a driver on a
    /// [`ManualClock`](crate::ManualClock) may call it after each step.
    pub fn alerts(&self) -> Vec<Alert> {
        self.table.alerts()
    }

    /// Mutes (`false`) or unmutes (`true`) the [listener](crate::Builder::listener): while
    /// muted, the engine makes no event at all (nothing queued, nothing counted in
    /// `events_dropped`), so a listener installed for callers that may or may not subscribe
    /// (a binding's `cache.on(...)`) costs nothing until one does. Events queued before are
    /// still told. A cache starts unmuted; without a listener this does nothing.
    pub fn set_listening(&self, on: bool) {
        self.table.set_listening(on);
    }

    /// Loader calls running now under the origin budget (0 without a budget).
    pub fn budget_in_use(&self) -> usize {
        self.table.budget.as_ref().map_or(0, |b| b.in_use())
    }
}
