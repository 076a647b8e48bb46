//! [`RedisBackend`]: the core's [`Backend`] on Redis or Redis Cluster.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use herdless::backend::{
    AcquireRequest, Acquired, Backend, BackendFuture, Listener, LockToken, StoredEntry, Watch,
    WriteOutcome,
};
use herdless::key::namespace_of;
use tokio::runtime::Handle;

use crate::conn::Conn;
use crate::error::Error;
use crate::fleet::{Fleet, FleetOptions};
use crate::keys::{self, KeyNames};
use crate::metrics::{Metrics, RedisMetrics, inc};
use crate::notify::{Hub, MAX_SHARDED_SUBSCRIPTIONS};
use crate::runtime::Runtime;
use crate::scripts::SCRIPTS;
use crate::wall::{hex, now_ms, random_secret};
use crate::wire;

mod batch;
mod builder;
mod tags;

pub use builder::{DEFAULT_MAX_ENTRY_BYTES, RedisBuilder};

/// The lock value of a token: `<epoch>:<32 hex digits>`.
pub fn lock_value(token: &LockToken) -> String {
    format!("{}:{}", token.epoch, hex(&token.secret))
}

/// The longest lease a lock can have (`FleetOptions::lease` is refused above it): about
/// 24 days, so that `now + lease` never overflows anywhere and Redis's PX accepts it.
pub const MAX_LEASE: Duration = Duration::from_millis(1 << 31);

/// A duration as a PX argument: whole milliseconds, at least 1.
pub(crate) fn ms_arg(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

struct Inner {
    cmd: Conn,
    sub: Conn,
    hub: Arc<Hub>,
    metrics: Arc<Metrics>,
    prefix: String,
    op_timeout: Duration,
    max_entry_bytes: usize,
    tag_retention: Duration,
    /// The tags channel's subscription on a Cluster (kept apart from the namespaces'
    /// bounded ones: it is never dropped).
    tags_subscription: tokio::sync::OnceCell<()>,
    sharded: bool,
    /// Ask the server to track the value keys (single server, `outside_writes`).
    track: bool,
    // Last: connections and tasks go before their runtime.
    rt: Runtime,
}

impl Inner {
    /// Asks the server to track the value keys for the subscription connection, where it
    /// should (`crate::tracking`); a refusal is remembered and counted, not an error.
    pub(crate) async fn track(&self) -> Result<(), Error> {
        if !self.track {
            return Ok(());
        }
        if self.sub.track(&self.prefix).await? {
            self.hub.tracked();
        } else {
            self.hub.tracking_refused();
        }
        Ok(())
    }
}

/// Redis (or Redis Cluster) as herdless's shared tier. Cheap to clone.
///
/// ```no_run
/// let backend = herdless_redis::RedisBackend::builder("redis://127.0.0.1:6379").build()?;
/// # Ok::<(), herdless_redis::Error>(())
/// ```
#[derive(Clone)]
pub struct RedisBackend {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBackend")
            .field("prefix", &self.inner.prefix)
            .field("origin", &self.inner.hub.origin)
            .finish_non_exhaustive()
    }
}

impl RedisBackend {
    /// The fleet-level protocol driver over this backend.
    pub fn fleet(&self, options: FleetOptions) -> Fleet {
        Fleet::over(
            self,
            self.handle().clone(),
            self.inner.metrics.clone(),
            options,
        )
    }

    /// The Redis names of `key` under this backend's prefix.
    pub fn names(&self, key: &str) -> KeyNames {
        keys::names(&self.inner.prefix, key)
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.inner.prefix
    }

    /// Notification subscriptions this process holds (one pattern on a standalone server;
    /// at most 1,024 sharded channels on a Cluster).
    pub fn subscriptions(&self) -> usize {
        self.inner.hub.subscriptions()
    }

    /// This process's origin id in notifications.
    pub fn origin(&self) -> &str {
        &self.inner.hub.origin
    }

