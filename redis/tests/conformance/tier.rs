//! Where a conformance scenario runs ([`Tier`]): the in-memory tier, a private
//! redis-server, or a private memcached; how each plays the scenario's faults and planted
//! state.

use std::time::Duration;

use herdless_redis::memcached::MemcachedBackend;
use herdless_redis::memory::{Fault, MemoryStore};
use herdless_redis::{Codec, CodecError, RedisBackend, SharedTier, TieredCache};
use serde_json::Value;

use crate::common;
use crate::common::memcached::Memcached;
use crate::ms;

/// JSON, refusing the scenario's stand-in for a value the codec cannot encode.
pub(crate) struct ScenarioJson;

impl Codec<Value> for ScenarioJson {
    fn encode(&self, v: &Value) -> Result<Vec<u8>, CodecError> {
        if v.get("$unshareable").is_some() {
            return Err(CodecError::new("this value cannot be encoded"));
        }
        serde_json::to_vec(v).map_err(CodecError::new)
    }
    fn decode(&self, b: &[u8]) -> Result<Value, CodecError> {
        serde_json::from_slice(b).map_err(CodecError::new)
    }
}

pub(crate) type Cache = TieredCache<Value, ScenarioJson>;

/// Where a scenario runs.
pub(crate) enum Tier {
    Memory(MemoryStore),
    Redis(common::Server, String),
    Memcached(Memcached, String),
}

impl Tier {
    pub(crate) fn process(&self, cfg: &Value) -> Cache {
        let ms = |name: &str| {
            cfg.get(name)
                .and_then(Value::as_u64)
                .map(Duration::from_millis)
        };
        let backend: SharedTier = match self {
            Tier::Memory(store) => store.backend().build().expect("memory backend").into(),
            Tier::Redis(srv, prefix) => RedisBackend::builder(srv.url())
                .prefix(prefix.clone())
                .isolated()
                .build()
                .expect("redis backend")
                .into(),
            Tier::Memcached(m, prefix) => MemcachedBackend::builder([m.addr()])
                .prefix(prefix.clone())
                .build()
                .expect("memcached backend")
                .into(),
        };
        let mut b = TieredCache::builder(backend, ScenarioJson)
            .jitter(0.0)
            .beta(0.0);
        if let Some(d) = ms("ttl_ms") {
            b = b.ttl(d);
        }
        if let Some(d) = ms("grace_ms") {
            b = b.grace(d);
        }
        if let Some(d) = ms("negative_ttl_ms") {
            b = b.negative_ttl(d);
        }
        if let Some(d) = ms("tti_ms") {
            b = b.tti(d);
        }
        if let Some(d) = ms("wait_timeout_ms") {
            b = b.wait_timeout(d);
        }
        if let Some(d) = ms("lease_ms") {
            b = b.lease(d);
        }
        if let Some(d) = ms("max_stale_ms") {
            b = b.max_stale(d);
        }
        if let Some(d) = ms("hard_timeout_ms") {
            b = b.hard_timeout(d);
        }
        b.build().expect("cache")
    }

    /// `fault` of the whole tier, or with `ns` (memory only) of that namespace's slot
    /// alone (its Cluster node); `bus`: the notice connections are down (`bus_down`).
    pub(crate) fn fault(&mut self, fault: &str, ns: Option<&str>, bus: bool) {
        match self {
            Tier::Memory(store) => {
                let fault = match fault {
                    "down" => Some(Fault::Down),
                    "stall" => Some(Fault::Stall),
                    "lose_notifications" => Some(Fault::LoseNotifications),
                    "bus_down" => Some(Fault::BusDown),
                    "up" => None,
                    other => panic!("unknown fault {other}"),
                };
                match ns {
                    Some(ns) => store.set_namespace_fault(ns, fault),
                    None => store.set_fault(fault),
                }
            }
            Tier::Redis(..) | Tier::Memcached(..) if ns.is_some() => {
                panic!("a namespace's fault is memory only (one server has one node)")
            }
            Tier::Memcached(m, _) => match fault {
                "down" => m.kill(),
                "stall" => m.stop(),
                "up" if m.is_running() => m.resume(),
                "up" => m.restart(),
                other => panic!("fault {other} is not available on memcached (no bus)"),
            },
            Tier::Redis(srv, _) => match fault {
                "down" => srv.kill(),
                "stall" => srv.stop(),
                // The notice connections are killed, and their resubscription refused until
                // `up` (so the gap lasts until then, however fast redis-rs reconnects).
                "bus_down" => {
                    let mut c = srv.client();
                    let () = redis::cmd("ACL")
                        .arg(&[
                            "SETUSER",
                            "default",
                            "-psubscribe",
                            "-ssubscribe",
                            "-subscribe",
                        ])
                        .query(&mut c)
                        .expect("ACL SETUSER");
                    let _: i64 = redis::cmd("CLIENT")
                        .arg(&["KILL", "TYPE", "pubsub"])
                        .query(&mut c)
                        .expect("CLIENT KILL");
                }
                "up" if bus => {
                    let mut c = srv.client();
                    let () = redis::cmd("ACL")
                        .arg(&[
                            "SETUSER",
                            "default",
                            "+psubscribe",
                            "+ssubscribe",
                            "+subscribe",
                        ])
                        .query(&mut c)
                        .expect("ACL SETUSER");
                }
                "up" if srv.is_running() => srv.resume(),
                "up" => srv.restart(),
                other => panic!("fault {other} is not available on Redis"),
            },
        }
    }

