//! [`TieredCache`]: the in-memory engine as L1 in front of Redis as L2, for Rust callers.
//!
//! The engine's single-flight picks one local leader per key; only that leader talks to the
//! fleet ([`Fleet::lead`]), so a process makes one lock attempt per key at a time and its
//! other callers wait in memory. Entries keep the lifetimes of the shared entry (the L1 is
//! built without jitter; the jitter is drawn once, when the shared entry is written), and
//! set / invalidate / bump in any process drop the L1 copies of all processes.
//!
//! When Redis fails, the cache serves its L1, coalesces loads in the process, counts the
//! errors, and uses Redis again as soon as it answers.

use std::error::Error as StdError;
use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use herdless::backend::{Backend, Notice, StoredEntry, WriteOutcome};
use herdless::{
    Builder, Cache, Error, LoadError, LoadGuard, Lookup, MetricsSnapshot, OriginPermit, Waited,
};

use crate::backend::{RedisBackend, now_ms};
use crate::codec::Codec;
use crate::coherence::apply_notice;
use crate::deadline::WithDeadline;
use crate::fleet::{Fleet, FleetLease, FleetOptions, FleetOutcome};
use crate::lifetimes::{Lifetimes, fresh_for};
use crate::metrics::RedisMetrics;
use crate::runtime::block_on;

/// What the L1 holds: the value and the version of the shared entry it came from (0 when
/// it never reached Redis).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Local<V> {
    /// The value.
    pub value: V,
    /// The shared entry's version.
    pub version: u64,
}

type L1Tweak<V> = Box<dyn FnOnce(Builder<Local<V>>) -> Builder<Local<V>> + Send>;

/// Options of a [`TieredCache`].
pub struct TieredBuilder<V, C> {
    backend: RedisBackend,
    codec: C,
    ttl: Duration,
    grace: Duration,
    negative_ttl: Duration,
    max_stale: Option<Duration>,
    hard_timeout: Option<Duration>,
    jitter: f64,
    beta: f64,
    fleet: FleetOptions,
    l1: Option<L1Tweak<V>>,
}

impl<V, C> std::fmt::Debug for TieredBuilder<V, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TieredBuilder")
            .field("ttl", &self.ttl)
            .field("grace", &self.grace)
            .field("fleet", &self.fleet)
            .finish_non_exhaustive()
    }
}