    /// Counters of the Redis tier.
    pub fn metrics(&self) -> RedisMetrics {
        self.inner.metrics.snapshot()
    }

    pub(crate) fn counters(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// The backend's runtime handle (where its timers and tasks run).
    pub fn handle(&self) -> &Handle {
        self.inner.rt.handle()
    }

    /// Closes the backend now, for every clone of it: its own runtime is shut down (its
    /// thread ends; the command and subscription connections close, the heartbeat and
    /// lease extensions stop; locks it held run out by their lease), and every operation,
    /// in flight or later, answers [`Error::Closed`]. On a runtime given with
    /// [`RedisBuilder::runtime`] the connections close when the last clone is dropped.
    /// Idempotent.
    pub fn close(&self) {
        self.inner.rt.close();
    }

    /// Runs `f` with the operation timeout, inside the backend's runtime, counting errors.
    fn run<'a, T: Send + 'a>(
        &'a self,
        name: &'static str,
        f: impl Future<Output = Result<T, Error>> + Send + 'a,
    ) -> impl Future<Output = Result<T, Error>> + Send + 'a {
        let errors = &self.inner.metrics.backend_errors;
        self.inner
            .rt
            .bounded(name, self.inner.op_timeout, errors, f)
    }

    /// [`run`](Self::run), boxed for the [`Backend`] seam.
    fn op<'a, T: Send + 'a>(
        &'a self,
        name: &'static str,
        f: impl Future<Output = Result<T, Error>> + Send + 'a,
    ) -> BackendFuture<'a, T> {
        let fut = self.run(name, f);
        Box::pin(async move { fut.await.map_err(Into::into) })
    }

    /// Runs a script on `key`'s lock that tells the fleet when it frees the key (release,
    /// forget, unshare): its own arguments `head`, then the channel, this process's origin,
    /// the pub/sub flavour and the key, as those scripts take them. True if it acted.
    async fn freeing_script(
        &self,
        script: &redis::Script,
        key: &str,
        head: Vec<String>,
    ) -> Result<bool, Error> {
        let n = self.names(key);
        let mut live = self.inner.cmd.live().await?;
        let mut inv = script.key(&n.lock);
        for arg in &head {
            inv.arg(arg);
        }
        let ok: i64 = inv
            .arg(&n.channel)
            .arg(&self.inner.hub.origin)
            .arg(if self.inner.sharded { "1" } else { "0" })
            .arg(key)
            .invoke_async(&mut live)
            .await?;
        Ok(ok == 1)
    }

    /// Runs a raw command on the command connection (tests, tools), with the timeout.
    pub async fn query<T: redis::FromRedisValue + Send>(
        &self,
        cmd: redis::Cmd,
    ) -> Result<T, Error> {
        self.run("query", async move {
            let mut live = self.inner.cmd.live().await?;
            Ok(cmd.query_async(&mut live).await?)
        })
        .await
    }

    fn classify(&self, raw: &[u8]) -> Option<StoredEntry> {
        match wire::decode(raw) {
            Ok(e) => Some(e),
            Err(_) => {
                inc(&self.inner.metrics.corrupt_entries);
                None
            }
        }
    }

    /// An acquire script's reply, counted and typed.
    fn acquired(&self, req: &AcquireRequest, reply: AcquireReply) -> Result<Acquired, Error> {
        let (status, raw, epoch, pttl, corrupt) = reply;
        let m = &self.inner.metrics;
        if corrupt == 1 {
            inc(&m.corrupt_entries);
        }
        let entry = if raw.is_empty() {
            None
        } else {
            self.classify(&raw)
        };
        self.inner.metrics.count_read(entry.as_ref(), req.now_ms);
        Ok(match status {
            0 => Acquired::Fresh(entry.ok_or(Error::Protocol("acquire: no entry"))?),
            1 => {
                inc(&m.fleet_locks_acquired);
                Acquired::Locked {
                    token: LockToken {
                        epoch,
                        secret: req.secret,
                    },
                    stale: entry,
                }
            }
            2 => {
                inc(&m.fleet_locks_contended);
                Acquired::Contended {
                    stale: entry,
                    remaining: Duration::from_millis(pttl.max(0) as u64),
                }
            }
            3 => Acquired::Unshared,
            _ => return Err(Error::Protocol("acquire: unknown status")),
        })
    }
}

