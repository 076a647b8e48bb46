//! Locks on keys from the engine ([`TwoTier::lock`]), decided once for every language.
//!
//! - With a shared tier, the lock is the fleet's ([`FleetLock`]): the lock a load of the
//!   key takes, leased, extended while held and released by token (PROTOCOL.md, "Locks
//!   held outside a load"). Every process sharing the tier excludes every other.
//! - Without one (an L1-only cache), the same protocol runs over a private in-memory tier
//!   of this cache ([`MemoryBackend`], the shared tier's stand-in, through the same
//!   [`Backend`](herdless::backend::Backend) trait): the lock excludes the callers of this
//!   cache in this process, with the same answers, waits and release. Made at the first
//!   lock (its one runtime thread), again in a child of `fork`, closed by
//!   [`TwoTier::close`].
//! - A closed engine answers [`Error::Closed`]; a key is checked as a write's is.
//!
//! Such a lock does not stop a load of the key on an L1-only cache (nothing is shared for
//! it to guard); with a shared tier a load of the key waits for it as for any leader.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use herdless::Error;

use super::{Pending, TwoTier};
use crate::fleet::{Fleet, FleetLock, FleetOptions};
use crate::memory::{MemoryBackend, MemoryStore};

/// The private in-memory tier of an L1-only engine's locks, made at the first lock.
#[derive(Default)]
pub(crate) struct LocalLocks {
    slot: Mutex<Option<Arc<Local>>>,
}

struct Local {
    backend: MemoryBackend,
    fleet: Fleet,
    pid: u32,
}

impl LocalLocks {
    /// The fleet over this engine's private tier, made (again, in a forked child) if need be.
    fn fleet(&self) -> Result<Fleet, Error> {
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        let pid = std::process::id();
        if let Some(local) = slot.as_ref()
            && local.pid == pid
        {
            return Ok(local.fleet.clone());
        }
        let backend = MemoryStore::new().backend().build()?;
        let fleet = backend.fleet(FleetOptions::default());
        *slot = Some(Arc::new(Local {
            backend,
            fleet: fleet.clone(),
            pid,
        }));
        Ok(fleet)
    }

    /// Closes the private tier (its runtime thread), if this process made one.
    pub(crate) fn close(&self) {
        let taken = self.slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(local) = taken
            && local.pid == std::process::id()
        {
            local.backend.close();
        }
    }
}

/// What [`TwoTier::lock`] answers once its wait is over: the held lock, or `None` (still
/// held by another caller at the deadline).
pub type LockAnswer = Result<Option<FleetLock>, Error>;

impl<V: Clone + Send + Sync + 'static> TwoTier<V> {
    /// Takes the lock on `key` (see the module docs), waiting for another holder until
    /// `until`: `Some(now)` or earlier only tries (one round trip), `None` waits for as
    /// long as it takes. The answer is a future any driver polls (the backend's runtime
    /// does the I/O and wakes it); dropped, it gives back a lock it already won.
    pub fn lock(&self, key: &str, until: Option<Instant>) -> Pending<LockAnswer> {
        let fleet = match self.lock_fleet(key) {
            Ok(f) => f,
            Err(e) => return Pending::ready(Err(e)),
        };
        let key = key.to_owned();
        let this = self.clone();
        Pending::new(async move {
            fleet
                .lock_until(&key, until)
                .await
                .map_err(|e| this.or_closed(e))
        })
    }

    /// Whether another caller holds the lock on `key` (or a load of it runs, with a shared
    /// tier), without keeping it: a try that wins gives the lock back at once (one more
    /// round trip, and a wake-up of the key's waiters, who find it free). The answer may be
    /// stale by the time it is read.
    pub fn is_locked(&self, key: &str) -> Pending<Result<bool, Error>> {
        let tried = self.lock(key, Some(Instant::now()));
        Pending::new(async move {
            match tried.await? {
                Some(lock) => lock.release().await.map(|_| false),
                None => Ok(true),
            }
        })
    }

    /// The fleet a lock of `key` is taken in: the shared tier's, else the private one.
    fn lock_fleet(&self, key: &str) -> Result<Fleet, Error> {
        self.check_open()?;
        self.check_key(key)?;
        match self.inner.shared {
            Some(_) => self.fleet().ok_or(Error::Closed),
            None => self.inner.locks.fleet(),
        }
    }
}