    pub(crate) fn names(&self, key: &str) -> herdless_redis::keys::KeyNames {
        match self {
            Tier::Memory(_) => herdless_redis::keys::names("hl", key),
            // memcached takes these names as they are (the scenarios' keys fit in them).
            Tier::Redis(_, prefix) | Tier::Memcached(_, prefix) => {
                herdless_redis::keys::names(prefix, key)
            }
        }
    }

    pub(crate) fn plant(&self, step: &Value) {
        let text = |f: &str| step[f].as_str().expect("text").to_owned();
        match self {
            Tier::Memory(store) => match step["op"].as_str() {
                Some("plant") => store.put_raw(&text("key"), text("bytes").as_bytes()),
                Some("plant_epoch") => store.put_epoch(&text("ns"), &text("text")),
                Some("plant_lock") => store.put_lock(&text("key"), ms(step, "ms")),
                op => panic!("{op:?}"),
            },
            Tier::Redis(srv, prefix) => {
                let mut c = srv.client();
                let mut cmd = redis::cmd("SET");
                match step["op"].as_str() {
                    Some("plant") => cmd.arg(self.names(&text("key")).value).arg(text("bytes")),
                    Some("plant_epoch") => cmd
                        .arg(herdless_redis::keys::epoch_key(prefix, &text("ns")))
                        .arg(text("text")),
                    Some("plant_lock") => {
                        let n = self.names(&text("key"));
                        let epoch: Option<String> =
                            redis::cmd("GET").arg(&n.epoch).query(&mut c).expect("GET");
                        let epoch = epoch.unwrap_or_else(|| "0".into());
                        cmd.arg(n.lock)
                            .arg(format!("{epoch}:{}", "0".repeat(32)))
                            .arg("PX")
                            .arg(ms(step, "ms").as_millis() as u64)
                    }
                    op => panic!("{op:?}"),
                };
                let () = cmd.query(&mut c).expect("plant");
            }
            Tier::Memcached(m, prefix) => match step["op"].as_str() {
                Some("plant") => m.put(&self.names(&text("key")).value, text("bytes").as_bytes()),
                Some("plant_epoch") => m.put(
                    &herdless_redis::keys::epoch_key(prefix, &text("ns")),
                    text("text").as_bytes(),
                ),
                // A lease nobody holds (a leader that died): its marker, for `ms`.
                Some("plant_lock") => {
                    let secs = ms(step, "ms").as_millis().div_ceil(1000).max(1);
                    let name = self.names(&text("key")).value;
                    let marker = format!("herdless:lease:{}", "0".repeat(32));
                    let cmd = format!("ms {name} {} T{secs}\r\n{marker}\r\n", marker.len());
                    assert!(m.raw(cmd.as_bytes()).starts_with("HD"));
                }
                op => panic!("{op:?}"),
            },
        }
    }

    /// `outside_delete` (the value deleted by a program that is not herdless) and
    /// `outside_flush` (`FLUSHDB`).
    pub(crate) fn outside(&self, step: &Value) {
        let flush = step["op"] == "outside_flush";
        match self {
            Tier::Memory(store) if flush => store.flush(),
            Tier::Memory(store) => store.delete_raw(step["key"].as_str().expect("key")),
            Tier::Redis(srv, _) => {
                let mut c = srv.client();
                if flush {
                    let () = redis::cmd("FLUSHDB").query(&mut c).expect("FLUSHDB");
                } else {
                    let name = self.names(step["key"].as_str().expect("key")).value;
                    let _: i64 = redis::cmd("DEL").arg(name).query(&mut c).expect("DEL");
                }
            }
            Tier::Memcached(..) => panic!("outside writes are not followed on memcached"),
        }
    }

    /// `plant_tag` (raw `text`, or with `wrong_type` a key of another Redis type, as a tag's
    /// record) and `evict_tag` (the record deleted, as `maxmemory` eviction would).
    pub(crate) fn plant_tag(&self, step: &Value) {
        let tag = step["tag"].as_str().expect("tag");
        let wrong_type = step["wrong_type"].as_bool() == Some(true);
        let evict = step["op"] == "evict_tag";
        match self {
            Tier::Memory(store) if evict => store.evict_tag(tag),
            Tier::Memory(store) if wrong_type => store.put_tag_wrong_type(tag),
            Tier::Memory(store) => store.put_tag_record(tag, step["text"].as_str().expect("text")),
            Tier::Redis(srv, prefix) => {
                let mut c = srv.client();
                let name = herdless_redis::keys::tag_key(prefix, tag);
                let () = redis::cmd("DEL").arg(&name).query(&mut c).expect("DEL");
                if wrong_type {
                    let () = redis::cmd("LPUSH")
                        .arg(&name)
                        .arg("x")
                        .query(&mut c)
                        .expect("LPUSH");
                } else if !evict {
                    let text = step["text"].as_str().expect("text");
                    let () = redis::cmd("SET")
                        .arg(&name)
                        .arg(text)
                        .query(&mut c)
                        .expect("SET");
                }
            }
            Tier::Memcached(..) => panic!("memcached has no tags"),
        }
    }

    pub(crate) fn resubscribe(&self) {
        match self {
            Tier::Memory(store) => store.restart_subscriptions(),
            Tier::Redis(..) | Tier::Memcached(..) => panic!("resubscribe is memory only"),
        }
    }
}
