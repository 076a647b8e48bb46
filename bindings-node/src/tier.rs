//! The Redis tier (`new Cache({ redis: 'redis://...' })`): the in-memory engine stays the
//! first tier (L1) and does the in-process single-flight; its one local leader per key
//! drives the fleet protocol of `herdless-redis` ([`Fleet`], PROTOCOL.md), so Node, Python
//! and Rust processes sharing a Redis make one loader call per key between them.
//!
//! The fleet's futures (ask who loads, publish) are polled on the JS thread like waiters,
//! woken by the backend's own runtime. Values cross Redis through a [`Codec`]: JSON by
//! default (what the other languages read), or raw bytes for `Buffer` values.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use herdless::backend::{Backend, Notice, StoredEntry, WriteOutcome};
use herdless_redis::{Fleet, FleetOptions, FleetOutcome, RedisBackend};
use napi::Result;

use crate::js::{Js, Type, Value};
use crate::value::{Table, Val};

/// How values become the bytes of a shared entry and back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Codec {
    /// UTF-8 JSON text (`JSON.stringify` / `JSON.parse`), readable by every language.
    Json,
    /// The value is a `Buffer` (or any `Uint8Array`), stored as its bytes; read back as a
    /// `Buffer`.
    Buffer,
}

impl Codec {
    /// The bytes of `v`; `None` when this codec cannot share it (JSON of `undefined`, a
    /// function, a bigint, a cycle; a `Buffer` codec given something else). Such a value
    /// is served in this process only.
    pub(crate) fn encode(self, js: Js, v: Value) -> Result<Option<Vec<u8>>> {
        match self {
            Codec::Json => {
                let json = js.get(js.global()?, "JSON")?;
                let stringify = js.get(json, "stringify")?;
                match js.call(stringify, json, &[v])? {
                    Ok(text) if js.type_of(text)? == Type::String => {
                        Ok(Some(js.get_string(text)?.into_bytes()))
                    }
                    _ => Ok(None),
                }
            }
            Codec::Buffer => js.bytes(v),
        }
    }

    /// The value of `bytes`; `None` when they are not this codec's (another codec wrote
    /// them): the caller then loads locally and leaves Redis alone.
    pub(crate) fn decode(self, js: Js, bytes: &[u8]) -> Result<Option<Value>> {
        match self {
            Codec::Json => {
                let Ok(text) = std::str::from_utf8(bytes) else {
                    return Ok(None);
                };
                let json = js.get(js.global()?, "JSON")?;
                let parse = js.get(json, "parse")?;
                Ok(js.call(parse, json, &[js.string(text)?])?.ok())
            }
            Codec::Buffer => js.buffer(bytes).map(Some),
        }
    }
}

pub(crate) use herdless_redis::Lifetimes;

/// A fleet operation, polled on the JS thread.
pub(crate) type FleetFuture<T> =
    Pin<Box<dyn Future<Output = std::result::Result<T, herdless::Error>>>>;

/// The connection to the fleet. JS thread only (it lives in the cache's state).
pub(crate) struct Tier {
    pub(crate) backend: RedisBackend,
    pub(crate) fleet: Fleet,
    pub(crate) codec: Codec,
    life: Lifetimes,
    /// The L1 the notification listener keeps coherent. The listener lives as long as the
    /// backend's runtime, which may outlive this cache: [`Tier::detach`] empties the slot,
    /// so the engine (and the JS values it holds) go when the cache goes.
    listened: Arc<Mutex<Option<herdless::Cache<Val>>>>,
}

