//! Options of a cache and their validation. Defaults are safe for a service that has not
//! thought about them yet: single-flight always, jitter 0.2, XFetch beta 1, a 10 s negative
//! TTL; stale serving (grace, fail-safe) is opt-in because whether stale data is acceptable is
//! a business decision (a price may be stale, a balance may not).

use core::time::Duration;

use crate::admission::Admission;
use crate::clock::Clock;
use crate::detector::DetectorOptions;
use crate::error::ConfigError;
use crate::events::{Event, Listener};
use crate::idle::IdleReads;
use crate::rng::{SharedRng, seeded_rng};
use crate::spawn::Spawn;
use crate::sync::unchecked::Arc as StdArc;

/// Weighs an entry for the capacity bound (e.g. its size in bytes).
pub type Weigher<V> = StdArc<dyn Fn(&str, &V) -> u64 + Send + Sync>;

/// Bytes charged per entry for herdless's own bookkeeping under
/// [`Builder::max_bytes`]: the entry node, its slot in the shard's table and eviction ring,
/// and allocator headers. Measured with a counting allocator at 79-121 bytes beyond key and
/// a `u64` value (1,000,000 down to 10,000 entries; BENCHMARKS.md, "Memory per entry"), and
/// at ~125 bytes of resident memory beyond key and value bytes for 64-byte `Vec<u8>` values
/// (malloc's headers and rounding included); with this charge a 1,000,000-key flood stays
/// within 1.1x of the bound in RSS.
pub const ENTRY_OVERHEAD_BYTES: u64 = 128;

/// The default of the bindings' `copy_values` (Python) / `copyValues` (Node): a binding whose
/// values are its language's mutable objects isolates them from its callers (a copy, or the
/// codec's bytes, per caller), as the platforms' own caches do, so that one caller mutating
/// a value it stored or read never changes what another caller reads. The engine itself
/// holds whatever `V` it is given.
pub const DEFAULT_COPY_VALUES: bool = true;

/// The validated options of a cache.
pub(crate) struct Config<V> {
    pub(crate) capacity: u64,
    pub(crate) weigher: Option<Weigher<V>>,
    /// Under [`Builder::max_bytes`]: bytes added to every entry's weight (its key's length
    /// is added too, and a cached absence weighs no value bytes).
    pub(crate) entry_overhead: Option<u64>,
    pub(crate) ttl: Duration,
    pub(crate) tti: Option<Duration>,
    pub(crate) grace: Duration,
    pub(crate) jitter: f64,
    pub(crate) beta: f64,
    pub(crate) negative_ttl: Duration,
    pub(crate) wait_timeout: Duration,
    pub(crate) max_stale: Option<Duration>,
    pub(crate) failsafe_backoff: Duration,
    pub(crate) soft_timeout: Option<Duration>,
    pub(crate) hard_timeout: Option<Duration>,
    pub(crate) origin_budget: Option<usize>,
    pub(crate) max_flights: usize,
    pub(crate) max_batch: usize,
    pub(crate) max_key_len: usize,
    pub(crate) max_namespaces: usize,
    pub(crate) max_tags: usize,
    pub(crate) max_tags_per_entry: usize,
    pub(crate) shards: usize,
    pub(crate) detector: DetectorOptions,
    pub(crate) hot_keys: usize,
    pub(crate) hot_key_sample: u64,
    pub(crate) refresh_ahead: Option<f64>,
    pub(crate) listener: Option<Listener>,
    pub(crate) idle_reads: Option<IdleReads>,
    pub(crate) event_queue: usize,
    /// Keep the write generation ([`Cache::generation`](crate::Cache::generation)).
    pub(crate) count_writes: bool,
    pub(crate) admission: Admission,
}

