//! Changes told within one process. Caches of a process over the same Redis keyspace (the
//! server and database, or the Cluster, and the key prefix) hear each other's changes
//! before the call that made them returns, instead of one pub/sub delivery later
//! (PROTOCOL.md section 4, "In one process"): two Django aliases, or two `Cache(redis=...)`
//! of one program, never disagree about what one of them just wrote, deleted or bumped.
//! Redis delivers the same message to them afterwards; it is recognised and applied once.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};

/// A process's end of the notifications of one backend (`notify::Hub`), as this module
/// needs it (a trait, so that this module depends on nothing of the hub's).
pub(crate) trait Peer: Send + Sync {
    /// The backend's origin id.
    fn origin(&self) -> &str;
    /// Its record of what other caches of this process told it.
    fn echoes(&self) -> &Echoes;
    /// The channel a message of `kind` about `key` is published on.
    fn channel_of(&self, kind: char, key: &str) -> String;
    /// Whether a message published on `channel` would reach it through Redis.
    fn hears(&self, channel: &str) -> bool;
    /// Acts on a message as on one from another process; `count`: whether it is news
    /// (counted in `notices`), or a copy already counted on its other path.
    fn on_message(&self, payload: &[u8], count: bool);
}

/// This process's keyspaces by name, each shared by the hubs that joined it.
static LOCAL: Mutex<Option<HashMap<String, Weak<Keyspace>>>> = Mutex::new(None);

/// Unmatched arrivals a hub remembers at most (a message Redis lost leaves one behind):
/// past it they are forgotten, and a late copy is applied a second time (harmless: a copy
/// dropped once more).
const MAX_UNMATCHED: usize = 4096;

/// The hubs of one keyspace in this process, and their origins (whose messages come
/// twice: told here, then from Redis). Dropped with its last hub.
struct Keyspace {
    hubs: Mutex<Vec<Weak<dyn Peer>>>,
    origins: RwLock<HashSet<String>>,
}

/// What a hub knows of the messages other caches of its process tell it.
#[derive(Default)]
pub(crate) struct Echoes {
    /// The keyspace joined and this hub's origin in it, if any.
    joined: OnceLock<(Arc<Keyspace>, String)>,
    /// Payload -> arrivals told locally minus arrivals from Redis, not yet matched.
    balance: Mutex<HashMap<Vec<u8>, i32>>,
}

impl Echoes {
    fn balance(&self) -> std::sync::MutexGuard<'_, HashMap<Vec<u8>, i32>> {
        self.balance.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether this arrival of `payload` (from `origin`; told locally, or from Redis) is
    /// its first, to be applied; the second, from the other path, is not. A message from
    /// another process, or this hub's own, comes once and is always applied.
    pub(crate) fn first(&self, payload: &[u8], origin: &str, local: bool) -> bool {
        // A release is never told locally: it comes once, from Redis.
        if payload.first() == Some(&b'r') {
            return true;
        }
        if !local {
            let Some((keyspace, own)) = self.joined.get() else {
                return true;
            };
            let sibling = origin != own
                && keyspace
                    .origins
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .contains(origin);
            if !sibling {
                return true;
            }
        }
        let mut balance = self.balance();
        if balance.len() >= MAX_UNMATCHED {
            balance.clear();
        }
        let b = balance.entry(payload.to_vec()).or_insert(0);
        let before = *b;
        *b += if local { 1 } else { -1 };
        let first = b.abs() > before.abs();
        if *b == 0 {
            balance.remove(payload);
        }
        first
    }

    /// Messages may have been lost: unmatched arrivals are forgotten (every copy they
    /// concerned is dropped anyway).
    pub(crate) fn clear(&self) {
        self.balance().clear();
    }
}

impl Drop for Echoes {
    /// The hub is gone: its origin leaves the keyspace.
    fn drop(&mut self) {
        if let Some((keyspace, own)) = self.joined.get() {
            let mut origins = keyspace.origins.write().unwrap_or_else(|e| e.into_inner());
            origins.remove(own);
        }
    }
}

