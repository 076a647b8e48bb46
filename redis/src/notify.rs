//! Notifications (PROTOCOL.md, "Notifications"): one channel per namespace, messages
//! `<kind>:<origin>:<number>:<key>` published by the scripts in the same atomic step as the
//! change they announce. The hub turns them into wake-ups of this process's watches (the
//! waiters of another process's load) and into [`Notice`]s for first-tier coherence.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use herdless::backend::{Listener, Notice, Watch};
use herdless::key::namespace_of;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::{Notify, OnceCell};

use crate::local::{Echoes, Peer};
use crate::metrics::{Metrics, inc};
use crate::tags::StampCache;
use crate::tracking::{Invalidation, Tracking};

/// One parsed message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    /// `w` written, `r` released, `d` deleted (invalidated), `e` epoch bumped, `t` a tag
    /// removed, `x` a tag expired, `i` an idle entry's life lengthened by a read.
    pub kind: char,
    /// The publishing process's origin id.
    pub origin: &'a str,
    /// The new version (`w`), the new epoch (`e`), the tag's stamp (`t`, `x`), 1 when the
    /// command changed the value key (`d`, `i`), else 0.
    pub number: u64,
    /// The key (`w`, `r`, `d`), the namespace (`e`) or the tag (`t`, `x`).
    pub key: &'a str,
}

/// Parses a message; `None` for anything else (other publishers on the channel).
pub fn parse(payload: &[u8]) -> Option<Message<'_>> {
    let s = std::str::from_utf8(payload).ok()?;
    let mut it = s.splitn(4, ':');
    let kind = it.next()?;
    let origin = it.next()?;
    let number = it.next()?.parse().ok()?;
    let key = it.next()?;
    let kind = match kind {
        "w" | "r" | "d" | "e" | "t" | "x" | "i" => kind.chars().next()?,
        _ => return None,
    };
    Some(Message {
        kind,
        origin,
        number,
        key,
    })
}

/// The most sharded (Cluster) subscriptions a process keeps; past it, the least recently
/// used is dropped and its namespace's first-tier copies with it.
pub(crate) const MAX_SHARDED_SUBSCRIPTIONS: usize = 1024;

#[derive(Default)]
pub(crate) struct Subscriptions {
    cells: HashMap<String, (Arc<OnceCell<()>>, u64)>,
    tick: u64,
}

#[derive(Default)]
struct Slot {
    seq: AtomicU64,
    notify: Notify,
    /// Watches of this key; changed only under the map's lock.
    watches: AtomicUsize,
}

impl Slot {
    fn fire(&self) {
        self.seq.fetch_add(1, Ordering::AcqRel);
        self.notify.notify_waiters();
    }
}

/// The process side of notifications.
pub(crate) struct Hub {
    pub(crate) origin: String,
    /// The key prefix: a message must name a key of its channel's namespace.
    prefix: String,
    watches: Mutex<HashMap<String, Arc<Slot>>>,
    listeners: RwLock<Vec<Listener>>,
    /// Channel (or pattern) -> its subscription, and when it was last used.
    subscriptions: Mutex<Subscriptions>,
    /// The subscription connection dropped and has not confirmed a resubscription yet.
    disconnected: AtomicBool,
    /// Drops and losses so far: a copy written while it stayed the same, and heard, can be
    /// kept (`hearing`).
    generation: AtomicU64,
    metrics: Arc<Metrics>,
    /// The tag records this process learned (notices update them, a loss drops them).
    pub(crate) stamps: StampCache,
    /// The changes other caches of this process tell it (`crate::local`).
    pub(crate) echoes: Echoes,
    /// The server's key tracking on the subscription connection (`crate::tracking`).
    pub(crate) tracking: Tracking,
}

