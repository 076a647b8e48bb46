//! [`MemoryBackend`]: one process's handle on a [`MemoryStore`], implementing the
//! protocol's operations as the scripts of PROTOCOL.md do, under the store's faults.

use std::sync::Arc;
use std::time::Duration;

use herdless::backend::{
    AcquireRequest, Acquired, Backend, BackendFuture, Listener, LockToken, StoredEntry, Watch,
    WriteOutcome,
};
use tokio::runtime::Handle;

use herdless::key::namespace_of;

use super::{Fault, MemoryStore, PREFIX, Slot};
use crate::error::Error;
use crate::fleet::{Fleet, FleetOptions};
use crate::metrics::{Metrics, RedisMetrics, inc};
use crate::notify::Hub;
use crate::runtime::Runtime;
use crate::wall::{now_ms, random_secret};
use crate::wire;

mod locks;
mod tags;

/// Parses a lock value `<epoch>:<hex>`: its epoch.
fn lock_epoch(v: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(v).ok()?;
    let (e, _) = s.split_once(':')?;
    if e.is_empty() || !e.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    e.parse().ok()
}

/// Options of a [`MemoryBackend`].
#[derive(Clone, Debug)]
pub struct MemoryBuilder {
    store: MemoryStore,
    op_timeout: Duration,
    tag_retention: Duration,
}

impl MemoryBuilder {
    pub(super) fn new(store: MemoryStore) -> Self {
        Self {
            store,
            op_timeout: Duration::from_secs(1),
            tag_retention: crate::tags::DEFAULT_TAG_RETENTION,
        }
    }

    /// How long a tag's record is kept, as
    /// [`RedisBuilder::tag_retention`](crate::RedisBuilder::tag_retention) (default a day).
    pub fn tag_retention(mut self, d: Duration) -> Self {
        self.tag_retention = d;
        self
    }

    /// Bound of every operation (default 1 s), as Redis's `op_timeout`.
    pub fn op_timeout(mut self, d: Duration) -> Self {
        self.op_timeout = d;
        self
    }

    /// The backend: a process of the fleet, with a runtime of its own for its timers.
    pub fn build(self) -> Result<MemoryBackend, Error> {
        if self.op_timeout.is_zero() {
            return Err(Error::Config("`op_timeout` must not be zero".into()));
        }
        if self.tag_retention.is_zero() {
            return Err(Error::Config("`tag_retention` must not be zero".into()));
        }
        let metrics = Arc::new(Metrics::default());
        let origin = crate::wall::hex(&random_secret()?[..8]);
        // Not yet subscribed: like a Redis process, it hears notices only once an
        // operation that keeps copies (a read, a write, a load, tags) has subscribed it.
        let hub = Arc::new(Hub::new(origin, PREFIX.to_owned(), metrics.clone()));
        let rt = Runtime::new(1).map_err(|e| Error::Config(e.to_string()))?;
        Ok(MemoryBackend {
            inner: Arc::new(MemoryInner {
                store: self.store,
                hub,
                metrics,
                op_timeout: self.op_timeout,
                tag_retention: self.tag_retention.min(crate::MAX_TTL),
                subscribed: std::sync::atomic::AtomicBool::new(false),
                rt,
            }),
        })
    }
}

struct MemoryInner {
    store: MemoryStore,
    hub: Arc<Hub>,
    metrics: Arc<Metrics>,
    op_timeout: Duration,
    tag_retention: Duration,
    /// Whether its hub is among the store's subscribers (one pattern for the whole
    /// prefix, as on a single Redis server).
    subscribed: std::sync::atomic::AtomicBool,
    rt: Runtime,
}

/// The operations that subscribe their process before they run, as
/// [`RedisBackend`](crate::RedisBackend)'s do: whatever they hand back may be kept in its L1.
const SUBSCRIBING: [&str; 6] = ["read", "acquire", "commit", "tag_stamps", "tag", "tag_use"];

/// One process's handle on a [`MemoryStore`]. Cheap to clone.
#[derive(Clone)]
pub struct MemoryBackend {
    inner: Arc<MemoryInner>,
}

impl std::fmt::Debug for MemoryBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBackend")
            .field("origin", &self.inner.hub.origin)
            .finish_non_exhaustive()
    }
}