impl RedisBackend {
    /// Listens to the notices of `key`'s namespace (once): a process keeping a copy of a
    /// shared entry in its L1 (it loaded, wrote or read it) must hear of later changes.
    async fn subscribe_namespace(&self, key: &str) -> Result<(), Error> {
        let hub = &self.inner.hub;
        if self.inner.sharded {
            // Sharded pub/sub has no patterns: one subscription per namespace, at most
            // MAX_SHARDED_SUBSCRIPTIONS; the one displaced is dropped, and with it the
            // first tier's copies of its namespace (no notice would reach them now).
            let ns = namespace_of(key);
            let channel = keys::channel(&self.inner.prefix, ns);
            let (cell, displaced) = hub.subscription(&channel, MAX_SHARDED_SUBSCRIPTIONS);
            if let Some(old) = displaced {
                if let Some(old_ns) = keys::namespace_of_channel(&self.inner.prefix, &old) {
                    hub.unwatched(&old_ns);
                }
                let sub = self.inner.sub.clone();
                self.inner.rt.handle().spawn(async move {
                    let _ = sub.sunsubscribe(&old).await;
                });
            }
            cell.get_or_try_init(|| self.inner.sub.ssubscribe(&channel))
                .await?;
        } else {
            // One pattern for every namespace of the prefix: a process holds one
            // subscription however many namespaces it touches.
            let pattern = keys::channel_pattern(&self.inner.prefix);
            let (cell, _) = hub.subscription(&pattern, usize::MAX);
            cell.get_or_try_init(|| async {
                self.inner.sub.psubscribe(&pattern).await?;
                self.inner.track().await
            })
            .await?;
        }
        Ok(())
    }

    /// Subscribes to `key`'s namespace before reading it, so that whatever the read hands
    /// the L1 hears of later changes. Tags need nothing more here: a tagged entry is
    /// checked against its tags' records before it is kept, and that check subscribes the
    /// tags channel before it reads them (`TagTier::fetch_records`). Once confirmed, a
    /// subscription costs an atomic load. While the subscription is known to be down (a
    /// disconnection seen, its resubscription not yet confirmed) nothing read is handed
    /// over: the read fails.
    async fn subscribe_for(&self, key: &str) -> Result<(), Error> {
        if self.inner.hub.is_disconnected() {
            return Err(Error::Unsubscribed);
        }
        self.subscribe_namespace(key).await
    }
}

/// A namespace epoch as the scripts accept it: 1 to 16 decimal digits below 2^53 (exact in
/// Lua), nothing else; `None` for anything else (corrupt: a miss here, and the next script
/// that reads it resets it forward, PROTOCOL.md "Repairs").
pub fn parse_epoch(raw: &[u8]) -> Option<u64> {
    if raw.is_empty() || raw.len() > 16 || !raw.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(raw).ok()?.parse().ok()?;
    (n < 1 << 53).then_some(n)
}

/// What the acquire script answers: status, entry bytes, epoch, the lock's PTTL, corrupt.
type AcquireReply = (i64, Vec<u8>, u64, i64, i64);

