//! `require('herdless').testing`: the shared tier in this process's memory, with faults on
//! demand, for testing code that uses a fleet cache (and for the conformance scenarios).

use std::time::Duration;

use herdless_redis::memory::{self, Fault};
use napi::Result;
use napi::bindgen_prelude::Env;
use napi_derive::napi;

use crate::errors::{code, throw_new};
use crate::js::{ErrorKind, Js};

/// A shared tier in memory, standing for one Redis: every `new Cache({ redis:
/// 'memory://<name>' })` with its name is one process of its fleet. It follows the wire
/// protocol's rules (locks, epochs, notifications, repairs) on the wall clock, with the
/// prefix `hl`. Get one with `testing.memoryStore(name)`.
#[napi(namespace = "testing")]
pub struct MemoryStore {
    store: memory::MemoryStore,
}

#[napi(namespace = "testing")]
impl MemoryStore {
    /// Sets the store's fault, or clears it with `null` (with no `namespace`: every fault):
    /// `'down'` (every operation fails at once, as a refused connection), `'stall'`
    /// (operations wait; callers give up at their 1 s operation timeout, and what they sent
    /// runs when the stall is cleared, as on a stopped Redis), `'lose_notifications'`
    /// (published notifications reach nobody), `'bus_down'` (every cache's notice connection
    /// is down until the fault is cleared, then confirmed again). With `namespace`, the fault of that
    /// namespace's operations alone, as when the Redis Cluster node that holds its slot
    /// fails while the others serve.
    #[napi(
        ts_args_type = "fault: 'down' | 'stall' | 'lose_notifications' | 'bus_down' | null, namespace?: string"
    )]
    pub fn set_fault(
        &self,
        env: &Env,
        fault: Option<String>,
        namespace: Option<String>,
    ) -> Result<()> {
        let fault = match fault.as_deref() {
            None => None,
            Some("down") => Some(Fault::Down),
            Some("stall") => Some(Fault::Stall),
            Some("lose_notifications") => Some(Fault::LoseNotifications),
            Some("bus_down") => Some(Fault::BusDown),
            Some(other) => {
                let message = format!(
                    "the fault must be 'down', 'stall', 'lose_notifications', 'bus_down' or null, got {other:?}"
                );
                return Err(throw_new(
                    Js(env.raw()),
                    ErrorKind::Range,
                    code::INVALID_ARGUMENT,
                    &message,
                ));
            }
        };
        match namespace {
            Some(ns) => self.store.set_namespace_fault(&ns, fault),
            None => self.store.set_fault(fault),
        }
        Ok(())
    }

    /// Tells every cache of the store that its notifications may have been lost (a
    /// subscription that dropped and came back): each drops its whole memory tier.
    #[napi]
    pub fn restart_subscriptions(&self) {
        self.store.restart_subscriptions();
    }

    /// Plants `text` as the raw bytes under `key`'s value (no expiry), as a bug, an
    /// attacker or another program would: bytes that are not an entry are a miss for every
    /// reader, and every cache's copy of `key` is dropped (as Redis's key tracking reports
    /// such a write).
    #[napi]
    pub fn plant(&self, key: String, text: String) {
        self.store.put_raw(&key, text.as_bytes());
    }

    /// Deletes `key`'s value as a program that is not herdless would (`DEL`).
    #[napi]
    pub fn delete_raw(&self, key: String) {
        self.store.delete_raw(&key);
    }

    /// Empties the store as `FLUSHDB` would: every cache drops its copies.
    #[napi]
    pub fn flush(&self) {
        self.store.flush();
    }

    /// Plants `text` as the epoch of `namespace` (a corrupt epoch is repaired forward).
    #[napi]
    pub fn plant_epoch(&self, namespace: String, text: String) {
        self.store.put_epoch(&namespace, &text);
    }

    /// Plants `text` as the record of the entry tag `tag` (no expiry), as a bug, an older
    /// release or an attacker would: text that is not a record removes every entry carrying
    /// the tag.
    #[napi]
    pub fn plant_tag(&self, tag: String, text: String) {
        self.store.put_tag_record(&tag, &text);
    }

    /// Makes the record of the entry tag `tag` a key of another Redis type.
    #[napi]
    pub fn plant_tag_wrong_type(&self, tag: String) {
        self.store.put_tag_wrong_type(&tag);
    }

    /// Deletes the record of the entry tag `tag`, as a `maxmemory` eviction (or its expiry)
    /// would: the entries carrying it are removed, never served again.
    #[napi]
    pub fn evict_tag(&self, tag: String) {
        self.store.evict_tag(&tag);
    }

    /// Plants a lock on `key` that no live cache holds (a leader that died), for `ms`
    /// milliseconds.
    #[napi]
    pub fn plant_lock(&self, env: &Env, key: String, ms: f64) -> Result<()> {
        let lease = Some(ms / 1000.0)
            .filter(|s| *s > 0.0)
            .and_then(|s| Duration::try_from_secs_f64(s).ok());
        let Some(lease) = lease else {
            let message =
                format!("the lock's duration must be a number of milliseconds > 0, got {ms}");
            return Err(throw_new(
                Js(env.raw()),
                ErrorKind::Range,
                code::INVALID_ARGUMENT,
                &message,
            ));
        };
        self.store.put_lock(&key, lease);
        Ok(())
    }
}

/// The in-memory shared tier named `name` (made on first use), the one that caches created
/// with `redis: 'memory://<name>'` share.
#[napi(namespace = "testing")]
pub fn memory_store(name: String) -> MemoryStore {
    MemoryStore {
        store: memory::MemoryStore::named(&name),
    }
}
