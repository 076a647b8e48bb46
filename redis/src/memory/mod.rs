//! [`MemoryBackend`]: the shared tier in this process's memory, with faults on demand.
//!
//! A [`MemoryStore`] stands for one Redis; each [`MemoryBackend`] over it stands for one
//! process of the fleet (its own origin id, notifications, watches), so a test runs a
//! whole fleet in one process. It follows the protocol of PROTOCOL.md operation for
//! operation (the scripts' rules, repairs included), on the wall clock as Redis does, and
//! its notifications go through the same hub as Redis's, so the fleet engine above it
//! cannot tell the difference. The faults:
//!
//! - [`Fault::Down`]: every operation fails at once (a refused connection);
//! - [`Fault::Stall`]: every operation waits until the stall ends; a caller gives up at
//!   the backend's `op_timeout`, and what it sent still runs when the stall ends (as a
//!   Redis script does after `SIGSTOP`/`DEBUG SLEEP`);
//! - [`Fault::Delay`]: every operation takes this long first (a slow network);
//! - [`Fault::LoseNotifications`]: published messages reach nobody;
//! - [`Fault::BusDown`]: every process's subscription is known down (its connection was
//!   killed) and messages reach nobody; when it ends, each subscription is confirmed
//!   again and its process told that messages may have been lost;
//! - [`MemoryStore::set_namespace_fault`]: any of these for one namespace's operations
//!   only, as when the Cluster node that holds its slot fails (a namespace is one slot:
//!   PROTOCOL.md section 1) while the other nodes serve;
//! - [`MemoryStore::restart`]: everything is gone, and every process is told its
//!   notifications may have been lost (as after a resubscription);
//! - [`MemoryStore::put_raw`] and friends: bytes, epochs, tag records and keys of the wrong
//!   type, planted as an attacker or a bug would (a value planted or
//!   [deleted](MemoryStore::delete_raw) is reported to every process as Redis's key
//!   tracking reports a write from outside herdless; [`MemoryStore::flush`] as `FLUSHDB`); [`MemoryStore::evict_tag`]: a tag's record
//!   gone as under `maxmemory` eviction.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use herdless::backend::StoredEntry;
use herdless::key::namespace_of;

use crate::notify::Hub;
use crate::wall::now_ms;
use crate::wire;

mod backend;

pub use backend::{MemoryBackend, MemoryBuilder};

/// A fault of a [`MemoryStore`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// Every operation fails at once.
    Down,
    /// Operations wait until the stall is cleared; callers give up at `op_timeout`, and
    /// what they sent runs when the stall ends.
    Stall,
    /// Every operation takes this long first.
    Delay(Duration),
    /// Published messages reach nobody.
    LoseNotifications,
    /// The processes' subscription connections are down (killed, as by `CLIENT KILL TYPE
    /// pubsub`, and not yet resubscribed): messages reach nobody, and each process knows
    /// its subscription is down. When the fault ends, every subscription is confirmed
    /// again. A whole store's fault: as one namespace's, it only loses that namespace's
    /// messages (as [`LoseNotifications`](Self::LoseNotifications)).
    BusDown,
}

/// What a key of the store holds: a string, or something of another Redis type (a list, a
/// hash: corrupt state as far as herdless is concerned).
#[derive(Clone, Debug)]
enum Slot {
    Str(Vec<u8>),
    Other,
}

#[derive(Default)]
struct Data {
    /// name -> (content, expires at Unix ms; `u64::MAX`: never).
    keys: HashMap<String, (Slot, u64)>,
}

impl Data {
    fn live(&mut self, name: &str, now: u64) -> Option<&Slot> {
        if self.keys.get(name).is_some_and(|(_, at)| *at <= now) {
            self.keys.remove(name);
        }
        self.keys.get(name).map(|(s, _)| s)
    }

    /// GET that heals, as the scripts' `get`: another type is deleted; `(value, repaired)`.
    fn get(&mut self, name: &str, now: u64) -> (Option<Vec<u8>>, bool) {
        match self.live(name, now).cloned() {
            None => (None, false),
            Some(Slot::Str(b)) => (Some(b), false),
            Some(Slot::Other) => {
                self.keys.remove(name);
                (None, true)
            }
        }
    }

