//! The engine: one sharded table holding both the entries and the flight records, so that
//! deciding hit / stale / lead / wait, storing a load's result, and `set`/`invalidate` are
//! each atomic for a key. The hit path takes only the shard's read lock.

use alloc::boxed::Box;
use alloc::sync::Arc as StdArc;
use alloc::vec::Vec;
use core::hash::BuildHasher;
use core::time::Duration;

use hashbrown::HashTable;

use crate::budget::{Budget, OriginPermit};
use crate::clock::Clock;
use crate::config::{Builder, Config};
use crate::entry::Entry;
use crate::epoch::{Namespace, Namespaces};
use crate::error::{ConfigError, Error};
use crate::expiry::{Phase, Timing, nanos};
use crate::flight::{self, Flight, Outcome};
use crate::key::namespace_of;
use crate::lookup::{Hit, HitState, LoadGuard, Lookup, Retry, Waiter};
use crate::metrics::MetricsSnapshot;
use crate::rng::SharedRng;
use crate::spawn::Spawn;
use crate::store::Store;
use crate::sync::{Arc, AtomicU64, AtomicUsize, Ordering, RwLock};
use crate::{jitter, xfetch};

pub(crate) struct Shard<V> {
    pub(crate) store: Store<V>,
    flights: HashTable<Arc<Flight<V>>>,
}

impl<V> Shard<V> {
    fn flight(&self, hash: u64, key: &str) -> Option<&Arc<Flight<V>>> {
        self.flights.find(hash, |f| &*f.key == key)
    }

    /// Removes `flight`'s record if it is still the key's current one.
    fn remove_flight(&mut self, flight: &Flight<V>) -> bool {
        match self.flights.find_entry(flight.hash, |f| f.id == flight.id) {
            Ok(e) => {
                e.remove();
                true
            }
            Err(_) => false,
        }
    }
}

pub(crate) struct Inner<V> {
    pub(crate) cfg: Config<V>,
    shards: Box<[RwLock<Shard<V>>]>,
    /// Shards are picked by hash bits 32 and up, clear of the bits hashbrown uses inside a
    /// shard's table (the low bits place a key, the top 7 are its tag): sharding by the top
    /// bits made every key of a shard share part of its tag, so lookups compared more keys.
    shard_mask: usize,
    /// Capacity of each shard: also the most one entry may weigh.
    shard_capacity: u64,
    hasher: hashbrown::DefaultHashBuilder,
    pub(crate) namespaces: Namespaces,
    pub(crate) clock: StdArc<dyn Clock>,
    /// The clock is the default [`SystemClock`](crate::SystemClock): the hit path reads it
    /// directly instead of through the trait object.
    #[cfg_attr(not(feature = "std"), allow(dead_code))]
    system_clock: bool,
    rng: SharedRng,
    pub(crate) budget: Option<Arc<Budget>>,
    flights: AtomicUsize,
    next_id: AtomicU64,
    pub(crate) spawner: Option<StdArc<dyn Spawn>>,
    /// The stampede detector, unless switched off.
    pub(crate) detector: Option<crate::detector::Detector>,
    /// The hot-key tracker, unless switched off.
    pub(crate) hot: Option<crate::hotkeys::HotKeys>,
}

/// A stampede-proof cache of `V` values under string keys.
///
/// Cloning is cheap and shares the cache. See the [crate documentation](crate) for how the
/// state machine ([`Cache::lookup`]) and the convenience APIs fit together.
pub struct Cache<V> {
    pub(crate) inner: Arc<Inner<V>>,
}

impl<V> Clone for Cache<V> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<V> core::fmt::Debug for Cache<V> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Cache").finish_non_exhaustive()
    }
}

