//! The fleet engine: the two-tier protocol (an in-memory L1 in front of a shared L2),
//! decided once, driven by every language.
//!
//! Core's [`Cache::lookup`](herdless::Cache::lookup) decides, per key and per process, who
//! loads. [`TwoTier`] decides the rest: what the one local leader of a key does with the
//! shared tier, what a write does when the tier is down, what is counted. A driver (the
//! Rust [`TieredCache`](crate::TieredCache), the Python binding's blocking and asyncio
//! paths, the Node binding) only does what a [`Step`] says, in its language:
//!
//! ```text
//! lookup ─► Hit ────────────────► serve (a refresh guard: TwoTier::refresh, in the background)
//!        ─► Wait ───────────────► await; Retry: lookup_again
//!        ─► Lead ─► TwoTier::lead ─► Step::Done(answer)
//!                                 ─► Step::Load(load)   run the loader, then load.loaded(..)
//!                                 ─► Step::Stale(v, refresh)   answer v now, run refresh
//!                                 ─► Step::Tier(pending)   await it, then reply.next(host)
//! ```
//!
//! Every step that talks to the shared tier is a [`Pending`] future (`Send`, runtime
//! agnostic: the backend's own runtime does the I/O and wakes it); what it resolves to is
//! finished on the driver's thread with its [`Host`] (the codec), because decoding and
//! encoding run the driver's language. Without a shared tier (`TwoTier::memory`) the same
//! machine answers without any `Tier` step, so a binding has one driver for both.
//!
//! The failure policy (PROTOCOL.md, "Failure policy") lives here and only here: a load
//! whose tier is down is served in its process and not written; a `set`, `invalidate` or
//! `bump` that cannot reach the tier answers [`Error::Backend`] (after applying itself to
//! this process's L1, so this process never serves what it was told to drop); a `get`
//! that cannot reach the tier is a miss; every failed tier operation is counted in the
//! L1's per-namespace `backend_errors`.

mod batch;
mod close;
mod host;
mod idle;
mod load;
mod lock;
mod many;
mod ops;
mod step;
mod tags;

use std::collections::HashSet;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use herdless::backend::Notice;
use herdless::key::namespace_of;
use herdless::{Cache, Error, LoadGuard};

use crate::coherence::apply_notice;
use crate::fleet::{Fleet, FleetOptions};
use crate::lifetimes::Lifetimes;
use crate::metrics::RedisMetrics;
pub use crate::tier::{SharedTier, TierAddress, TierOptions};
pub use crate::versioned::Versioned;
pub use batch::{Many, ManyAnswer, ManyStep, Resume};
pub use host::{Host, Warning};
pub(crate) use idle::IdleReads;
pub use load::{Deadline, Load};
pub use lock::LockAnswer;
pub use ops::{Get, Read};
pub use step::{Pending, Reply, Step};

/// The most namespaces a cache warns about ([`Warning::Unshareable`]); past it the counter
/// still counts, but nothing more is told.
const MAX_WARNED_NAMESPACES: usize = 256;

/// Why [`TwoTier::build`] refused its options.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// An option out of range (the engine's rules, or what the shared tier can keep).
    Config(herdless::ConfigError),
    /// The shared tier's address or connection settings.
    Tier(crate::Error),
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildError::Config(e) => e.fmt(f),
            BuildError::Tier(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for BuildError {}

/// The live connection to the shared tier: the fleet protocol over it, and the process
/// that made it (a tier's threads and sockets do not survive a `fork`).
struct Live {
    fleet: Fleet,
    tier: SharedTier,
    pid: u32,
}

/// The shared tier of a [`TwoTier`]: what entries are written with, and the connection,
/// remade in a forked child when the tier was given as an address.
struct Shared {
    life: Lifetimes,
    options: FleetOptions,
    /// How to connect again (in a forked child); `None` for a tier given as an object.
    address: Option<(TierAddress, Option<String>)>,
    /// `None` once [`TwoTier::close`] let go of a tier it connected itself: nothing then
    /// holds the tier's runtime (its file descriptors), however long this engine lives.
    live: RwLock<Option<Arc<Live>>>,
    /// The tier's counters as [`TwoTier::close`] left them.
    closed_metrics: std::sync::OnceLock<RedisMetrics>,
}

struct Inner<V: Clone + Send + Sync + 'static> {
    l1: Cache<Versioned<V>>,
    shared: Option<Shared>,
    /// Namespaces already warned about an unshareable value.
    warned: Mutex<HashSet<String>>,
    /// Set once by [`TwoTier::close`].
    closed: AtomicBool,
    /// The private tier of an L1-only engine's locks ([`TwoTier::lock`]).
    locks: lock::LocalLocks,
}