/// The options a cache was built with, read back (e.g. by a binding that writes entries of
/// its own to a shared tier with the same TTLs).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Options {
    /// Capacity in weight units.
    pub capacity: u64,
    /// Fresh time of a loaded value, before jitter.
    pub ttl: Duration,
    /// Time-to-idle: an entry not read for this long is dropped, if set.
    pub tti: Option<Duration>,
    /// Stale-while-revalidate window after `ttl`.
    pub grace: Duration,
    /// TTL jitter fraction.
    pub jitter: f64,
    /// XFetch beta.
    pub beta: f64,
    /// Life of a cached absence, before jitter.
    pub negative_ttl: Duration,
    /// How long waiters wait for a load.
    pub wait_timeout: Duration,
    /// Fail-safe retention past `ttl`, if on.
    pub max_stale: Option<Duration>,
    /// Fail-safe backoff after a failed load.
    pub failsafe_backoff: Duration,
    /// Loader soft timeout, if any.
    pub soft_timeout: Option<Duration>,
    /// Loader hard timeout, if any.
    pub hard_timeout: Option<Duration>,
    /// Origin budget, if any.
    pub origin_budget: Option<usize>,
    /// Most keys loading at once.
    pub max_flights: usize,
    /// Most keys per batch loader call.
    pub max_batch: usize,
    /// Longest key, in bytes.
    pub max_key_len: usize,
    /// Namespaces tracked for epochs and metrics.
    pub max_namespaces: usize,
    /// Tag records kept (see [`Builder::max_tags`]).
    pub max_tags: usize,
    /// Most tags on one entry.
    pub max_tags_per_entry: usize,
    /// Which new keys a full cache keeps.
    pub admission: Admission,
    /// Share of the ttl after which one refresh runs in the background, if on.
    pub refresh_ahead: Option<f64>,
}

impl<V> Config<V> {
    pub(crate) fn options(&self) -> Options {
        Options {
            capacity: self.capacity,
            ttl: self.ttl,
            tti: self.tti,
            grace: self.grace,
            jitter: self.jitter,
            beta: self.beta,
            negative_ttl: self.negative_ttl,
            wait_timeout: self.wait_timeout,
            max_stale: self.max_stale,
            failsafe_backoff: self.failsafe_backoff,
            soft_timeout: self.soft_timeout,
            hard_timeout: self.hard_timeout,
            origin_budget: self.origin_budget,
            max_flights: self.max_flights,
            max_batch: self.max_batch,
            max_key_len: self.max_key_len,
            max_namespaces: self.max_namespaces,
            max_tags: self.max_tags,
            max_tags_per_entry: self.max_tags_per_entry,
            admission: self.admission,
            refresh_ahead: self.refresh_ahead,
        }
    }
}

/// Builds a [`Cache`](crate::Cache). Every option is checked by [`build`](Self::build).
///
/// ```
/// use core::time::Duration;
/// let cache = herdless::Cache::<u64>::builder()
///     .capacity(100_000)
///     .ttl(Duration::from_secs(60))
///     .grace(Duration::from_secs(30))
///     .max_stale(Duration::from_secs(600))
///     .origin_budget(20)
///     .build()
///     .unwrap();
/// # drop(cache);
/// ```
pub struct Builder<V> {
    cfg: Config<V>,
    clock: Option<StdArc<dyn Clock>>,
    rng: Option<SharedRng>,
    spawner: Spawner,
}

/// Where background work goes, as chosen on the builder.
enum Spawner {
    /// [`ThreadSpawn`](crate::ThreadSpawn) under `std`, none without it.
    Default,
    /// No background work.
    Off,
    Given(StdArc<dyn Spawn>),
}

/// A checked builder, taken apart for the table.
pub(crate) struct Parts<V> {
    pub(crate) cfg: Config<V>,
    pub(crate) clock: StdArc<dyn Clock>,
    /// Whether `clock` is the default system clock (the hit path then reads it directly).
    pub(crate) system_clock: bool,
    pub(crate) rng: SharedRng,
    pub(crate) spawner: Option<StdArc<dyn Spawn>>,
}

impl<V> Default for Builder<V> {
    fn default() -> Self {
        Self {
            cfg: Config {
                capacity: 10_000,
                weigher: None,
                entry_overhead: None,
                ttl: Duration::from_secs(60),
                tti: None,
                grace: Duration::ZERO,
                jitter: 0.2,
                beta: 1.0,
                negative_ttl: Duration::from_secs(10),
                wait_timeout: Duration::from_secs(5),
                max_stale: None,
                failsafe_backoff: Duration::from_secs(5),
                soft_timeout: None,
                hard_timeout: None,
                origin_budget: None,
                max_flights: 100_000,
                max_batch: 1_000,
                max_key_len: 1024,
                max_namespaces: 4096,
                max_tags: 100_000,
                max_tags_per_entry: 16,
                shards: 0,
                detector: Default::default(),
                hot_keys: 1024,
                hot_key_sample: 256,
                refresh_ahead: None,
                listener: None,
                idle_reads: None,
                event_queue: 1024,
                count_writes: false,
                admission: Admission::Always,
            },
            clock: None,
            rng: None,
            spawner: Spawner::Default,
        }
    }
}

macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident: $ty:ty => $field:ident $(as $wrap:ident)?;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(mut self, value: $ty) -> Self {
                self.cfg.$field = setters!(@wrap value $($wrap)?);
                self
            }
        )*
    };
    (@wrap $v:ident) => { $v };
    (@wrap $v:ident Some) => { Some($v) };
}

impl<V> Builder<V> {
    /// The options as set so far (defaults for the rest), before [`build`](Self::build)
    /// checks them: what a second tier reads its own lifetimes from, so the defaults are
    /// written once.
    pub fn options(&self) -> Options {
        self.cfg.options()
    }

    setters! {
        /// Keep the write generation, a count of every change to what a read can answer
        /// ([`Cache::generation`](crate::Cache::generation)), for a copy of answers kept
        /// outside the engine (default off: writes then skip it).
        count_writes: bool => count_writes;
        /// Which new keys a full cache keeps (default [`Admission::Always`]; see
        /// [`Admission::TinyLfu`] for loops and scans, where a new key may be refused).
        admission: Admission => admission;
        /// Capacity in weight units: entries, unless a [`weigher`](Self::weigher) is set
        /// (default 10,000). Values and cached absences both count.
        capacity: u64 => capacity;
        /// How long a loaded value is fresh (default 60 s), before jitter.
        ttl: Duration => ttl;
        /// Time-to-idle (sliding expiration; default: none): an entry not read for this
        /// long is dropped even if its ttl has not run out, and is neither served stale nor
        /// kept for fail-safe. A read stores its time once per sixteenth of the tti, so an
        /// entry is dropped between `tti` and `tti * 17 / 16` after its last read (a
        /// [`peek`](crate::Cache::peek) is not a read). Per entry:
        /// [`Loaded::tti`](crate::Loaded::tti). An entry with a tti carries the part of an
        /// entry few have (160 bytes: its idle clock, and room for tags and a loader's own
        /// lifetimes); entries without one pay a branch per hit (BENCHMARKS.md,
        /// "Time-to-idle").
        tti: Duration => tti as Some;
        /// How long after `ttl` a value may still be served stale while one background
        /// refresh runs (stale-while-revalidate; default 0: off).
        grace: Duration => grace;
        /// TTL jitter `j`: every stored TTL becomes `ttl * (1 + j * (u - 0.5))`, u uniform in
        /// [0, 1), i.e. within ±j/2 of the TTL (default 0.2; must be in [0, 1)).
        jitter: f64 => jitter;
        /// XFetch's beta (default 1; 0 disables early refresh; larger refreshes earlier).
        beta: f64 => beta;
        /// How long a cached absence lasts (default 10 s).
        negative_ttl: Duration => negative_ttl;
        /// How long a caller waits for another caller's load before it takes stale data or a
        /// [`Error::WaitTimeout`](crate::Error::WaitTimeout) (default 5 s). Also bounds a
        /// leader's wait for the origin budget.
        wait_timeout: Duration => wait_timeout;
        /// Fail-safe: keep values up to `max_stale` past their TTL and serve them when a load
        /// fails or times out (default: off). Must be at least `grace`.
        max_stale: Duration => max_stale as Some;
        /// Fail-safe: after a failed load, serve the stale value without trying again for
        /// this long (default 5 s).
        failsafe_backoff: Duration => failsafe_backoff;
        /// Loader soft timeout: waiters holding a fail-safe value take it after this long;
        /// the load goes on and its result is stored (default: none).
        soft_timeout: Duration => soft_timeout as Some;
        /// Loader hard timeout: the load is abandoned with
        /// [`Error::LoadTimeout`](crate::Error::LoadTimeout) and its result discarded
        /// (default: none). Counted from the loader's start: a load that first waited for
        /// the [`origin_budget`](Self::origin_budget) (or, through a shared tier, for
        /// another process's lock) still gets the whole timeout.
        hard_timeout: Duration => hard_timeout as Some;
        /// At most this many loader calls at once across all keys (default: unlimited).
        origin_budget: usize => origin_budget as Some;
        /// At most this many keys loading at once; more is refused with
        /// [`Error::TooManyFlights`](crate::Error::TooManyFlights) (default 100,000).
        max_flights: usize => max_flights;
        /// At most this many keys per loader call of a batch
        /// ([`get_or_load_many`](crate::Cache::get_or_load_many)); a batch with more misses
        /// makes several calls (default 1,000).
        max_batch: usize => max_batch;
        /// Longest accepted key, in bytes (default 1,024).
        max_key_len: usize => max_key_len;
        /// Distinct namespaces tracked for epochs and metrics (default 4,096, about 2 KB of
        /// counters each). Past it, the
        /// record of the namespace least recently looked up is retired: its entries become
        /// misses (never stale hits), its counters are kept under `__retired__`, and
        /// `retired_namespaces` counts it. A bump always invalidates exactly its namespace.
        max_namespaces: usize => max_namespaces;
        /// Distinct tags tracked (default 100,000; a record is about 100 bytes). Past it,
        /// the record of the tag least recently used by a write, a load's answer or an
        /// invalidation is retired: every entry carrying it becomes a miss (never a stale
        /// hit: a forgotten tag cannot resurrect old entries), and `retired_tags` counts
        /// it. A later use of the name starts a new record.
        max_tags: usize => max_tags;
        /// Most distinct tags on one entry (default 16); more fails the write or the load
        /// with [`Error::TooManyTags`](crate::Error::TooManyTags). Each tag costs a read of
        /// the entry two atomic loads.
        max_tags_per_entry: usize => max_tags_per_entry;
        /// Number of lock shards (rounded up to a power of two; default 4 per CPU).
        shards: usize => shards;
        /// The stampede detector's options (default: on, with the thresholds of
        /// [`DetectorOptions::default`](crate::DetectorOptions); see
        /// [`Cache::alerts`](crate::Cache::alerts)).
        detector: DetectorOptions => detector;
        /// Keys the hot-key tracker keeps (default 1,024; 0: off). See
        /// [`Cache::hot_keys`](crate::Cache::hot_keys).
        hot_keys: usize => hot_keys;
        /// The hot-key tracker records one fresh hit in this many (rounded up to a power of
        /// two; default 256), weighted by it. Misses of tracked keys are always recorded; once
        /// the tracker is full, an untracked key gets in on one of its misses in 8, weighted 8.
        hot_key_sample: u64 => hot_key_sample;
        /// Refresh-ahead: once an entry has lived this share of its ttl (in (0, 1), e.g.
        /// 0.8), the next read refreshes it in the background, once per entry (default:
        /// off). Beside XFetch, which refreshes at a random moment that comes earlier for
        /// slower loads and hotter keys, this is a fixed schedule: one refresh per
        /// `ttl * share` for a key read at least that often, whatever its load time, at
        /// the cost of refreshing keys that would have been read only once more. Take it
        /// when the origin's load should be predictable (a quota, a rate limit) or when
        /// loads are slow enough to matter; keep XFetch alone (or set `beta` to 0 and use
        /// this alone) when the key set is large and mostly cold. Keys written together
        /// stay in step (their refreshes come together unless `jitter` spreads their ttls),
        /// where XFetch's random draw spreads them. Measured against XFetch in the
        /// simulator: BENCHMARKS.md, "Refresh-ahead against XFetch (simulator)".
        refresh_ahead: f64 => refresh_ahead as Some;
        /// Most events queued for the [`listener`](Self::listener) (default 1,024);
        /// further events are dropped and counted (`events_dropped`) until it catches up.
        event_queue: usize => event_queue;
    }

