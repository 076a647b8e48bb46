//! The options as index.d.ts documents them (`CacheOptions`, `CodecObject`, `DetectorOptions`):
//! their shape and docs only; [`super::parse`] reads them.

use napi_derive::napi;

/// Options of `new Cache(options)`. Every one is optional; durations are in milliseconds.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct CacheOptions {
    /// How long a loaded value is fresh, before jitter (default 60000).
    pub ttl: Option<f64>,
    /// Time-to-idle (sliding expiration; default: none): an entry not read for this long is
    /// dropped even within its `ttl`, and is neither served stale nor kept for fail-safe. In
    /// memory it lives `tti` to `tti * 17 / 16` past its last read; with `redis` the shared
    /// entry is kept while any process reads it. Such entries are never answered by the
    /// front: their hits go through the engine. A loader may set its own (`ctx.setTti`).
    pub tti: Option<f64>,
    /// How long after `ttl` a value may still be served stale while one background refresh
    /// runs (stale-while-revalidate; default 0: off).
    pub grace: Option<f64>,
    /// How long a cached absence (`ABSENT`) lasts (default 10000).
    pub negative_ttl: Option<f64>,
    /// How long a caller waits for another caller's load before it takes stale data or
    /// fails with `HERDLESS_WAIT_TIMEOUT` (default 5000).
    pub wait_timeout: Option<f64>,
    /// Fail-safe: keep values up to this long past their TTL and serve them when a load
    /// fails or times out (default: off). At least `grace`.
    pub max_stale: Option<f64>,
    /// Fail-safe: after a failed load, serve the stale value this long before trying again
    /// (default 5000).
    pub failsafe_backoff: Option<f64>,
    /// Loader soft timeout: callers holding a fail-safe value take it after this long; the
    /// load goes on and its result is stored (default: none).
    pub soft_timeout: Option<f64>,
    /// Loader hard timeout: the load fails with `HERDLESS_LOAD_TIMEOUT` and its result is
    /// discarded (default: none). Longer than `softTimeout`. Counted from the loader's
    /// start (a load that first waited for `originBudget` gets the whole timeout).
    pub hard_timeout: Option<f64>,
    /// TTL jitter j in [0, 1): every stored TTL becomes `ttl * (1 + j * (u - 0.5))`
    /// (default 0.2).
    pub jitter: Option<f64>,
    /// XFetch early-refresh factor beta >= 0 (default 1; 0 turns early refresh off).
    pub beta: Option<f64>,
    /// Refresh-ahead: a read of an entry that lived this share of its ttl, in (0, 1),
    /// refreshes it in the background while the fresh value is served (the loader's
    /// `ctx.reason` is `'refreshAhead'`; default: off).
    pub refresh_ahead: Option<f64>,
    /// Most entries held (values and absences; default 10000).
    pub capacity: Option<f64>,
    /// `true`: a TinyLFU admission filter in front of the engine's SIEVE eviction, for loops
    /// and scans (default `false`). A full cache keeps a new key only if it was stored (or
    /// found read by the eviction hand) more often than the entry it would evict; a refused
    /// value still answers its caller and waiters and a refused `set` resolves as usual, but
    /// neither is kept (counted in `admissionRejections`). Slower to follow popular keys
    /// that move.
    pub admission: Option<bool>,
    /// At most this many loader calls at once across all keys (default: unlimited).
    pub origin_budget: Option<f64>,
    /// At most this many keys loading at once (default 100000).
    pub max_flights: Option<f64>,
    /// At most this many keys per loader call of `getOrLoadMany` (default 1000).
    pub max_batch: Option<f64>,
    /// Longest accepted key, in bytes (default 1024).
    pub max_key_len: Option<f64>,
    /// Distinct namespaces tracked for epochs and metrics (default 4096).
    pub max_namespaces: Option<f64>,
    /// The cache's default namespace: `wrap()` builds keys in it unless told otherwise, and
    /// `bump()` without an argument bumps it. Keys given to other methods are used as they
    /// are.
    pub namespace: Option<String>,
    /// Adds the shared tier: this cache stays the first tier, and Node, Python and Rust
    /// processes sharing it make one loader call per key between them (PROTOCOL.md). A URL:
    /// `'redis://host:port/db'`, `'unix:///path'`,
    /// `'redis+cluster://host:port,host:port'` (a Redis Cluster),
    /// `'memcached://host:port,host:port'` (memcached: no copy kept in this process, no tags;
    /// PROTOCOL.md section 9), or `'memory://name'` (a tier in this process's memory, shared
    /// by the caches given the same name: for tests, see `testing.memoryStore`); or an array
    /// of node URLs (a Redis Cluster).
    #[napi(ts_type = "string | readonly string[]")]
    pub redis: Option<()>,
    /// memcached as the shared tier: `'host:port'` (servers separated by commas) or an array
    /// of them; the same as `redis: 'memcached://host:port'`. Not with `redis`.
    #[napi(ts_type = "string | readonly string[]")]
    pub memcached: Option<()>,
    /// Prefix of every Redis key (default `'hl'`); processes that share keys share it.
    pub redis_prefix: Option<String>,
    /// How values are stored in the shared tier: `'json'` (default; what every language
    /// reads), `'buffer'` (values are `Buffer`s, stored as their bytes), or your own
    /// `{ encode(value), decode(bytes) }`. A value the codec cannot encode is served in its
    /// process only.
    #[napi(ts_type = "'json' | 'buffer' | CodecObject")]
    pub codec: Option<()>,
    /// How long the fleet lock of a loading key lasts unless extended (default 5000); a
    /// crashed leader blocks the key for at most this long.
    pub lease: Option<f64>,
    /// Width of one window tick of the stampede detector (`alerts()`), in milliseconds
    /// (default 1000); its steady state is the median of the last 64 ticks.
    pub detector_tick: Option<f64>,
    /// The stampede detector: `false` switches it off (`alerts()` is then always empty);
    /// an object sets its thresholds (default: on, with the thresholds below).
    #[napi(ts_type = "boolean | DetectorOptions")]
    pub detector: Option<()>,
    /// Told every event of the cache, like a listener of every name given to `cache.on`
    /// (see `CacheEvent`); it cannot be removed with `off`.
    #[napi(ts_type = "(event: CacheEvent) => void")]
    pub on_event: Option<()>,
    /// The front: repeated `get` and `getOrLoad` hits answered in JavaScript from a small
    /// map of recent answers, kept exactly coherent with the engine (any write, and the
    /// entry's fresh time, end an answer's stay; its hits are counted as the engine's own).
    /// `false` switches it off; `{ capacity }` sets how many answers it keeps (default on,
    /// 1024; at most 65536).
    #[napi(ts_type = "boolean | { capacity?: number }")]
    pub front: Option<()>,
    /// Value isolation (default `true`): the cache keeps its own copy of every object it is
    /// given and each reader gets a new copy (plain data node by node, other objects by
    /// `structuredClone`, a `Buffer` as a `Buffer`), so no caller's mutation reaches another
    /// caller. An object that cannot be copied as it is (a class instance) is refused with a
    /// `TypeError` (code `HERDLESS_UNCOPYABLE_VALUE`). `false` shares objects: hits cost no
    /// copy, and callers must never mutate what they store or read.
    pub copy_values: Option<bool>,
}

