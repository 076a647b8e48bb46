//! The seam to a shared second tier: what a fleet-wide store such as
//! Redis must offer so that many processes coalesce on one load per key.
//!
//! The in-memory engine ([`Cache`](crate::Cache)) is always the first tier and does the
//! in-process single-flight; a `Backend` is what its one local leader per key talks to, so a
//! process makes at most one lock attempt per key at a time. The protocol a leader follows
//! on top of these operations (the `herdless-redis` crate drives it; PROTOCOL.md at the
//! repository root specifies the Redis side byte for byte):
//!
//! 1. [`watch`](Backend::watch) the key first, so no notification can slip between the
//!    check below and the wait.
//! 2. [`acquire`](Backend::acquire): in one atomic step, read the key under its namespace's
//!    current epoch and, when nothing servable is there, take the key's lock with a random
//!    token and a lease. Because the read and the lock are one step, the winner has
//!    re-read the cache after winning: nobody can have written in between.
//!    - [`Acquired::Fresh`]: a servable entry; no load.
//!    - [`Acquired::Locked`]: this process loads. While the loader runs it keeps
//!      [`extend`](Backend::extend)ing the lease (a load longer than the lease never lets a
//!      second leader in), then [`commit`](Backend::commit)s, which stores the entry only
//!      if the token still owns the lock and the epoch did not move, releases the lock and
//!      notifies, atomically; or it [`release`](Backend::release)s without a value.
//!    - [`Acquired::Contended`]: another process loads. Wait for the watch (bounded by
//!      `wait_timeout`) and acquire again; re-check at least when the other lease would
//!      run out, in case a notification was lost or the leader died (a dead leader blocks
//!      the key for at most one lease).
//! 3. [`commit`](Backend::commit) without a token (a `set`), [`invalidate`](Backend::invalidate)
//!    and [`bump`](Backend::bump) reach every process: each drops its first-tier copies when
//!    its [`listen`](Backend::listen)er is told.
//!
//! Values cross this seam as bytes; a codec of the binding (JSON, raw bytes, or the user's)
//! turns them into `V`. Times are wall-clock Unix milliseconds, shared by the fleet.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::future::Future;
use core::pin::Pin;
use core::time::Duration;

use crate::error::LoadError;
use crate::sync::unchecked::Arc;

/// A future returned by a backend operation. Errors mean "the tier is not available now";
/// callers count them and keep serving and coalescing from memory.
pub type BackendFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, LoadError>> + Send + 'a>>;

/// An entry as the shared tier stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredEntry {
    /// The encoded value; `None` is a cached absence.
    pub value: Option<Vec<u8>>,
    /// Fresh until this time, in milliseconds since the Unix epoch.
    pub fresh_until_ms: u64,
    /// Servable stale (grace, with one refresh) until this time, in Unix milliseconds.
    pub stale_until_ms: u64,
    /// Kept (for fail-safe) until this time, in Unix milliseconds: the store's own expiry.
    pub retain_until_ms: u64,
    /// How long the load that produced it took (XFetch's delta).
    pub load_duration: Duration,
    /// The key's version, assigned by the tier at commit; strictly increasing per key.
    pub version: u64,
    /// The namespace epoch it was written under, assigned by the tier at commit.
    pub epoch: u64,
    /// The ttl its loader chose for it ([`Loaded::ttl`](crate::Loaded::ttl)), so that a
    /// not-modified refresh in any process restarts the same lifetime; `None`: the cache's.
    pub ttl: Option<Duration>,
    /// Its time-to-idle ([`Loaded::tti`](crate::Loaded::tti), or the writer's cache's):
    /// dropped by the tier once no process has read it for this long.
    pub tti: Option<Duration>,
    /// The metadata its loader kept with it ([`Loaded::meta`](crate::Loaded::meta)).
    pub meta: Option<String>,
    /// Its tags ([`Loaded::tags`](crate::Loaded::tags)); empty: none. An invalidation of
    /// any of them after it was written drops it for the whole fleet.
    pub tags: Vec<String>,
    /// One mark per tag, in the order of `tags`: what the shared tier's record of that tag
    /// said when the entry was written. Readers compare each with the tag's record as it is
    /// now; the writer fills them in (empty until then, and without tags).
    pub tag_marks: Vec<TagMark>,
}

/// What a shared tier's record of one tag said when an entry carrying the tag was written:
/// which record it was (a record that is lost and made again has another incarnation) and
/// the last invalidation of it the entry has seen. A later invalidation, or another
/// incarnation, tells a reader the entry was removed (or, soft, expired).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TagMark {
    /// The record's incarnation: random, never 0, made when the record is made.
    pub incarnation: u64,
    /// The stamp of the record's last invalidation (hard or soft) the entry has seen; 0:
    /// none.
    pub seen: u64,
}

