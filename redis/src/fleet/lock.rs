//! A lock on a key for the whole fleet ([`Fleet::try_lock`], [`Fleet::lock_until`]): the very
//! lock a load of that key takes, held by a caller's own code instead of a loader (a
//! `dogpile.cache` mutex, a critical section of a job).
//!
//! It is the load's protocol (PROTOCOL.md, "Locks held outside a load"), not a second one:
//!
//! - **The same lock key and script.** `acquire` with `have_version` = [`LOCK_ONLY`]: no
//!   entry is newer than that, so the script never answers "fresh"; it takes the lock when
//!   no lock of the current epoch is held, and answers "contended" (with the holder's
//!   remaining lease) otherwise. A lock on `k` is therefore the lock of the loads of `k`:
//!   while it is held, a load of `k` anywhere in the fleet waits for it (or serves a stale
//!   entry) as it waits for another leader, and a `set`, `invalidate` or namespace `bump` of
//!   `k` breaks it as it breaks a load's ([`FleetLock::is_lost`] then tells).
//! - **The same lease.** The lock is taken for one lease ([`FleetOptions::lease`](super::FleetOptions::lease))
//!   and extended every third of it while held, by the backend's runtime, however long the
//!   holder keeps it; [`FleetOptions::hold`](super::FleetOptions::hold) (a load's hard
//!   timeout) does not apply. A holder that dies (killed, frozen, cut off from Redis) stops
//!   extending, so the key is free again within one lease.
//! - **Released by token.** [`FleetLock::release`] runs the `release` script with the
//!   lock's token (a foreign token releases nothing) and publishes `r`, which wakes every
//!   waiter of the fleet at once; a lock dropped unreleased is released in the background.
//! - **Waiting** is a load's wait: a watch of the key armed before the first try, a re-try
//!   when a notification comes, at least every `recheck` and when the holder's lease would
//!   run out; never past the caller's deadline. A key marked "load locally" (an unshareable
//!   value, PROTOCOL.md section 5) is waited out as a held lock is.
//! - **Failures** are the caller's to see: a lock that cannot reach the tier is an
//!   [`herdless::Error::Backend`], never a lock that looks held while it is not.

use std::time::{Duration, Instant};

use herdless::backend::{AcquireRequest, Acquired};

use super::{AbortOnDrop, Fleet, FleetLease};
use crate::runtime::block_on;
use crate::wall::{now_ms, random_secret};

/// The `have_version` of a lock-only `acquire`: no entry's version is above it, so the
/// script takes the lock whenever it is free, whatever entry the key holds.
pub const LOCK_ONLY: u64 = u64::MAX;

/// A lock on one key, held for the fleet (see the module docs). Extended in the background
/// while held; [`release`](Self::release) it, or drop it (released in the background).
#[derive(Debug)]
pub struct FleetLock {
    lease: FleetLease,
}

impl FleetLock {
    /// The key.
    pub fn key(&self) -> &str {
        self.lease.key()
    }

    /// Whether an extension found the lock gone: it ran out (this process was frozen or
    /// cut off from the tier for a whole lease), or a `set`, `invalidate` or `bump` of its
    /// key broke it. Another caller may hold it now.
    pub fn is_lost(&self) -> bool {
        self.lease.is_lost()
    }

    /// Releases the lock (by its token, waking the fleet's waiters). `Ok(false)`: it was no
    /// longer this lock's (lost, see [`is_lost`](Self::is_lost)). An error: the tier could
    /// not be reached; the lock then runs out by itself within one lease.
    pub async fn release(self) -> Result<bool, herdless::Error> {
        self.lease.release().await
    }

    /// [`release`](Self::release), blocking the calling thread.
    pub fn release_blocking(self) -> Result<bool, herdless::Error> {
        self.lease.release_blocking()
    }
}

impl Fleet {
    /// Takes the lock on `key` if it is free: one round trip, no wait. `Ok(None)`: another
    /// caller holds it (or a load of the key runs).
    pub async fn try_lock(&self, key: &str) -> Result<Option<FleetLock>, herdless::Error> {
        self.lock_until(key, Some(Instant::now())).await
    }

    /// Takes the lock on `key`, waiting for its holder until `until` (`None`: for as long
    /// as it takes; a dead holder's lease runs out). `Ok(None)`: still held at `until`.
    pub async fn lock_until(
        &self,
        key: &str,
        until: Option<Instant>,
    ) -> Result<Option<FleetLock>, herdless::Error> {
        // On the backend's runtime, as a load's wait: woken once, with the answer. Dropped
        // (the caller left), the task is aborted, and a lock it won is released by its drop.
        let mut this = self.clone();
        this.opts.hold = None;
        let owned = key.to_owned();
        let mut task = AbortOnDrop(
            self.rt
                .spawn(async move { this.lock_inner(&owned, until).await }),
        );
        match (&mut task.0).await {
            Ok(r) => r,
            Err(e) => Err(self.failed(key, herdless::LoadError::new(e))),
        }
    }

    /// [`lock_until`](Self::lock_until) `timeout` from now (`None`: no limit), blocking the
    /// calling thread.
    pub fn lock_blocking(
        &self,
        key: &str,
        timeout: Option<Duration>,
    ) -> Result<Option<FleetLock>, herdless::Error> {
        let until = timeout.map(|t| Instant::now() + t);
        block_on(self.lock_until(key, until))?
    }

    async fn lock_inner(
        &self,
        key: &str,
        until: Option<Instant>,
    ) -> Result<Option<FleetLock>, herdless::Error> {
        // Armed before the first try, so a release between the try and the wait wakes it;
        // a try without a wait needs none. Without one, the wait polls on its timer.
        let waits = until.is_none_or(|u| u > Instant::now());
        let mut watch = match waits {
            true => self.backend.watch(key).await.ok(),
            false => None,
        };
        loop {
            let req = AcquireRequest {
                now_ms: now_ms(),
                lease: self.opts.lease,
                secret: random_secret()?,
                have_version: LOCK_ONLY,
            };
            let secret = req.secret;
            let remaining = match self.backend.acquire(key, req).await {
                Err(e) => {
                    self.forget_later(key, secret);
                    return Err(self.failed(key, e));
                }
                Ok(Acquired::Locked { token, .. }) => {
                    let lease = FleetLease::start(self.clone(), key, token, None);
                    return Ok(Some(FleetLock { lease }));
                }
                Ok(Acquired::Contended { remaining, .. }) => remaining,
                // The "load locally" mark holds the key for its lease; "fresh" is never the
                // answer to LOCK_ONLY. Either way: try again after a recheck.
                Ok(Acquired::Unshared | Acquired::Fresh(_)) => self.opts.recheck,
            };
            let now = Instant::now();
            if until.is_some_and(|u| now >= u) {
                return Ok(None);
            }
            let mut nap = self.opts.recheck.min(remaining + Duration::from_millis(1));
            if let Some(u) = until {
                nap = nap.min(u - now);
            }
            match &mut watch {
                Some(w) => {
                    let _ = tokio::time::timeout(nap, w.changed()).await;
                }
                None => tokio::time::sleep(nap).await,
            }
        }
    }
}
