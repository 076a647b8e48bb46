//! [`RedisBuilder`]: a [`RedisBackend`]'s options, and what building one starts (its
//! runtime, its two connections, the subscription's heartbeat).

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::runtime::Handle;

use super::{Inner, RedisBackend, hex, random_secret};
use crate::conn::{Conn, Target, Timings};
use crate::error::Error;
use crate::metrics::Metrics;
use crate::notify::Hub;
use crate::runtime::Runtime;

/// Options of a [`RedisBackend`].
#[derive(Clone, Debug)]
pub struct RedisBuilder {
    target: Target,
    prefix: String,
    op_timeout: Duration,
    connect_timeout: Duration,
    heartbeat: Duration,
    threads: usize,
    handle: Option<Handle>,
    max_entry_bytes: usize,
    tag_retention: Duration,
    isolated: bool,
    outside_writes: bool,
}

/// Default of [`RedisBuilder::max_entry_bytes`]: 8 MiB.
pub const DEFAULT_MAX_ENTRY_BYTES: usize = 8 << 20;

impl RedisBuilder {
    /// Prefix of every Redis key and channel (default `hl`): fleets that must not share
    /// data use different prefixes.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Bound of every Redis operation, connecting included (default 1 s): a stalled Redis
    /// never holds a caller longer.
    pub fn op_timeout(mut self, d: Duration) -> Self {
        self.op_timeout = d;
        self
    }

    /// Bound of one connection attempt (default 500 ms).
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.connect_timeout = d;
        self
    }

    /// How often the subscription connection is checked (PING) so that it reconnects and
    /// resubscribes after Redis comes back (default 1 s).
    pub fn heartbeat(mut self, d: Duration) -> Self {
        self.heartbeat = d;
        self
    }

    /// Worker threads of the backend's own runtime (default 1).
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = n;
        self
    }

    /// Largest stored entry, in bytes (the encoded value plus its [`wire::HEADER_LEN`](crate::wire::HEADER_LEN)-byte header; default
    /// [`DEFAULT_MAX_ENTRY_BYTES`], 8 MiB). A larger write is refused with
    /// [`Error::EntryTooLarge`] before it reaches Redis, so one oversized value cannot
    /// stall the shared connection or fill Redis's memory.
    pub fn max_entry_bytes(mut self, bytes: usize) -> Self {
        self.max_entry_bytes = bytes;
        self
    }

    /// How long a tag's record is kept after its last invalidation or use by a writer
    /// (default one day, [`DEFAULT_TAG_RETENTION`](crate::tags::DEFAULT_TAG_RETENTION)). A
    /// tagged entry lives at most this long after its load began (or its write), so it
    /// outlives its records only if one is evicted, and then reads as removed. Every
    /// process of a fleet should use the same value (PROTOCOL.md, "Tags").
    pub fn tag_retention(mut self, d: Duration) -> Self {
        self.tag_retention = d;
        self
    }

    /// Keeps this backend apart from the other backends of this process over the same
    /// keyspace: their changes reach it, and its changes reach them, through Redis only, as
    /// between two processes (PROTOCOL.md section 4, "In one process"). For tests that
    /// stand for a fleet in one process and mean to exercise Redis's delivery.
    pub fn isolated(mut self) -> Self {
        self.isolated = true;
        self
    }

    /// Whether copies follow writes made outside herdless (default on): on a single server
    /// the subscription connection asks for the server's key tracking over the prefix
    /// (`CLIENT TRACKING ON BCAST`), so a `SET`, `DEL` or `EXPIRE` of a value key by
    /// another program, or a `FLUSHDB`, drops this process's copies (PROTOCOL.md section 4,
    /// "Writes from outside herdless"). It costs every process one push per change of a
    /// key under the prefix. A Cluster, or a server that refuses it (before Redis 6),
    /// follows such writes only at the copies' fresh time.
    pub fn outside_writes(mut self, follow: bool) -> Self {
        self.outside_writes = follow;
        self
    }

    /// Runs connections and timers on this tokio runtime instead of an own one. Its worker
    /// threads must keep running; the blocking API must not be called on them.
    pub fn runtime(mut self, handle: Handle) -> Self {
        self.handle = Some(handle);
        self
    }

    /// Creates the backend. Connections are made lazily: this succeeds while Redis is down,
    /// and operations fail (quickly) until it is up.
    pub fn build(self) -> Result<RedisBackend, Error> {
        for (name, d) in [
            ("op_timeout", self.op_timeout),
            ("connect_timeout", self.connect_timeout),
            ("heartbeat", self.heartbeat),
            ("tag_retention", self.tag_retention),
        ] {
            if d.is_zero() {
                return Err(Error::Config(format!("`{name}` must not be zero")));
            }
        }
        if self.max_entry_bytes == 0 {
            return Err(Error::Config("`max_entry_bytes` must not be zero".into()));
        }
        if self.prefix.is_empty() || self.prefix.contains(['{', '}']) {
            return Err(Error::Config(
                "`prefix` must be non-empty, without `{` or `}`".into(),
            ));
        }
        let rt = match self.handle {
            Some(h) => Runtime::from_handle(h),
            None => Runtime::new(self.threads).map_err(|e| Error::Config(e.to_string()))?,
        };
        let metrics = Arc::new(Metrics::default());
        let origin = hex(&random_secret()?[..8]);
        let hub = Arc::new(Hub::new(origin, self.prefix.clone(), metrics.clone()));
        let timings = Timings {
            connect: self.connect_timeout,
            response: self.op_timeout,
        };
        let (cmd, sub) = {
            let _entered = rt.handle().enter();
            let h = hub.clone();
            (
                Conn::commands(&self.target, timings)?,
                Conn::subscriber(&self.target, timings, move |p| h.on_push(p))?,
            )
        };
        let sharded = matches!(self.target, Target::Cluster(_));
        let track = self.outside_writes && !sharded;
        // Caches of this process over the same keys hear each other's changes at once.
        if !self.isolated {
            let keyspace = format!("{} {}", self.target.keyspace(), self.prefix);
            crate::local::join(hub.clone(), keyspace);
        }
        let inner = Arc::new(Inner {
            cmd,
            sub,
            hub,
            metrics,
            prefix: self.prefix,
            op_timeout: self.op_timeout,
            max_entry_bytes: self.max_entry_bytes,
            tag_retention: self.tag_retention.min(crate::MAX_TTL),
            tags_subscription: tokio::sync::OnceCell::new(),
            sharded,
            track,
            rt,
        });
        let weak = Arc::downgrade(&inner);
        let hub = inner.hub.clone();
        inner
            .rt
            .handle()
            .spawn(heartbeat(weak, hub, self.heartbeat, sharded));
        Ok(RedisBackend { inner })
    }
}