impl Backend for RedisBackend {
    fn read<'a>(&'a self, key: &'a str, now: u64) -> BackendFuture<'a, Option<StoredEntry>> {
        self.op("read", async move {
            // Subscribed before the read: whatever it hands the L1 hears of later changes
            // (a copy that could not hear them is not handed over: the read fails).
            self.subscribe_for(key).await?;
            let n = self.names(key);
            let mut live = self.inner.cmd.live().await?;
            let (raw, epoch): (Option<Vec<u8>>, Option<Vec<u8>>) = redis::cmd("MGET")
                .arg(&n.value)
                .arg(&n.epoch)
                .query_async(&mut live)
                .await?;
            let epoch = match epoch {
                None => Some(0),
                Some(b) => parse_epoch(&b),
            };
            let Some(epoch) = epoch else {
                // Corrupt shared state is a miss (counted), never an error.
                inc(&self.inner.metrics.corrupt_entries);
                self.inner.metrics.count_read(None, now);
                return Ok(None);
            };
            let entry = raw
                .and_then(|r| self.classify(&r))
                .filter(|e| e.epoch == epoch && e.is_servable(now));
            self.inner.metrics.count_read(entry.as_ref(), now);
            Ok(entry)
        })
    }

    fn acquire<'a>(&'a self, key: &'a str, req: AcquireRequest) -> BackendFuture<'a, Acquired> {
        self.op("acquire", async move {
            // A fresh answer is kept in the L1: subscribed first, as `read`.
            self.subscribe_for(key).await?;
            let n = self.names(key);
            let mut live = self.inner.cmd.live().await?;
            let lease_ms = ms_arg(req.lease);
            let reply: AcquireReply = SCRIPTS
                .acquire
                .key(&n.value)
                .key(&n.epoch)
                .key(&n.lock)
                .arg(req.now_ms)
                .arg(lease_ms)
                .arg(hex(&req.secret))
                .arg(req.have_version)
                .invoke_async(&mut live)
                .await?;
            self.acquired(&req, reply)
        })
    }

