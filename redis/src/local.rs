//! Changes told within one process. Caches of a process over the same Redis keyspace (the
//! server and database, or the Cluster, and the key prefix) hear each other's changes
//! before the call that made them returns, instead of one pub/sub delivery later
//! (PROTOCOL.md section 4, "In one process"): two Django aliases, or two `Cache(redis=...)`
//! of one program, never disagree about what one of them just wrote, deleted or bumped.
//! Redis delivers the same message to them afterwards; it is recognised and applied once.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};

use crate::notify::Hub;

/// This process's hubs by keyspace.
static LOCAL: Mutex<Option<HashMap<String, Vec<Weak<Hub>>>>> = Mutex::new(None);

/// Unmatched arrivals a hub remembers at most (a message Redis lost leaves one behind):
/// past it they are forgotten, and a late copy is applied a second time (harmless: a copy
/// dropped once more).
const MAX_UNMATCHED: usize = 4096;

/// What a hub knows of the messages other caches of its process tell it.
#[derive(Default)]
pub(crate) struct Echoes {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The keyspace joined, if any.
    keyspace: Option<String>,
    /// The origins of the other hubs of that keyspace: their messages come twice.
    siblings: HashSet<String>,
    /// Payload -> arrivals told locally minus arrivals from Redis, not yet matched.
    balance: HashMap<Vec<u8>, i32>,
}

impl Echoes {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether this arrival of `payload` (from `origin`; told locally, or from Redis) is
    /// its first, to be applied; the second, from the other path, is not. A message from
    /// a hub of another process comes once and is always applied.
    pub(crate) fn first(&self, payload: &[u8], origin: &str, local: bool) -> bool {
        // A release is never told locally: it comes once, from Redis.
        if payload.first() == Some(&b'r') {
            return true;
        }
        let mut s = self.state();
        if !local && !s.siblings.contains(origin) {
            return true;
        }
        if s.balance.len() >= MAX_UNMATCHED {
            s.balance.clear();
        }
        let b = s.balance.entry(payload.to_vec()).or_insert(0);
        let before = *b;
        *b += if local { 1 } else { -1 };
        let first = b.abs() > before.abs();
        if *b == 0 {
            s.balance.remove(payload);
        }
        first
    }

    /// Messages may have been lost: unmatched arrivals are forgotten (every copy they
    /// concerned is dropped anyway).
    pub(crate) fn clear(&self) {
        self.state().balance.clear();
    }
}

/// Joins `hub` to this process's hubs of `keyspace` (once): from now on the changes its
/// backend makes are told to the others at once ([`tell`]), and theirs to it.
pub(crate) fn join(hub: &Arc<Hub>, keyspace: String) {
    let mut local = LOCAL.lock().unwrap_or_else(|e| e.into_inner());
    let map = local.get_or_insert_with(HashMap::new);
    map.retain(|_, hubs| {
        hubs.retain(|h| h.strong_count() > 0);
        !hubs.is_empty()
    });
    {
        let mut s = hub.echoes.state();
        if s.keyspace.is_some() {
            return;
        }
        s.keyspace = Some(keyspace.clone());
    }
    let hubs = map.entry(keyspace).or_default();
    for other in hubs.iter().filter_map(Weak::upgrade) {
        other.echoes.state().siblings.insert(hub.origin.clone());
        hub.echoes.state().siblings.insert(other.origin.clone());
    }
    hubs.push(Arc::downgrade(hub));
}

/// Tells the other hubs of `hub`'s keyspace in this process of a change its backend just
/// made (what the script published: `kind`, `number`, `key`), before the call returns:
/// their listeners apply it and their watches wake as for another process's message. Only
/// changes of entries are told (`w`, `d`, `e`, `t`, `x`; a release, `r`, comes through
/// Redis), and only to a hub whose subscription would bring it the same message
/// (confirmed, not known down): this never tells a cache more than Redis would, only
/// sooner, so a cache that did not subscribe is not covered up.
pub(crate) fn tell(hub: &Hub, kind: char, number: u64, key: &str) {
    let Some(keyspace) = hub.echoes.state().keyspace.clone() else {
        return;
    };
    let others: Vec<Arc<Hub>> = {
        let local = LOCAL.lock().unwrap_or_else(|e| e.into_inner());
        let hubs = local.as_ref().and_then(|m| m.get(&keyspace));
        hubs.into_iter()
            .flatten()
            .filter_map(Weak::upgrade)
            .filter(|h| !std::ptr::eq(Arc::as_ptr(h), hub))
            .collect()
    };
    if others.is_empty() {
        return;
    }
    let channel = hub.channel_of(kind, key);
    let message = format!("{kind}:{}:{number}:{key}", hub.origin);
    for other in others.iter().filter(|h| h.hears(&channel)) {
        if other.echoes.first(message.as_bytes(), &hub.origin, true) {
            other.on_message(message.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_applied_at_its_first_arrival_whichever_path_brings_it() {
        let e = Echoes::default();
        e.state().siblings.insert("sib".into());
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
        // Another process's messages and releases come once: applied, nothing kept.
        assert!(e.first(b"w:far:7:a:1", "far", false));
        assert!(e.first(b"r:sib:0:a:1", "sib", false));
        assert!(e.state().balance.is_empty());
        // A loss forgets what was unmatched: a late copy is applied again (a drop more).
        assert!(e.first(b"w:sib:8:a:1", "sib", true));
        e.clear();
        assert!(e.first(b"w:sib:8:a:1", "sib", false));
    }
}
