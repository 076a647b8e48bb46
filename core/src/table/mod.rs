//! The mechanism under every API: one sharded table holding both the entries and the flight
//! records, so that deciding hit / stale / lead / wait, storing a load's result, and
//! `set`/`invalidate` are each atomic for a key. The hit path takes only the shard's read
//! lock.
//!
//! - this file: the table itself, its shards, hashing, the clock and the counting done on
//!   every path;
//! - `flights`: a load's life in the table (start, finish, time-out);
//! - `write`: entries made and stored (weighing, `set`, `invalidate`, `clear`);
//! - `read`: reads that decide nothing (`get`, `peek`, the hit path's fast case).

// The children add to `Table`'s methods; this file names none of them, so the dependencies
// run one way (children -> table).
mod flights;
pub(crate) mod read;
pub(crate) mod shard;
#[cfg(test)]
mod tests;
mod write;

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::hash::BuildHasher;
use core::time::Duration;

use self::shard::Shard;
use crate::admission::{Admission, Sketch};
use crate::budget::Budget;
use crate::clock::Clock;
use crate::config::{Config, Parts};
use crate::detector::{Alert, Detector, Setup};
use crate::entry::Entry;
use crate::epoch::{Namespace, Namespaces};
use crate::error::Error;
use crate::events::{Event, EventKind, Events};
use crate::expiry::{Lifetimes, Timing, nanos};
use crate::hotkeys::HotKeys;
use crate::metrics::MetricsSnapshot;
use crate::rng::SharedRng;
use crate::spawn::Spawn;
use crate::sync::unchecked::Arc as StdArc;
use crate::sync::{Arc, AtomicU64, AtomicUsize, Ordering, RwLock};
use crate::tags::Tags;
use crate::xfetch;

/// The state of one cache, shared by its handles ([`Cache`](crate::Cache), guards, waiters).
pub(crate) struct Table<V> {
    pub(crate) cfg: Config<V>,
    /// The cache's grace and `max_stale`, which make every entry's later deadlines.
    pub(crate) life: Lifetimes,
    shards: Box<[RwLock<Shard<V>>]>,
    /// Shards are picked by hash bits 32 and up, clear of the bits hashbrown uses inside a
    /// shard's table (the low bits place a key, the top 7 are its tag): sharding by the top
    /// bits made every key of a shard share part of its tag, so lookups compared more keys.
    shard_mask: usize,
    /// Capacity of each shard: also the most one entry may weigh.
    shard_capacity: u64,
    hasher: hashbrown::DefaultHashBuilder,
    pub(crate) namespaces: Namespaces,
    pub(crate) tags: Tags,
    pub(crate) clock: StdArc<dyn Clock>,
    /// The clock is the default [`SystemClock`](crate::SystemClock): the hit path reads it
    /// directly instead of through the trait object.
    #[cfg_attr(not(feature = "std"), allow(dead_code))]
    system_clock: bool,
    rng: SharedRng,
    pub(crate) budget: Option<Arc<Budget>>,
    /// Flight records in the table.
    flights: AtomicUsize,
    next_id: AtomicU64,
    /// Where background work runs; `None`: nowhere, and no refresh is ever handed out.
    pub(crate) spawner: Option<StdArc<dyn Spawn>>,
    /// The stampede detector, unless switched off.
    detector: Option<Detector>,
    /// The hot-key tracker, unless switched off.
    pub(crate) hot: Option<HotKeys>,
    /// The listener's queue, when one is registered.
    events: Option<StdArc<Events>>,
}

