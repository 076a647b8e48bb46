//! `new Cache(options)`: the core's options in Node's idiom (durations in milliseconds),
//! each checked with a message that names it: a wrong type is a `TypeError`, a value out of
//! range a `RangeError`, both with code `HERDLESS_INVALID_OPTION`.

use std::time::Duration;

use napi::Result;
use napi_derive::napi;

use crate::driver::Entry;
use crate::error::{code, throw_new};
use crate::js::{ErrorKind, Js, Type, Value};
use crate::tier::Codec;
use herdless_redis::TierAddress;

/// Options of `new Cache(options)`. Every one is optional; durations are in milliseconds.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct CacheOptions {
    /// How long a loaded value is fresh, before jitter (default 60000).
    pub ttl: Option<f64>,
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
    /// discarded (default: none). Longer than `softTimeout`.
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
    /// At most this many loader calls at once across all keys (default: unlimited).
    pub origin_budget: Option<f64>,
    /// At most this many keys loading at once (default 100000).
    pub max_flights: Option<f64>,
    /// At most this many keys per loader call of `getOrLoadMany` (default 1000).
    pub max_batch: Option<f64>,
    /// Longest accepted key, in bytes (default 1024).
    pub max_key_len: Option<f64>,
    /// Distinct namespaces tracked for epochs and metrics (default 1024).
    pub max_namespaces: Option<f64>,
    /// The cache's default namespace: `wrap()` builds keys in it unless told otherwise, and
    /// `bump()` without an argument bumps it. Keys given to other methods are used as they
    /// are.
    pub namespace: Option<String>,
    /// Adds the shared tier: this cache stays the first tier, and Node, Python and Rust
    /// processes sharing it make one loader call per key between them (PROTOCOL.md). A URL:
    /// `'redis://host:port/db'`, `'unix:///path'`,
    /// `'redis+cluster://host:port,host:port'` (a Redis Cluster), or `'memory://name'` (a
    /// tier in this process's memory, shared by the caches given the same name: for tests,
    /// see `testing.memoryStore`); or an array of node URLs (a Redis Cluster).
    #[napi(ts_type = "string | readonly string[]")]
    pub redis: Option<()>,
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

const DETECTOR: [&str; 8] = [
    "tick",
    "spikeFactor",
    "minSpikeMisses",
    "latencyFactor",
    "latencyWindow",
    "minSamples",
    "keyShare",
    "hold",
];

/// The `detector` option, with `detectorTick` (which wins for the tick when both are given).
fn detector(
    js: Js,
    obj: Value,
    tick: Option<Duration>,
) -> Result<Option<herdless::DetectorOptions>> {
    let v = js.get(obj, "detector")?;
    let mut o = herdless::DetectorOptions::default();
    match js.type_of(v)? {
        Type::Undefined if tick.is_none() => return Ok(None),
        Type::Undefined => {}
        Type::Boolean if !js.get_bool(v)? => return Ok(Some(herdless::DetectorOptions::off())),
        Type::Boolean => {}
        Type::Object if !js.is_array(v)? => {
            for key in js.keys(v)? {
                if !DETECTOR.contains(&key.as_str()) {
                    return Err(bad(
                        js,
                        ErrorKind::Type,
                        &format!(
                            "unknown detector option `{key}` (known: {})",
                            DETECTOR.join(", ")
                        ),
                    ));
                }
            }
            // Read as `detector.<name>`, so a message names the option in full.
            let field = js.object()?;
            for key in DETECTOR {
                js.set(field, &format!("detector.{key}"), js.get(v, key)?)?;
            }
            let name = |key: &str| format!("detector.{key}");
            if let Some(d) = duration(js, field, &name("tick"), false)? {
                o.tick = d;
            }
            if let Some(d) = duration(js, field, &name("latencyWindow"), false)? {
                o.latency_window = d;
            }
            if let Some(d) = duration(js, field, &name("hold"), true)? {
                o.hold = d;
            }
            if let Some(n) = number(js, field, &name("spikeFactor"))? {
                o.spike_factor = n;
            }
            if let Some(n) = number(js, field, &name("latencyFactor"))? {
                o.latency_factor = n;
            }
            if let Some(n) = number(js, field, &name("keyShare"))? {
                o.key_share = n;
            }
            if let Some(n) = count(js, field, &name("minSpikeMisses"))? {
                o.min_spike_misses = n;
            }
            if let Some(n) = count(js, field, &name("minSamples"))? {
                o.min_samples = n;
            }
        }
        t => {
            return Err(bad(
                js,
                ErrorKind::Type,
                &format!(
                    "option `detector` must be a boolean or an object, got {}",
                    t.name()
                ),
            ));
        }
    }
    if let Some(t) = tick {
        o.tick = t;
    }
    Ok(Some(o))
}

