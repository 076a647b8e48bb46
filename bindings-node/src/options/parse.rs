//! `new Cache(options)` read into the engine's builder and the binding's own options.

use std::time::Duration;

use napi::Result;

use super::detector::detector;
use super::front::{FrontSize, front};
use super::read::{bad, boolean, count, duration, number, string};
use crate::codec::Codec;
use crate::js::{ErrorKind, Js, Type, Value};
use crate::value::Entry;
use herdless_redis::TierAddress;

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

/// The options of the shared tier.
pub(crate) struct RedisOptions {
    pub(crate) address: TierAddress,
    pub(crate) prefix: Option<String>,
    pub(crate) codec: Codec,
    pub(crate) lease: Option<Duration>,
}

const DURATIONS: [&str; 10] = [
    "ttl",
    "tti",
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
const OTHERS: [&str; 13] = [
    "admission",
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
    "memcached",
];

/// The strings of the array `v` (option `option`); a non-string element is refused as
/// `<option>: <what> <i> must be <kind>`.
fn strings(js: Js, v: Value, option: &str, (what, kind): (&str, &str)) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for i in 0..js.array_len(v)? {
        let s = js.get_element(v, i)?;
        if js.type_of(s)? != Type::String {
            return Err(bad(
                js,
                ErrorKind::Type,
                &format!("option `{option}`: {what} {i} must be {kind}"),
            ));
        }
        out.push(js.get_string(s)?);
    }
    Ok(out)
}

/// The `memcached` option: `'host:port'` (servers separated by commas) or an array of them;
/// the fleet engine parses it.
fn memcached(js: Js, v: Value) -> Result<TierAddress> {
    let invalid =
        |e: herdless_redis::Error| bad(js, ErrorKind::Type, &format!("option `memcached`: {e}"));
    let servers = if js.is_array(v)? {
        strings(js, v, "memcached", ("server", "a 'host:port' string"))?
    } else if js.type_of(v)? == Type::String {
        vec![js.get_string(v)?]
    } else {
        return Err(bad(
            js,
            ErrorKind::Type,
            "option `memcached` must be a 'host:port' string or an array of them",
        ));
    };
    TierAddress::memcached(&servers).map_err(invalid)
}

/// The `redis` option: one address, or the nodes of a Redis Cluster.
fn address(js: Js, v: Value) -> Result<TierAddress> {
    let invalid =
        |e: herdless_redis::Error| bad(js, ErrorKind::Type, &format!("option `redis`: {e}"));
    if js.is_array(v)? {
        let nodes = strings(js, v, "redis", ("node", "a URL string"))?;
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
    // Zero is refused; a positive value under a nanosecond is too, by the builder.
    if let Some(v) = d("tti", false)? {
        b = b.tti(v);
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
    if boolean(js, obj, "admission")? == Some(true) {
        b = b.admission(herdless::Admission::TinyLfu);
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
    let on_memcached = js.get(obj, "memcached")?;
    let given_tier = match js.type_of(given)? {
        Type::Undefined => None,
        _ => Some(address(js, given)?),
    };
    let memcached_tier = match js.type_of(on_memcached)? {
        Type::Undefined => None,
        _ => Some(memcached(js, on_memcached)?),
    };
    let tier = TierAddress::one_of(given_tier, memcached_tier)
        .map_err(|e| bad(js, ErrorKind::Type, &e.to_string()))?;
    let redis = match tier {
        None => {
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
        }
        Some(address) => Some(RedisOptions {
            address,
            prefix: string(js, obj, "redisPrefix")?,
            codec: codec(js, obj)?,
            lease: d("lease", false)?,
        }),
    };
    let front = front(js, obj)?;
    Ok(Parsed {
        builder: b,
        namespace,
        redis,
        on_event,
        front,
        copy_values: boolean(js, obj, "copyValues")?.unwrap_or(herdless::DEFAULT_COPY_VALUES),
    })
}