    /// Tells `listener` of evictions, expiries without a refresh, failed loads and
    /// fail-safe activations ([`Event`](crate::Event)). It runs on the cache's spawner
    /// (without one, on a thread that just released the engine's locks), never on the hit
    /// path and never under a lock; the engine never waits for it: events that find the
    /// queue full are dropped and counted in `events_dropped`. A panic of the listener
    /// loses its event only.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use herdless::{Cache, Event};
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let log = seen.clone();
    /// let cache: Cache<u32> = Cache::builder()
    ///     .capacity(1)
    ///     .without_spawner()
    ///     .listener(move |e: Event| log.lock().unwrap().push((e.kind, e.key)))
    ///     .build()?;
    /// cache.set("a", 1)?;
    /// cache.set("b", 2)?; // evicts "a"
    /// assert_eq!(seen.lock().unwrap().len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn listener(mut self, listener: impl Fn(Event) + Send + Sync + 'static) -> Self {
        self.cfg.listener = Some(StdArc::new(listener));
        self
    }

    /// Tells `reads`, on a hit of an entry with a time-to-idle, at most once per quarter
    /// of its tti per entry, of its key and tti ([`IdleReads`]): how a shared tier behind
    /// this cache keeps its own copy alive while this process reads the entry from memory.
    pub fn idle_reads(mut self, reads: impl Fn(&str, Duration) + Send + Sync + 'static) -> Self {
        self.cfg.idle_reads = Some(StdArc::new(reads));
        self
    }

    /// Weighs entries for the capacity bound, e.g. by size in bytes (a cached absence
    /// weighs 1). Replaces [`max_bytes`](Self::max_bytes).
    pub fn weigher(mut self, weigher: impl Fn(&str, &V) -> u64 + Send + Sync + 'static) -> Self {
        self.cfg.weigher = Some(StdArc::new(weigher));
        self.cfg.entry_overhead = None;
        self
    }

    /// Bounds the cache's memory in bytes: the capacity becomes `bytes`, and each entry
    /// weighs its key's length, `value_bytes(value)` (nothing for a cached absence) and
    /// [`ENTRY_OVERHEAD_BYTES`] for herdless's own bookkeeping, so that the bound holds for
    /// what the process allocates (a 1,000,000 random-key flood: peak RSS growth 0.98x the
    /// bound with 64-byte values, where weighing key and value bytes alone reaches 2.4x).
    /// Cached absences are charged too: a flood of random absent ids cannot outgrow it.
    /// Replaces [`capacity`](Self::capacity) and [`weigher`](Self::weigher).
    ///
    /// ```
    /// use herdless::Cache;
    /// let cache: Cache<Vec<u8>> = Cache::builder()
    ///     .max_bytes(64 << 20, |v: &Vec<u8>| v.len() as u64)
    ///     .build()?;
    /// # Ok::<(), herdless::ConfigError>(())
    /// ```
    pub fn max_bytes(
        mut self,
        bytes: u64,
        value_bytes: impl Fn(&V) -> u64 + Send + Sync + 'static,
    ) -> Self {
        self.cfg.capacity = bytes;
        self.cfg.weigher = Some(StdArc::new(move |_: &str, v: &V| value_bytes(v)));
        self.cfg.entry_overhead = Some(ENTRY_OVERHEAD_BYTES);
        self
    }

    /// The clock (default: [`SystemClock`](crate::SystemClock) under `std`; required
    /// without it).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(StdArc::new(clock));
        self
    }

    /// The source of randomness for jitter and XFetch (default:
    /// [`default_rng`](crate::default_rng), seeded differently in every process). XFetch
    /// and jitter draw from the one given here. The default one only seeds one generator
    /// per shard when the cache is built, which jitter draws from (a store holds its
    /// shard's lock, so its draw takes no lock of its own).
    pub fn rng(mut self, rng: impl rand_core::Rng + Send + 'static) -> Self {
        self.rng = Some(SharedRng::new(rng));
        self
    }

    /// The default generator ([`DefaultRng`](crate::DefaultRng)) seeded with `seed`, so
    /// jitter and XFetch draw the same numbers on every run: for tests and simulations.
    ///
    /// ```
    /// # use core::time::Duration;
    /// let cache = herdless::Cache::<u32>::builder().seed(7).build()?;
    /// # Ok::<(), herdless::ConfigError>(())
    /// ```
    pub fn seed(mut self, seed: u64) -> Self {
        self.rng = Some(SharedRng::new(seeded_rng(seed)));
        self
    }

    /// Where background work runs: the refresh of a stale or XFetch-chosen entry (from
    /// [`get_or_load`](crate::Cache::get_or_load), [`get_or_load_async`](crate::Cache::get_or_load_async)
    /// and the state machine's [`Hit::refresh`](crate::Hit::refresh)), and the rest of an
    /// async load that outlived its soft timeout. Default:
    /// [`ThreadSpawn`](crate::ThreadSpawn) under `std` (a short-lived thread per task),
    /// none without it; see [`without_spawner`](Self::without_spawner) for a cache with none.
    ///
    /// A blocking loader refreshed in the background runs on this spawner too: with an async
    /// runtime's spawner, give it a runtime thread that may block (e.g. tokio's
    /// `spawn_blocking`), or keep the default.
    pub fn spawner(mut self, spawner: impl Spawn) -> Self {
        self.spawner = Spawner::Given(StdArc::new(spawner));
        self
    }

    /// No background work at all: a stale hit is served without a refresh (the first caller
    /// after grace loads, in the foreground), XFetch never refreshes early, and an async
    /// leader past its soft timeout keeps loading in its caller's task (its waiters still
    /// take their fail-safe value then). The state machine then never hands out a
    /// [`Hit::refresh`](crate::Hit::refresh). This is also what a cache without `std` does
    /// when no [`spawner`](Self::spawner) is given.
    pub fn without_spawner(mut self) -> Self {
        self.spawner = Spawner::Off;
        self
    }

    /// Checks every option and fills in the defaults.
    pub(crate) fn into_parts(self) -> Result<Parts<V>, ConfigError> {
        self.validate()?;
        let system_clock = cfg!(feature = "std") && self.clock.is_none();
        #[cfg(feature = "std")]
        let clock = self
            .clock
            .unwrap_or_else(|| StdArc::new(crate::clock::SystemClock));
        #[cfg(not(feature = "std"))]
        let clock = self.clock.ok_or(ConfigError::Inconsistent {
            reason: "without the `std` feature a clock must be given",
        })?;
        let spawner = match self.spawner {
            Spawner::Given(s) => Some(s),
            Spawner::Off => None,
            #[cfg(feature = "std")]
            Spawner::Default => Some(StdArc::new(crate::spawn::ThreadSpawn) as _),
            #[cfg(not(feature = "std"))]
            Spawner::Default => None,
        };
        Ok(Parts {
            cfg: self.cfg,
            clock,
            system_clock,
            rng: self.rng.unwrap_or_else(SharedRng::by_default),
            spawner,
        })
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let c = &self.cfg;
        for (option, d) in [
            ("ttl", Some(c.ttl)),
            ("tti", c.tti),
            ("negative_ttl", Some(c.negative_ttl)),
            ("wait_timeout", Some(c.wait_timeout)),
            ("max_stale", c.max_stale),
            ("soft_timeout", c.soft_timeout),
            ("hard_timeout", c.hard_timeout),
        ] {
            if d == Some(Duration::ZERO) {
                return Err(ConfigError::ZeroDuration { option });
            }
        }
        if !(c.jitter.is_finite() && (0.0..1.0).contains(&c.jitter)) {
            return Err(ConfigError::JitterOutOfRange(c.jitter));
        }
        if !(c.beta.is_finite() && c.beta >= 0.0) {
            return Err(ConfigError::InvalidBeta(c.beta));
        }
        for (option, n) in [
            ("capacity", c.capacity as usize),
            ("max_flights", c.max_flights),
            ("max_batch", c.max_batch),
            ("max_key_len", c.max_key_len),
            ("max_namespaces", c.max_namespaces),
            ("max_tags", c.max_tags),
            ("event_queue", c.event_queue),
            ("origin_budget", c.origin_budget.unwrap_or(1)),
        ] {
            if n == 0 {
                return Err(ConfigError::Zero { option });
            }
        }
        if c.refresh_ahead
            .is_some_and(|r| !(r.is_finite() && r > 0.0 && r < 1.0))
        {
            return Err(ConfigError::Inconsistent {
                reason: "`refresh_ahead` must be a share of the ttl, in (0, 1)",
            });
        }
        c.detector.validate()?;
        if let (Some(soft), Some(hard)) = (c.soft_timeout, c.hard_timeout) {
            if soft >= hard {
                return Err(ConfigError::Inconsistent {
                    reason: "`soft_timeout` must be shorter than `hard_timeout`",
                });
            }
        }
        if c.max_stale.is_some_and(|m| m < c.grace) {
            return Err(ConfigError::Inconsistent {
                reason: "`max_stale` must be at least `grace`",
            });
        }
        Ok(())
    }
}