impl MemoryBackend {
    /// The store this process shares.
    pub fn store(&self) -> &MemoryStore {
        &self.inner.store
    }

    /// This process's origin id in notifications.
    pub fn origin(&self) -> &str {
        &self.inner.hub.origin
    }

    /// Counters of the shared tier, as [`RedisBackend::metrics`](crate::RedisBackend::metrics).
    pub fn metrics(&self) -> RedisMetrics {
        self.inner.metrics.snapshot()
    }

    pub(crate) fn counters(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// The runtime its timers run on.
    pub fn handle(&self) -> &Handle {
        self.inner.rt.handle()
    }

    /// Closes this process's handle, as [`RedisBackend::close`](crate::RedisBackend::close):
    /// its runtime ends and every operation answers [`Error::Closed`]; the store and the
    /// other processes' handles are untouched.
    pub fn close(&self) {
        self.inner.rt.close();
    }

    /// The fleet protocol over this backend.
    pub fn fleet(&self, options: FleetOptions) -> Fleet {
        Fleet::over(
            self,
            self.handle().clone(),
            self.inner.metrics.clone(),
            options,
        )
    }

    /// Runs `apply` on the store's data under the whole store's fault, bounded by
    /// `op_timeout`: an operation on no namespace's slot (a tag's).
    fn op<'a, T: Send + 'static>(
        &'a self,
        name: &'static str,
        apply: impl FnOnce(&MemoryStore, u64) -> T + Send + 'static,
    ) -> BackendFuture<'a, T> {
        self.op_on(name, None, apply)
    }

    /// [`op`](Self::op) on the slot of `namespace` (the node that holds it): under the
    /// whole store's fault, else that namespace's.
    fn op_on<'a, T: Send + 'static>(
        &'a self,
        name: &'static str,
        namespace: Option<String>,
        apply: impl FnOnce(&MemoryStore, u64) -> T + Send + 'static,
    ) -> BackendFuture<'a, T> {
        let store = self.inner.store.clone();
        let after = self.inner.op_timeout;
        let metrics = self.inner.metrics.clone();
        let handle = self.handle().clone();
        let subscriber = SUBSCRIBING.contains(&name).then(|| self.clone());
        // As a Redis process's: while its subscription is known down, what a read hands
        // over could not be kept coherent, so the read fails.
        let unheard = matches!(name, "read" | "acquire") && self.inner.hub.is_disconnected();
        let op = async move {
            let store_fault = store.fault_of(namespace.as_deref());
            let failed = |e: Error| {
                inc(&metrics.backend_errors);
                Err(herdless::LoadError::new(e))
            };
            if unheard {
                return failed(Error::Unsubscribed);
            }
            // During a stall, what was sent runs when the stall ends, whether or not the
            // caller still waits for it (as a script does on a Redis that was stopped). It is
            // queued when the caller first polls it, so operations run in the order they were
            // sent, as over one Redis connection: a `forget` sent after an acquire gave up
            // can never run before that acquire and leave its lock behind.
            let (tx, rx) = tokio::sync::oneshot::channel();
            let s = store.clone();
            let queued = move || {
                store.run_or_hold(
                    namespace.as_deref(),
                    Box::new(move || {
                        // Subscribed in the same step as the operation: no change after what
                        // it reads can be published unheard.
                        if let Some(b) = subscriber {
                            b.subscribe();
                        }
                        let _ = tx.send(apply(&s, now_ms()));
                    }),
                );
            };
            match store_fault {
                Some(Fault::Down) => return failed(Error::Protocol("the store is down")),
                // A slow link: the operation arrives late, whether or not anyone waits.
                Some(Fault::Delay(d)) => {
                    handle.spawn(async move {
                        tokio::time::sleep(d).await;
                        queued();
                    });
                }
                _ => queued(),
            }
            match tokio::time::timeout(after, rx).await {
                Ok(Ok(v)) => Ok(v),
                Ok(Err(_)) => failed(Error::Protocol("the store went away")),
                Err(_) => failed(Error::Timeout { op: name, after }),
            }
        };
        let closed = || Err(herdless::LoadError::new(Error::Closed));
        Box::pin(self.inner.rt.enter(op, closed))
    }

    /// Adds this process to the store's subscribers (once).
    fn subscribe(&self) {
        use std::sync::atomic::Ordering;
        if !self.inner.subscribed.swap(true, Ordering::AcqRel) {
            self.inner.store.subscribe(&self.inner.hub);
            // Confirmed at once, as Redis confirms the one pattern of a single server.
            let pattern = crate::keys::channel_pattern(PREFIX);
            let _ = self.inner.hub.subscription(&pattern, usize::MAX).0.set(());
        }
    }
}

