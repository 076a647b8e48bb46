//! Writes from outside herdless (PROTOCOL.md section 4, "Writes from outside herdless"): on
//! a single server the subscription connection also asks for the server's key tracking in
//! broadcast mode over the prefix (`CLIENT TRACKING ON BCAST PREFIX <prefix>:{`), so a `SET`,
//! `DEL`, `EXPIRE`, eviction or `FLUSHDB` of a value key by any client reaches the process as
//! an `invalidate` push on the connection its notices come on.
//!
//! herdless's own writes are tracked too. A script publishes its notice before the server
//! sends the invalidations of that command, on the same connection, so a change a notice
//! already announced (`w`, a `d` that deleted, an `i` idle touch that lengthened) is
//! recognised and left to the notice: a process keeps the copy it wrote itself, and a
//! waiter keeps the entry it was handed. What no notice announced was written from outside:
//! the copy is dropped (`outside_invalidations`).

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use redis::Value;
use tokio::sync::Notify;

// The state: 0 not asked (yet, or on a Cluster, or turned off), or one of these.
/// On for the subscription connection (it may have dropped since: `untracked`).
const ON: u8 = 1;
/// The server refused it (Redis before 6, an ACL without `client|tracking`).
const REFUSED: u8 = 2;

/// More announced keys than this between two invalidation pushes means pushes are not
/// coming (they always follow the command that publishes): the set is emptied rather than
/// grown, and the changes it would have explained drop copies, which is safe.
const MAX_ANNOUNCED: usize = 65_536;

/// The tracking state of one subscription connection.
#[derive(Default)]
pub(crate) struct Tracking {
    state: AtomicU8,
    /// Tracking was on and the connection dropped: the new connection has not been asked
    /// again yet, so outside writes of the gap may go unheard.
    untracked: AtomicBool,
    /// Value keys whose change a notice announced since the last invalidation push.
    announced: Mutex<HashSet<String>>,
    /// Wakes the heartbeat to ask the new connection for tracking at once.
    pub(crate) kick: Notify,
}

/// What an `invalidate` push says.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Invalidation<'a> {
    /// The database was flushed (a null key list): every copy may be outdated.
    Flushed,
    /// The keys changed that no notice announced.
    Outside(Vec<&'a str>),
}

impl Tracking {
    /// Whether tracking is on for the subscription connection (it may be down).
    pub(crate) fn is_on(&self) -> bool {
        self.state.load(Ordering::Acquire) == ON
    }

    /// Whether tracking is wanted but the current connection has not been asked yet.
    pub(crate) fn is_untracked(&self) -> bool {
        self.untracked.load(Ordering::Acquire)
    }

    /// The server accepted tracking on the current connection; `true` if that ends a gap
    /// (the connection had dropped while it was on).
    pub(crate) fn on(&self) -> bool {
        self.state.store(ON, Ordering::Release);
        self.untracked.swap(false, Ordering::AcqRel)
    }

    /// The server refused tracking: outside writes are not followed (as before tracking).
    pub(crate) fn refused(&self) {
        self.state.store(REFUSED, Ordering::Release);
        self.untracked.store(false, Ordering::Release);
    }

    /// Whether the server refused tracking.
    pub(crate) fn is_refused(&self) -> bool {
        self.state.load(Ordering::Acquire) == REFUSED
    }

    /// The subscription connection dropped: a new one starts without tracking.
    pub(crate) fn dropped(&self) {
        if self.is_on() {
            self.untracked.store(true, Ordering::Release);
        }
        self.announced.lock().expect("announced lock").clear();
    }

    /// A notice of `kind` about `key` arrived on the subscription connection: if its
    /// command changed the value key, the invalidation that follows is explained by it.
    pub(crate) fn announce(&self, kind: char, number: u64, key: &str) {
        let changed = match kind {
            'w' => true,
            // `d` and `i` carry 1 when their command changed the key.
            'd' | 'i' => number == 1,
            _ => false,
        };
        if !changed || !self.is_on() {
            return;
        }
        let mut set = self.announced.lock().expect("announced lock");
        if set.len() >= MAX_ANNOUNCED {
            set.clear();
        }
        set.insert(key.to_owned());
    }