impl<V, C> TieredBuilder<V, C>
where
    V: Clone + Send + Sync + 'static,
    C: Codec<V>,
{
    /// How long a loaded value is fresh, before jitter (default 60 s).
    pub fn ttl(mut self, d: Duration) -> Self {
        self.ttl = d;
        self
    }
    /// Stale-while-revalidate window after the TTL (default 0).
    pub fn grace(mut self, d: Duration) -> Self {
        self.grace = d;
        self
    }
    /// How long an absence is cached (default 10 s).
    pub fn negative_ttl(mut self, d: Duration) -> Self {
        self.negative_ttl = d;
        self
    }
    /// Fail-safe: keep values this long past their TTL, served when a load fails.
    pub fn max_stale(mut self, d: Duration) -> Self {
        self.max_stale = Some(d);
        self
    }
    /// Loader hard timeout: the loader future is dropped and the load fails with
    /// [`Error::LoadTimeout`] (waiters too); a blocking loader cannot be interrupted, but its
    /// waiters are released at the deadline. Default: none.
    pub fn hard_timeout(mut self, d: Duration) -> Self {
        self.hard_timeout = Some(d);
        self
    }
    /// TTL jitter (default 0.2), drawn once per shared entry.
    pub fn jitter(mut self, j: f64) -> Self {
        self.jitter = j;
        self
    }
    /// XFetch beta (default 1; 0 disables early refresh).
    pub fn beta(mut self, b: f64) -> Self {
        self.beta = b;
        self
    }
    /// Longest wait for a load, in this process or another (default 5 s).
    pub fn wait_timeout(mut self, d: Duration) -> Self {
        self.fleet.wait_timeout = d;
        self
    }
    /// The fleet lock's lease (default 5 s; extended while the loader runs).
    pub fn lease(mut self, d: Duration) -> Self {
        self.fleet.lease = d;
        self
    }
    /// Longest wait for another process without re-checking Redis (default 250 ms).
    pub fn recheck(mut self, d: Duration) -> Self {
        self.fleet.recheck = d;
        self
    }
    /// Further L1 options (capacity, weigher, origin budget, clock...). TTLs, grace,
    /// jitter, beta, wait_timeout and hard_timeout are the tiered cache's own and are set
    /// after this.
    pub fn l1(
        mut self,
        f: impl FnOnce(Builder<Local<V>>) -> Builder<Local<V>> + Send + 'static,
    ) -> Self {
        self.l1 = Some(Box::new(f));
        self
    }

    /// Builds the cache and subscribes it to the fleet's changes.
    pub fn build(self) -> Result<TieredCache<V, C>, herdless::ConfigError> {
        let mut b = Cache::<Local<V>>::builder();
        if let Some(f) = self.l1 {
            b = f(b);
        }
        b = b
            .ttl(self.ttl)
            .grace(self.grace)
            .negative_ttl(self.negative_ttl)
            .jitter(0.0)
            .beta(self.beta)
            .wait_timeout(self.fleet.wait_timeout);
        if let Some(m) = self.max_stale {
            b = b.max_stale(m);
        }
        if let Some(h) = self.hard_timeout {
            b = b.hard_timeout(h);
        }
        let l1 = b.build()?;
        // Same checks as the L1's, for the jitter the L1 does not see.
        Cache::<()>::builder().jitter(self.jitter).build()?;
        let inner = Arc::new(Inner {
            l1,
            fleet: self.backend.fleet(self.fleet),
            backend: self.backend,
            codec: self.codec,
            life: Lifetimes {
                ttl: self.ttl,
                grace: self.grace,
                negative_ttl: self.negative_ttl,
                max_stale: self.max_stale,
                jitter: self.jitter,
            },
            hard_timeout: self.hard_timeout,
        });
        let weak: Weak<Inner<V, C>> = Arc::downgrade(&inner);
        inner.backend.listen(Arc::new(move |n: Notice<'_>| {
            if let Some(inner) = weak.upgrade() {
                inner.on_notice(n);
            }
        }));
        Ok(TieredCache { inner })
    }
}

struct Inner<V: Clone + Send + Sync + 'static, C> {
    l1: Cache<Local<V>>,
    fleet: Fleet,
    backend: RedisBackend,
    codec: C,
    life: Lifetimes,
    hard_timeout: Option<Duration>,
}

impl<V: Clone + Send + Sync + 'static, C> Inner<V, C> {
    fn on_notice(&self, n: Notice<'_>) {
        apply_notice(&self.l1, n);
    }

    /// The shared entry for a value just loaded (or set), and its fresh TTL.
    fn entry(&self, value: Option<Vec<u8>>, took: Duration, epoch: u64) -> (StoredEntry, Duration) {
        self.life.entry(value, took, epoch, None)
    }
}

/// An in-memory L1 in front of Redis, with fleet-wide single-flight. Cheap to clone.
///
/// ```no_run
/// use std::time::Duration;
/// use herdless_redis::{Json, RedisBackend, TieredCache};
///
/// let backend = RedisBackend::builder("redis://127.0.0.1:6379").build()?;
/// let cache: TieredCache<String, Json> = TieredCache::builder(backend, Json)
///     .ttl(Duration::from_secs(60))
///     .build()?;
/// let v = cache.get_or_load("users:42", || Ok::<_, std::io::Error>(Some("Ada".into())))?;
/// assert_eq!(v.as_deref(), Some("Ada"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct TieredCache<V: Clone + Send + Sync + 'static, C> {
    inner: Arc<Inner<V, C>>,
}

impl<V: Clone + Send + Sync + 'static, C> Clone for TieredCache<V, C> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<V: Clone + Send + Sync + 'static, C> std::fmt::Debug for TieredCache<V, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TieredCache")
            .field("backend", &self.inner.backend)
            .finish_non_exhaustive()
    }
}

fn load_error<E: Into<Box<dyn StdError + Send + Sync>>>(e: E) -> LoadError {
    LoadError::from_boxed(e.into())
}

/// Where a background refresh runs its loader.
#[derive(Clone, Copy)]
enum Runner {
    /// On the backend's runtime (async loaders).
    Task,
    /// On a short-lived thread (blocking loaders must not hold the runtime's workers).
    Thread,
}

