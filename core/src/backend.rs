//! The seam to a shared second tier (DESIGN 10, 18-20): what a fleet-wide store such as
//! Redis must offer so that many processes coalesce on one load per key.
//!
//! The in-memory engine ([`Cache`](crate::Cache)) is always the first tier and does the
//! in-process single-flight; a `Backend` is what its one local leader per key talks to. The
//! protocol a leader follows, on top of these operations:
//!
//! 1. [`read`](Backend::read) the key (one round trip, epoch checked); a servable entry ends
//!    the load (it becomes the local value, with its remaining TTL).
//! 2. [`try_lock`](Backend::try_lock) with a lease. Won: re-read (another process may have
//!    just written), load, keep [`extend`](Backend::extend)ing the lease while the loader
//!    runs, then [`write`](Backend::write), which checks epoch and version atomically,
//!    releases the lock and notifies. Lost: [`wait_for`](Backend::wait_for) the key's
//!    notification (bounded by `wait_timeout`, with a re-read in case a message was lost).
//! 3. [`bump`](Backend::bump) and [`invalidate`](Backend::invalidate) reach every process,
//!    which drop their first-tier copies.
//!
//! Values cross this seam as bytes; a codec of the binding (JSON, raw bytes, or the user's)
//! turns them into `V`. The byte layout is specified in PROTOCOL.md so that Rust, Python and
//! Node processes share keys.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::future::Future;
use core::pin::Pin;
use core::time::Duration;

use crate::error::LoadError;

/// A future returned by a backend operation.
pub type BackendFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, LoadError>> + Send + 'a>>;

/// An entry as the shared tier stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredEntry {
    /// The encoded value; `None` is a cached absence.
    pub value: Option<Vec<u8>>,
    /// Fresh until this time, in milliseconds since the Unix epoch (wall clock, shared by
    /// the fleet).
    pub fresh_until_ms: u64,
    /// Servable stale (grace) until this time, in Unix milliseconds.
    pub stale_until_ms: u64,
    /// Kept for fail-safe until this time, in Unix milliseconds; the store's own expiry.
    pub retain_until_ms: u64,
    /// How long the load that produced it took (XFetch's delta).
    pub load_duration: Duration,
    /// Monotonic version of the key's value; a write never replaces a higher version.
    pub version: u64,
    /// The namespace epoch it was written under.
    pub epoch: u64,
}

/// Proof of holding a key's distributed lock: a random token only its owner knows.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LockToken(pub [u8; 16]);

/// What a conditional write did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Stored.
    Written,
    /// Not stored: the namespace was bumped, or a newer version is already there.
    Superseded,
}

/// A shared tier: storage, a lock with token and lease, and notifications.
///
/// Every operation is async and fallible; the engine treats an error as "the tier is not
/// available now", counts it, and keeps serving and coalescing from memory.
pub trait Backend: Send + Sync + 'static {
    /// Reads `key` under its namespace's current epoch: `None` when absent, expired, of an
    /// older epoch, or undecodable (a corrupt entry is a miss, never a failure).
    fn read<'a>(&'a self, key: &'a str) -> BackendFuture<'a, Option<StoredEntry>>;

    /// Takes `key`'s lock for `lease` if nobody holds it.
    fn try_lock<'a>(
        &'a self,
        key: &'a str,
        lease: Duration,
    ) -> BackendFuture<'a, Option<LockToken>>;

    /// Extends a held lock; false when `token` no longer owns it.
    fn extend<'a>(
        &'a self,
        key: &'a str,
        token: &'a LockToken,
        lease: Duration,
    ) -> BackendFuture<'a, bool>;

    /// Releases a held lock without writing; false when `token` no longer owns it.
    fn unlock<'a>(&'a self, key: &'a str, token: &'a LockToken) -> BackendFuture<'a, bool>;

    /// Stores `entry` if its epoch is still current and no newer version is stored, releases
    /// `token`'s lock if given, and notifies the key's waiters, atomically.
    fn write<'a>(
        &'a self,
        key: &'a str,
        entry: StoredEntry,
        token: Option<&'a LockToken>,
    ) -> BackendFuture<'a, WriteOutcome>;

    /// Deletes `key` in the whole fleet and tells other processes to drop their copies.
    fn invalidate<'a>(&'a self, key: &'a str) -> BackendFuture<'a, ()>;

    /// Moves `namespace` to a new epoch for the whole fleet (INCR); returns it.
    fn bump<'a>(&'a self, namespace: &'a str) -> BackendFuture<'a, u64>;

    /// Resolves when `key`'s value lands (or its lock is released), as notified by the
    /// tier. May resolve spuriously; the caller re-reads and bounds its wait.
    fn wait_for<'a>(&'a self, key: &'a str) -> BackendFuture<'a, ()>;
}