/// Keeps the subscription connection alive: a failed PING makes redis-rs reconnect it (and
/// resubscribe), however long Redis was away. A resubscription the server refused (redis-rs
/// sends it once, after the reconnect) is sent again here while the subscription is known
/// down, so a refused or lost one is repaired within a heartbeat of the server accepting it.
/// A new connection is asked for key tracking again as soon as its subscription is back
/// (the hub kicks), so the gap of outside writes ends with it.
async fn heartbeat(inner: Weak<Inner>, hub: Arc<Hub>, every: Duration, cluster: bool) {
    loop {
        // A heartbeat, or sooner when kicked.
        let _ = tokio::time::timeout(every, hub.tracking.kick.notified()).await;
        let Some(inner) = inner.upgrade() else { return };
        if cluster {
            // The cluster connection repairs its nodes itself; nothing to poke.
            continue;
        }
        if let Ok(mut live) = inner.sub.live().await {
            let cmd = redis::cmd("PING");
            let ping = cmd.query_async::<Option<String>>(&mut live);
            let _ = tokio::time::timeout(inner.op_timeout, ping).await;
        }
        let pattern = crate::keys::channel_pattern(&inner.prefix);
        // Only a subscription made before: a process that never subscribed has no copy.
        if inner.hub.is_unsubscribed() && inner.hub.made(&pattern) {
            // Its confirmation ends the gap (`Hub::confirmed`).
            let again = inner.sub.psubscribe(&pattern);
            let _ = tokio::time::timeout(inner.op_timeout, again).await;
        } else if inner.hub.tracking.is_untracked() && inner.hub.made(&pattern) {
            let _ = tokio::time::timeout(inner.op_timeout, inner.track()).await;
        }
    }
}

fn builder(target: Target) -> RedisBuilder {
    RedisBuilder {
        target,
        prefix: "hl".into(),
        op_timeout: Duration::from_secs(1),
        connect_timeout: Duration::from_millis(500),
        heartbeat: Duration::from_secs(1),
        threads: 1,
        handle: None,
        max_entry_bytes: DEFAULT_MAX_ENTRY_BYTES,
        tag_retention: crate::tags::DEFAULT_TAG_RETENTION,
        isolated: false,
        outside_writes: true,
    }
}

impl RedisBackend {
    /// A backend on one Redis server, e.g. `redis://127.0.0.1:6379/0`.
    pub fn builder(url: impl Into<String>) -> RedisBuilder {
        builder(Target::Single(url.into()))
    }

    /// A backend on a Redis Cluster, given some of its nodes.
    pub fn cluster<S: Into<String>>(nodes: impl IntoIterator<Item = S>) -> RedisBuilder {
        builder(Target::Cluster(nodes.into_iter().map(Into::into).collect()))
    }
}