impl<V, C> TieredCache<V, C>
where
    V: Clone + Send + Sync + 'static,
    C: Codec<V>,
{
    /// A builder over `backend` with `codec`.
    pub fn builder(backend: RedisBackend, codec: C) -> TieredBuilder<V, C> {
        TieredBuilder {
            backend,
            codec,
            ttl: Duration::from_secs(60),
            grace: Duration::ZERO,
            negative_ttl: Duration::from_secs(10),
            max_stale: None,
            hard_timeout: None,
            jitter: 0.2,
            beta: 1.0,
            fleet: FleetOptions::default(),
            l1: None,
        }
    }

    /// The L1 engine.
    pub fn l1(&self) -> &Cache<Local<V>> {
        &self.inner.l1
    }

    /// The fleet protocol driver.
    pub fn fleet(&self) -> &Fleet {
        &self.inner.fleet
    }

    /// The backend.
    pub fn backend(&self) -> &RedisBackend {
        &self.inner.backend
    }

    /// The L1's metrics (per namespace) and the Redis tier's counters.
    pub fn metrics(&self) -> (MetricsSnapshot, RedisMetrics) {
        (self.inner.l1.metrics(), self.inner.backend.metrics())
    }

    /// Both metric sets in Prometheus text format, with the L1 detector's alerts gauge.
    pub fn prometheus(&self) -> String {
        self.inner.l1.prometheus() + &self.inner.backend.metrics().to_prometheus()
    }

    /// The value of `key`: from L1, else from Redis, else loaded by one caller in the whole
    /// fleet with `loader` (run on this task); other callers, here and in other processes,
    /// wait for that load. `Ok(None)`: absent (cached for `negative_ttl`).
    pub async fn get_or_load_async<F, Fut, E>(
        &self,
        key: &str,
        loader: F,
    ) -> Result<Option<V>, Error>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<Option<V>, E>> + Send + 'static,
        E: Into<Box<dyn StdError + Send + Sync>>,
    {
        self.drive(key, loader, Runner::Task).await
    }

    /// [`get_or_load_async`](Self::get_or_load_async), blocking, with a blocking loader run
    /// on this thread (background refreshes get a thread of their own). Callable from any
    /// thread, a tokio worker included (it blocks it), except the backend's own threads
    /// ([`crate::Error::BlockingInRuntime`]).
    pub fn get_or_load<F, E>(&self, key: &str, loader: F) -> Result<Option<V>, Error>
    where
        F: FnOnce() -> Result<Option<V>, E> + Send + 'static,
        E: Into<Box<dyn StdError + Send + Sync>>,
    {
        let loader = move || {
            std::future::ready(loader().map_err(Into::<Box<dyn StdError + Send + Sync>>::into))
        };
        block_on(self.drive(key, loader, Runner::Thread))?
    }

    async fn drive<F, Fut, E>(
        &self,
        key: &str,
        loader: F,
        runner: Runner,
    ) -> Result<Option<V>, Error>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<Option<V>, E>> + Send + 'static,
        E: Into<Box<dyn StdError + Send + Sync>>,
    {
        let mut loader = Some(loader);
        loop {
            match self.inner.l1.lookup(key)? {
                Lookup::Hit(hit) => {
                    if let (Some(guard), Some(loader)) = (hit.refresh, loader.take()) {
                        let have = hit.value.as_ref().map_or(0, |l| l.version);
                        self.spawn_refresh(guard, have, loader, runner);
                    }
                    return Ok(hit.value.map(|l| l.value));
                }
                Lookup::Wait(waiter) => match waiter.await? {
                    Waited::Loaded(v) => return Ok(v.map(|l| l.value)),
                    Waited::Stale(l) => return Ok(Some(l.value)),
                    Waited::Retry => continue,
                },
                Lookup::Lead(guard) => {
                    let loader = loader.take().expect("a caller leads at most once");
                    return self
                        .lead(guard, 0, loader, Some(runner))
                        .await
                        .map(|v| v.map(|l| l.value));
                }
            }
        }
    }

    fn spawn_refresh<F, Fut, E>(
        &self,
        guard: LoadGuard<Local<V>>,
        have: u64,
        loader: F,
        runner: Runner,
    ) where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<Option<V>, E>> + Send + 'static,
        E: Into<Box<dyn StdError + Send + Sync>>,
    {
        let this = self.clone();
        let job = async move {
            let _ = this.lead(guard, have, loader, None).await;
        };
        match runner {
            Runner::Task => {
                self.inner.backend.handle().spawn(job);
            }
            Runner::Thread => {
                // No thread: the job (and its guard) is dropped, which hands the refresh over.
                let _ = std::thread::Builder::new()
                    .name("herdless-refresh".into())
                    .spawn(move || block_on(job));
            }
        }
    }

    /// The local leader's part: ask the fleet, then adopt, load for the fleet, or (Redis
    /// failing) load for this process only. `runner` is where a foreground caller's load may
    /// be moved to serve a stale entry at once; `None` for a background refresh.
    async fn lead<F, Fut, E>(
        &self,
        guard: LoadGuard<Local<V>>,
        have: u64,
        loader: F,
        runner: Option<Runner>,
    ) -> Result<Option<Local<V>>, Error>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<Option<V>, E>> + Send + 'static,
        E: Into<Box<dyn StdError + Send + Sync>>,
    {
        let key = guard.key().to_owned();
        let background = runner.is_none();
        match self.inner.fleet.lead(&key, have).await {
            Ok(FleetOutcome::Fresh(e) | FleetOutcome::Stale(e)) => match self.decode(&e) {
                Ok(value) => {
                    let fresh = fresh_for(&e);
                    guard.adopt(value, fresh, e.load_duration)
                }
                // Bytes another codec wrote: serve a local load, leave Redis alone.
                Err(()) => self.load_local(guard, loader, background).await,
            },
            Ok(FleetOutcome::Lead(lease)) => {
                // A stale entry within grace: serve it now (here and to this process's
                // waiters) and refresh it for the fleet in the background.
                let stale = lease
                    .stale()
                    .filter(|e| e.value.is_some())
                    .and_then(|e| Some((self.decode(e).ok()??, e.load_duration)));
                if let (Some(runner), Some((value, took))) = (runner, stale) {
                    // The detached refresh calls the origin, so it takes a share of the
                    // budget; with none free it is skipped (dropping the lease hands the key
                    // over) and a later read of the still-stale copy tries again.
                    match self.inner.l1.try_origin_permit() {
                        Some(permit) => self.spawn_detached(lease, loader, runner, permit),
                        None => drop(lease),
                    }
                    return guard.adopt(Some(value), Duration::ZERO, took);
                }
                self.load_for_fleet(guard, lease, loader, background).await
            }
            Err(e @ Error::WaitTimeout { .. }) => guard.fail(e),
            Err(_) => {
                self.inner.l1.record_backend_error(&key);
                self.load_local(guard, loader, background).await
            }
        }
    }

    /// Runs the loader until it answers or the L1's hard timeout (if configured through
    /// [`TieredBuilder::l1`]) passes: `None` then, and the loader future is dropped.
    async fn run_loader<F, Fut, E>(
        &self,
        guard: &LoadGuard<Local<V>>,
        loader: F,
    ) -> Option<Result<Option<V>, LoadError>>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<Option<V>, E>> + Send + 'static,
        E: Into<Box<dyn StdError + Send + Sync>>,
    {
        let clock = self.inner.l1.clock();
        WithDeadline::new(loader(), clock, guard.hard_deadline())
            .await
            .map(|r| r.map_err(load_error))
    }

    fn timed_out(&self, guard: LoadGuard<Local<V>>) -> Result<Option<Local<V>>, Error> {
        let after = self.inner.hard_timeout.unwrap_or_default();
        guard.fail(Error::LoadTimeout { after })
    }

    /// Loads and publishes for the fleet with no local flight: the L1 keeps serving the
    /// stale copy; this process's refreshes of it wait for this lease's notification, and
    /// later misses read the new entry from Redis.
    fn spawn_detached<F, Fut, E>(
        &self,
        lease: FleetLease,
        loader: F,
        runner: Runner,
        permit: OriginPermit,
    ) where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<Option<V>, E>> + Send + 'static,
        E: Into<Box<dyn StdError + Send + Sync>>,
    {
        let this = self.clone();
        let job = async move {
            // Held until the entry is published: the budget counts the whole refresh.
            let _permit = permit;
            let key = lease.key().to_owned();
            let started = Instant::now();
            let clock = this.inner.l1.clock();
            let at = this.inner.hard_timeout.map(|h| clock.now() + h);
            let Some(Ok(value)) = WithDeadline::new(loader(), clock, at).await else {
                let _ = lease.release().await;
                return;
            };
            let bytes = match value
                .as_ref()
                .map(|v| this.inner.codec.encode(v))
                .transpose()
            {
                Ok(b) => b,
                Err(_) => {
                    let _ = lease.release().await;
                    return;
                }
            };
            let (entry, _) = this.inner.entry(bytes, started.elapsed(), lease.epoch());
            if lease.publish(entry).await.is_err() {
                this.inner.l1.record_backend_error(&key);
            }
        };
        match runner {
            Runner::Task => {
                self.inner.backend.handle().spawn(job);
            }
            Runner::Thread => {
                let _ = std::thread::Builder::new()
                    .name("herdless-refresh".into())
                    .spawn(move || block_on(job));
            }
        }
    }

    fn decode(&self, e: &StoredEntry) -> Result<Option<Local<V>>, ()> {
        match &e.value {
            None => Ok(None),
            Some(b) => match self.inner.codec.decode(b) {
                Ok(value) => Ok(Some(Local {
                    value,
                    version: e.version,
                })),
                Err(_) => {
                    self.inner.backend.count_corrupt();
                    Err(())
                }
            },
        }
    }

    /// Takes the origin budget. `Ok(false)`: a refresh found it spent and is skipped (a
    /// refresh never queues for the origin).
    async fn begin(guard: &mut LoadGuard<Local<V>>, background: bool) -> Result<bool, Error> {
        if background {
            Ok(guard.try_begin())
        } else {
            guard.begin().await.map(|()| true)
        }
    }

    async fn load_local<F, Fut, E>(
        &self,
        mut guard: LoadGuard<Local<V>>,
        loader: F,
        background: bool,
    ) -> Result<Option<Local<V>>, Error>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<Option<V>, E>> + Send + 'static,
        E: Into<Box<dyn StdError + Send + Sync>>,
    {
        match Self::begin(&mut guard, background).await {
            Ok(true) => {}
            Ok(false) => {
                guard.abandon();
                return Ok(None);
            }
            Err(e) => return guard.fail(e),
        }
        let Some(result) = self.run_loader(&guard, loader).await else {
            return self.timed_out(guard);
        };
        guard.complete(result.map(|v| v.map(|value| Local { value, version: 0 })))
    }

    async fn load_for_fleet<F, Fut, E>(
        &self,
        mut guard: LoadGuard<Local<V>>,
        lease: FleetLease,
        loader: F,
        background: bool,
    ) -> Result<Option<Local<V>>, Error>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<Option<V>, E>> + Send + 'static,
        E: Into<Box<dyn StdError + Send + Sync>>,
    {
        let key = guard.key().to_owned();
        match Self::begin(&mut guard, background).await {
            Ok(true) => {}
            Ok(false) => {
                let _ = lease.release().await;
                guard.abandon();
                return Ok(None);
            }
            Err(e) => {
                let _ = lease.release().await;
                return guard.fail(e);
            }
        }
        let started = Instant::now();
        let Some(result) = self.run_loader(&guard, loader).await else {
            let _ = lease.release().await;
            return self.timed_out(guard);
        };
        let took = started.elapsed();
        let value = match result {
            Ok(v) => v,
            Err(e) => {
                let _ = lease.release().await;
                return guard.complete(Err(e));
            }
        };
        let bytes = match value
            .as_ref()
            .map(|v| self.inner.codec.encode(v))
            .transpose()
        {
            Ok(b) => b,
            Err(_) => {
                // Unshareable: serve it here, let another process try.
                let _ = lease.release().await;
                return guard.complete(Ok(value.map(|value| Local { value, version: 0 })));
            }
        };
        let (entry, fresh) = self.inner.entry(bytes, took, lease.epoch());
        guard.set_ttl(fresh);
        let version = match lease.publish(entry).await {
            Ok(WriteOutcome::Written { version, .. }) => version,
            Ok(WriteOutcome::Superseded) => {
                // Newer data is in Redis (a write, an invalidation, a bump or another leader
                // after our lease ran out): answer our callers, but keep it out of the L1.
                let _ = self.inner.l1.invalidate(&key);
                0
            }
            Err(_) => {
                self.inner.l1.record_backend_error(&key);
                0
            }
        };
        guard.complete(Ok(value.map(|value| Local { value, version })))
    }

    /// A fresh or within-grace value from L1, else from Redis (one round trip), without
    /// loading.
    pub async fn get_async(&self, key: &str) -> Result<Option<V>, Error> {
        if let Some(l) = self.inner.l1.get(key) {
            return Ok(Some(l.value));
        }
        let Some(e) = self.inner.fleet.read(key).await? else {
            return Ok(None);
        };
        match self.decode(&e) {
            Ok(Some(l)) => {
                let now = now_ms();
                if e.is_fresh(now) {
                    let fresh = Duration::from_millis(e.fresh_until_ms - now);
                    let _ = self.inner.l1.set_with_ttl(key, l.clone(), fresh);
                }
                Ok(Some(l.value))
            }
            Ok(None) | Err(()) => Ok(None),
        }
    }

    /// [`get_async`](Self::get_async), blocking.
    pub fn get(&self, key: &str) -> Result<Option<V>, Error> {
        block_on(self.get_async(key))?
    }

    /// Stores `value` for the whole fleet (a load already running anywhere will not
    /// overwrite it) and drops the other processes' L1 copies. On a Redis error the L1 copy
    /// is dropped too and the error returned.
    pub async fn set_async(&self, key: &str, value: V) -> Result<(), Error> {
        // The L1's key rules, checked before anything is written to Redis.
        let max = self.inner.l1.options().max_key_len;
        if key.is_empty() {
            return Err(Error::EmptyKey);
        }
        if key.len() > max {
            return Err(Error::KeyTooLong {
                len: key.len(),
                max,
            });
        }
        let bytes = self
            .inner
            .codec
            .encode(&value)
            .map_err(|e| Error::Load(LoadError::new(e)))?;
        let (entry, fresh) = self.inner.entry(Some(bytes), Duration::ZERO, 0);
        match self.inner.fleet.set(key, entry).await {
            Ok(WriteOutcome::Written { version, .. }) => {
                self.inner
                    .l1
                    .set_with_ttl(key, Local { value, version }, fresh)
            }
            Ok(WriteOutcome::Superseded) => Ok(()),
            Err(e) => {
                self.inner.l1.record_backend_error(key);
                let _ = self.inner.l1.invalidate(key);
                Err(e)
            }
        }
    }

    /// [`set_async`](Self::set_async), blocking.
    pub fn set(&self, key: &str, value: V) -> Result<(), Error> {
        block_on(self.set_async(key, value))?
    }

    /// Deletes `key` in L1 and Redis and drops the other processes' copies; true if Redis
    /// held an entry.
    pub async fn invalidate_async(&self, key: &str) -> Result<bool, Error> {
        let _ = self.inner.l1.invalidate(key)?;
        let r = self.inner.fleet.invalidate(key).await;
        if r.is_err() {
            self.inner.l1.record_backend_error(key);
        }
        r
    }

    /// [`invalidate_async`](Self::invalidate_async), blocking.
    pub fn invalidate(&self, key: &str) -> Result<bool, Error> {
        block_on(self.invalidate_async(key))?
    }

    /// Invalidates every key of `namespace` in the whole fleet in O(1); returns the new
    /// fleet epoch (0 for a namespace longer than `max_key_len`, which holds no key).
    pub async fn bump_async(&self, namespace: &str) -> Result<u64, Error> {
        // No key has a namespace longer than a key: nothing to invalidate, and Redis is
        // spared an epoch key of that name (as the L1 is, see `Cache::bump`).
        if namespace.len() > self.inner.l1.options().max_key_len {
            return Ok(0);
        }
        self.inner.l1.bump(namespace);
        let r = self.inner.fleet.bump(namespace).await;
        if r.is_err() {
            self.inner.l1.record_backend_error(namespace);
        }
        r
    }

    /// [`bump_async`](Self::bump_async), blocking.
    pub fn bump(&self, namespace: &str) -> Result<u64, Error> {
        block_on(self.bump_async(namespace))?
    }
}
