//! [`TieredCache`]: the fleet engine ([`TwoTier`]) driven from Rust, sync and async.
//!
//! Everything the two tiers decide is decided by [`TwoTier`]; this driver only runs Rust
//! loaders (a closure on the calling thread, or a future on the caller's task), waits
//! (parks the thread, or awaits), and runs background refreshes (a short-lived thread for
//! blocking loaders, a task on the backend's runtime for async ones).

use std::error::Error as StdError;
use std::future::Future;
use std::panic::resume_unwind;
use std::sync::Arc;
use std::time::Duration;

use herdless::{
    Builder, Cache, Error, Hit, LoadContext, LoadError, Loaded, Lookup, MetricsSnapshot,
};

use self::lang::{Loader, Rt, Runner};
use crate::call::{Call, CallOptions, Driven, Failure};
use crate::codec::Codec;
use crate::fleet::FleetOptions;
use crate::lifetimes::Lifetimes;
use crate::metrics::RedisMetrics;
use crate::runtime::{block_on, on_own_thread};
use crate::two_tier::{Get, IdleReads, SharedTier, TwoTier, Versioned};

mod batch;
mod lang;
mod tags;
mod warm;

type L1Tweak<V> = Box<dyn FnOnce(Builder<Versioned<V>>) -> Builder<Versioned<V>> + Send>;

/// Options of a [`TieredCache`].
pub struct TieredBuilder<V, C> {
    backend: SharedTier,
    codec: C,
    life: Lifetimes,
    hard_timeout: Option<Duration>,
    beta: f64,
    fleet: FleetOptions,
    l1: Option<L1Tweak<V>>,
}

impl<V, C> std::fmt::Debug for TieredBuilder<V, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TieredBuilder")
            .field("life", &self.life)
            .field("fleet", &self.fleet)
            .finish_non_exhaustive()
    }
}

impl<V, C> TieredBuilder<V, C>
where
    V: Clone + Send + Sync + 'static,
    C: Codec<V> + Send + Sync + 'static,
{
    /// How long a loaded value is fresh, before jitter (default 60 s).
    pub fn ttl(mut self, d: Duration) -> Self {
        self.life.ttl = d;
        self
    }
    /// Time-to-idle (default: none): an entry no process has read for this long is
    /// dropped, in memory and in Redis, within its ttl (PROTOCOL.md, "Time-to-idle").
    pub fn tti(mut self, d: Duration) -> Self {
        self.life.tti = Some(d);
        self
    }
    /// Stale-while-revalidate window after the TTL (default 0).
    pub fn grace(mut self, d: Duration) -> Self {
        self.life.grace = d;
        self
    }
    /// How long an absence is cached (default 10 s).
    pub fn negative_ttl(mut self, d: Duration) -> Self {
        self.life.negative_ttl = d;
        self
    }
    /// Fail-safe: keep values this long past their TTL, served when a load fails.
    pub fn max_stale(mut self, d: Duration) -> Self {
        self.life.max_stale = Some(d);
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
        self.life.jitter = j;
        self
    }
    /// XFetch beta (default 1; 0 disables early refresh).
    pub fn beta(mut self, b: f64) -> Self {
        self.beta = b;
        self
    }
    /// Longest wait for a load, in this process or another (default 5 s), counted from a
    /// caller's arrival.
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
    /// How long the invalidation stamps of a tag read from Redis are trusted (default
    /// 1 s; notifications update them meanwhile): the bound on a lost tag notification for
    /// reads of Redis ([`FleetOptions::tag_check`](crate::FleetOptions::tag_check)).
    pub fn tag_check(mut self, d: Duration) -> Self {
        self.fleet.tag_check = d;
        self
    }
    /// Further L1 options (capacity, weigher, origin budget, clock...). TTLs, grace,
    /// jitter, beta, wait_timeout and hard_timeout are the tiered cache's own and are set
    /// after this.
    pub fn l1(
        mut self,
        f: impl FnOnce(Builder<Versioned<V>>) -> Builder<Versioned<V>> + Send + 'static,
    ) -> Self {
        self.l1 = Some(Box::new(f));
        self
    }

    /// Builds the cache and subscribes it to the fleet's changes.
    pub fn build(mut self) -> Result<TieredCache<V, C>, herdless::ConfigError> {
        let mut b = Cache::<Versioned<V>>::builder();
        if let Some(f) = self.l1 {
            b = f(b);
        }
        let life = self.life;
        b = b
            .ttl(life.ttl)
            .grace(life.grace)
            .negative_ttl(life.negative_ttl)
            .jitter(0.0)
            .beta(self.beta)
            .wait_timeout(self.fleet.wait_timeout);
        if let Some(m) = life.max_stale {
            b = b.max_stale(m);
        }
        if let Some(h) = self.hard_timeout {
            b = b.hard_timeout(h);
        }
        if let Some(t) = life.tti {
            b = b.tti(t);
        }
        self.fleet.hold = self.hard_timeout;
        let idle = IdleReads::new();
        let l1 = idle.on(b).build()?;
        life.check()?;
        self.fleet.check()?;
        let tt = TwoTier::shared(l1, self.backend, self.fleet, life);
        idle.attach(&tt);
        Ok(TieredCache {
            tt,
            codec: Arc::new(self.codec),
        })
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
    tt: TwoTier<V>,
    codec: Arc<C>,
}

impl<V: Clone + Send + Sync + 'static, C> Clone for TieredCache<V, C> {
    fn clone(&self) -> Self {
        Self {
            tt: self.tt.clone(),
            codec: self.codec.clone(),
        }
    }
}