impl Hub {
    pub(crate) fn new(origin: String, prefix: String, metrics: Arc<Metrics>) -> Self {
        Self {
            origin,
            prefix,
            watches: Mutex::default(),
            listeners: RwLock::default(),
            subscriptions: Mutex::default(),
            disconnected: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            metrics,
            stamps: StampCache::default(),
            echoes: Echoes::default(),
            tracking: Tracking::default(),
        }
    }

    /// The channel a message of `kind` about `key` is published on (a tag's on the tags
    /// channel, a bump's on its namespace's, the others on their key's namespace's).
    pub(crate) fn channel_of(&self, kind: char, key: &str) -> String {
        match kind {
            't' | 'x' => crate::keys::tags_channel(&self.prefix),
            'e' => crate::keys::channel(&self.prefix, key),
            _ => crate::keys::channel(&self.prefix, namespace_of(key)),
        }
    }

    /// Whether a message published on `channel` would reach this hub: its subscription
    /// covering it (the one pattern of a single server, or the channel's own on a Cluster)
    /// is confirmed and not known to be down. (A Cluster's tags channel is subscribed
    /// apart, by the backend: tag notices reach other caches there through Redis only.)
    pub(crate) fn hears(&self, channel: &str) -> bool {
        if self.is_disconnected() {
            return false;
        }
        self.made(&crate::keys::channel_pattern(&self.prefix)) || self.made(channel)
    }

    /// Whether the subscription of `channel` (or pattern) was confirmed once (it may have
    /// dropped since).
    pub(crate) fn made(&self, channel: &str) -> bool {
        let subs = self.subscriptions.lock().expect("subscriptions lock");
        subs.cells
            .get(channel)
            .is_some_and(|(cell, _)| cell.initialized())
    }

    /// Whether the subscription connection is known to be down: a disconnection seen,
    /// its resubscription (or, where the server tracks keys for it, its tracking) not yet
    /// confirmed.
    pub(crate) fn is_disconnected(&self) -> bool {
        self.disconnected.load(Ordering::Acquire) || self.tracking.is_untracked()
    }

    /// Whether the subscription itself is known to be down (its tracking aside).
    pub(crate) fn is_unsubscribed(&self) -> bool {
        self.disconnected.load(Ordering::Acquire)
    }

    /// Drops and losses seen so far. A writer reads it before its write and passes it to
    /// [`keeps`](Self::keeps) after: a drop in between means a notice of a later change may
    /// have been missed.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Whether a copy of `key` written since `generation` may be kept in the L1: the
    /// subscription that brings its notices is confirmed now, and did not drop (nor lose
    /// messages) since.
    pub(crate) fn keeps(&self, key: &str, generation: u64) -> bool {
        self.hears(&self.channel_of('w', key)) && self.generation() == generation
    }

    /// The subscription is known to be down (a dropped connection, a bus killed): waiters
    /// re-check Redis, reads are not kept, the L1's copies keep serving until [`confirmed`](Self::confirmed).
    pub(crate) fn disconnect(&self) {
        inc(&self.metrics.subscription_drops);
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.tracking.dropped();
        self.disconnected.store(true, Ordering::Release);
        self.wake_all();
    }

    /// A subscription was confirmed: if it had dropped, messages of the gap may have been
    /// lost ([`lost`](Self::lost)).
    pub(crate) fn confirmed(&self) {
        if self.disconnected.swap(false, Ordering::AcqRel) {
            if self.tracking.is_untracked() {
                // The gap ends when the new connection tracks keys too (`tracked`).
                self.tracking.kick.notify_one();
            } else {
                self.lost();
            }
        }
    }

    /// The server tracks the value keys for the subscription connection now: if the
    /// connection had dropped, outside writes of the gap may have been missed.
    pub(crate) fn tracked(&self) {
        if self.tracking.on() && !self.disconnected.load(Ordering::Acquire) {
            self.lost();
        }
    }

    /// The server refused key tracking: writes from outside herdless are not followed.
    pub(crate) fn tracking_refused(&self) {
        if !self.tracking.is_refused() {
            inc(&self.metrics.tracking_refused);
        }
        let gap = self.tracking.is_untracked();
        self.tracking.refused();
        if gap && !self.disconnected.load(Ordering::Acquire) {
            self.lost();
        }
    }