/// Joins `hub` to this process's hubs of `keyspace` (once): from now on the changes its
/// backend makes are told to the others at once ([`tell`]), and theirs to it.
pub(crate) fn join(hub: Arc<dyn Peer>, keyspace: String) {
    let shared = {
        let mut local = LOCAL.lock().unwrap_or_else(|e| e.into_inner());
        let map = local.get_or_insert_with(HashMap::new);
        map.retain(|_, k| k.strong_count() > 0);
        match map.get(&keyspace).and_then(Weak::upgrade) {
            Some(k) => k,
            None => {
                let k = Arc::new(Keyspace {
                    hubs: Mutex::default(),
                    origins: RwLock::default(),
                });
                map.insert(keyspace, Arc::downgrade(&k));
                k
            }
        }
    };
    let origin = hub.origin().to_owned();
    if hub
        .echoes()
        .joined
        .set((shared.clone(), origin.clone()))
        .is_err()
    {
        return;
    }
    let mut origins = shared.origins.write().unwrap_or_else(|e| e.into_inner());
    origins.insert(origin);
    drop(origins);
    let mut hubs = shared.hubs.lock().unwrap_or_else(|e| e.into_inner());
    hubs.retain(|h| h.strong_count() > 0);
    hubs.push(Arc::downgrade(&hub));
}

/// Tells the other hubs of `hub`'s keyspace in this process of a change its backend just
/// made (what the script published: `kind`, `number`, `key`), before the call returns:
/// their listeners apply it and their watches wake as for another process's message. Only
/// changes of entries are told (`w`, `d`, `e`, `t`, `x`; a release, `r`, comes through
/// Redis), and only to a hub whose subscription would bring it the same message
/// (confirmed, not known down): this never tells a cache more than Redis would, only
/// sooner, so a cache that did not subscribe is not covered up.
pub(crate) fn tell(hub: &dyn Peer, kind: char, number: u64, key: &str) {
    let Some((keyspace, origin)) = hub.echoes().joined.get() else {
        return;
    };
    let others: Vec<Arc<dyn Peer>> = keyspace
        .hubs
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter_map(Weak::upgrade)
        .filter(|h| h.origin() != origin)
        .collect();
    if others.is_empty() {
        return;
    }
    let channel = hub.channel_of(kind, key);
    let message = format!("{kind}:{origin}:{number}:{key}");
    for other in others.iter().filter(|h| h.hears(&channel)) {
        // Applied whatever the order: Redis's copy may have been claimed first on the
        // backend's thread and not be applied yet, and this caller must not return before
        // the other caches dropped their copies. Applying twice only drops a copy again;
        // the notice is counted once.
        let first = other.echoes().first(message.as_bytes(), origin, true);
        other.on_message(message.as_bytes(), first);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_applied_at_its_first_arrival_whichever_path_brings_it() {
        let keyspace = Arc::new(Keyspace {
            hubs: Mutex::default(),
            origins: RwLock::new(["me", "sib"].map(String::from).into()),
        });
        let e = Echoes::default();
        assert!(e.joined.set((keyspace.clone(), "me".into())).is_ok());
        // Told locally, then from Redis; from Redis, then told.
        assert!(e.first(b"w:sib:5:a:1", "sib", true));
        assert!(!e.first(b"w:sib:5:a:1", "sib", false));
        assert!(e.first(b"e:sib:6:a", "sib", false));
        assert!(!e.first(b"e:sib:6:a", "sib", true));
        // One payload twice (two deletes of a key): each is applied once.
        for _ in 0..2 {
            assert!(e.first(b"d:sib:0:a:1", "sib", true));
        }
        for _ in 0..2 {
            assert!(!e.first(b"d:sib:0:a:1", "sib", false));
        }
        // Another process's messages, this hub's own and releases come once: applied,
        // nothing kept.
        assert!(e.first(b"w:far:7:a:1", "far", false));
        assert!(e.first(b"w:me:7:a:1", "me", false));
        assert!(e.first(b"r:sib:0:a:1", "sib", false));
        assert!(e.balance().is_empty());
        // A loss forgets what was unmatched: a late copy is applied again (a drop more).
        assert!(e.first(b"w:sib:8:a:1", "sib", true));
        e.clear();
        assert!(e.first(b"w:sib:8:a:1", "sib", false));
        // A hub gone leaves the keyspace.
        drop(e);
        assert!(!keyspace.origins.read().unwrap().contains("me"));
    }
}