impl<V: Clone + Send + Sync + 'static> Builder<V> {
    /// Checks every option and builds the cache.
    pub fn build(self) -> Result<Cache<V>, ConfigError> {
        self.validate()?;
        let system_clock = cfg!(feature = "std") && self.clock.is_none();
        #[cfg(feature = "std")]
        let clock = self
            .clock
            .unwrap_or_else(|| StdArc::new(crate::SystemClock));
        #[cfg(not(feature = "std"))]
        let clock = self.clock.ok_or(ConfigError::Inconsistent {
            reason: "without the `std` feature a clock must be given",
        })?;
        #[cfg(feature = "std")]
        let spawner = self
            .spawner
            .or_else(|| Some(StdArc::new(crate::ThreadSpawn) as _));
        #[cfg(not(feature = "std"))]
        let spawner = self.spawner;
        let wanted = match self.cfg.shards {
            0 => default_shards(),
            n => n,
        };
        // Each shard holds at least one entry, and the shards' capacities add up to the
        // capacity exactly (the first `extra` shards take one unit more), never beyond it.
        let capacity = self.cfg.capacity;
        let most = 1u64 << (63 - capacity.leading_zeros());
        let shards = (wanted.min(1 << 16).next_power_of_two() as u64).min(most) as usize;
        let (per_shard, extra) = (capacity / shards as u64, capacity % shards as u64);
        let cfg = self.cfg;
        let detector = cfg.detector.enabled.then(|| {
            crate::detector::Detector::new(
                cfg.detector.clone(),
                crate::detector::Setup {
                    ttl: cfg.ttl,
                    negative_ttl: cfg.negative_ttl,
                    grace: !cfg.grace.is_zero(),
                    xfetch: cfg.beta > 0.0,
                    budget: cfg.origin_budget.is_some(),
                },
            )
        });
        let hot = (cfg.hot_keys > 0)
            .then(|| crate::hotkeys::HotKeys::new(cfg.hot_keys, cfg.hot_key_sample));
        Ok(Cache {
            inner: Arc::new(Inner {
                shards: (0..shards as u64)
                    .map(|i| {
                        RwLock::new(Shard {
                            store: Store::new(per_shard + u64::from(i < extra)),
                            flights: HashTable::new(),
                        })
                    })
                    .collect(),
                shard_mask: shards - 1,
                shard_capacity: per_shard,
                hasher: Default::default(),
                namespaces: Namespaces::new(cfg.max_namespaces),
                clock,
                system_clock,
                rng: self
                    .rng
                    .unwrap_or_else(|| SharedRng::new(crate::default_rng())),
                budget: cfg.origin_budget.map(|n| Arc::new(Budget::new(n))),
                flights: AtomicUsize::new(0),
                next_id: AtomicU64::new(1),
                spawner,
                detector,
                hot,
                cfg,
            }),
        })
    }
}

fn default_shards() -> usize {
    #[cfg(feature = "std")]
    {
        4 * std::thread::available_parallelism().map_or(4, |n| n.get())
    }
    #[cfg(not(feature = "std"))]
    {
        16
    }
}

#[cfg(feature = "std")]
impl<V: Clone + Send + Sync + 'static> Default for Cache<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V: Clone + Send + Sync + 'static> Cache<V> {
    /// A builder with the default options.
    pub fn builder() -> Builder<V> {
        Builder::default()
    }

    /// A cache with the default options.
    #[cfg(feature = "std")]
    pub fn new() -> Self {
        Self::builder()
            .build()
            .expect("the default options are valid")
    }

    /// The options the cache was built with.
    pub fn options(&self) -> crate::Options {
        self.inner.cfg.options()
    }

    /// The cache's clock.
    pub fn clock(&self) -> &dyn Clock {
        &*self.inner.clock
    }

    fn check_key(&self, key: &str) -> Result<(), Error> {
        if key.is_empty() {
            return Err(Error::EmptyKey);
        }
        let max = self.inner.cfg.max_key_len;
        if key.len() > max {
            return Err(Error::KeyTooLong {
                len: key.len(),
                max,
            });
        }
        Ok(())
    }

    pub(crate) fn hash(&self, key: &str) -> u64 {
        self.inner.hasher.hash_one(key)
    }

    #[inline]
    fn shard_index(&self, hash: u64) -> usize {
        (hash >> 32) as usize & self.inner.shard_mask
    }