/// The options a cache was built with, as the binding needs them.
pub(crate) struct Parsed {
    pub(crate) builder: herdless::Builder<Entry>,
    pub(crate) namespace: Option<String>,
    /// The shared tier's options, when `redis` is given.
    pub(crate) redis: Option<RedisOptions>,
    /// The `onEvent` function, checked to be one.
    pub(crate) on_event: Option<Value>,
    /// How many answers the front keeps; `None`: no front.
    pub(crate) front: FrontSize,
    /// The `copyValues` option.
    pub(crate) copy_values: bool,
}

impl Default for Parsed {
    fn default() -> Self {
        Self {
            builder: herdless::Builder::default(),
            namespace: None,
            redis: None,
            on_event: None,
            front: FrontSize::default(),
            copy_values: herdless::DEFAULT_COPY_VALUES,
        }
    }
}

/// The `front` option: how many answers the JS front keeps (`None`: off).
pub(crate) struct FrontSize(pub(crate) Option<usize>);

/// The front's capacity unless told otherwise: the hot keys of most services fit, and a
/// miss of the front costs one call into the engine, as without it.
const FRONT_DEFAULT: usize = 1024;
/// Its largest capacity (a bound on what one cache holds beside the engine).
const FRONT_MAX: u64 = 65_536;

impl Default for FrontSize {
    fn default() -> Self {
        FrontSize(Some(FRONT_DEFAULT))
    }
}

/// The `front` option.
fn front(js: Js, obj: Value) -> Result<FrontSize> {
    let v = js.get(obj, "front")?;
    match js.type_of(v)? {
        Type::Undefined => Ok(FrontSize::default()),
        Type::Boolean if js.get_bool(v)? => Ok(FrontSize::default()),
        Type::Boolean => Ok(FrontSize(None)),
        Type::Object if !js.is_array(v)? => {
            for key in js.keys(v)? {
                if key != "capacity" {
                    return Err(bad(
                        js,
                        ErrorKind::Type,
                        &format!("unknown front option `{key}` (known: capacity)"),
                    ));
                }
            }
            let field = js.object()?;
            js.set(field, "front.capacity", js.get(v, "capacity")?)?;
            match count(js, field, "front.capacity")? {
                None => Ok(FrontSize::default()),
                Some(n) if n <= FRONT_MAX => Ok(FrontSize(Some(n as usize))),
                Some(n) => Err(bad(
                    js,
                    ErrorKind::Range,
                    &format!("option `front.capacity` must be at most {FRONT_MAX}, got {n}"),
                )),
            }
        }
        t => Err(bad(
            js,
            ErrorKind::Type,
            &format!(
                "option `front` must be a boolean or {{ capacity }}, got {}",
                t.name()
            ),
        )),
    }
}

/// The options of the shared tier.
pub(crate) struct RedisOptions {
    pub(crate) address: TierAddress,
    pub(crate) prefix: Option<String>,
    pub(crate) codec: Codec,
    pub(crate) lease: Option<Duration>,
}