impl<V> Table<V> {
    /// A table of the checked options.
    pub(crate) fn new(parts: Parts<V>) -> Self {
        let Parts {
            cfg,
            clock,
            system_clock,
            rng,
            spawner,
        } = parts;
        let wanted = match cfg.shards {
            0 => default_shards(),
            n => n,
        };
        // Each shard holds at least one entry, and the shards' capacities add up to the
        // capacity exactly (the first `extra` shards take one unit more), never beyond it.
        let capacity = cfg.capacity;
        let most = 1u64 << (63 - capacity.leading_zeros());
        let shards = (wanted.min(1 << 16).next_power_of_two() as u64).min(most) as usize;
        let (per_shard, extra) = (capacity / shards as u64, capacity % shards as u64);
        let detector = cfg.detector.enabled.then(|| {
            Detector::new(
                cfg.detector.clone(),
                Setup {
                    ttl: cfg.ttl,
                    negative_ttl: cfg.negative_ttl,
                    grace: !cfg.grace.is_zero(),
                    xfetch: cfg.beta > 0.0,
                    budget: cfg.origin_budget.is_some(),
                },
            )
        });
        let hot = (cfg.hot_keys > 0).then(|| HotKeys::new(cfg.hot_keys, cfg.hot_key_sample));
        let hasher = hashbrown::DefaultHashBuilder::default();
        let life = Lifetimes::new(cfg.grace, cfg.max_stale);
        let events = cfg
            .listener
            .clone()
            .map(|l| StdArc::new(Events::new(l, cfg.event_queue)));
        Table {
            shards: (0..shards as u64)
                .map(|i| {
                    let capacity = per_shard + u64::from(i < extra);
                    let sketch = (cfg.admission == Admission::TinyLfu)
                        .then(|| Sketch::new(most_entries(capacity, cfg.entry_overhead)));
                    RwLock::new(Shard::new(
                        capacity,
                        hasher.clone(),
                        life,
                        sketch,
                        rng.shard_rng(),
                    ))
                })
                .collect(),
            shard_mask: shards - 1,
            shard_capacity: per_shard,
            hasher,
            namespaces: Namespaces::new(cfg.max_namespaces, cfg.count_writes),
            tags: Tags::new(cfg.max_tags),
            clock,
            system_clock,
            rng,
            budget: cfg.origin_budget.map(|n| Arc::new(Budget::new(n))),
            flights: AtomicUsize::new(0),
            next_id: AtomicU64::new(1),
            spawner,
            detector,
            hot,
            events,
            life,
            cfg,
        }
    }

    /// An empty or too-long key is refused before anything else.
    #[inline]
    pub(crate) fn check_key(&self, key: &str) -> Result<(), Error> {
        if key.is_empty() {
            return Err(Error::EmptyKey);
        }
        let max = self.cfg.max_key_len;
        if key.len() > max {
            return Err(Error::KeyTooLong {
                len: key.len(),
                max,
            });
        }
        Ok(())
    }

    #[inline]
    pub(crate) fn hash(&self, key: &str) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The shard of `hash`, which is also the stripe of the counters it touches.
    #[inline]
    pub(crate) fn shard_index(&self, hash: u64) -> usize {
        (hash >> 32) as usize & self.shard_mask
    }

    #[inline]
    pub(crate) fn shard(&self, hash: u64) -> &RwLock<Shard<V>> {
        &self.shards[self.shard_index(hash)]
    }

    /// The cheap clock reading of the hit path ([`Clock::now_fast`]), in nanoseconds.
    #[inline]
    pub(crate) fn now_fast(&self) -> u64 {
        #[cfg(feature = "std")]
        if self.system_clock {
            return crate::clock::SystemClock::now_fast_nanos();
        }
        nanos(self.clock.now_fast())
    }

    /// The clock now.
    #[inline]
    pub(crate) fn now(&self) -> Duration {
        self.clock.now()
    }

    /// Counts a hit on `e` (a fresh value or a cached absence) and lets the hot-key tracker
    /// sample it.
    #[inline]
    pub(crate) fn count_hit(&self, e: &Entry<V>, hash: u64, key: &str) {
        let c = e.ns.counters();
        let stripe = self.shard_index(hash);
        let seen = if e.has_value() {
            c.hits.add(stripe)
        } else {
            c.negative_hits.add(stripe)
        };
        // The hot-key tracker samples on the count just taken: no extra atomic per hit.
        if let Some(hot) = &self.hot {
            hot.hit(seen, key, hash);
        }
    }

    /// XFetch: should this read of a fresh entry refresh it early?
    #[inline]
    pub(crate) fn xfetch_fires(&self, e: &Entry<V>, now: u64) -> bool {
        let beta = self.cfg.beta;
        let gap = Duration::from_nanos(e.timing.fresh_until - now);
        let delta = Duration::from_nanos(e.load_nanos());
        if !e.has_value() || now < e.backoff_until() || xfetch::out_of_reach(gap, delta, beta) {
            return false;
        }
        let u = 1.0 - self.rng.unit();
        xfetch::should_refresh(gap, delta, beta, u)
    }