    /// The cheap clock reading of the hit path ([`Clock::now_fast`]), in nanoseconds.
    #[inline]
    fn now_fast(&self) -> u64 {
        #[cfg(feature = "std")]
        if self.inner.system_clock {
            return crate::SystemClock::now_fast_nanos();
        }
        nanos(self.inner.clock.now_fast())
    }

    #[inline]
    fn shard(&self, hash: u64) -> &RwLock<Shard<V>> {
        &self.inner.shards[self.shard_index(hash)]
    }

    /// Decides what a caller of `key` does now: take a value ([`Lookup::Hit`], possibly with
    /// a background refresh to run), load it ([`Lookup::Lead`]) or wait for the caller who
    /// does ([`Lookup::Wait`]). This is the state machine every API and binding drives.
    pub fn lookup(&self, key: &str) -> Result<Lookup<V>, Error> {
        self.check_key(key)?;
        let hash = self.inner.hasher.hash_one(key);
        // The cheap clock errs late, so a value it calls fresh is fresh.
        let n = self.now_fast();
        let mut early = false;
        {
            let shard = self.shard(hash).read();
            if let Some(node) = shard.store.get(hash, key) {
                let e = &node.entry;
                if e.phase(n) == Phase::Fresh {
                    // Most reads are far from expiry: one compare rules XFetch out.
                    early = n >= e.quiet_until && self.xfetch_fires(e, n);
                    if !early {
                        node.touch();
                        self.count_hit(e, hash, key);
                        let value = e.value.clone();
                        return Ok(Lookup::Hit(Hit {
                            value,
                            state: HitState::Fresh,
                            refresh: None,
                        }));
                    }
                }
            }
        }
        self.lookup_slow(key, hash, self.inner.clock.now(), early, None)
    }

    /// [`lookup`](Self::lookup) after a [`Waited::Retry`](crate::Waited::Retry): the same
    /// decision, with the caller's `wait_timeout` still counted from its first arrival.
    pub fn lookup_again(&self, key: &str, retry: Retry) -> Result<Lookup<V>, Error> {
        self.check_key(key)?;
        let hash = self.inner.hasher.hash_one(key);
        self.lookup_slow(
            key,
            hash,
            self.inner.clock.now(),
            false,
            Some(retry.arrived),
        )
    }

    /// A value that is fresh or within grace, without loading or refreshing anything.
    /// A cached absence reads as `None`, like a miss; so does an empty or too-long key (the
    /// calls that can fail report those as errors).
    pub fn get(&self, key: &str) -> Option<V> {
        self.get_with(key, V::clone)
    }

    /// [`get`](Self::get) without cloning the value: `read` sees it in place and its answer
    /// is returned. `read` runs under the shard's read lock, so it must be quick and must
    /// not call into this cache.
    pub fn get_with<R>(&self, key: &str, read: impl FnOnce(&V) -> R) -> Option<R> {
        self.check_key(key).ok()?;
        let hash = self.inner.hasher.hash_one(key);
        let fast = self.now_fast();
        let shard = self.shard(hash).read();
        let Some(node) = shard.store.get(hash, key) else {
            drop(shard);
            let c = &self.inner.namespaces.get(namespace_of(key)).metrics.c;
            c.misses.fetch_add(1, Ordering::Relaxed);
            c.cold_misses.fetch_add(1, Ordering::Relaxed);
            self.observe_miss(key, hash, fast);
            return None;
        };
        let e = &node.entry;
        let phase = match e.phase(fast) {
            Phase::Fresh => Phase::Fresh,
            _ => e.phase(nanos(self.inner.clock.now())),
        };
        match phase {
            Phase::Fresh => {
                node.touch();
                self.count_hit(e, hash, key);
                e.value.as_ref().map(read)
            }
            Phase::Stale if e.value.is_some() => {
                node.touch();
                let seen = e.ns.metrics.c.stale_served.add(self.shard_index(hash));
                if let Some(hot) = &self.inner.hot {
                    hot.hit(seen, key, hash);
                }
                e.value.as_ref().map(read)
            }
            _ => {
                let c = &e.ns.metrics.c;
                c.misses.fetch_add(1, Ordering::Relaxed);
                c.expired_misses.fetch_add(1, Ordering::Relaxed);
                drop(shard);
                self.observe_miss(key, hash, fast);
                None
            }
        }
    }