    fn set(&mut self, name: &str, value: Vec<u8>, px: Option<u64>, now: u64) {
        let at = px.map_or(u64::MAX, |px| now.saturating_add(px.max(1)));
        self.keys.insert(name.to_owned(), (Slot::Str(value), at));
    }

    /// `PEXPIRE name px GT`: a live key's expiry moved to `px` from now if that is later.
    fn lengthen(&mut self, name: &str, px: u64, now: u64) -> bool {
        if self.live(name, now).is_none() {
            return false;
        }
        let Some((_, at)) = self.keys.get_mut(name) else {
            return false;
        };
        let later = now.saturating_add(px.max(1));
        // GT: a key without an expiry counts as infinite, as in Redis.
        let moved = *at != u64::MAX && later > *at;
        if moved {
            *at = later;
        }
        moved
    }

    fn pttl(&self, name: &str, now: u64) -> i64 {
        match self.keys.get(name) {
            None => -2,
            Some((_, u64::MAX)) => -1,
            Some((_, at)) => i64::try_from(at.saturating_sub(now)).unwrap_or(i64::MAX),
        }
    }

    /// The namespace epoch, reset forward to the clock when corrupt; `(epoch, repaired)`.
    fn epoch(&mut self, name: &str, now: u64) -> (u64, bool) {
        let (raw, bad) = self.get(name, now);
        if raw.is_none() && !bad {
            return (0, false);
        }
        if let Some(e) = raw.as_deref().and_then(crate::backend::parse_epoch) {
            return (e, false);
        }
        // Forward to the clock in microseconds, as the scripts do.
        let forward = crate::wall::now_us();
        self.set(name, forward.to_string().into_bytes(), None, now);
        (forward, true)
    }
}

/// An operation sent during a stall: it runs, in the order sent, when the stall ends.
type Stalled = Box<dyn FnOnce() + Send>;

/// The store's faults, and the operations a stall holds back.
#[derive(Default)]
struct Faults {
    /// The whole store's fault (one Redis server, or every node).
    all: Option<Fault>,
    /// Faults of single namespaces (the node of their slot); the store's own comes first.
    namespaces: HashMap<String, Fault>,
    /// Operations held back by a stall, in the order sent, each with its namespace.
    held: Vec<(Option<String>, Stalled)>,
}

impl Faults {
    /// The fault an operation on `namespace` (`None`: on no namespace's slot) meets.
    fn of(&self, namespace: Option<&str>) -> Option<Fault> {
        self.all
            .or_else(|| namespace.and_then(|ns| self.namespaces.get(ns).copied()))
    }

    /// The held operations no stall holds any more, in the order sent.
    fn unstalled(&mut self) -> Vec<Stalled> {
        let (go, stay): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|(ns, _)| self.of(ns.as_deref()) != Some(Fault::Stall));
        self.held = stay;
        go.into_iter().map(|(_, op)| op).collect()
    }
}

struct StoreInner {
    data: Mutex<Data>,
    fault: Mutex<Faults>,
    /// The processes, for notifications.
    hubs: Mutex<Vec<Weak<Hub>>>,
}

/// One shared tier in memory (one Redis, as far as the fleet is concerned). Cheap to clone.
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<StoreInner>,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("fault", &self.fault())
            .finish_non_exhaustive()
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