fn names(key: &str) -> crate::keys::KeyNames {
    crate::keys::names(PREFIX, key)
}

/// The namespace whose slot holds `key` (a namespace is one Cluster slot).
fn slot(key: &str) -> Option<String> {
    Some(namespace_of(key).to_owned())
}

impl Backend for MemoryBackend {
    fn read<'a>(&'a self, key: &'a str, now: u64) -> BackendFuture<'a, Option<StoredEntry>> {
        let (key, this) = (key.to_owned(), self.clone());
        Box::pin(async move {
            let found = self
                .op_on("read", slot(&key), move |s, _| {
                    let n = names(&key);
                    let mut d = s.data();
                    // MGET: another type reads as nothing; a bad epoch is counted below.
                    let raw = match d.live(&n.value, now) {
                        Some(Slot::Str(b)) => Some(b.clone()),
                        _ => None,
                    };
                    let epoch = match d.live(&n.epoch, now) {
                        None => Some(0),
                        Some(Slot::Str(b)) => crate::backend::parse_epoch(b),
                        Some(Slot::Other) => Some(0),
                    };
                    (raw, epoch)
                })
                .await?;
            let m = &this.inner.metrics;
            let (raw, epoch) = found;
            let Some(epoch) = epoch else {
                inc(&m.corrupt_entries);
                this.inner.metrics.count_read(None, now);
                return Ok(None);
            };
            let entry = match raw.map(|r| wire::decode(&r)) {
                Some(Ok(e)) => Some(e),
                Some(Err(_)) => {
                    inc(&m.corrupt_entries);
                    None
                }
                None => None,
            }
            .filter(|e| e.epoch == epoch && e.is_servable(now));
            this.inner.metrics.count_read(entry.as_ref(), now);
            Ok(entry)
        })
    }