    #[inline]
    fn count_hit(&self, e: &Entry<V>, hash: u64, key: &str) {
        let c = &e.ns.metrics.c;
        let stripe = self.shard_index(hash);
        let seen = if e.value.is_some() {
            c.hits.add(stripe)
        } else {
            c.negative_hits.add(stripe)
        };
        // The hot-key tracker samples on the count just taken: no extra atomic per hit.
        if let Some(hot) = &self.inner.hot {
            hot.hit(seen, key, hash);
        }
    }

    /// A miss seen by `get`: the hot-key tracker and the detector's tick.
    #[cold]
    fn observe_miss(&self, key: &str, hash: u64, now: u64) {
        if let Some(hot) = &self.inner.hot {
            hot.access(key, hash, true);
        }
        self.detect(now);
    }

    /// XFetch: should this read of a fresh entry refresh it early?
    #[inline]
    fn xfetch_fires(&self, e: &Entry<V>, now: u64) -> bool {
        let beta = self.inner.cfg.beta;
        let gap = Duration::from_nanos(e.timing.fresh_until - now);
        let delta = Duration::from_nanos(e.load_nanos);
        if e.value.is_none() || now < e.backoff_until || xfetch::out_of_reach(gap, delta, beta) {
            return false;
        }
        let u = 1.0 - self.inner.rng.unit();
        xfetch::should_refresh(gap, delta, beta, u)
    }

