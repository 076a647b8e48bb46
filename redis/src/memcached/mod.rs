//! [`MemcachedBackend`]: the shared tier on memcached (`memcached://host:port`), with the
//! meta protocol's own anti-stampede flags doing the fleet's single-flight (PROTOCOL.md,
//! "The memcached tier").
//!
//! Memcached has no scripts, no server clock and no push, so the tier is built from what
//! one item can do atomically (compare-and-swap, vivify-on-miss, the stale mark and its
//! win token) and nothing needs two keys to change together:
//!
//! - **The value item is the lock.** An `acquire` reads it with `N<lease>` (vivify): on a
//!   miss memcached creates an empty placeholder for one lease and hands exactly one
//!   client the win flag (`W`); the others see `Z` (a winner exists) and wait. An entry
//!   that needs a refresh (past its fresh time, of an older epoch, unreadable, or not newer
//!   than the caller's copy) is claimed with `md <key> I T<lease> C<cas>` (marked stale,
//!   for one lease), which again hands one reader `W` while the others serve the stale
//!   value. The winner's token is the item's CAS: its commit is `ms C<cas>`, which a
//!   `set`, an invalidation or another winner after the lease ran out all defeat. A dead
//!   winner blocks the key for at most one lease (the placeholder, or the stale mark,
//!   expires).
//! - **Epochs** are counters (`ma`) that start at a random number when first made (or
//!   remade after an eviction), so an evicted epoch never brings back an older
//!   generation's entries; every entry carries the epoch it was written under.
//! - **No copies in the first tier.** Nothing tells a process of another's writes, so a
//!   two-tier cache over memcached keeps no L1 copies across calls (its callers of a key
//!   still share one load, one read): a delete in one process is seen by the next read
//!   in every other, as the coherence rule of every tier requires.
//!
//! Not offered here: entry tags (refused with [`Error::Unsupported`]), time-to-idle
//! beyond lengthening an entry's life on reads, and `forget` (a lost acquire's placeholder
//! simply expires after one lease).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memcache::exp::AsyncMetaClient;
use tokio::runtime::Handle;
use tokio::sync::OnceCell;

use crate::error::Error;
use crate::fleet::{Fleet, FleetOptions};
use crate::metrics::{Metrics, RedisMetrics};
use crate::runtime::Runtime;
use crate::tags::StampCache;
use crate::wall::random_secret;

mod acquire;
mod item;
mod names;
mod ops;
mod tags;

/// How a waiter polls for another process's load: memcached has no push, so a watch
/// resolves by itself after this long, doubling up to [`MAX_POLL`].
const FIRST_POLL: Duration = Duration::from_millis(10);
/// The longest interval between two polls of a waiter.
const MAX_POLL: Duration = Duration::from_millis(40);

/// Options of a [`MemcachedBackend`].
#[derive(Clone, Debug)]
pub struct MemcachedBuilder {
    servers: Vec<String>,
    prefix: String,
    op_timeout: Duration,
}

impl MemcachedBuilder {
    /// The prefix of every item name (default `hl`), as Redis's.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Bound of every operation (default 1 s).
    pub fn op_timeout(mut self, d: Duration) -> Self {
        self.op_timeout = d;
        self
    }

    /// The backend, with a runtime of its own for its connections. Connects lazily: this
    /// succeeds while memcached is down.
    pub fn build(self) -> Result<MemcachedBackend, Error> {
        if self.servers.is_empty() {
            return Err(Error::Config("memcached: name at least one server".into()));
        }
        if self.op_timeout.is_zero() {
            return Err(Error::Config("`op_timeout` must not be zero".into()));
        }
        names::check_prefix(&self.prefix)?;
        let rt = Runtime::new(1).map_err(|e| Error::Config(e.to_string()))?;
        Ok(MemcachedBackend {
            inner: Arc::new(Inner {
                servers: self.servers,
                prefix: self.prefix,
                op_timeout: self.op_timeout,
                client: OnceCell::new(),
                metrics: Arc::new(Metrics::default()),
                origin: crate::wall::hex(&random_secret()?[..8]),
                held: Mutex::new(HashMap::new()),
                stamps: StampCache::default(),
                rt,
            }),
        })
    }
}