const DURATIONS: [&str; 9] = [
    "ttl",
    "grace",
    "negativeTtl",
    "waitTimeout",
    "maxStale",
    "failsafeBackoff",
    "softTimeout",
    "hardTimeout",
    "detectorTick",
];
const COUNTS: [&str; 6] = [
    "capacity",
    "originBudget",
    "maxFlights",
    "maxBatch",
    "maxKeyLen",
    "maxNamespaces",
];
const DURATIONS_REDIS: [&str; 1] = ["lease"];
const OTHERS: [&str; 11] = [
    "copyValues",
    "onEvent",
    "front",
    "detector",
    "jitter",
    "beta",
    "refreshAhead",
    "namespace",
    "redis",
    "redisPrefix",
    "codec",
];

fn bad(js: Js, kind: ErrorKind, message: &str) -> napi::Error {
    throw_new(js, kind, code::INVALID_OPTION, message)
}

/// Reads option `name` of `obj` as a number; `None` when absent (undefined).
fn number(js: Js, obj: Value, name: &str) -> Result<Option<f64>> {
    let v = js.get(obj, name)?;
    match js.type_of(v)? {
        Type::Undefined => Ok(None),
        Type::Number => {
            let n = js.get_number(v)?;
            if n.is_finite() {
                Ok(Some(n))
            } else {
                Err(bad(
                    js,
                    ErrorKind::Range,
                    &format!("option `{name}` must be a finite number, got {n}"),
                ))
            }
        }
        t => Err(bad(
            js,
            ErrorKind::Type,
            &format!("option `{name}` must be a number, got {}", t.name()),
        )),
    }
}

/// A duration in milliseconds; `zero_ok` for the options where 0 means "off".
fn duration(js: Js, obj: Value, name: &str, zero_ok: bool) -> Result<Option<Duration>> {
    let Some(ms) = number(js, obj, name)? else {
        return Ok(None);
    };
    if ms < 0.0 || (ms == 0.0 && !zero_ok) {
        let need = if zero_ok { ">= 0" } else { "> 0" };
        return Err(bad(
            js,
            ErrorKind::Range,
            &format!("option `{name}` must be a duration in milliseconds {need}, got {ms}"),
        ));
    }
    // `from_secs_f64` would panic past ~584 billion years, and a panic here aborts Node.
    Duration::try_from_secs_f64(ms / 1000.0)
        .map(Some)
        .map_err(|_| {
            bad(
                js,
                ErrorKind::Range,
                &format!("option `{name}` is too large: {ms} ms"),
            )
        })
}

fn count(js: Js, obj: Value, name: &str) -> Result<Option<u64>> {
    let Some(n) = number(js, obj, name)? else {
        return Ok(None);
    };
    if n < 1.0 || n.fract() != 0.0 || n > 2f64.powi(53) {
        return Err(bad(
            js,
            ErrorKind::Range,
            &format!("option `{name}` must be an integer >= 1, got {n}"),
        ));
    }
    Ok(Some(n as u64))
}

fn string(js: Js, obj: Value, name: &str) -> Result<Option<String>> {
    let v = js.get(obj, name)?;
    match js.type_of(v)? {
        Type::Undefined => Ok(None),
        Type::String => Ok(Some(js.get_string(v)?)),
        t => Err(bad(
            js,
            ErrorKind::Type,
            &format!("option `{name}` must be a string, got {}", t.name()),
        )),
    }
}