    fn lookup_slow(
        &self,
        key: &str,
        hash: u64,
        now: Duration,
        early: bool,
        arrived: Option<Duration>,
    ) -> Result<Lookup<V>, Error> {
        let n = nanos(now);
        let arrived = arrived.unwrap_or(now);
        self.detect(n);
        let stripe = self.shard_index(hash);
        let mut timed_out = None;
        let mut dead = None;
        let mut shard = self.shard(hash).write();
        // A load past its hard timeout is given up here too, so a hung loader never holds
        // a key even when no waiter is left to notice. A load that began before a `set`,
        // `invalidate` or `bump` must not answer callers who came after it: it leaves the
        // table (its own waiters still get its result) and this caller loads anew.
        if let Some(f) = shard.flight(hash, key) {
            let hung = f.hard_deadline.is_some_and(|d| now >= d);
            // A flight inherited through `fork` has no leader here: the key loads anew.
            let outdated = f.is_superseded() || f.epoch != f.ns.epoch() || f.orphaned();
            if hung || outdated {
                let f = f.clone();
                shard.remove_flight(&f);
                self.inner.flights.fetch_sub(1, Ordering::Relaxed);
                if hung {
                    // Back off as any failed load does: serve the fail-safe value, if
                    // any, rather than sending the next caller straight to a hung origin.
                    let until = n.saturating_add(nanos(self.inner.cfg.failsafe_backoff));
                    if let Some(node) = shard.store.get_mut(hash, key) {
                        node.entry.backoff_until = until;
                    }
                }
                timed_out = hung.then_some(f);
            }
        }
        let phase = shard.store.get(hash, key).map(|node| node.entry.phase(n));
        if phase == Some(Phase::Dead) {
            dead = shard.store.remove(hash, key);
        }
        let flight = shard.flight(hash, key).cloned();
        let result = match phase {
            Some(p @ (Phase::Fresh | Phase::Stale)) => {
                let node = shard
                    .store
                    .get(hash, key)
                    .expect("phase came from this node");
                node.touch();
                let (value, ns) = (node.entry.value.clone(), node.entry.ns.clone());
                let c = &ns.metrics.c;
                let wants_refresh = flight.is_none()
                    && n >= node.entry.backoff_until
                    && if p == Phase::Fresh { early } else { true };
                let refresh = if wants_refresh {
                    self.start_flight(&mut shard, key, hash, ns.clone(), (now, now), None)
                        .ok()
                } else {
                    None
                };
                if refresh.is_some() {
                    c.refreshes.fetch_add(1, Ordering::Relaxed);
                    if p == Phase::Fresh {
                        c.early_refreshes.fetch_add(1, Ordering::Relaxed);
                    }
                }
                let state = if p == Phase::Fresh {
                    if value.is_some() {
                        c.hits.add(stripe);
                    } else {
                        c.negative_hits.add(stripe);
                    }
                    HitState::Fresh
                } else {
                    c.stale_served.add(stripe);
                    HitState::Stale
                };
                Lookup::Hit(Hit {
                    value,
                    state,
                    refresh,
                })
            }
            Some(Phase::FailSafe)
                if n < shard
                    .store
                    .get(hash, key)
                    .map_or(0, |x| x.entry.backoff_until) =>
            {
                let node = shard
                    .store
                    .get(hash, key)
                    .expect("phase came from this node");
                node.entry
                    .ns
                    .metrics
                    .c
                    .failsafe_served
                    .fetch_add(1, Ordering::Relaxed);
                Lookup::Hit(Hit {
                    value: node.entry.value.clone(),
                    state: HitState::FailSafe,
                    refresh: None,
                })
            }
            _ => {
                let (ns, fallback) = match (phase, shard.store.get(hash, key)) {
                    // The fallback keeps its retention deadline: it is never handed out
                    // past it, however long the load or the wait lasts.
                    (Some(Phase::FailSafe), Some(node)) => (
                        node.entry.ns.clone(),
                        node.entry
                            .value
                            .clone()
                            .map(|v| (v, Duration::from_nanos(node.entry.timing.retain_until))),
                    ),
                    _ => (self.inner.namespaces.get(namespace_of(key)), None),
                };
                let c = &ns.metrics.c;
                c.misses.fetch_add(1, Ordering::Relaxed);
                if phase.is_some() {
                    c.expired_misses.fetch_add(1, Ordering::Relaxed);
                } else if flight.is_none() {
                    c.cold_misses.fetch_add(1, Ordering::Relaxed);
                }
                match flight {
                    Some(f) => {
                        c.coalesced_waiters.fetch_add(1, Ordering::Relaxed);
                        c.lock_contended.fetch_add(1, Ordering::Relaxed);
                        Lookup::Wait(Waiter::new(self.clone(), f, fallback, arrived))
                    }
                    None => {
                        let guard = self.start_flight(
                            &mut shard,
                            key,
                            hash,
                            ns.clone(),
                            (now, arrived),
                            fallback,
                        )?;
                        c.lock_acquired.fetch_add(1, Ordering::Relaxed);
                        Lookup::Lead(guard)
                    }
                }
            }
        };
        drop(shard);
        if let Some(hot) = &self.inner.hot {
            hot.access(key, hash, !matches!(result, Lookup::Hit(_)));
        }
        if let Some(f) = timed_out {
            self.time_out(&f);
        }
        drop(dead);
        Ok(result)
    }

    fn start_flight(
        &self,
        shard: &mut Shard<V>,
        key: &str,
        hash: u64,
        ns: Arc<Namespace>,
        // The clock now, and when the leading caller first arrived (before any hand-over).
        (now, arrived): (Duration, Duration),
        fallback: Option<(V, Duration)>,
    ) -> Result<LoadGuard<V>, Error> {
        let max = self.inner.cfg.max_flights;
        if self.inner.flights.load(Ordering::Relaxed) >= max {
            return Err(Error::TooManyFlights { max });
        }
        self.inner.flights.fetch_add(1, Ordering::Relaxed);
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let cfg = &self.inner.cfg;
        let flight = Arc::new(Flight::new(
            id,
            key,
            hash,
            ns,
            now,
            cfg.soft_timeout,
            cfg.hard_timeout,
        ));
        shard
            .flights
            .insert_unique(hash, flight.clone(), |f| f.hash);
        Ok(LoadGuard::new(self.clone(), flight, fallback, arrived))
    }