impl StoredEntry {
    /// Whether it is fresh at `now_ms`.
    pub fn is_fresh(&self, now_ms: u64) -> bool {
        now_ms < self.fresh_until_ms
    }

    /// Whether it may be served at `now_ms`, fresh or within grace.
    pub fn is_servable(&self, now_ms: u64) -> bool {
        now_ms < self.stale_until_ms.max(self.fresh_until_ms)
    }
}

/// Proof of holding a key's distributed lock: the namespace epoch the lock was taken under
/// and a random secret only its owner knows (128 bits from the OS).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct LockToken {
    /// The namespace epoch when the lock was taken; a bump frees the lock for new leaders.
    pub epoch: u64,
    /// The unguessable part.
    pub secret: [u8; 16],
}

impl core::fmt::Debug for LockToken {
    // The secret stays out of logs: whoever reads it can release someone else's lock.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("LockToken")
            .field("epoch", &self.epoch)
            .finish_non_exhaustive()
    }
}

/// What [`Backend::acquire`] asks for.
#[derive(Clone, Debug)]
pub struct AcquireRequest {
    /// The caller's wall clock, Unix milliseconds.
    pub now_ms: u64,
    /// How long the lock is held unless extended.
    pub lease: Duration,
    /// The secret to lock with, if the lock is free.
    pub secret: [u8; 16],
    /// A refresh of a value this process already holds passes its version: only a fresh
    /// entry of a *higher* version ends it without a load. A miss passes 0.
    pub have_version: u64,
}

/// What [`Backend::acquire`] found and did, atomically.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Acquired {
    /// A fresh entry (newer than `have_version`): serve it; no lock was taken.
    Fresh(StoredEntry),
    /// The lock is this caller's: load, then commit or release.
    Locked {
        /// The token to extend, commit and release with.
        token: LockToken,
        /// An entry that may still be served meanwhile (within grace), if any.
        stale: Option<StoredEntry>,
    },
    /// Another process holds the lock.
    Contended {
        /// An entry that may still be served meanwhile (within grace), if any.
        stale: Option<StoredEntry>,
        /// How long the other lease still runs unless extended.
        remaining: Duration,
    },
    /// The key is marked "load locally" ([`Backend::mark_unshared`]): another process's
    /// value could not be encoded. Load in this process; do not wait.
    Unshared,
}

/// What a conditional write did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Stored under this version and epoch.
    Written {
        /// The version the tier gave the entry.
        version: u64,
        /// The epoch it was stored under.
        epoch: u64,
    },
    /// Not stored: the lock was no longer the caller's (lease lost, the key was written or
    /// invalidated meanwhile) or the namespace was bumped since the lock was taken.
    Superseded,
}

/// A fleet-wide event, as told to a [`Backend::listen`]er. Events caused by this process
/// itself are not told (it already applied them to its first tier).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notice<'a> {
    /// `key` was written (a load or a `set`) with `version`.
    Written {
        /// The key.
        key: &'a str,
        /// Its new version.
        version: u64,
        /// This process is waiting for the key's load (a watch is armed) and will read the
        /// new entry itself: a first tier need not drop its copy.
        awaited: bool,
    },
    /// `key`'s lock was released without a value.
    Released {
        /// The key.
        key: &'a str,
    },
    /// `key` was invalidated.
    Invalidated {
        /// The key.
        key: &'a str,
    },
    /// `key`'s shared value was changed by a writer that is not herdless (another program's
    /// write or delete), or its shared entry expired or was evicted: the tier cannot tell
    /// which. A first tier drops a copy it could still serve; a copy at the end of its
    /// servable life (the expiry of its shared entry) or kept only for fail-safe stays.
    Changed {
        /// The key.
        key: &'a str,
    },
    /// `namespace` moved to `epoch`.
    Bumped {
        /// The namespace.
        namespace: &'a str,
        /// Its new epoch.
        epoch: u64,
    },
    /// Notifications may have been lost (the subscription dropped and came back): every
    /// first-tier copy may be outdated.
    Lost,
    /// Every entry carrying `tag` was invalidated (`soft`: expired, served stale within
    /// grace while one refresh runs; else removed) at `stamp` (Unix ms on the fleet's time
    /// line): entries born at or before it are affected.
    Tagged {
        /// The tag.
        tag: &'a str,
        /// The invalidation's stamp.
        stamp: u64,
        /// Expired (stale) rather than removed.
        soft: bool,
    },
    /// This process stopped listening to `namespace`'s notifications (it keeps a bounded
    /// number of subscriptions): its first-tier copies of the namespace may go outdated.
    Unwatched {
        /// The namespace.
        namespace: &'a str,
    },
}

