//! Reads that decide nothing: `get` (a value or nothing, never a load), `peek` (no side
//! effect at all), and the state machine's fast case, a fresh hit under the read lock.

use super::Table;
use crate::entry::Peek;
use crate::expiry::{Phase, nanos};
use crate::key::namespace_of;
use crate::store::Node;

/// The hit path's answer under the shard's read lock.
pub(crate) enum Fast<V> {
    /// A fresh hit, counted: the value (`None`: a cached absence).
    Hit(Option<V>),
    /// Anything else is decided under the write lock; `early`: XFetch or refresh-ahead chose
    /// this read to refresh a fresh entry.
    Slow { early: bool },
}

impl<V> Table<V> {
    /// `node` read at `now`: SIEVE's mark and its idle clock, and the cache's
    /// [`idle_reads`](crate::Builder::idle_reads) told when its idle clock says so.
    #[inline]
    pub(crate) fn touch(&self, node: &Node<V>, now: u64) {
        if node.touch(now) {
            self.tell_idle(node);
        }
    }

    #[cold]
    fn tell_idle(&self, node: &Node<V>) {
        if let (Some(tell), Some(idle)) = (&self.cfg.idle_reads, node.entry.idle()) {
            tell(node.key(), idle.tti());
        }
    }
}

impl<V: Clone> Table<V> {
    /// A fresh entry's value, counted and marked as used, if `key` has one at `now` and
    /// XFetch (when `may_refresh`) does not pick this read to refresh it early.
    #[inline]
    pub(crate) fn read_fresh(
        &self,
        key: &str,
        hash: u64,
        now: u64,
        may_refresh: impl FnOnce() -> bool,
    ) -> Fast<V> {
        let shard = self.shard(hash).read();
        let Some(node) = shard.store.get(hash, key) else {
            return Fast::Slow { early: false };
        };
        let e = &node.entry;
        if e.phase(now, &self.life) != Phase::Fresh {
            return Fast::Slow { early: false };
        }
        // Most reads are far from expiry: one compare rules XFetch out.
        if now >= e.quiet_until()
            && may_refresh()
            && (self.ahead_due(e, now) || self.xfetch_fires(e, now))
        {
            return Fast::Slow { early: true };
        }
        self.touch(node, now);
        self.count_hit(e, hash, key);
        Fast::Hit(e.value().cloned())
    }

    /// `get_with`: a value that is fresh or within grace, seen in place by `read`, without
    /// loading or refreshing anything. A cached absence, a miss and a bad key read as `None`.
    #[inline]
    pub(crate) fn get_with<R>(&self, key: &str, read: impl FnOnce(&V) -> R) -> Option<R> {
        self.check_key(key).ok()?;
        let hash = self.hash(key);
        let fast = self.now_fast();
        let shard = self.shard(hash).read();
        let Some(node) = shard.store.get(hash, key) else {
            drop(shard);
            let ns = self.namespaces.get(namespace_of(key));
            ns.counters().misses.inc();
            ns.counters().cold_misses.inc();
            self.observe_miss(key, hash, fast);
            return None;
        };
        let e = &node.entry;
        let phase = match e.phase(fast, &self.life) {
            Phase::Fresh => Phase::Fresh,
            _ => e.phase(nanos(self.now()), &self.life),
        };
        match phase {
            Phase::Fresh => {
                self.touch(node, fast);
                self.count_hit(e, hash, key);
                e.value().map(read)
            }
            Phase::Stale if e.has_value() => {
                self.touch(node, fast);
                let seen = e.ns.counters().stale_served.add(self.shard_index(hash));
                if let Some(hot) = &self.hot {
                    hot.hit(seen, key, hash);
                }
                e.value().map(read)
            }
            _ => {
                let c = e.ns.counters();
                c.misses.inc();
                c.expired_misses.inc();
                drop(shard);
                self.observe_miss(key, hash, fast);
                None
            }
        }
    }

    /// `key`'s entry as it is now, touching nothing: no counter, no hot-key sample, no
    /// eviction mark, no refresh, no detector tick. `None`: no live entry (never stored,
    /// evicted, expired past retention, or of a bumped namespace), or a bad key.
    pub(crate) fn peek(&self, key: &str) -> Option<Peek<V>> {
        self.check_key(key).ok()?;
        let hash = self.hash(key);
        let now = nanos(self.now());
        let shard = self.shard(hash).read();
        shard.store.get(hash, key)?.entry.peek(now, &self.life)
    }

    /// A miss seen by `get`: the hot-key tracker and the detector's tick.
    #[cold]
    fn observe_miss(&self, key: &str, hash: u64, now: u64) {
        if let Some(hot) = &self.hot {
            hot.access(key, hash, true);
        }
        self.detect(now);
    }
}
