//! `herdless.testing.MemoryStore`: the in-memory shared tier (`Cache(redis="memory://name")`)
//! and its faults, for tests of code that runs on herdless (and for herdless's own
//! conformance scenarios): Redis down, stalled, losing notifications, corrupt state.

use std::time::Duration;

use herdless_redis::memory::{Fault, MemoryStore as Store};
use pyo3::prelude::*;

use crate::errors::config_error;
use crate::options::duration;

/// The shared store behind `memory://<name>`: every `Cache(redis="memory://<name>")` of
/// this process is one process of a simulated fleet over it.
#[pyclass(frozen, module = "herdless._native", name = "MemoryStore")]
pub(crate) struct MemoryStore(Store);

#[pymethods]
impl MemoryStore {
    /// The store of `memory://<name>` (created on first use).
    #[new]
    fn new(name: &str) -> Self {
        Self(Store::named(name))
    }

    /// Sets the fault: `"down"` (every call fails at once), `"stall"` (calls hang; a caller
    /// gives up after 1 s, and what it sent still runs when the stall ends),
    /// `"lose_notifications"`, `"bus_down"` (every cache's notice connection is down until
    /// the fault is cleared, then confirmed again), or `None` to clear it (with no
    /// `namespace`: every fault).
    /// With `namespace`, the fault of that namespace's operations alone, as when the Redis
    /// Cluster node that holds its slot fails while the others serve.
    #[pyo3(signature = (fault, namespace=None))]
    fn set_fault(
        &self,
        py: Python<'_>,
        fault: Option<&str>,
        namespace: Option<&str>,
    ) -> PyResult<()> {
        let fault = match fault {
            None => None,
            Some("down") => Some(Fault::Down),
            Some("stall") => Some(Fault::Stall),
            Some("lose_notifications") => Some(Fault::LoseNotifications),
            Some("bus_down") => Some(Fault::BusDown),
            Some(other) => {
                return Err(config_error(
                    py,
                    format!(
                        "unknown fault {other:?}: \"down\", \"stall\", \"lose_notifications\", \"bus_down\" or None"
                    ),
                ));
            }
        };
        match namespace {
            Some(ns) => self.0.set_namespace_fault(ns, fault),
            None => self.0.set_fault(fault),
        }
        Ok(())
    }

    /// Tells every cache on this store that notifications may have been lost (as after a
    /// subscription that dropped and came back): each drops its in-memory copies.
    fn restart_subscriptions(&self) {
        self.0.restart_subscriptions();
    }

    /// Forgets everything, as a Redis restarted empty.
    fn restart(&self) {
        self.0.restart();
    }

    /// Plants `data` under `key` (not an entry: corrupt state), as a program that is not
    /// herdless would: every cache's copy of `key` is dropped, as Redis's key tracking
    /// reports such a write.
    fn plant(&self, key: &str, data: &[u8]) {
        self.0.put_raw(key, data);
    }

    /// Deletes `key`'s value as a program that is not herdless would (`DEL`).
    fn delete_raw(&self, key: &str) {
        self.0.delete_raw(key);
    }

    /// Empties the store as `FLUSHDB` would: every cache drops its copies.
    fn flush(&self) {
        self.0.flush();
    }

    /// Plants `text` as `namespace`'s epoch.
    fn plant_epoch(&self, namespace: &str, text: &str) {
        self.0.put_epoch(namespace, text);
    }

    /// Plants `text` as `tag`'s record (PROTOCOL.md, "Tags"), or with `wrong_type` a key of
    /// another Redis type: corrupt state.
    #[pyo3(signature = (tag, text = None, wrong_type = false))]
    fn plant_tag(&self, tag: &str, text: Option<&str>, wrong_type: bool) {
        match (wrong_type, text) {
            (true, _) => self.0.put_tag_wrong_type(tag),
            (false, text) => self.0.put_tag_record(tag, text.unwrap_or_default()),
        }
    }

    /// Deletes `tag`'s record, as a `maxmemory` eviction (or its expiry) would.
    fn evict_tag(&self, tag: &str) {
        self.0.evict_tag(tag);
    }

    /// Plants a lock on `key` that no cache holds (a leader that died), for `seconds`.
    fn plant_lock(&self, py: Python<'_>, key: &str, seconds: Bound<'_, PyAny>) -> PyResult<()> {
        let d: Duration = duration(py, "seconds", &seconds, true)?;
        self.0.put_lock(key, d);
        Ok(())
    }
}