/// A listener of fleet-wide events.
pub type Listener = Arc<dyn Fn(Notice<'_>) + Send + Sync>;

/// An armed subscription to one key's changes: a change after [`Backend::watch`] returned
/// completes the next [`changed`](Watch::changed), even if it happened before the call.
pub trait Watch: Send {
    /// Resolves at the key's next change (written, released, invalidated, or notifications
    /// lost). May resolve spuriously; callers re-check and bound their wait.
    fn changed(&mut self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

/// A shared tier: storage, a lock with token and lease, and notifications.
pub trait Backend: Send + Sync + 'static {
    /// Reads `key` (one round trip, epoch checked): `None` when absent, past its grace, of
    /// an older epoch, or undecodable (a corrupt entry is a miss, never a failure).
    fn read<'a>(&'a self, key: &'a str, now_ms: u64) -> BackendFuture<'a, Option<StoredEntry>>;

    /// Reads `key` and, unless a fresh entry (newer than `req.have_version`) is there, takes
    /// its lock if free, in one atomic step.
    fn acquire<'a>(&'a self, key: &'a str, req: AcquireRequest) -> BackendFuture<'a, Acquired>;

    /// [`acquire`](Backend::acquire) for many keys at once (a batch load): one answer per
    /// request, in order. The default asks one key after the other; a tier that can do
    /// better overrides it (Redis: one pipeline per Cluster slot, so one round trip on a
    /// single server). An error of the whole exchange is the outer error. A tier whose
    /// parts can fail apart (a Cluster's nodes) answers each part on its own: a part that
    /// fails or stalls fails only its own requests, within the tier's operation timeout,
    /// and holds back no other part (PROTOCOL.md, "Batch loads").
    fn acquire_many<'a>(
        &'a self,
        requests: &'a [(String, AcquireRequest)],
    ) -> BackendFuture<'a, Vec<Result<Acquired, LoadError>>> {
        Box::pin(async move {
            let mut out = Vec::with_capacity(requests.len());
            for (key, req) in requests {
                out.push(self.acquire(key, req.clone()).await);
            }
            Ok(out)
        })
    }

    /// Extends a held lock to `lease` from now; false when `token` no longer owns it.
    fn extend<'a>(
        &'a self,
        key: &'a str,
        token: &'a LockToken,
        lease: Duration,
    ) -> BackendFuture<'a, bool>;

    /// Releases a held lock without writing and wakes the waiters; false when `token` no
    /// longer owns it.
    fn release<'a>(&'a self, key: &'a str, token: &'a LockToken) -> BackendFuture<'a, bool>;

    /// Releases `key`'s lock if it was taken with `secret`, whatever its epoch, and wakes
    /// the waiters. For an [`acquire`](Backend::acquire) whose answer never came (it timed
    /// out): the tier may still have run it and locked the key for a leader that gave up.
    fn forget<'a>(&'a self, key: &'a str, secret: &'a [u8; 16]) -> BackendFuture<'a, bool>;

    /// Replaces a held lock with a "load locally" mark for `hold` and wakes the waiters:
    /// this process's value could not be encoded, so each process loads for itself until
    /// the mark runs out ([`Acquired::Unshared`]). False when `token` no longer owns it.
    fn mark_unshared<'a>(
        &'a self,
        key: &'a str,
        token: &'a LockToken,
        hold: Duration,
    ) -> BackendFuture<'a, bool>;

    /// Stores `entry` (its `version` and `epoch` are assigned by the tier) and notifies.
    ///
    /// With a token: only if the token still owns the lock and the namespace was not bumped
    /// since it was taken; the lock is released either way. Without (a `set`): always,
    /// and any lock on the key is broken so a load already running cannot overwrite it.
    fn commit<'a>(
        &'a self,
        key: &'a str,
        entry: StoredEntry,
        token: Option<&'a LockToken>,
    ) -> BackendFuture<'a, WriteOutcome>;

    /// Keeps `key`'s entry, which has a time-to-idle of `tti`, in the tier for `tti * 5 / 4`
    /// more from now, never shortening its life: a process read it (from the tier, or from
    /// its own copy). True if the entry was there. The default, for a tier that keeps no
    /// idle times, does nothing.
    fn touch<'a>(&'a self, key: &'a str, tti: Duration) -> BackendFuture<'a, bool> {
        let _ = (key, tti);
        Box::pin(async { Ok(false) })
    }

    /// Deletes `key` (and breaks its lock) in the whole fleet; true if an entry was there.
    fn invalidate<'a>(&'a self, key: &'a str) -> BackendFuture<'a, bool>;

    /// Moves `namespace` to a new epoch for the whole fleet (INCR); returns it.
    fn bump<'a>(&'a self, namespace: &'a str) -> BackendFuture<'a, u64>;

    /// Subscribes to `key`'s changes; the returned watch is armed when the future resolves.
    fn watch<'a>(&'a self, key: &'a str) -> BackendFuture<'a, Box<dyn Watch>>;

    /// Registers a listener of other processes' changes (first-tier coherence).
    fn listen(&self, listener: Listener);
}