/// A codec of your own (`new Cache({ codec: { encode, decode } })`): `encode` turns a
/// value into bytes (throwing, or returning anything but bytes, when it cannot: the value is
/// then served in its process only, and `set` rejects with what `encode` threw); `decode`
/// turns the bytes of a shared entry back into a value (throwing when they are not its own:
/// a miss, counted in `corruptEntries`).
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct CodecObject {
    /// The bytes of `value`.
    #[napi(ts_type = "(value: unknown) => Buffer | Uint8Array")]
    pub encode: (),
    /// The value of `bytes`.
    #[napi(ts_type = "(bytes: Buffer) => unknown")]
    pub decode: (),
}

/// The stampede detector's thresholds (`new Cache({ detector: { ... } })`); durations in
/// milliseconds. Every field is optional.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct DetectorOptions {
    /// Width of one window tick (default 1000); the same as `detectorTick`.
    pub tick: Option<f64>,
    /// Miss spike: misses in a tick above this times their steady state (>= 1; default 5).
    pub spike_factor: Option<f64>,
    /// Miss spike: and at least this many misses in the tick (default 20).
    pub min_spike_misses: Option<f64>,
    /// Origin latency: load p99 above this times load p50 (>= 1; default 10).
    pub latency_factor: Option<f64>,
    /// Origin latency and lock wait: the latency window (default 60000).
    pub latency_window: Option<f64>,
    /// Origin latency and lock wait: at least this many loads / waits in the window
    /// (default 20).
    pub min_samples: Option<f64>,
    /// A key with at least this share of a spike's misses is named, in (0, 1] (default 0.5).
    pub key_share: Option<f64>,
    /// How long an alert stays listed after its condition last held (default 600000).
    pub hold: Option<f64>,
}