impl<V: Clone + Send + Sync + 'static, C> std::fmt::Debug for TieredCache<V, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TieredCache")
            .field("tier", &self.tt.tier())
            .finish_non_exhaustive()
    }
}

impl<V, C> TieredCache<V, C>
where
    V: Clone + Send + Sync + 'static,
    C: Codec<V> + Send + Sync + 'static,
{
    /// A builder over `backend` (a [`RedisBackend`](crate::RedisBackend), or a
    /// [`MemoryBackend`](crate::memory::MemoryBackend)) with `codec`.
    pub fn builder(backend: impl Into<SharedTier>, codec: C) -> TieredBuilder<V, C> {
        TieredBuilder {
            backend: backend.into(),
            codec,
            life: Lifetimes::default(),
            hard_timeout: None,
            beta: 1.0,
            fleet: FleetOptions::default(),
            l1: None,
        }
    }

    /// The fleet engine this cache drives.
    pub fn two_tier(&self) -> &TwoTier<V> {
        &self.tt
    }

    /// The L1 engine.
    pub fn l1(&self) -> &Cache<Versioned<V>> {
        self.tt.l1()
    }

    /// The fleet protocol.
    pub fn fleet(&self) -> crate::Fleet {
        self.tt.fleet().expect("a tiered cache has a shared tier")
    }

    /// The shared tier.
    pub fn backend(&self) -> SharedTier {
        self.tt.tier().expect("a tiered cache has a shared tier")
    }

    /// Closes the cache for every clone of it: its entries are dropped, the connections
    /// and runtime of a tier it connected itself are released (a backend given to the
    /// builder stays open for its owner, who may close it), and every later call that
    /// reads or writes entries fails with [`Error::Closed`] (see
    /// [`TwoTier::close`]). Idempotent.
    pub fn close(&self) {
        self.tt.close();
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.tt.is_closed()
    }

    /// The L1's metrics (per namespace) and the Redis tier's counters.
    pub fn metrics(&self) -> (MetricsSnapshot, RedisMetrics) {
        (self.tt.l1().metrics(), self.tt.tier_metrics())
    }

    /// Both metric sets in Prometheus text format, with the L1 detector's alerts gauge.
    pub fn prometheus(&self) -> String {
        self.tt.prometheus()
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
        let loader: Loader<V> = Box::new(move |_| {
            let fut = loader();
            Box::pin(async move { fut.await.map(Loaded::from).map_err(Into::into) })
        });
        let first = self.tt.l1().lookup(key);
        self.drive(first, key, loader, Runner::Task).await
    }

    /// [`get_or_load_async`](Self::get_or_load_async) with a context-aware loader (see
    /// [`herdless::Cache::get_or_load_with`]): it is told the key, why it loads, the value
    /// it may replace (from L1, or the shared entry it refreshes) with its age and metadata,
    /// and a cancellation signal; its answer's lifetimes and metadata hold for the whole
    /// fleet (kept in the shared entry), "not modified" republishes the previous value
    /// with its lifetime restarted, "no cache" stores nothing anywhere.
    pub async fn get_or_load_with_async<F, Fut, E>(
        &self,
        key: &str,
        loader: F,
    ) -> Result<Option<V>, Error>
    where
        F: FnOnce(LoadContext<V>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<Loaded<V>, E>> + Send + 'static,
        E: Into<Box<dyn StdError + Send + Sync>>,
    {
        let loader: Loader<V> =
            Box::new(move |ctx| Box::pin(async move { loader(ctx).await.map_err(Into::into) }));
        let first = self.tt.l1().lookup(key);
        self.drive(first, key, loader, Runner::Task).await
    }

    /// [`get_or_load_with_async`](Self::get_or_load_with_async), blocking, with a blocking
    /// loader run on this thread (as [`get_or_load`](Self::get_or_load)).
    pub fn get_or_load_with<F, E>(&self, key: &str, loader: F) -> Result<Option<V>, Error>
    where
        F: FnOnce(LoadContext<V>) -> Result<Loaded<V>, E> + Send + 'static,
        E: Into<Box<dyn StdError + Send + Sync>>,
    {
        let step = match self.tt.l1().lookup(key)? {
            Lookup::Hit(Hit {
                value,
                refresh: None,
                ..
            }) => return Ok(value.map(|v| v.value)),
            step => step,
        };
        let loader: Loader<V> =
            Box::new(move |ctx| Box::pin(std::future::ready(loader(ctx).map_err(Into::into))));
        block_on(self.drive(Ok(step), key, loader, Runner::Thread))?
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
        // The hit path: one lookup, no future and no waker.
        let step = match self.tt.l1().lookup(key)? {
            Lookup::Hit(Hit {
                value,
                refresh: None,
                ..
            }) => return Ok(value.map(|v| v.value)),
            step => step,
        };
        let loader: Loader<V> = Box::new(move |_| {
            Box::pin(std::future::ready(
                loader().map(Loaded::from).map_err(Into::into),
            ))
        });
        block_on(self.drive(Ok(step), key, loader, Runner::Thread))?
    }

    /// Drives `key`'s call from its first lookup, `first` (see [`crate::call`]).
    async fn drive(
        &self,
        first: Result<Lookup<Versioned<V>>, Error>,
        key: &str,
        loader: Loader<V>,
        runner: Runner,
    ) -> Result<Option<V>, Error> {
        let call = Call::new(&self.tt, key, first, loader, CallOptions::default());
        let rt = Rt {
            tt: self.tt.clone(),
            codec: self.codec.clone(),
            runner,
        };
        match Driven::new(call, rt).await {
            Ok(v) => Ok(v),
            Err(Failure::Error(e)) => Err(e),
            Err(Failure::Raise(payload)) => resume_unwind(payload),
        }
    }

    /// A fresh or within-grace value from L1, else from Redis (one round trip), without
    /// loading. Redis failing is a miss (counted in `backend_errors`).
    pub async fn get_async(&self, key: &str) -> Result<Option<V>, Error> {
        match self.tt.get(key)? {
            Get::Ready(v) => Ok(v),
            Get::Tier(read) => read
                .await
                .finish(&*self.codec)
                .map_err(|e| Error::Load(LoadError::new(e))),
        }
    }

    /// [`get_async`](Self::get_async), blocking. Refused on the backend's own threads
    /// ([`crate::Error::BlockingInRuntime`], as [`Error::Backend`]), an L1 hit too: where a
    /// call may block, it fails every time, not only on a miss.
    pub fn get(&self, key: &str) -> Result<Option<V>, Error> {
        if on_own_thread() {
            return Err(crate::Error::BlockingInRuntime.into());
        }
        // An L1 answer is returned here: no future, no thread waker (an `Arc` per call).
        match self.tt.get(key)? {
            Get::Ready(v) => Ok(v),
            Get::Tier(read) => block_on(read)?
                .finish(&*self.codec)
                .map_err(|e| Error::Load(LoadError::new(e))),
        }
    }

    /// Stores `value` for the whole fleet (a load already running anywhere will not
    /// overwrite it) and drops the other processes' L1 copies. On a Redis error the L1 copy
    /// is dropped too and the error returned.
    pub async fn set_async(&self, key: &str, value: V) -> Result<(), Error> {
        self.tt.set(key, value, None, &*self.codec)?.await
    }

    /// [`set_async`](Self::set_async), blocking.
    pub fn set(&self, key: &str, value: V) -> Result<(), Error> {
        block_on(self.set_async(key, value))?
    }

    /// Deletes `key` in L1 and Redis and drops the other processes' copies; true if Redis
    /// held an entry.
    pub async fn invalidate_async(&self, key: &str) -> Result<bool, Error> {
        self.tt.invalidate(key)?.await
    }

    /// [`invalidate_async`](Self::invalidate_async), blocking.
    pub fn invalidate(&self, key: &str) -> Result<bool, Error> {
        block_on(self.invalidate_async(key))?
    }

    /// Invalidates every key of `namespace` in the whole fleet in O(1); returns the new
    /// fleet epoch (0 for a namespace longer than `max_key_len`, which holds no key).
    pub async fn bump_async(&self, namespace: &str) -> Result<u64, Error> {
        self.tt.bump(namespace).await
    }

    /// [`bump_async`](Self::bump_async), blocking.
    pub fn bump(&self, namespace: &str) -> Result<u64, Error> {
        block_on(self.bump_async(namespace))?
    }
}