/// The prefix of the store's names (as Redis's default).
const PREFIX: &str = "hl";

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(StoreInner {
                data: Mutex::default(),
                fault: Mutex::default(),
                hubs: Mutex::default(),
            }),
        }
    }

    /// The store of `name` in this process's registry (created on first use): what
    /// `memory://<name>` means to the bindings, so caches created apart share one store.
    pub fn named(name: &str) -> Self {
        static NAMED: Mutex<Option<HashMap<String, MemoryStore>>> = Mutex::new(None);
        let mut named = NAMED.lock().unwrap_or_else(|e| e.into_inner());
        named
            .get_or_insert_with(HashMap::new)
            .entry(name.to_owned())
            .or_default()
            .clone()
    }

    /// A new process of the fleet over this store.
    pub fn backend(&self) -> MemoryBuilder {
        MemoryBuilder::new(self.clone())
    }

    /// Sets the whole store's fault; `None` ends every fault, the namespaces' too (all
    /// is well again). Ending a stall runs what was sent meanwhile, in order.
    pub fn set_fault(&self, fault: Option<Fault>) {
        let (held, was) = {
            let mut f = self.lock_fault();
            let was = std::mem::replace(&mut f.all, fault);
            if fault.is_none() {
                f.namespaces.clear();
            }
            (f.unstalled(), was)
        };
        let bus_down = |f: Option<Fault>| f == Some(Fault::BusDown);
        if bus_down(fault) && !bus_down(was) {
            for hub in self.hubs() {
                hub.disconnect();
            }
        }
        if bus_down(was) && !bus_down(fault) {
            for hub in self.hubs() {
                hub.confirmed();
            }
        }
        for op in held {
            op();
        }
    }

    /// Sets (or with `None` clears) the fault of `namespace`'s operations alone: the
    /// Cluster node that holds its slot is down, stalled, slow or loses its notices while
    /// the others serve. The whole store's fault, if any, comes first. Ending a stall runs
    /// what was sent to the namespace meanwhile, in order.
    pub fn set_namespace_fault(&self, namespace: &str, fault: Option<Fault>) {
        let held = {
            let mut f = self.lock_fault();
            match fault {
                Some(fault) => f.namespaces.insert(namespace.to_owned(), fault),
                None => f.namespaces.remove(namespace),
            };
            f.unstalled()
        };
        for op in held {
            op();
        }
    }

    /// The whole store's fault.
    pub fn fault(&self) -> Option<Fault> {
        self.lock_fault().all
    }

    /// The fault an operation on `namespace` meets (`None`: an operation on no
    /// namespace's slot, such as a tag's, meets the whole store's only).
    pub fn fault_of(&self, namespace: Option<&str>) -> Option<Fault> {
        self.lock_fault().of(namespace)
    }

    fn lock_fault(&self) -> std::sync::MutexGuard<'_, Faults> {
        self.inner.fault.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `op` (on `namespace`'s slot, if any) now, or, while a stall holds it, when the
    /// stall ends (`false`: held back).
    fn run_or_hold(&self, namespace: Option<&str>, op: Stalled) -> bool {
        let mut f = self.lock_fault();
        if f.of(namespace) == Some(Fault::Stall) {
            f.held.push((namespace.map(str::to_owned), op));
            return false;
        }
        drop(f);
        op();
        true
    }

    fn data(&self) -> std::sync::MutexGuard<'_, Data> {
        self.inner.data.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets everything (Redis restarted empty); every process is told its notifications
    /// may have been lost.
    pub fn restart(&self) {
        self.data().keys.clear();
        for hub in self.hubs() {
            hub.lost();
        }
    }

    /// Tells every process its notifications may have been lost (a subscription that
    /// dropped and came back), keeping the data.
    pub fn restart_subscriptions(&self) {
        for hub in self.hubs() {
            hub.lost();
        }
    }

    /// Plants `bytes` under `key`'s value name (no TTL), as a bug, an attacker or another
    /// program would: every process's copies of `key` are dropped, as the server's key
    /// tracking reports such a write (PROTOCOL.md section 4, "Writes from outside herdless").
    pub fn put_raw(&self, key: &str, bytes: &[u8]) {
        let n = crate::keys::names(PREFIX, key);
        self.data().set(&n.value, bytes.to_vec(), None, now_ms());
        self.outside(key);
    }

    /// Deletes `key`'s value as another program would (`DEL`): copies are dropped, as for
    /// [`put_raw`](Self::put_raw).
    pub fn delete_raw(&self, key: &str) {
        let n = crate::keys::names(PREFIX, key);
        self.data().keys.remove(&n.value);
        self.outside(key);
    }

    /// Empties the store as `FLUSHDB` would: every process is told its copies may be
    /// outdated (key tracking reports a flush), and keeps its subscriptions.
    pub fn flush(&self) {
        self.restart();
    }

    /// Key tracking's report of an outside change of `key`'s value, unless the bus is down
    /// (then the processes hear of the gap when it is back).
    fn outside(&self, key: &str) {
        if matches!(
            self.fault_of(Some(namespace_of(key))),
            Some(Fault::LoseNotifications | Fault::BusDown)
        ) {
            return;
        }
        for hub in self.hubs() {
            hub.outside(key);
        }
    }

    /// Plants raw text as `namespace`'s epoch.
    pub fn put_epoch(&self, namespace: &str, text: &str) {
        let name = crate::keys::epoch_key(PREFIX, namespace);
        self.data()
            .set(&name, text.as_bytes().to_vec(), None, now_ms());
    }

    /// Makes `key`'s value (or with `lock`, its lock) a key of another Redis type.
    pub fn put_wrong_type(&self, key: &str, lock: bool) {
        let n = crate::keys::names(PREFIX, key);
        let name = if lock { n.lock } else { n.value };
        self.data().keys.insert(name, (Slot::Other, u64::MAX));
    }

    /// Plants raw text as `tag`'s record (PROTOCOL.md, "Tags"), without a TTL, as a bug, an
    /// older writer or an attacker would.
    pub fn put_tag_record(&self, tag: &str, text: &str) {
        let name = crate::keys::tag_key(PREFIX, tag);
        self.data()
            .set(&name, text.as_bytes().to_vec(), None, now_ms());
    }

    /// Makes `tag`'s record a key of another Redis type.
    pub fn put_tag_wrong_type(&self, tag: &str) {
        let name = crate::keys::tag_key(PREFIX, tag);
        self.data().keys.insert(name, (Slot::Other, u64::MAX));
    }

    /// Deletes `tag`'s record, as a `maxmemory` eviction (or its expiry) would.
    pub fn evict_tag(&self, tag: &str) {
        let name = crate::keys::tag_key(PREFIX, tag);
        self.data().keys.remove(&name);
    }

    /// Plants a lock on `key` that no live process holds (a leader that died), for `px`.
    pub fn put_lock(&self, key: &str, px: Duration) {
        let n = crate::keys::names(PREFIX, key);
        let mut data = self.data();
        let now = now_ms();
        let (ep, _) = data.epoch(&n.epoch, now);
        let value = format!("{ep}:{}", "0".repeat(32));
        data.set(&n.lock, value.into_bytes(), Some(ms(px)), now);
    }

    /// The entry under `key`, if its bytes are one (any epoch, any age).
    pub fn entry(&self, key: &str) -> Option<StoredEntry> {
        let n = crate::keys::names(PREFIX, key);
        let (raw, _) = self.data().get(&n.value, now_ms());
        wire::decode(&raw?).ok()
    }

    /// Whether `key`'s lock is held (by anyone, or marked unshared).
    pub fn locked(&self, key: &str) -> bool {
        let n = crate::keys::names(PREFIX, key);
        self.data().get(&n.lock, now_ms()).0.is_some()
    }

    /// The epoch text of `namespace`, as stored.
    pub fn epoch_text(&self, namespace: &str) -> Option<String> {
        let name = crate::keys::epoch_key(PREFIX, namespace);
        let (raw, _) = self.data().get(&name, now_ms());
        raw.map(|b| String::from_utf8_lossy(&b).into_owned())
    }

    /// Makes `hub` hear the store's notices from now on.
    pub(crate) fn subscribe(&self, hub: &Arc<Hub>) {
        let mut hubs = self.inner.hubs.lock().unwrap_or_else(|e| e.into_inner());
        hubs.push(Arc::downgrade(hub));
    }

    fn hubs(&self) -> Vec<Arc<Hub>> {
        let mut hubs = self.inner.hubs.lock().unwrap_or_else(|e| e.into_inner());
        hubs.retain(|h| h.strong_count() > 0);
        hubs.iter().filter_map(Weak::upgrade).collect()
    }

    fn publish(&self, kind: char, origin: &str, number: u64, key: &str) {
        // A tag's notice ('t', 'x') is on the tags channel, no namespace's.
        let namespace = (!matches!(kind, 't' | 'x')).then(|| namespace_of(key));
        if matches!(
            self.fault_of(namespace),
            Some(Fault::LoseNotifications | Fault::BusDown)
        ) {
            return;
        }
        let message = format!("{kind}:{origin}:{number}:{key}");
        for hub in self.hubs() {
            hub.on_message(message.as_bytes());
        }
    }
}

fn ms(d: Duration) -> u64 {
    crate::backend::ms_arg(d)
}
