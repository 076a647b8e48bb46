//! The fleet-level protocol, drivable by any caller: [`Fleet::lead`] answers with a value
//! to serve, or a [`FleetLease`] — this process loads for the whole fleet, with the loader
//! run by the caller (a Rust closure, a Python callable or coroutine, a JS async function),
//! then [`FleetLease::publish`]es the entry or [`FleetLease::release`]s the lock.
//!
//! Waiting for another process is a future woken by that process's notification, with a
//! re-check at least every `recheck` and when the other lease would run out (a lost message
//! or a dead leader costs at most that), and never past `wait_timeout`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use herdless::backend::{AcquireRequest, Acquired, Backend, LockToken, StoredEntry, WriteOutcome};
use tokio::runtime::Handle;
use tokio::task::JoinHandle;

use crate::metrics::{Metrics, inc};
use crate::runtime::block_on;
use crate::tags::TagTier;
use crate::wall::{now_ms, random_secret};

mod later;
mod lock;
mod many;
mod tags;
pub use lock::{FleetLock, LOCK_ONLY};

/// Options of the fleet protocol.
#[derive(Clone, Copy, Debug)]
pub struct FleetOptions {
    /// How long a lock is held unless extended (default 5 s). A leader that dies blocks
    /// its key for at most this long; a live one extends it every third of it.
    pub lease: Duration,
    /// Longest wait for another process without re-checking Redis (default 250 ms): the
    /// bound on the cost of a lost notification.
    pub recheck: Duration,
    /// Longest wait for another process's load (default 5 s).
    pub wait_timeout: Duration,
    /// How long this process trusts the record of a tag it read from the tier (default
    /// 1 s; notifications update it meanwhile): a hit on a tagged entry whose tags were all
    /// read within it is one round trip; otherwise its tags are read too (one more). The
    /// bound on a lost tag notification, or a lost record, for reads of the tier.
    pub tag_check: Duration,
    /// Longest a lock is held for one load (default none: while its leader runs). The
    /// engines set it to the hard timeout: past it the lock is handed back even though the
    /// loader still runs (a blocking loader cannot be stopped), so the other processes
    /// lead instead of waiting on a hung loader; its late answer is not published.
    pub hold: Option<Duration>,
}

impl FleetOptions {
    /// Checks the options: every duration positive, the lease at most
    /// [`MAX_LEASE`](crate::MAX_LEASE) (a longer one could not be honoured exactly).
    pub fn check(&self) -> Result<(), herdless::ConfigError> {
        use herdless::ConfigError;
        for (option, d) in [
            ("lease", self.lease),
            ("recheck", self.recheck),
            ("wait_timeout", self.wait_timeout),
        ] {
            if d.is_zero() {
                return Err(ConfigError::ZeroDuration { option });
            }
        }
        if self.lease > crate::MAX_LEASE {
            return Err(ConfigError::TooLong {
                option: "lease",
                max: crate::MAX_LEASE,
            });
        }
        Ok(())
    }
}

impl Default for FleetOptions {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(5),
            recheck: Duration::from_millis(250),
            wait_timeout: Duration::from_secs(5),
            tag_check: Duration::from_secs(1),
            hold: None,
        }
    }
}

/// What [`Fleet::lead`] decided.
// Made and moved once per lead: boxing the entry would only add an allocation per hit.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum FleetOutcome {
    /// A fresh entry: another process's load, or one already there. Serve it.
    Fresh(StoredEntry),
    /// Another process is loading; this entry is within its grace: serve it now.
    Stale(StoredEntry),
    /// This process loads for the fleet: run the loader, then publish or release.
    Lead(FleetLease),
    /// Another process found this key's value unshareable (its codec could not encode it)
    /// and marked the key "load locally" for a lease: load in this process, do not wait.
    Unshared,
}

/// An acquire's answer after its entry's tags were checked.
enum Judged {
    Ready(Acquired),
    /// The tier served this version as fresh, but a tag of it was invalidated since its
    /// birth: ask again with it as the version already held.
    PastFresh(u64),
}

/// Counts a failed tier operation against a key (or namespace): the L1's per-namespace
/// `backend_errors`, set by the fleet engine.
pub type ErrorCounter = Arc<dyn Fn(&str) + Send + Sync>;