    fn acquire_many<'a>(
        &'a self,
        requests: &'a [(String, AcquireRequest)],
    ) -> BackendFuture<'a, Vec<Result<Acquired, herdless::LoadError>>> {
        Box::pin(async move { Ok(self.acquire_batch(requests).await) })
    }

    fn extend<'a>(
        &'a self,
        key: &'a str,
        token: &'a LockToken,
        lease: Duration,
    ) -> BackendFuture<'a, bool> {
        self.op("extend", async move {
            let n = self.names(key);
            let mut live = self.inner.cmd.live().await?;
            let ok: i64 = SCRIPTS
                .extend
                .key(&n.lock)
                .arg(lock_value(token))
                .arg(ms_arg(lease))
                .invoke_async(&mut live)
                .await?;
            Ok(ok == 1)
        })
    }

    fn release<'a>(&'a self, key: &'a str, token: &'a LockToken) -> BackendFuture<'a, bool> {
        self.op(
            "release",
            self.freeing_script(&SCRIPTS.release, key, vec![lock_value(token)]),
        )
    }

    fn forget<'a>(&'a self, key: &'a str, secret: &'a [u8; 16]) -> BackendFuture<'a, bool> {
        self.op(
            "forget",
            self.freeing_script(&SCRIPTS.forget, key, vec![hex(secret)]),
        )
    }

    fn mark_unshared<'a>(
        &'a self,
        key: &'a str,
        token: &'a LockToken,
        hold: Duration,
    ) -> BackendFuture<'a, bool> {
        let head = vec![lock_value(token), ms_arg(hold).to_string()];
        self.op("unshare", self.freeing_script(&SCRIPTS.unshare, key, head))
    }

    fn commit<'a>(
        &'a self,
        key: &'a str,
        entry: StoredEntry,
        token: Option<&'a LockToken>,
    ) -> BackendFuture<'a, WriteOutcome> {
        self.op("commit", async move {
            // This process keeps what it writes in its L1: later changes by other
            // processes (a write, a bump, a tag invalidation) must reach it even if it
            // never leads a load. A subscription that fails now is tried again by the next
            // write or load; it never fails the write itself.
            let _ = self.subscribe_namespace(key).await;
            if !entry.tags.is_empty() {
                let _ = self.subscribe_tags().await;
            }
            let n = self.names(key);
            let px = crate::lifetimes::key_life_ms(&entry, now_ms());
            let bytes = wire::encode(&entry);
            let max = self.inner.max_entry_bytes;
            if bytes.len() > max {
                return Err(Error::EntryTooLarge {
                    bytes: bytes.len(),
                    max,
                });
            }
            let mut live = self.inner.cmd.live().await?;
            let (ok, version, epoch): (i64, u64, u64) = SCRIPTS
                .commit
                .key(&n.value)
                .key(&n.epoch)
                .key(&n.lock)
                .arg(token.map(lock_value).unwrap_or_default())
                .arg(bytes)
                .arg(px)
                .arg(&n.channel)
                .arg(&self.inner.hub.origin)
                .arg(if self.inner.sharded { "1" } else { "0" })
                .arg(key)
                .invoke_async(&mut live)
                .await?;
            let m = &self.inner.metrics;
            Ok(if ok == 1 {
                inc(&m.commits);
                crate::local::tell(&*self.inner.hub, 'w', version, key);
                WriteOutcome::Written { version, epoch }
            } else {
                inc(&m.superseded_commits);
                WriteOutcome::Superseded
            })
        })
    }

    fn touch<'a>(&'a self, key: &'a str, tti: Duration) -> BackendFuture<'a, bool> {
        self.op("touch", async move {
            let n = self.names(key);
            let mut live = self.inner.cmd.live().await?;
            // GT: a touch only lengthens (a retention shorter than it is the reader's to
            // judge: an entry past its retain_until is a miss whatever its PX).
            let set: i64 = SCRIPTS
                .touch
                .key(&n.value)
                .arg(crate::lifetimes::idle_life_ms(tti))
                .arg(&n.channel)
                .arg(&self.inner.hub.origin)
                .arg(if self.inner.sharded { "1" } else { "0" })
                .arg(key)
                .invoke_async(&mut live)
                .await?;
            inc(&self.inner.metrics.idle_touches);
            Ok(set == 1)
        })
    }

    fn invalidate<'a>(&'a self, key: &'a str) -> BackendFuture<'a, bool> {
        self.op("invalidate", async move {
            let n = self.names(key);
            let mut live = self.inner.cmd.live().await?;
            let deleted: i64 = SCRIPTS
                .invalidate
                .key(&n.value)
                .key(&n.lock)
                .arg(&n.channel)
                .arg(&self.inner.hub.origin)
                .arg(if self.inner.sharded { "1" } else { "0" })
                .arg(key)
                .invoke_async(&mut live)
                .await?;
            // The script's own message (its number says whether it deleted), so the copy
            // Redis delivers afterwards is recognised.
            crate::local::tell(&*self.inner.hub, 'd', deleted.clamp(0, 1) as u64, key);
            Ok(deleted == 1)
        })
    }

    fn bump<'a>(&'a self, namespace: &'a str) -> BackendFuture<'a, u64> {
        self.op("bump", async move {
            let p = &self.inner.prefix;
            let mut live = self.inner.cmd.live().await?;
            let (epoch, repaired): (u64, i64) = SCRIPTS
                .bump
                .key(keys::epoch_key(p, namespace))
                .arg(keys::channel(p, namespace))
                .arg(&self.inner.hub.origin)
                .arg(if self.inner.sharded { "1" } else { "0" })
                .arg(namespace)
                .invoke_async(&mut live)
                .await?;
            if repaired == 1 {
                inc(&self.inner.metrics.corrupt_entries);
            }
            crate::local::tell(&*self.inner.hub, 'e', epoch, namespace);
            Ok(epoch)
        })
    }

    fn watch<'a>(&'a self, key: &'a str) -> BackendFuture<'a, Box<dyn Watch>> {
        self.op("watch", async move {
            self.subscribe_namespace(key).await?;
            Ok(Box::new(self.inner.hub.watch(key)) as Box<dyn Watch>)
        })
    }

    fn listen(&self, listener: Listener) {
        self.inner.hub.listen(listener);
    }
}
