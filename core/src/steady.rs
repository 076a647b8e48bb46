//! Reads for a copy of answers kept outside the engine (the Node binding's front): the
//! write generation, the clock the hit path judges by, how long an answer stays the
//! engine's answer, and the hits such a copy served, folded back into the engine's counts.

use crate::cache::Cache;
use crate::expiry::Phase;
use crate::key::namespace_of;

impl<V: Clone> Cache<V> {
    /// The write generation now, or `None` when the cache was not built with
    /// [`count_writes`](crate::Builder::count_writes). Read it before a read whose answer
    /// is kept: while it has not moved, no write changed that answer.
    #[inline]
    pub fn generation(&self) -> Option<u64> {
        self.table.namespaces.writes.get()
    }

    /// The cheap clock reading the hit path judges freshness with, in nanoseconds on the
    /// cache's clock (never earlier than [`Clock::now`](crate::Clock::now)).
    #[inline]
    pub fn now_fast_nanos(&self) -> u64 {
        self.table.now_fast()
    }

    /// Until when (nanoseconds on the cache's clock, compared with
    /// [`now_fast_nanos`](Self::now_fast_nanos)) a read of `key`'s entry as it is now is a
    /// fresh hit that neither XFetch nor refresh-ahead can pick: before it, and while the
    /// [`generation`](Self::generation) stays, `get` and `lookup` answer this value and
    /// count one hit. `None` for anything else (a miss, a cached absence, a stale entry, an
    /// entry with a time-to-idle, a bad key). Touches nothing.
    pub fn steady_until(&self, key: &str) -> Option<u64> {
        let t = &self.table;
        t.check_key(key).ok()?;
        let hash = t.hash(key);
        let now = t.now_fast();
        let shard = t.shard(hash).read();
        let e = &shard.store.get(hash, key)?.entry;
        // An entry with an idle clock is never answered from outside the engine: its reads
        // must reach the clock.
        (e.has_value() && e.idle().is_none() && e.phase(now, &t.life) == Phase::Fresh)
            .then(|| e.quiet_until().min(e.timing.fresh_until))
    }

    /// Counts `n` fresh hits of `key` served by a copy outside the engine, as the engine
    /// counts its own: the namespace's hit counter, the hot-key tracker's samples, and the
    /// eviction policy's mark on the entry (if it is still there). For the reader of
    /// [`steady_until`](Self::steady_until); `n` should stay small (one sample check each).
    pub fn credit_hits(&self, key: &str, n: u64) {
        let t = &self.table;
        if n == 0 || t.check_key(key).is_err() {
            return;
        }
        let hash = t.hash(key);
        let ns = t.namespaces.get(namespace_of(key));
        let seen = ns.counters().hits.add_n(t.shard_index(hash), n);
        if let Some(hot) = &t.hot {
            for i in 0..n {
                hot.hit(seen.wrapping_add(i), key, hash);
            }
        }
        if let Some(node) = t.shard(hash).read().store.get(hash, key) {
            t.touch(node, t.now_fast());
        }
    }
}