    /// Gives up a load past its hard timeout: its waiters get the timeout (or fail-safe),
    /// and the key backs off as after any failed load, whoever noticed the timeout.
    pub(crate) fn time_out(&self, flight: &Arc<Flight<V>>) {
        let after = self.inner.cfg.hard_timeout.unwrap_or_default();
        let outcome = Outcome::Failed(Error::LoadTimeout { after });
        self.finish(
            flight,
            outcome,
            Duration::ZERO,
            None,
            self.inner.clock.now(),
        );
    }

    /// Ends a flight: stores a loaded result when nothing newer happened meanwhile (no
    /// `set`, `invalidate` or `bump` since it began, and it was not timed out), records a
    /// failure for fail-safe backoff, then wakes the waiters. `now` is the caller's reading
    /// of the clock at the end of the load (one read serves both the duration and this).
    pub(crate) fn finish(
        &self,
        flight: &Arc<Flight<V>>,
        outcome: Outcome<V>,
        took: Duration,
        ttl: Option<Duration>,
        now: Duration,
    ) {
        let n = nanos(now);
        let mut dropped = Vec::new();
        let wakers = {
            let mut shard = self.shard(flight.hash).write();
            let current = shard.remove_flight(flight);
            if current {
                self.inner.flights.fetch_sub(1, Ordering::Relaxed);
            }
            let storable = current && !flight.is_superseded() && flight.ns.epoch() == flight.epoch;
            let entry = match &outcome {
                Outcome::Loaded(v) if storable => Some(self.make_entry(
                    v.clone(),
                    flight.ns.clone(),
                    flight.epoch,
                    nanos(took),
                    n,
                    ttl,
                )),
                _ => None,
            };
            let failed = matches!(outcome, Outcome::Failed(_));
            let timed_out = matches!(outcome, Outcome::Failed(Error::LoadTimeout { .. }));
            // The outcome is settled under the shard lock, before anything is stored: a
            // hard timeout that ended the flight first wins, and then nothing is stored, so
            // no waiter is told "timed out" about a value that was cached.
            let wakers = flight.settle(outcome);
            // Counted once per load, by whichever of the leader and the waiters ended it.
            if wakers.is_some() && timed_out {
                flight
                    .ns
                    .metrics
                    .c
                    .load_timeouts
                    .fetch_add(1, Ordering::Relaxed);
            }
            if let Some(entry) = entry {
                match self.weigh(&flight.key, &entry) {
                    Ok(weight) if wakers.is_some() => {
                        dropped.extend(shard.store.remove(flight.hash, &flight.key));
                        let before = dropped.len();
                        shard.store.insert(
                            flight.hash,
                            &flight.key,
                            entry,
                            weight,
                            n,
                            &mut dropped,
                        );
                        self.count_evictions(&dropped[before..]);
                    }
                    // Not stored: dropped with the rest, outside the lock.
                    _ => dropped.push(entry),
                }
            } else if wakers.is_some() && failed && storable {
                // Back off: the stale value keeps being served without hammering a
                // failing origin with one refresh per read.
                if let Some(node) = shard.store.get_mut(flight.hash, &flight.key) {
                    node.entry.backoff_until =
                        n.saturating_add(nanos(self.inner.cfg.failsafe_backoff));
                }
            }
            wakers
        };
        drop(dropped);
        if let Some(wakers) = wakers {
            flight::wake_all(wakers);
        }
        self.detect(n);
    }