/// A stale entry a won claim replaced with its stale mark: put back if the load fails, so
/// a failed refresh does not cost the fleet its fail-safe copy.
#[derive(Clone, Debug)]
struct Held {
    cas: u64,
    bytes: Vec<u8>,
    retain_until_ms: u64,
}

struct Inner {
    servers: Vec<String>,
    prefix: String,
    op_timeout: Duration,
    client: OnceCell<AsyncMetaClient>,
    metrics: Arc<Metrics>,
    origin: String,
    /// Per key, the stale entry this process's won claim holds (at most one per key: a
    /// process leads a key once at a time).
    held: Mutex<HashMap<String, Held>>,
    /// Always empty (no tags here); the tag layer asks for one.
    stamps: StampCache,
    rt: Runtime,
}

/// One process's handle on memcached. Cheap to clone.
#[derive(Clone)]
pub struct MemcachedBackend {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for MemcachedBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemcachedBackend")
            .field("servers", &self.inner.servers)
            .field("prefix", &self.inner.prefix)
            .finish_non_exhaustive()
    }
}

impl MemcachedBackend {
    /// Options for the memcached servers at `servers` (`host:port` each; keys are spread
    /// over several by rendezvous hashing).
    pub fn builder<S: Into<String>>(servers: impl IntoIterator<Item = S>) -> MemcachedBuilder {
        MemcachedBuilder {
            servers: servers.into_iter().map(Into::into).collect(),
            prefix: "hl".into(),
            op_timeout: Duration::from_secs(1),
        }
    }

    /// This process's origin id (in logs; memcached carries no notices).
    pub fn origin(&self) -> &str {
        &self.inner.origin
    }

    /// The tier's counters.
    pub fn metrics(&self) -> RedisMetrics {
        self.inner.metrics.snapshot()
    }

    pub(crate) fn counters(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// The runtime its connections and timers run on.
    pub fn handle(&self) -> &Handle {
        self.inner.rt.handle()
    }

    /// Closes its connections and runtime: every operation answers
    /// [`Error::Closed`] from now on.
    pub fn close(&self) {
        self.inner.rt.close();
    }

    /// The fleet protocol over memcached.
    pub fn fleet(&self, options: FleetOptions) -> Fleet {
        Fleet::over(
            self,
            self.handle().clone(),
            self.inner.metrics.clone(),
            options,
        )
    }

    /// The client, connected on first use (addresses are resolved then).
    async fn client(&self) -> Result<&AsyncMetaClient, Error> {
        let inner = &self.inner;
        inner
            .client
            .get_or_try_init(|| async {
                AsyncMetaClient::builder()
                    .connect_timeout(Some(inner.op_timeout))
                    .io_timeout(Some(inner.op_timeout))
                    .connect_multiple_async(inner.servers.iter().map(String::as_str))
                    .await
                    .map_err(memcached_error)
            })
            .await
    }

    /// Runs `op` inside the runtime, bounded by `op_timeout`; a failure is counted (as every
    /// shared tier's operations: [`Runtime::bounded`]).
    fn run<'a, T: Send + 'a>(
        &'a self,
        name: &'static str,
        op: impl std::future::Future<Output = Result<T, Error>> + Send + 'a,
    ) -> herdless::backend::BackendFuture<'a, T> {
        let errors = &self.inner.metrics.backend_errors;
        let fut = self
            .inner
            .rt
            .bounded(name, self.inner.op_timeout, errors, op);
        Box::pin(async move { fut.await.map_err(Into::into) })
    }
}

/// The crate's error for what the memcached client reported.
fn memcached_error(e: memcache::exp::Error) -> Error {
    Error::Memcached(Arc::new(e.to_string()))
}

/// A waiter's watch: memcached tells nobody of a change, so it resolves by itself, sooner
/// at first (a load that ends quickly is seen quickly), then every [`MAX_POLL`].
struct Poll {
    next: Duration,
}

impl herdless::backend::Watch for Poll {
    fn changed(&mut self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        let wait = self.next;
        self.next = (self.next * 2).min(MAX_POLL);
        Box::pin(tokio::time::sleep(wait))
    }
}