/// The fleet protocol over a backend. Cheap to clone.
#[derive(Clone)]
pub struct Fleet {
    backend: Arc<dyn Backend>,
    tags: Arc<dyn TagTier>,
    rt: Handle,
    metrics: Arc<Metrics>,
    opts: FleetOptions,
    errors: Option<ErrorCounter>,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

/// Aborts a task whose result nobody awaits any more (the caller was cancelled); a lease it
/// already won is released by the lease's own drop.
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Fleet {
    pub(crate) fn new(
        backend: Arc<dyn Backend>,
        tags: Arc<dyn TagTier>,
        rt: Handle,
        metrics: Arc<Metrics>,
        opts: FleetOptions,
    ) -> Self {
        Self {
            backend,
            tags,
            rt,
            metrics,
            opts,
            errors: None,
        }
    }

    /// The fleet protocol over `backend` (a shared tier: Redis, or the memory stand-in),
    /// with its timers on `rt` and its counters `metrics`.
    pub(crate) fn over<B: Backend + TagTier + Clone + 'static>(
        backend: &B,
        rt: Handle,
        metrics: Arc<Metrics>,
        opts: FleetOptions,
    ) -> Self {
        Self::new(
            Arc::new(backend.clone()),
            Arc::new(backend.clone()),
            rt,
            metrics,
            opts,
        )
    }

    /// The same fleet, counting every failed operation against its key's namespace with
    /// `counter` (the fleet engine passes the L1's `backend_errors`).
    pub fn counting_errors(mut self, counter: ErrorCounter) -> Self {
        self.errors = Some(counter);
        self
    }

    /// A failed operation on `key`: counted, and typed as the tier's error.
    fn failed(&self, key: &str, e: herdless::LoadError) -> herdless::Error {
        if let Some(count) = &self.errors {
            count(key);
        }
        herdless::Error::Backend(e)
    }

    /// The options.
    pub fn options(&self) -> &FleetOptions {
        &self.opts
    }

    /// The backend.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// Decides who loads `key` for the fleet. `have_version` is the version of the value
    /// this process already serves when this is a refresh (stale-while-revalidate, XFetch),
    /// else 0: only a fresh entry of a higher version then ends it without a load.
    ///
    /// Errors: [`herdless::Error::Backend`] when Redis fails (serve and load locally),
    /// [`herdless::Error::WaitTimeout`] when another process's load took longer than
    /// `wait_timeout`.
    pub async fn lead(
        &self,
        key: &str,
        have_version: u64,
    ) -> Result<FleetOutcome, herdless::Error> {
        let until = Instant::now() + self.opts.wait_timeout;
        self.lead_until(key, have_version, until).await
    }

    /// [`lead`](Self::lead), waiting for another process's load only until `until` (the
    /// caller's own wait deadline, counted from its first arrival).
    pub async fn lead_until(
        &self,
        key: &str,
        have_version: u64,
        until: Instant,
    ) -> Result<FleetOutcome, herdless::Error> {
        // Run on the backend's runtime: the notification, the re-check it triggers and the
        // reply all happen on its worker, and the caller is woken once, with the answer.
        let (this, owned) = (self.clone(), key.to_owned());
        let mut task = AbortOnDrop(
            self.rt
                .spawn(async move { this.lead_inner(&owned, have_version, until).await }),
        );
        match (&mut task.0).await {
            Ok(r) => r,
            Err(e) => Err(self.failed(key, herdless::LoadError::new(e))),
        }
    }

    /// [`lead`](Self::lead), blocking the calling thread.
    pub fn lead_blocking(
        &self,
        key: &str,
        have_version: u64,
    ) -> Result<FleetOutcome, herdless::Error> {
        block_on(self.lead(key, have_version))?
    }