    /// One exchange with the store per namespace of the batch (a Cluster slot group), all
    /// at once, each bounded by `op_timeout` on its own: a namespace whose slot fails or
    /// stalls fails only its own keys. Counted as one round trip (the memory tier stands
    /// for a single Redis server).
    fn acquire_many<'a>(
        &'a self,
        requests: &'a [(String, AcquireRequest)],
    ) -> BackendFuture<'a, Vec<Result<Acquired, herdless::LoadError>>> {
        self.acquire_batch(requests)
    }

    fn acquire<'a>(&'a self, key: &'a str, req: AcquireRequest) -> BackendFuture<'a, Acquired> {
        self.acquire_one(key, req)
    }

    fn extend<'a>(
        &'a self,
        key: &'a str,
        token: &'a LockToken,
        lease: Duration,
    ) -> BackendFuture<'a, bool> {
        self.extend_lock(key, token, lease)
    }

    fn release<'a>(&'a self, key: &'a str, token: &'a LockToken) -> BackendFuture<'a, bool> {
        self.release_lock(key, token)
    }

    fn forget<'a>(&'a self, key: &'a str, secret: &'a [u8; 16]) -> BackendFuture<'a, bool> {
        self.forget_lock(key, secret)
    }

    fn mark_unshared<'a>(
        &'a self,
        key: &'a str,
        token: &'a LockToken,
        hold: Duration,
    ) -> BackendFuture<'a, bool> {
        self.unshare_lock(key, token, hold)
    }

    fn commit<'a>(
        &'a self,
        key: &'a str,
        entry: StoredEntry,
        token: Option<&'a LockToken>,
    ) -> BackendFuture<'a, WriteOutcome> {
        let (owned, origin) = (key.to_owned(), self.origin().to_owned());
        let token = token.map(lock_text);
        let metrics = self.inner.metrics.clone();
        let commit = self.op_on("commit", slot(&owned), move |s, now| {
            let n = names(&owned);
            let written = {
                let mut d = s.data();
                let (ep, _) = d.epoch(&n.epoch, now);
                let mut refused_by_bump = false;
                if let Some(token) = &token {
                    if d.get(&n.lock, now).0.as_deref() != Some(token.as_bytes()) {
                        return WriteOutcome::Superseded;
                    }
                    d.keys.remove(&n.lock);
                    refused_by_bump = lock_epoch(token.as_bytes()) != Some(ep);
                } else {
                    d.keys.remove(&n.lock);
                }
                if refused_by_bump {
                    None
                } else {
                    let now_us = now.saturating_mul(1000);
                    let old = d.get(&n.value, now).0.and_then(|b| wire::decode(&b).ok());
                    let version = match old {
                        Some(o) if o.version >= now_us => o.version + 1,
                        _ => now_us,
                    };
                    let mut e = entry;
                    e.version = version;
                    e.epoch = ep;
                    let px = crate::lifetimes::key_life_ms(&e, now);
                    d.set(&n.value, wire::encode(&e), Some(px), now);
                    Some((version, ep))
                }
            };
            match written {
                None => {
                    s.publish('r', &origin, 0, &owned);
                    WriteOutcome::Superseded
                }
                Some((version, epoch)) => {
                    s.publish('w', &origin, version, &owned);
                    WriteOutcome::Written { version, epoch }
                }
            }
        });
        Box::pin(async move {
            let r = commit.await?;
            inc(match r {
                WriteOutcome::Written { .. } => &metrics.commits,
                WriteOutcome::Superseded => &metrics.superseded_commits,
            });
            Ok(r)
        })
    }

    fn touch<'a>(&'a self, key: &'a str, tti: Duration) -> BackendFuture<'a, bool> {
        let key = key.to_owned();
        let metrics = self.inner.metrics.clone();
        self.op_on("touch", slot(&key), move |s, now| {
            inc(&metrics.idle_touches);
            s.data()
                .lengthen(&names(&key).value, crate::lifetimes::idle_life_ms(tti), now)
        })
    }

    fn invalidate<'a>(&'a self, key: &'a str) -> BackendFuture<'a, bool> {
        let (key, origin) = (key.to_owned(), self.origin().to_owned());
        self.op_on("invalidate", slot(&key), move |s, now| {
            let n = names(&key);
            let had = {
                let mut d = s.data();
                let had = d.live(&n.value, now).is_some();
                d.keys.remove(&n.value);
                d.keys.remove(&n.lock);
                had
            };
            s.publish('d', &origin, u64::from(had), &key);
            had
        })
    }

    fn bump<'a>(&'a self, namespace: &'a str) -> BackendFuture<'a, u64> {
        let (ns, origin) = (namespace.to_owned(), self.origin().to_owned());
        let metrics = self.inner.metrics.clone();
        self.op_on("bump", slot(&ns), move |s, now| {
            let name = crate::keys::epoch_key(PREFIX, &ns);
            let epoch = {
                let mut d = s.data();
                let (ep, repaired) = d.epoch(&name, now);
                if repaired {
                    inc(&metrics.corrupt_entries);
                }
                d.set(&name, (ep + 1).to_string().into_bytes(), None, now);
                ep + 1
            };
            s.publish('e', &origin, epoch, &ns);
            epoch
        })
    }

    fn watch<'a>(&'a self, key: &'a str) -> BackendFuture<'a, Box<dyn Watch>> {
        // A subscription already made: only a tier that is down refuses it.
        let hub = self.inner.hub.clone();
        let fault = self.store().fault_of(Some(namespace_of(key)));
        let (key, down) = (key.to_owned(), fault == Some(Fault::Down));
        let metrics = self.inner.metrics.clone();
        let this = self.clone();
        Box::pin(async move {
            if down {
                inc(&metrics.backend_errors);
                return Err(herdless::LoadError::new(Error::Protocol(
                    "the store is down",
                )));
            }
            this.subscribe();
            Ok(Box::new(hub.watch(&key)) as Box<dyn Watch>)
        })
    }

    fn listen(&self, listener: Listener) {
        self.inner.hub.listen(listener);
    }
}

fn lock_text(token: &LockToken) -> String {
    crate::backend::lock_value(token)
}