/// The fleet engine over one L1 (see the module docs). Cheap to clone.
pub struct TwoTier<V: Clone + Send + Sync + 'static> {
    inner: Arc<Inner<V>>,
}

impl<V: Clone + Send + Sync + 'static> Clone for TwoTier<V> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<V: Clone + Send + Sync + 'static> std::fmt::Debug for TwoTier<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TwoTier")
            .field("shared", &self.inner.shared.is_some())
            .finish_non_exhaustive()
    }
}

impl<V: Clone + Send + Sync + 'static> TwoTier<V> {
    /// The engine a binding's options describe: `l1` alone, or in front of the shared tier
    /// of `tier`. The shared entries' lifetimes are read from `l1`'s options (one set of
    /// defaults, the engine's), the fleet waits as long as `l1` does (`wait_timeout`), and
    /// the L1 is built without jitter (the jitter is drawn once, when a shared entry is
    /// written, so every process agrees on when it expires).
    pub fn build(
        l1: herdless::Builder<Versioned<V>>,
        tier: Option<TierOptions>,
    ) -> Result<Self, BuildError> {
        let Some(t) = tier else {
            return l1.build().map(Self::memory).map_err(BuildError::Config);
        };
        let options = l1.options();
        let life = Lifetimes::from(&options);
        let defaults = FleetOptions::default();
        let fleet = FleetOptions {
            lease: t.lease.unwrap_or(defaults.lease),
            wait_timeout: options.wait_timeout,
            hold: options.hard_timeout,
            ..defaults
        };
        let idle = IdleReads::new();
        let l1 = idle
            .on(l1)
            .jitter(0.0)
            .build()
            .map_err(BuildError::Config)?;
        life.check().map_err(BuildError::Config)?;
        fleet.check().map_err(BuildError::Config)?;
        let tt = Self::connect(l1, t.address, t.prefix.as_deref(), fleet, life)
            .map_err(BuildError::Tier)?;
        idle.attach(&tt);
        Ok(tt)
    }

    /// The engine with no shared tier: `l1` is the whole cache.
    pub fn memory(l1: Cache<Versioned<V>>) -> Self {
        Self {
            inner: Arc::new(Inner {
                l1,
                shared: None,
                warned: Mutex::default(),
                closed: AtomicBool::new(false),
                locks: lock::LocalLocks::default(),
            }),
        }
    }

    /// The engine with `tier` as the shared tier: `l1` in front of it, kept coherent
    /// with the other processes' writes, invalidations and bumps. `l1` should be built
    /// without jitter: the jitter of `life` is drawn once, when the shared entry is
    /// written, so every process agrees on when it expires. A tier given this way cannot
    /// be remade after a `fork`: use [`connect`](Self::connect) where processes fork.
    pub fn shared(
        l1: Cache<Versioned<V>>,
        tier: impl Into<SharedTier>,
        fleet: FleetOptions,
        life: Lifetimes,
    ) -> Self {
        Self::with_tier(l1, tier.into(), fleet, life, None)
    }

    /// [`shared`](Self::shared) over the tier at `address` (with `prefix` for its
    /// names). Connecting is lazy for Redis (this succeeds while it is down). In a child
    /// of `fork` (a prefork server, a Celery worker) the first use connects again, from
    /// the child, by itself.
    pub fn connect(
        l1: Cache<Versioned<V>>,
        address: TierAddress,
        prefix: Option<&str>,
        fleet: FleetOptions,
        life: Lifetimes,
    ) -> Result<Self, crate::Error> {
        let tier = address.connect(prefix)?;
        let again = Some((address, prefix.map(str::to_owned)));
        Ok(Self::with_tier(l1, tier, fleet, life, again))
    }

    fn with_tier(
        l1: Cache<Versioned<V>>,
        tier: SharedTier,
        options: FleetOptions,
        life: Lifetimes,
        address: Option<(TierAddress, Option<String>)>,
    ) -> Self {
        let inner = Arc::new_cyclic(|weak: &Weak<Inner<V>>| Inner {
            l1: l1.clone(),
            shared: Some(Shared {
                life,
                options,
                address,
                live: RwLock::new(Some(Arc::new(Self::attach(
                    weak.clone(),
                    &l1,
                    tier,
                    options,
                )))),
                closed_metrics: std::sync::OnceLock::new(),
            }),
            warned: Mutex::default(),
            closed: AtomicBool::new(false),
            locks: lock::LocalLocks::default(),
        });
        Self { inner }
    }

    /// Wires `tier` to `l1`: its errors counted per namespace, its notices applied. The
    /// listener holds a weak handle: the backend (which may outlive this cache) must not
    /// keep the L1 and its values alive.
    fn attach(
        weak: Weak<Inner<V>>,
        l1: &Cache<Versioned<V>>,
        tier: SharedTier,
        options: FleetOptions,
    ) -> Live {
        let errors_of = l1.clone();
        let fleet = tier
            .fleet(options)
            .counting_errors(Arc::new(move |key: &str| {
                herdless::driver::record_backend_error(&errors_of, key);
            }));
        tier.backend().listen(Arc::new(move |n: Notice<'_>| {
            if let Some(inner) = weak.upgrade() {
                apply_notice(&inner.l1, n);
            }
        }));
        Live {
            fleet,
            tier,
            pid: std::process::id(),
        }
    }

    /// The connection to the shared tier, made again first in a child of `fork` (the
    /// parent's threads and sockets are not there; its copy of the L1 is kept, as the
    /// parent's values were valid), unless the engine was closed.
    fn live(&self) -> Option<Arc<Live>> {
        let shared = self.inner.shared.as_ref()?;
        let live = shared
            .live
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()?;
        let pid = std::process::id();
        if live.pid == pid || self.is_closed() {
            return Some(live);
        }
        let mut slot = shared.live.write().unwrap_or_else(|e| e.into_inner());
        let held = slot.as_ref()?;
        if held.pid != pid
            && let Some(tier) = shared
                .address
                .as_ref()
                .and_then(|(a, prefix)| a.connect(prefix.as_deref()).ok())
        {
            let weak = Arc::downgrade(&self.inner);
            *slot = Some(Arc::new(Self::attach(
                weak,
                &self.inner.l1,
                tier,
                shared.options,
            )));
        }
        slot.clone()
    }

    /// The in-memory tier.
    pub fn l1(&self) -> &Cache<Versioned<V>> {
        &self.inner.l1
    }

    /// The shared tier, if any.
    pub fn tier(&self) -> Option<SharedTier> {
        self.live().map(|l| l.tier.clone())
    }

    /// The fleet protocol, if there is a shared tier.
    pub fn fleet(&self) -> Option<Fleet> {
        self.live().map(|l| l.fleet.clone())
    }

    /// Whether the L1 may keep copies of what the shared tier holds: always without a tier,
    /// never over one that tells no process of the others' changes (memcached: every call
    /// reads the tier, and the callers of one key share that read or load).
    pub fn holds_copies(&self) -> bool {
        self.live().is_none_or(|l| l.fleet.holds_copies())
    }

    /// The shared tier's counters (all zero without one).
    pub fn tier_metrics(&self) -> RedisMetrics {
        self.shared_metrics().unwrap_or_default()
    }

    /// The shared tier's counters, if there is one (once closed, as the close left them).
    pub fn shared_metrics(&self) -> Option<RedisMetrics> {
        match self.tier() {
            Some(t) => Some(t.metrics()),
            None => self.inner.shared.as_ref()?.closed_metrics.get().cloned(),
        }
    }

    /// Both metric sets in Prometheus text format: the L1's (per namespace, with the
    /// detector's alerts gauge), then the shared tier's, if any.
    pub fn prometheus(&self) -> String {
        let mut text = self.inner.l1.prometheus();
        if let Some(m) = self.shared_metrics() {
            text += &m.to_prometheus();
        }
        text
    }

    /// The first step of a caller that leads `key` in this process (a
    /// [`Lookup::Lead`](herdless::Lookup::Lead)). `ttl` replaces the cache's TTL for the
    /// value this load stores.
    pub fn lead(&self, guard: LoadGuard<Versioned<V>>, ttl: Option<Duration>) -> Step<V> {
        if let Err(e) = self.check_ttl(ttl) {
            return Step::Done(step::unwrap(guard.fail(e)));
        }
        self.ask(guard, ttl, 0, (false, false))
    }

    /// A per-call TTL the shared tier can honour.
    pub(crate) fn check_ttl(&self, ttl: Option<Duration>) -> Result<(), Error> {
        if ttl.is_some_and(|t| t.is_zero()) {
            return Err(Error::ZeroTtl);
        }
        match self.inner.shared {
            Some(_) => Lifetimes::check_ttl(ttl),
            None => Ok(()),
        }
    }

    /// The first step of a refresh that a hit chose this caller to run in the background
    /// (stale-while-revalidate or XFetch); `have` is the version of the value being served
    /// (its [`Versioned::version`]). Nobody awaits it: the driver runs it detached and drops
    /// its answer. `None`: the origin budget is spent, the refresh is skipped (a refresh
    /// never queues for the origin) and a later read tries again.
    pub fn refresh(
        &self,
        mut guard: LoadGuard<Versioned<V>>,
        have: u64,
        ttl: Option<Duration>,
    ) -> Option<Step<V>> {
        if !guard.try_begin() {
            guard.abandon();
            return None;
        }
        Some(self.ask(guard, ttl, have, (true, false)))
    }

    /// The first step of a refresh run in the foreground (a warm-up of a stale key): as
    /// [`lead`](Self::lead), but only a shared entry newer than `have` (the version being
    /// served) ends it without a load.
    pub fn renew(
        &self,
        guard: LoadGuard<Versioned<V>>,
        have: u64,
        ttl: Option<Duration>,
    ) -> Step<V> {
        if let Err(e) = self.check_ttl(ttl) {
            return Step::Done(step::unwrap(guard.fail(e)));
        }
        self.ask(guard, ttl, have, (false, false))
    }

    /// A key of a batch asked of the fleet alone (another process was loading it).
    pub(crate) fn ask_in_batch(
        &self,
        guard: LoadGuard<Versioned<V>>,
        have: u64,
        background: bool,
    ) -> Step<V> {
        self.ask(guard, None, have, (background, true))
    }

    fn ask(
        &self,
        guard: LoadGuard<Versioned<V>>,
        ttl: Option<Duration>,
        have: u64,
        // Whether this runs in the background, and whether it is a key of a batch.
        (background, batch): (bool, bool),
    ) -> Step<V> {
        if self.is_closed() {
            return Step::Done(step::unwrap(guard.fail(Error::Closed)));
        }
        let Some(live) = self.live() else {
            return Load::local(self.clone(), guard, ttl, background).start(batch);
        };
        let mut guard = guard;
        if !live.fleet.holds_copies() {
            guard.serve_only();
        }
        // The fleet wait ends where this caller's wait ends: `wait_timeout` after its first
        // arrival, on the L1's clock, carried over to the fleet's wall clock.
        let clock = self.inner.l1.clock();
        let left = guard.wait_deadline().saturating_sub(clock.now());
        let until = Instant::now() + left.min(Duration::from_secs(86_400 * 365));
        let fleet = live.fleet.clone();
        let key = guard.key().to_owned();
        let this = self.clone();
        Step::Tier(Pending::new(async move {
            let outcome = fleet.lead_until(&key, have, until).await;
            match batch {
                true => Reply::asked_in_batch(this, guard, background, outcome),
                false => Reply::asked(this, guard, ttl, background, outcome),
            }
        }))
    }

    pub(crate) fn shared_tier(&self) -> Option<&Lifetimes> {
        self.inner.shared.as_ref().map(|s| &s.life)
    }

    /// Counts unreadable bytes under a key (another codec's, or corrupt).
    pub(crate) fn count_unreadable(&self) {
        if let Some(t) = self.tier() {
            crate::metrics::inc(&t.counters().corrupt_entries);
        }
    }

    /// Counts an unshareable value and tells the user, once per namespace.
    pub(crate) fn unshareable(&self, key: &str, error: &crate::CodecError, host: &dyn Host<V>) {
        if let Some(t) = self.tier() {
            crate::metrics::inc(&t.counters().unshareable_values);
        }
        let first = {
            let mut warned = self.inner.warned.lock().unwrap_or_else(|e| e.into_inner());
            warned.len() < MAX_WARNED_NAMESPACES && warned.insert(namespace_of(key).to_owned())
        };
        if first {
            host.warn(&Warning::Unshareable { key, error });
        }
    }

    /// The error for a load past its hard timeout.
    pub(crate) fn load_timeout(&self) -> Error {
        Error::LoadTimeout {
            after: self.inner.l1.options().hard_timeout.unwrap_or_default(),
        }
    }
}

/// How long a shared entry is still fresh, measured now.
pub(crate) fn fresh_left(fresh_until_ms: u64) -> Duration {
    Duration::from_millis(fresh_until_ms.saturating_sub(crate::wall::now_ms()))
}