    async fn lead_inner(
        &self,
        key: &str,
        have_version: u64,
        deadline: Instant,
    ) -> Result<FleetOutcome, herdless::Error> {
        let arrived = Instant::now();
        // Armed before the first check: a value landing after it wakes us. Without a
        // subscription (it cannot be made right now), the wait below polls on its timer:
        // a load shared late beats one made by every process. The acquire tells whether
        // the tier itself is down.
        let mut watch = self.backend.watch(key).await.ok();
        let mut waited = false;
        // Raised past an entry the tier finds fresh but its tags do not (PROTOCOL.md,
        // "Tags"): asked again, the tier treats it as stale and hands out the lock.
        let mut have = have_version;
        loop {
            let req = AcquireRequest {
                now_ms: now_ms(),
                lease: self.opts.lease,
                secret: random_secret()?,
                have_version: have,
            };
            let secret = req.secret;
            let acquired = match self.backend.acquire(key, req).await {
                Ok(a) => a,
                Err(e) => {
                    self.forget_later(key, secret);
                    return Err(self.failed(key, e));
                }
            };
            let acquired = match self.judge_acquired(acquired).await {
                Ok(Judged::Ready(a)) => a,
                Ok(Judged::PastFresh(version)) => {
                    have = have.max(version);
                    continue;
                }
                Err(e) => return Err(self.failed(key, e)),
            };
            match acquired {
                Acquired::Fresh(e) => {
                    self.read_entry(key, Some(&e));
                    return Ok(FleetOutcome::Fresh(e));
                }
                Acquired::Locked { token, stale } => {
                    return Ok(FleetOutcome::Lead(FleetLease::start(
                        self.clone(),
                        key,
                        token,
                        stale,
                    )));
                }
                Acquired::Contended { stale: Some(e), .. } if e.version > have_version => {
                    return Ok(FleetOutcome::Stale(e));
                }
                Acquired::Unshared => return Ok(FleetOutcome::Unshared),
                Acquired::Contended { remaining, .. } => {
                    if !waited {
                        waited = true;
                        inc(&self.metrics.fleet_waits);
                    }
                    let now = Instant::now();
                    if now >= deadline {
                        inc(&self.metrics.fleet_wait_timeouts);
                        return Err(herdless::Error::WaitTimeout {
                            waited: now - arrived,
                        });
                    }
                    // Re-check when the other lease would run out (its leader may be dead),
                    // and at least every `recheck` (a notification may be lost).
                    let nap = self
                        .opts
                        .recheck
                        .min(remaining + Duration::from_millis(1))
                        .min(deadline - now);
                    let woken = match &mut watch {
                        Some(w) => tokio::time::timeout(nap, w.changed()).await.is_ok(),
                        None => {
                            tokio::time::sleep(nap).await;
                            false
                        }
                    };
                    if !woken {
                        inc(&self.metrics.fleet_wait_rechecks);
                    }
                }
            }
        }
    }

    /// Reads `key` (one round trip): a fresh or within-grace entry of the current epoch.
    pub async fn read(&self, key: &str) -> Result<Option<StoredEntry>, herdless::Error> {
        let now = now_ms();
        let found = self
            .backend
            .read(key, now)
            .await
            .map_err(|e| self.failed(key, e))?;
        let Some(e) = found else { return Ok(None) };
        let e = self.judge(e, now).await.map_err(|e| self.failed(key, e))?;
        let e = e.filter(|e| e.is_servable(now));
        self.read_entry(key, e.as_ref());
        Ok(e)
    }

    /// Writes `entry` for the whole fleet (breaking any lock on the key, so a load already
    /// running cannot overwrite it) and tells the other processes.
    pub async fn set(
        &self,
        key: &str,
        mut entry: StoredEntry,
    ) -> Result<WriteOutcome, herdless::Error> {
        self.mark_write(key, &mut entry).await?;
        self.backend
            .commit(key, entry, None)
            .await
            .map_err(|e| self.failed(key, e))
    }

    /// Deletes `key` for the whole fleet; true if an entry was there.
    pub async fn invalidate(&self, key: &str) -> Result<bool, herdless::Error> {
        self.backend
            .invalidate(key)
            .await
            .map_err(|e| self.failed(key, e))
    }

    /// Moves `namespace` to a new epoch for the whole fleet; returns it.
    pub async fn bump(&self, namespace: &str) -> Result<u64, herdless::Error> {
        self.backend
            .bump(namespace)
            .await
            .map_err(|e| self.failed(namespace, e))
    }

    /// [`read`](Self::read), blocking.
    pub fn read_blocking(&self, key: &str) -> Result<Option<StoredEntry>, herdless::Error> {
        block_on(self.read(key))?
    }

    /// [`set`](Self::set), blocking.
    pub fn set_blocking(
        &self,
        key: &str,
        entry: StoredEntry,
    ) -> Result<WriteOutcome, herdless::Error> {
        block_on(self.set(key, entry))?
    }

    /// [`invalidate`](Self::invalidate), blocking.
    pub fn invalidate_blocking(&self, key: &str) -> Result<bool, herdless::Error> {
        block_on(self.invalidate(key))?
    }

    /// [`bump`](Self::bump), blocking.
    pub fn bump_blocking(&self, namespace: &str) -> Result<u64, herdless::Error> {
        block_on(self.bump(namespace))?
    }
}

/// The right and duty to load one key for the fleet. While held, the lock's lease is
/// extended in the background. Finish with [`publish`](Self::publish) or
/// [`release`](Self::release); dropped unfinished, the lock is released in the background
/// (waiters in other processes then retry, one of them leads).
pub struct FleetLease {
    fleet: Fleet,
    key: String,
    token: LockToken,
    stale: Option<StoredEntry>,
    lost: Arc<AtomicBool>,
    extender: Option<JoinHandle<()>>,
    done: bool,
}

impl std::fmt::Debug for FleetLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetLease")
            .field("key", &self.key)
            .field("token", &self.token)
            .field("lost", &self.is_lost())
            .finish_non_exhaustive()
    }
}