    /// Reads an `invalidate` push (`data`: its key list, or null) against what notices
    /// announced: the value keys of `prefix` changed from outside.
    pub(crate) fn invalidation<'a>(&self, prefix: &str, data: &'a [Value]) -> Invalidation<'a> {
        let mut set = self.announced.lock().expect("announced lock");
        let names = match data.first() {
            Some(Value::Array(names)) | Some(Value::Set(names)) => names,
            _ => {
                set.clear();
                return Invalidation::Flushed;
            }
        };
        let mut outside = Vec::new();
        for name in names {
            let Value::BulkString(name) = name else {
                continue;
            };
            let Some(key) = std::str::from_utf8(name)
                .ok()
                .and_then(|n| crate::keys::key_of_value(prefix, n))
            else {
                // A lock, an epoch, a tag record: not a copy of anything.
                continue;
            };
            if !set.remove(key) {
                outside.push(key);
            }
        }
        // The push ends the command the announcements were of.
        set.clear();
        Invalidation::Outside(outside)
    }
}

/// What the server answered `CLIENT TRACKING ON`: `Ok(true)` on, `Ok(false)` refused.
pub(crate) fn accepted(answer: redis::RedisResult<()>) -> redis::RedisResult<bool> {
    match answer {
        Ok(()) => Ok(true),
        // Asked again on a connection that has it (the prefix is its own).
        Err(e) if e.to_string().contains("overlaps with an existing prefix") => Ok(true),
        Err(e)
            if matches!(
                e.kind(),
                redis::ErrorKind::Server(_) | redis::ErrorKind::Extension
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(names: &[&str]) -> Vec<Value> {
        vec![Value::Array(
            names
                .iter()
                .map(|n| Value::BulkString(n.as_bytes().to_vec()))
                .collect(),
        )]
    }

    #[test]
    fn a_change_a_notice_announced_is_left_to_the_notice() {
        let t = Tracking::default();
        t.on();
        t.announce('w', 17, "users:1");
        t.announce('d', 1, "users:2");
        // Not changed by its command: no invalidation follows, nothing to explain.
        t.announce('d', 0, "users:3");
        t.announce('i', 0, "users:4");
        t.announce('r', 0, "users:5");
        let data = push(&[
            "hl:{users}:l:users:1",
            "hl:{users}:v:users:1",
            "hl:{users}:v:users:2",
            "hl:{users}:v:users:3",
            "hl:{users}:v:users:5",
            "hl:{users}:e",
            "hl:{t:shelf}:t",
        ]);
        assert_eq!(
            t.invalidation("hl", &data),
            Invalidation::Outside(vec!["users:3", "users:5"])
        );
        // Each push ends its command: an old announcement explains no later change.
        t.announce('w', 18, "users:1");
        assert_eq!(
            t.invalidation("hl", &push(&["hl:{users}:v:users:6"])),
            Invalidation::Outside(vec!["users:6"])
        );
        assert_eq!(
            t.invalidation("hl", &push(&["hl:{users}:v:users:1"])),
            Invalidation::Outside(vec!["users:1"])
        );
        assert_eq!(t.invalidation("hl", &[Value::Nil]), Invalidation::Flushed);
    }

    #[test]
    fn nothing_is_announced_while_tracking_is_off_and_a_drop_forgets() {
        let t = Tracking::default();
        t.announce('w', 1, "a:1");
        t.on();
        assert_eq!(
            t.invalidation("hl", &push(&["hl:{a}:v:a:1"])),
            Invalidation::Outside(vec!["a:1"])
        );
        t.announce('w', 2, "a:1");
        t.dropped();
        assert!(t.is_untracked());
        assert!(t.on(), "asking the new connection ends the gap");
        assert_eq!(
            t.invalidation("hl", &push(&["hl:{a}:v:a:1"])),
            Invalidation::Outside(vec!["a:1"])
        );
        t.refused();
        assert!(!t.is_on() && t.is_refused());
    }

    #[test]
    fn the_server_s_answers_are_told_apart() {
        let server = |msg: &str| {
            redis::RedisError::from((redis::ErrorKind::Extension, "ERR", msg.to_owned()))
        };
        assert!(accepted(Ok(())).unwrap());
        assert!(
            accepted(Err(server(
                "Prefix 'hl:{' overlaps with an existing prefix 'hl:{'"
            )))
            .unwrap()
        );
        assert!(!accepted(Err(server("unknown subcommand 'TRACKING'"))).unwrap());
        let io = redis::RedisError::from(std::io::Error::other("reset"));
        assert!(accepted(Err(io)).is_err());
    }
}