    /// An `invalidate` push (`data`: the changed keys, or null for a flush): the copies of
    /// value keys changed from outside herdless are dropped; a flush drops every copy.
    pub(crate) fn on_invalidate(&self, data: &[Value]) {
        match self.tracking.invalidation(&self.prefix, data) {
            Invalidation::Flushed => self.lost(),
            Invalidation::Outside(keys) => {
                for key in keys {
                    self.outside(key);
                }
            }
        }
    }

    /// `key`'s value was changed by a writer that is not herdless: copies are dropped.
    pub(crate) fn outside(&self, key: &str) {
        inc(&self.metrics.outside_invalidations);
        self.tell(Notice::Changed { key });
    }

    pub(crate) fn listen(&self, l: Listener) {
        self.listeners.write().expect("listeners lock").push(l);
    }

    /// The subscription cell of `channel` (initialised once subscribed), and the channel
    /// whose subscription it displaced, if the table was full (at most `max` kept).
    pub(crate) fn subscription(
        &self,
        channel: &str,
        max: usize,
    ) -> (Arc<OnceCell<()>>, Option<String>) {
        let mut subs = self.subscriptions.lock().expect("subscriptions lock");
        subs.tick += 1;
        let tick = subs.tick;
        if let Some((cell, used)) = subs.cells.get_mut(channel) {
            *used = tick;
            return (cell.clone(), None);
        }
        let mut displaced = None;
        if subs.cells.len() >= max {
            let oldest = subs
                .cells
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(c, _)| c.clone());
            if let Some(c) = oldest {
                subs.cells.remove(&c);
                displaced = Some(c);
            }
        }
        let cell = Arc::new(OnceCell::new());
        subs.cells.insert(channel.to_owned(), (cell.clone(), tick));
        (cell, displaced)
    }

    /// Tells the listeners that `namespace` is no longer listened to.
    pub(crate) fn unwatched(&self, namespace: &str) {
        self.tell(Notice::Unwatched { namespace });
    }

    /// Subscriptions held now.
    pub(crate) fn subscriptions(&self) -> usize {
        self.subscriptions
            .lock()
            .expect("subscriptions lock")
            .cells
            .len()
    }

    /// An armed watch of `key`.
    pub(crate) fn watch(self: &Arc<Self>, key: &str) -> KeyWatch {
        let slot = {
            let mut map = self.watches.lock().expect("watches lock");
            let slot = map.entry(key.to_owned()).or_default().clone();
            slot.watches.fetch_add(1, Ordering::Relaxed);
            slot
        };
        let seen = slot.seq.load(Ordering::Acquire);
        KeyWatch {
            hub: self.clone(),
            key: key.to_owned(),
            slot,
            seen,
        }
    }

    fn watched(&self, key: &str) -> Option<Arc<Slot>> {
        self.watches.lock().expect("watches lock").get(key).cloned()
    }

    fn tell(&self, notice: Notice<'_>) {
        for l in self.listeners.read().expect("listeners lock").iter() {
            l(notice);
        }
    }

    fn wake_all(&self) {
        let slots: Vec<_> = self
            .watches
            .lock()
            .expect("watches lock")
            .values()
            .cloned()
            .collect();
        for s in slots {
            s.fire();
        }
    }

    /// Handles one push from the subscription connection.
    ///
    /// A dropped connection wakes the watches (they re-check Redis, and fall back to local
    /// loads while it is away) but keeps the first tiers: during an outage they are what is
    /// served. When the subscriptions are confirmed again, messages of the gap may have been
    /// lost, so the listeners are told [`Notice::Lost`] then.
    pub(crate) fn on_push(&self, push: PushInfo) {
        match push.kind {
            PushKind::Message | PushKind::SMessage => {
                if let (Some(Value::BulkString(channel)), Some(Value::BulkString(payload))) =
                    (push.data.first(), push.data.get(1))
                {
                    self.on_channel_message(channel, payload);
                }
            }
            // The one pattern subscription of a standalone server: pattern, channel, payload.
            PushKind::PMessage => {
                if let (Some(Value::BulkString(channel)), Some(Value::BulkString(payload))) =
                    (push.data.get(1), push.data.get(2))
                {
                    self.on_channel_message(channel, payload);
                }
            }
            PushKind::Invalidate => self.on_invalidate(&push.data),
            PushKind::Disconnection => self.disconnect(),
            PushKind::Subscribe | PushKind::SSubscribe | PushKind::PSubscribe => self.confirmed(),
            _ => {}
        }
    }

    /// Messages may have been lost (a resubscription after a drop, a store restarted):
    /// the listeners drop whatever they keep, then every waiter re-checks. Counted last, so
    /// that whoever sees `notices_lost` move finds the copies of the gap already gone.
    pub(crate) fn lost(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.stamps.clear();
        self.echoes.clear();
        self.tell(Notice::Lost);
        inc(&self.metrics.notices_lost);
        self.wake_all();
    }

    /// A message received on `channel`: acted on only if it names a key (or, for a bump,
    /// the namespace) of that channel's namespace, so whoever may publish on one channel
    /// cannot drop another namespace's copies or wake its waiters.
    pub(crate) fn on_channel_message(&self, channel: &[u8], payload: &[u8]) {
        let Some(m) = parse(payload) else { return };
        if self.channel_of(m.kind, m.key).as_bytes() != channel {
            return;
        }
        // Before the echo check: whoever told this process first, the server's
        // invalidation of this change follows on this connection.
        self.tracking.announce(m.kind, m.number, m.key);
        // Another cache of this process told it already (its copy from Redis is not news).
        if !self.echoes.first(payload, m.origin, false) {
            return;
        }
        self.on_message(payload);
    }

    /// A message from a trusted source (the scripts' own channel, or the memory store).
    pub(crate) fn on_message(&self, payload: &[u8]) {
        self.apply(payload, true);
    }

    /// Acts on a message; `count`: whether it is news (counted in `notices`).
    fn apply(&self, payload: &[u8], count: bool) {
        let Some(m) = parse(payload) else { return };
        let own = m.origin == self.origin;
        if !own && count {
            inc(&self.metrics.notices);
        }
        if m.kind == 'i' {
            // Only the life of the shared entry changed: nothing to drop or wake.
            return;
        }
        if matches!(m.kind, 't' | 'x') {
            let soft = m.kind == 'x';
            self.stamps.notice(m.key, m.number, soft);
            if !own {
                self.tell(Notice::Tagged {
                    tag: m.key,
                    stamp: m.number,
                    soft,
                });
            }
            return;
        }
        if m.kind == 'e' {
            // A bump frees the namespace's locks for new leaders: everyone waiting retries.
            let slots: Vec<_> = self
                .watches
                .lock()
                .expect("watches lock")
                .iter()
                .filter(|(k, _)| namespace_of(k) == m.key)
                .map(|(_, s)| s.clone())
                .collect();
            for s in slots {
                s.fire();
            }
            if !own {
                self.tell(Notice::Bumped {
                    namespace: m.key,
                    epoch: m.number,
                });
            }
            return;
        }
        let slot = self.watched(m.key);
        if let Some(s) = &slot {
            s.fire();
        }
        if own {
            return;
        }
        self.tell(match m.kind {
            'w' => Notice::Written {
                key: m.key,
                version: m.number,
                awaited: slot.is_some(),
            },
            'r' => Notice::Released { key: m.key },
            _ => Notice::Invalidated { key: m.key },
        });
    }
}