/// Refuses a field of the options object `obj` that is not in `known` (a misspelt option
/// silently ignored would be a bug nobody sees).
pub(crate) fn known_fields(js: Js, obj: Value, what: &str, known: &[&str]) -> Result<()> {
    for key in js.keys(obj)? {
        if !known.contains(&key.as_str()) {
            return Err(bad(
                js,
                ErrorKind::Type,
                &format!(
                    "unknown {what} option `{key}` (known: {})",
                    known.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// The `redis` option: one address, or the nodes of a Redis Cluster.
fn address(js: Js, v: Value) -> Result<TierAddress> {
    let invalid =
        |e: herdless_redis::Error| bad(js, ErrorKind::Type, &format!("option `redis`: {e}"));
    if js.is_array(v)? {
        let mut nodes = Vec::new();
        for i in 0..js.array_len(v)? {
            let node = js.get_element(v, i)?;
            if js.type_of(node)? != Type::String {
                return Err(bad(
                    js,
                    ErrorKind::Type,
                    &format!("option `redis`: node {i} must be a URL string"),
                ));
            }
            nodes.push(js.get_string(node)?);
        }
        return TierAddress::nodes(&nodes).map_err(invalid);
    }
    match js.type_of(v)? {
        Type::String => TierAddress::parse(&js.get_string(v)?).map_err(invalid),
        t => Err(bad(
            js,
            ErrorKind::Type,
            &format!(
                "option `redis` must be a URL string or an array of node URLs, got {}",
                t.name()
            ),
        )),
    }
}

/// The `codec` option.
fn codec(js: Js, obj: Value) -> Result<Codec> {
    let v = js.get(obj, "codec")?;
    match js.type_of(v)? {
        Type::Undefined => Ok(Codec::Json),
        Type::String => match js.get_string(v)?.as_str() {
            "json" => Ok(Codec::Json),
            "buffer" => Ok(Codec::Buffer),
            other => Err(bad(
                js,
                ErrorKind::Range,
                &format!(
                    "option `codec` must be 'json' or 'buffer' or a {{ encode, decode }} object, got {other:?}"
                ),
            )),
        },
        Type::Object if !js.is_array(v)? => {
            for f in ["encode", "decode"] {
                if js.type_of(js.get(v, f)?)? != Type::Function {
                    return Err(bad(
                        js,
                        ErrorKind::Type,
                        &format!("option `codec`: `{f}` must be a function"),
                    ));
                }
            }
            Ok(Codec::User(js.reference(v)?))
        }
        t => Err(bad(
            js,
            ErrorKind::Type,
            &format!(
                "option `codec` must be 'json' or 'buffer' or a {{ encode, decode }} object, got {}",
                t.name()
            ),
        )),
    }
}

/// Checks `options` (an object or undefined) and turns it into a builder.
pub(crate) fn parse(js: Js, options: Option<Value>) -> Result<Parsed> {
    let mut b = herdless::Cache::<Entry>::builder();
    let Some(obj) = options else {
        return Ok(Parsed::default());
    };
    match js.type_of(obj)? {
        Type::Undefined => return Ok(Parsed::default()),
        Type::Object if !js.is_array(obj)? => {}
        t => {
            let got = if t == Type::Object {
                "an array"
            } else {
                t.name()
            };
            return Err(bad(
                js,
                ErrorKind::Type,
                &format!("Cache options must be an object, got {got}"),
            ));
        }
    }
    for key in js.keys(obj)? {
        let known = DURATIONS.contains(&key.as_str())
            || DURATIONS_REDIS.contains(&key.as_str())
            || COUNTS.contains(&key.as_str())
            || OTHERS.contains(&key.as_str());
        if !known {
            let all = [
                &DURATIONS[..],
                &DURATIONS_REDIS[..],
                &COUNTS[..],
                &OTHERS[..],
            ]
            .concat()
            .join(", ");
            return Err(bad(
                js,
                ErrorKind::Type,
                &format!("unknown Cache option `{key}` (known options: {all})"),
            ));
        }
    }
    let d = |name, zero_ok| duration(js, obj, name, zero_ok);
    let ttl = d("ttl", false)?;
    if let Some(v) = ttl {
        b = b.ttl(v);
    }
    let grace = d("grace", true)?;
    if let Some(v) = grace {
        b = b.grace(v);
    }
    if let Some(o) = detector(js, obj, d("detectorTick", false)?)? {
        b = b.detector(o);
    }
    let negative_ttl = d("negativeTtl", false)?;
    if let Some(v) = negative_ttl {
        b = b.negative_ttl(v);
    }
    let wait_timeout = d("waitTimeout", false)?;
    if let Some(v) = wait_timeout {
        b = b.wait_timeout(v);
    }
    let max_stale = d("maxStale", false)?;
    if let Some(v) = max_stale {
        b = b.max_stale(v);
    }
    if let Some(v) = d("failsafeBackoff", true)? {
        b = b.failsafe_backoff(v);
    }
    let soft = d("softTimeout", false)?;
    if let Some(v) = soft {
        b = b.soft_timeout(v);
    }
    let hard = d("hardTimeout", false)?;
    if let Some(v) = hard {
        b = b.hard_timeout(v);
    }
    if let (Some(s), Some(h)) = (soft, hard) {
        if s >= h {
            return Err(bad(
                js,
                ErrorKind::Range,
                "option `softTimeout` must be shorter than `hardTimeout`",
            ));
        }
    }
    if let (Some(m), Some(g)) = (max_stale, grace) {
        if m < g {
            return Err(bad(
                js,
                ErrorKind::Range,
                "option `maxStale` must be at least `grace`",
            ));
        }
    }
    let jitter = number(js, obj, "jitter")?;
    if let Some(j) = jitter {
        if !(0.0..1.0).contains(&j) {
            return Err(bad(
                js,
                ErrorKind::Range,
                &format!("option `jitter` must be in [0, 1), got {j}"),
            ));
        }
        b = b.jitter(j);
    }
    if let Some(beta) = number(js, obj, "beta")? {
        if beta < 0.0 {
            return Err(bad(
                js,
                ErrorKind::Range,
                &format!("option `beta` must be >= 0, got {beta}"),
            ));
        }
        b = b.beta(beta);
    }
    // Its range is the core's to check (when the cache is built).
    if let Some(share) = number(js, obj, "refreshAhead")? {
        b = b.refresh_ahead(share);
    }
    if let Some(n) = count(js, obj, "capacity")? {
        b = b.capacity(n);
    }
    let usize_of = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
    if let Some(n) = count(js, obj, "originBudget")? {
        b = b.origin_budget(usize_of(n));
    }
    if let Some(n) = count(js, obj, "maxFlights")? {
        b = b.max_flights(usize_of(n));
    }
    if let Some(n) = count(js, obj, "maxBatch")? {
        b = b.max_batch(usize_of(n));
    }
    if let Some(n) = count(js, obj, "maxKeyLen")? {
        b = b.max_key_len(usize_of(n));
    }
    if let Some(n) = count(js, obj, "maxNamespaces")? {
        b = b.max_namespaces(usize_of(n));
    }
    let namespace = string(js, obj, "namespace")?;
    if let Some(ns) = &namespace {
        // The key builder's own rule: non-empty, no reserved character.
        if let Err(e) = herdless::KeyBuilder::new(ns).entity("x").build() {
            return Err(bad(
                js,
                ErrorKind::Range,
                &format!("option `namespace`: {e}"),
            ));
        }
    }
    let on_event = js.get(obj, "onEvent")?;
    let on_event = match js.type_of(on_event)? {
        Type::Undefined => None,
        Type::Function => Some(on_event),
        t => {
            return Err(bad(
                js,
                ErrorKind::Type,
                &format!("option `onEvent` must be a function, got {}", t.name()),
            ));
        }
    };
    let given = js.get(obj, "redis")?;
    let redis = if js.type_of(given)? == Type::Undefined {
        for name in ["redisPrefix", "codec", "lease"] {
            if js.type_of(js.get(obj, name)?)? != Type::Undefined {
                return Err(bad(
                    js,
                    ErrorKind::Type,
                    &format!("option `{name}` needs the `redis` option"),
                ));
            }
        }
        None
    } else {
        Some(RedisOptions {
            address: address(js, given)?,
            prefix: string(js, obj, "redisPrefix")?,
            codec: codec(js, obj)?,
            lease: d("lease", false)?,
        })
    };
    let front = front(js, obj)?;
    Ok(Parsed {
        builder: b,
        namespace,
        redis,
        on_event,
        front,
        copy_values: crate::copy::copy_values(js, obj)?,
    })
}

/// A per-call TTL in milliseconds (`set`, `getOrLoad`, `wrap`, `warm` options).
pub(crate) fn ttl(js: Js, obj: Value) -> Result<Option<Duration>> {
    duration(js, obj, "ttl", false)
}