    fn count_evictions(&self, evicted: &[Entry<V>]) {
        for e in evicted {
            e.ns.metrics.c.evictions.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn weigh(&self, key: &str, entry: &Entry<V>) -> Result<u64, Error> {
        let cfg = &self.inner.cfg;
        let weight = match (cfg.entry_overhead, &cfg.weigher, &entry.value) {
            // A byte bound: the key, the value and herdless's own bytes per entry.
            (Some(overhead), w, v) => {
                let value = match (w, v) {
                    (Some(w), Some(v)) => w(key, v),
                    _ => 0,
                };
                overhead
                    .saturating_add(key.len() as u64)
                    .saturating_add(value)
            }
            (None, Some(w), Some(v)) => w(key, v).max(1),
            _ => 1,
        };
        let max = self.inner.shard_capacity;
        if weight > max {
            return Err(Error::ValueTooLarge { weight, max });
        }
        Ok(weight)
    }

    fn make_entry(
        &self,
        value: Option<V>,
        ns: Arc<Namespace>,
        epoch: u64,
        load_nanos: u64,
        now: u64,
        ttl: Option<Duration>,
    ) -> Entry<V> {
        let cfg = &self.inner.cfg;
        let timing = if value.is_some() {
            let ttl = jitter::jittered(ttl.unwrap_or(cfg.ttl), cfg.jitter, self.inner.rng.unit());
            Timing::new(now, ttl, cfg.grace, cfg.max_stale)
        } else {
            // Absences are neither served stale nor kept for fail-safe: they are cheap to
            // re-check and a real write must be able to replace them quickly.
            let ttl = jitter::jittered(cfg.negative_ttl, cfg.jitter, self.inner.rng.unit());
            Timing::new(now, ttl, Duration::ZERO, None)
        };
        let quiet_until = match value {
            Some(_) => timing
                .fresh_until
                .saturating_sub(xfetch::reach_nanos(load_nanos, cfg.beta)),
            None => timing.fresh_until,
        };
        Entry {
            value,
            ns,
            epoch,
            timing,
            quiet_until,
            load_nanos,
            backoff_until: 0,
        }
    }

    fn write(&self, key: &str, value: Option<V>, ttl: Option<Duration>) -> Result<(), Error> {
        self.check_key(key)?;
        if ttl == Some(Duration::ZERO) {
            return Err(Error::ZeroTtl);
        }
        let hash = self.inner.hasher.hash_one(key);
        let ns = self.inner.namespaces.get(namespace_of(key));
        let n = nanos(self.inner.clock.now());
        let mut dropped = Vec::new();
        {
            let mut shard = self.shard(hash).write();
            if let Some(f) = shard.flight(hash, key) {
                f.supersede();
            }
            // Keep the measured load time so XFetch still knows how expensive the key is.
            let load_nanos = shard.store.get(hash, key).map_or(0, |o| o.entry.load_nanos);
            let epoch = ns.epoch();
            let entry = self.make_entry(value, ns, epoch, load_nanos, n, ttl);
            let weight = self.weigh(key, &entry)?;
            dropped.extend(shard.store.remove(hash, key));
            let before = dropped.len();
            shard
                .store
                .insert(hash, key, entry, weight, n, &mut dropped);
            self.count_evictions(&dropped[before..]);
        }
        drop(dropped);
        self.detect(n);
        Ok(())
    }

    /// Stores `value` under `key` now. A load of `key` already running will not overwrite it.
    pub fn set(&self, key: &str, value: V) -> Result<(), Error> {
        self.write(key, Some(value), None)
    }

    /// [`set`](Self::set) with its own TTL instead of the cache's (jitter still applies).
    pub fn set_with_ttl(&self, key: &str, value: V, ttl: Duration) -> Result<(), Error> {
        self.write(key, Some(value), Some(ttl))
    }

    /// Caches "absent" under `key` for `negative_ttl`.
    pub fn set_absent(&self, key: &str) -> Result<(), Error> {
        self.write(key, None, None)
    }

    /// Removes `key`'s entry. A load of `key` already running will not write back its
    /// (possibly older) result. Returns whether an entry was removed.
    pub fn invalidate(&self, key: &str) -> Result<bool, Error> {
        self.check_key(key)?;
        let hash = self.inner.hasher.hash_one(key);
        let removed = {
            let mut shard = self.shard(hash).write();
            if let Some(f) = shard.flight(hash, key) {
                f.supersede();
            }
            shard.store.remove(hash, key)
        };
        Ok(removed.is_some())
    }

    /// Drops every entry (O(entries)), and keeps loads already running from storing their
    /// results. For a process that lost track of the shared tier; to invalidate a namespace,
    /// [`bump`](Self::bump) is O(1).
    pub fn clear(&self) {
        for shard in self.inner.shards.iter() {
            let old = {
                let mut shard = shard.write();
                for f in shard.flights.iter() {
                    f.supersede();
                }
                shard.store.take()
            };
            drop(old);
        }
    }

    /// Drops every entry whose value (`None`: a cached absence) `keep` refuses, and marks
    /// the loads in progress as superseded (they are not stored), as [`clear`](Self::clear)
    /// does for every entry. A scan: for rare events (see [`crate::driver::retain`]).
    pub(crate) fn retain(&self, keep: impl Fn(Option<&V>) -> bool) {
        for shard in self.inner.shards.iter() {
            let dropped = {
                let mut shard = shard.write();
                for f in shard.flights.iter() {
                    f.supersede();
                }
                shard.store.retain(&keep)
            };
            drop(dropped);
        }
    }

    /// Invalidates every key of `namespace` in O(1) by moving to a new epoch; returns it.
    /// Loads that began under the old epoch are not stored.
    ///
    /// A namespace longer than `max_key_len` can hold no key, so there is nothing to
    /// invalidate: it is not registered (names must not grow memory) and 0 is returned.
    pub fn bump(&self, namespace: &str) -> u64 {
        if namespace.len() > self.inner.cfg.max_key_len {
            return 0;
        }
        self.inner.namespaces.bump(namespace)
    }

    /// Counters, histograms and sizes at this moment.
    pub fn metrics(&self) -> MetricsSnapshot {
        let (mut entries, mut weight) = (0, 0);
        for s in self.inner.shards.iter() {
            let s = s.read();
            entries += s.store.len() as u64;
            weight += s.store.weight();
        }
        MetricsSnapshot {
            namespaces: self.inner.namespaces.snapshot(),
            entries,
            weight,
            loads_in_flight: self.inner.flights.load(Ordering::Relaxed) as u64,
        }
    }

    /// [`metrics`](Self::metrics) in Prometheus text exposition format, then the gauge
    /// `herdless_alerts_active{namespace, kind, cause}` of the [`alerts`](Self::alerts).
    pub fn prometheus(&self) -> alloc::string::String {
        self.metrics().to_prometheus() + &crate::metrics::prometheus::alerts(&self.alerts())
    }

    /// Keys currently loading (flight records), for tests and leak checks.
    pub fn flights_in_progress(&self) -> usize {
        self.inner.flights.load(Ordering::Relaxed)
    }

    /// Loader calls running now under the origin budget (0 without a budget).
    pub fn budget_in_use(&self) -> usize {
        self.inner.budget.as_ref().map_or(0, |b| b.in_use())
    }

    /// A share of the origin budget for a load that runs outside a [`LoadGuard`], such as
    /// a two-tier driver's detached refresh; `None` while the budget is spent (a refresh
    /// never queues for the origin: the caller skips it and a later read tries again).
    /// Without a budget, always granted.
    pub fn try_origin_permit(&self) -> Option<OriginPermit> {
        match &self.inner.budget {
            Some(b) => Budget::try_acquire(b).map(|p| OriginPermit::new(Some(p))),
            None => Some(OriginPermit::new(None)),
        }
    }

    /// Counts an error of the shared tier (e.g. Redis) against `key`'s namespace, in the
    /// `backend_errors` metric. For two-tier drivers, which talk to the tier themselves.
    pub fn record_backend_error(&self, key: &str) {
        self.inner
            .namespaces
            .get(namespace_of(key))
            .metrics
            .c
            .backend_errors
            .fetch_add(1, Ordering::Relaxed);
    }
}