impl Peer for Hub {
    fn origin(&self) -> &str {
        &self.origin
    }
    fn echoes(&self) -> &Echoes {
        &self.echoes
    }
    fn channel_of(&self, kind: char, key: &str) -> String {
        Hub::channel_of(self, kind, key)
    }
    fn hears(&self, channel: &str) -> bool {
        Hub::hears(self, channel)
    }
    fn on_message(&self, payload: &[u8], count: bool) {
        self.apply(payload, count)
    }
}

/// An armed watch of one key.
pub(crate) struct KeyWatch {
    hub: Arc<Hub>,
    key: String,
    slot: Arc<Slot>,
    seen: u64,
}

impl KeyWatch {
    /// Resolves at the next change since the watch was armed or last resolved.
    pub(crate) async fn changed(&mut self) {
        loop {
            let notified = self.slot.notify.notified();
            let now = self.slot.seq.load(Ordering::Acquire);
            if now != self.seen {
                self.seen = now;
                return;
            }
            notified.await;
        }
    }
}

impl Watch for KeyWatch {
    fn changed(&mut self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(KeyWatch::changed(self))
    }
}

impl Drop for KeyWatch {
    fn drop(&mut self) {
        let mut map = self.hub.watches.lock().expect("watches lock");
        if self.slot.watches.fetch_sub(1, Ordering::Relaxed) == 1
            && let Entry::Occupied(e) = map.entry(std::mem::take(&mut self.key))
            && Arc::ptr_eq(e.get(), &self.slot)
        {
            e.remove();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_acts_only_on_its_channels_namespace() {
        let hub = Hub::new("me".into(), "hl".into(), Arc::default());
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let s = seen.clone();
        hub.listen(Arc::new(move |n: Notice<'_>| {
            s.lock().unwrap().push(format!("{n:?}"));
        }));
        let a = crate::keys::channel("hl", "a");
        // Published on `a`'s channel, naming a key and a namespace of `b`: ignored.
        hub.on_channel_message(a.as_bytes(), b"d:other:0:b:1");
        hub.on_channel_message(a.as_bytes(), b"e:other:7:b");
        assert!(seen.lock().unwrap().is_empty());
        hub.on_channel_message(a.as_bytes(), b"d:other:0:a:1");
        hub.on_channel_message(a.as_bytes(), b"e:other:7:a");
        assert_eq!(seen.lock().unwrap().len(), 2);
        // Tag notices count only on the tags channel.
        hub.on_channel_message(a.as_bytes(), b"t:other:9:product:1");
        assert_eq!(seen.lock().unwrap().len(), 2);
        let tags = crate::keys::tags_channel("hl");
        hub.on_channel_message(tags.as_bytes(), b"d:other:0:a:1");
        assert_eq!(seen.lock().unwrap().len(), 2);
        hub.on_channel_message(tags.as_bytes(), b"x:other:9:product:1");
        assert_eq!(
            seen.lock().unwrap()[2],
            "Tagged { tag: \"product:1\", stamp: 9, soft: true }"
        );
    }

    #[test]
    fn messages_parse_and_keys_may_hold_colons() {
        let m = parse(b"w:0123abcd:1700000000000123:users:v1:profile:42").unwrap();
        assert_eq!(m.kind, 'w');
        assert_eq!(m.origin, "0123abcd");
        assert_eq!(m.number, 1_700_000_000_000_123);
        assert_eq!(m.key, "users:v1:profile:42");
        assert_eq!(parse(b"e:o:3:users").unwrap().key, "users");
        let t = parse(b"t:o:1700000000000:product:42").unwrap();
        assert_eq!(
            (t.kind, t.number, t.key),
            ('t', 1_700_000_000_000, "product:42")
        );
        assert_eq!(parse(b"x:o:5:seller:7").unwrap().kind, 'x');
        for junk in [
            &b""[..],
            b"hello",
            b"z:o:1:k",
            b"w:o:notanumber:k",
            b"w:o:1",
            b"\xff\xfe",
        ] {
            assert_eq!(parse(junk), None);
        }
    }
}