impl Tier {
    /// Connects (lazily: this succeeds while Redis is down) and keeps `l1` coherent with the
    /// fleet's writes, invalidations and bumps.
    pub(crate) fn connect(
        url: &str,
        prefix: Option<&str>,
        fleet: FleetOptions,
        codec: Codec,
        life: Lifetimes,
        l1: &herdless::Cache<Val>,
    ) -> std::result::Result<Self, herdless_redis::Error> {
        let mut b = RedisBackend::builder(url);
        if let Some(p) = prefix {
            b = b.prefix(p);
        }
        let backend = b.build()?;
        let listened = Arc::new(Mutex::new(Some(l1.clone())));
        let slot = listened.clone();
        // Runs on the backend's thread: dropping L1 values there is fine (see value.rs).
        backend.listen(Arc::new(move |n: Notice<'_>| {
            let l1 = slot.lock().unwrap_or_else(|e| e.into_inner()).clone();
            if let Some(l1) = l1 {
                herdless_redis::apply_notice(&l1, n);
            }
        }));
        Ok(Self {
            fleet: backend.fleet(fleet),
            backend,
            codec,
            life,
            listened,
        })
    }

    /// Stops keeping the L1 coherent (the cache is going away).
    pub(crate) fn detach(&self) {
        self.listened
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
    }

    /// Asks the fleet who loads `key` (`have`: the version a refresh replaces, else 0).
    pub(crate) fn ask(&self, key: &str, have: u64) -> FleetFuture<FleetOutcome> {
        let (fleet, key) = (self.fleet.clone(), key.to_owned());
        Box::pin(async move { fleet.lead(&key, have).await })
    }

    /// Writes `entry` for the fleet (a `set`).
    pub(crate) fn set(&self, key: &str, entry: StoredEntry) -> FleetFuture<WriteOutcome> {
        let (fleet, key) = (self.fleet.clone(), key.to_owned());
        Box::pin(async move { fleet.set(&key, entry).await })
    }

    /// Deletes `key` for the fleet.
    pub(crate) fn invalidate(&self, key: &str) -> FleetFuture<bool> {
        let (fleet, key) = (self.fleet.clone(), key.to_owned());
        Box::pin(async move { fleet.invalidate(&key).await })
    }

    /// Bumps `namespace` for the fleet.
    pub(crate) fn bump(&self, namespace: &str) -> FleetFuture<u64> {
        let (fleet, ns) = (self.fleet.clone(), namespace.to_owned());
        Box::pin(async move { fleet.bump(&ns).await })
    }

    /// The L1 value of a shared entry (`Some(None)`: a cached absence); `None` when its
    /// bytes are not this codec's.
    pub(crate) fn decode(
        &self,
        js: Js,
        table: &Table,
        e: &StoredEntry,
    ) -> Result<Option<Option<Val>>> {
        let Some(bytes) = &e.value else {
            return Ok(Some(None));
        };
        let Some(v) = self.codec.decode(js, bytes)? else {
            return Ok(None);
        };
        let val = table.store(js, v)?;
        val.set_version(e.version);
        Ok(Some(Some(val)))
    }

    /// The shared entry of a value just loaded or set (jittered once, here, for the whole
    /// fleet), and how long it is fresh. `ttl` overrides the cache's for a value.
    pub(crate) fn entry(
        &self,
        value: Option<Vec<u8>>,
        took: Duration,
        epoch: u64,
        ttl: Option<Duration>,
    ) -> (StoredEntry, Duration) {
        self.life.entry(value, took, epoch, ttl)
    }

    /// How long a shared entry is still fresh from now.
    pub(crate) fn fresh_for(e: &StoredEntry) -> Duration {
        herdless_redis::fresh_for(e)
    }
}

/// Warns (`process.emitWarning`) that a value cannot be shared through Redis by the codec:
/// it is served in this process only.
pub(crate) fn warn_unshareable(js: Js, key: &str) -> Result<()> {
    let process = js.get(js.global()?, "process")?;
    let message = js.string(&format!(
        "herdless: the value of {key:?} cannot be encoded by the cache's codec; it is served in this process only, not shared through Redis"
    ))?;
    let kind = js.string("HerdlessWarning")?;
    js.call_method(process, "emitWarning", &[message, kind])?;
    Ok(())
}