/// Extends the lease every third of it until stopped or the lock is found gone; past the
/// `hold` (the hard timeout), hands the lock back instead (see [`FleetOptions::hold`]).
async fn extend(fleet: Fleet, key: String, token: LockToken, lost: Arc<AtomicBool>) {
    let lease = fleet.opts.lease;
    let every = (lease / 3).max(Duration::from_millis(1));
    let until = fleet.opts.hold.map(|h| tokio::time::Instant::now() + h);
    loop {
        let next = tokio::time::Instant::now() + every;
        match until {
            Some(until) if until <= next => {
                tokio::time::sleep_until(until).await;
                // The commit checks the token, so the late answer is refused (stays local).
                lost.store(true, Ordering::Release);
                inc(&fleet.metrics.leases_cut);
                if let Err(e) = fleet.backend.release(&key, &token).await {
                    drop(fleet.failed(&key, e));
                }
                return;
            }
            _ => tokio::time::sleep_until(next).await,
        }
        match fleet.backend.extend(&key, &token, lease).await {
            Ok(true) => inc(&fleet.metrics.lease_extensions),
            Ok(false) => {
                lost.store(true, Ordering::Release);
                inc(&fleet.metrics.leases_lost);
                return;
            }
            // Redis away: keep trying; the commit tells whether the lock survived.
            Err(e) => drop(fleet.failed(&key, e)),
        }
    }
}

impl FleetLease {
    fn start(fleet: Fleet, key: &str, token: LockToken, stale: Option<StoredEntry>) -> Self {
        let lost = Arc::new(AtomicBool::new(false));
        let extender = fleet.rt.spawn(extend(
            fleet.clone(),
            key.to_owned(),
            token.clone(),
            lost.clone(),
        ));
        Self {
            fleet,
            key: key.to_owned(),
            token,
            stale,
            lost,
            extender: Some(extender),
            done: false,
        }
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The namespace epoch the lock was taken under (what an entry is written under).
    pub fn epoch(&self) -> u64 {
        self.token.epoch
    }

    /// An entry within its grace found when the lock was taken: servable while loading.
    pub fn stale(&self) -> Option<&StoredEntry> {
        self.stale.as_ref()
    }

    /// Whether an extension found the lock gone (the publish will be refused).
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    fn finish(&mut self) {
        self.done = true;
        if let Some(h) = self.extender.take() {
            h.abort();
        }
    }

    /// Stores `entry` as it is (see [`publish_dated`](Self::publish_dated) for a tagged
    /// one) if this lease still holds the lock and the namespace was not bumped, releases
    /// the lock, and wakes the waiters. If the commit never reaches Redis (an error), the
    /// lock runs out by itself within one lease.
    pub async fn publish(mut self, entry: StoredEntry) -> Result<WriteOutcome, herdless::Error> {
        self.finish();
        self.fleet
            .backend
            .commit(&self.key, entry, Some(&self.token))
            .await
            .map_err(|e| self.fleet.failed(&self.key, e))
    }

    /// [`publish`](Self::publish), blocking.
    pub fn publish_blocking(self, entry: StoredEntry) -> Result<WriteOutcome, herdless::Error> {
        block_on(self.publish(entry))?
    }

    /// Releases the lock without a value (the load failed); waiters retry, one leads.
    pub async fn release(mut self) -> Result<bool, herdless::Error> {
        self.finish();
        self.fleet
            .backend
            .release(&self.key, &self.token)
            .await
            .map_err(|e| self.fleet.failed(&self.key, e))
    }

    /// Hands the lock back with a "load locally" mark that lasts one lease: this process's
    /// value could not be encoded, so the other processes (woken at once) load for
    /// themselves instead of taking the lock one after another. In the background.
    pub fn release_unshared(mut self) {
        self.finish();
        let (fleet, key, token) = (
            self.fleet.clone(),
            std::mem::take(&mut self.key),
            self.token.clone(),
        );
        self.fleet.rt.spawn(async move {
            if let Err(e) = fleet
                .backend
                .mark_unshared(&key, &token, fleet.opts.lease)
                .await
            {
                drop(fleet.failed(&key, e));
            }
        });
    }

    /// [`release`](Self::release), blocking.
    pub fn release_blocking(self) -> Result<bool, herdless::Error> {
        block_on(self.release())?
    }
}

impl Drop for FleetLease {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.finish();
        // Cancelled (the loader's future was dropped, or it panicked): hand the key over now
        // rather than after the lease runs out.
        let fleet = self.fleet.clone();
        let (key, token) = (std::mem::take(&mut self.key), self.token.clone());
        self.fleet.rt.spawn(async move {
            if let Err(e) = fleet.backend.release(&key, &token).await {
                drop(fleet.failed(&key, e));
            }
        });
    }
}