    /// Refresh-ahead: when an entry of `timing` has lived the configured share of its ttl
    /// (never, when off).
    pub(crate) fn ahead_at(&self, timing: &Timing) -> u64 {
        match self.cfg.refresh_ahead {
            Some(share) => {
                let ttl = timing.fresh_until.saturating_sub(timing.written);
                timing.written.saturating_add((ttl as f64 * share) as u64)
            }
            None => u64::MAX,
        }
    }

    /// Refresh-ahead: is this read of a fresh entry past the threshold (and not backing off
    /// after a failed refresh)?
    #[inline]
    pub(crate) fn ahead_due(&self, e: &Entry<V>, now: u64) -> bool {
        e.has_value() && now >= e.backoff_until() && now >= self.ahead_at(&e.timing)
    }

    /// Tells the listener, if any, of an event at `key` (of namespace `ns`); an event the
    /// queue cannot take is counted as dropped. Safe under the shard's lock: it never waits.
    /// A muted listener costs one load: no allocation, no queueing, nothing counted.
    pub(crate) fn emit(&self, ns: &Namespace, kind: EventKind, key: &str, error: Option<Error>) {
        if let Some(events) = self.events.as_ref().filter(|e| e.listening()) {
            let key = key.into();
            if !events.push(Event { kind, key, error }) {
                ns.counters().events_dropped.inc();
            }
        }
    }

    /// Whether a listener hears events now: an event's details are worked out only then.
    #[inline]
    pub(crate) fn listening(&self) -> bool {
        self.events.as_ref().is_some_and(|e| e.listening())
    }

    /// Mutes (`false`) or unmutes the listener; see [`Cache::set_listening`](crate::Cache::set_listening).
    pub(crate) fn set_listening(&self, on: bool) {
        if let Some(events) = &self.events {
            events.set_listening(on);
        }
    }

    /// Hands queued events to the listener. Called with no lock held.
    #[inline]
    pub(crate) fn deliver_events(&self) {
        if let Some(events) = &self.events {
            events.deliver(self.spawner.as_ref());
        }
    }

    /// A draw from the table's generator, uniform in [0, 1).
    pub(crate) fn unit(&self) -> f64 {
        self.rng.unit()
    }

    /// Called by the slow paths: lets the detector close its tick when one is due.
    #[inline]
    pub(crate) fn detect(&self, now: u64) {
        if let Some(d) = &self.detector {
            d.tick(now, self.hot.as_ref(), || self.namespaces.snapshot());
        }
    }

    /// The detector's findings now (empty when it is off).
    pub(crate) fn alerts(&self) -> Vec<Alert> {
        match &self.detector {
            Some(d) => d.alerts(nanos(self.now()), self.hot.as_ref(), || {
                self.namespaces.snapshot()
            }),
            None => Vec::new(),
        }
    }

    /// Flight records in the table now.
    pub(crate) fn flights(&self) -> usize {
        self.flights.load(Ordering::Relaxed)
    }

    /// Counters, histograms and sizes at this moment.
    pub(crate) fn metrics(&self) -> MetricsSnapshot {
        let (mut entries, mut weight) = (0, 0);
        for s in self.shards.iter() {
            let s = s.read();
            entries += s.store.len() as u64;
            weight += s.store.weight();
        }
        let tags = self.tags.counts();
        MetricsSnapshot {
            namespaces: self.namespaces.snapshot(),
            entries,
            weight,
            loads_in_flight: self.flights() as u64,
            tags: tags.records,
            tag_invalidations: tags.invalidations,
            tag_expirations: tags.expirations,
            retired_tags: tags.retired,
        }
    }
}

/// The most entries a shard of `capacity` can hold, which sizes its admission sketch:
/// under `max_bytes` an entry weighs at least its overhead and one key byte, otherwise at
/// least 1.
fn most_entries(capacity: u64, entry_overhead: Option<u64>) -> u64 {
    capacity / entry_overhead.map_or(1, |o| o.saturating_add(1)).max(1)
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
