//! Invalidation, all of it O(1) but `clear`: a key (`invalidate`), a namespace (`bump`, a
//! new epoch), every entry carrying a tag (`invalidate_tag`, hard; `expire_tag`, soft; the
//! crate docs' Tags section), everything (`clear`). A load that began before any of them
//! never stores its older value.

use crate::cache::Cache;
use crate::error::Error;

impl<V: Clone + Send + Sync + 'static> Cache<V> {
    /// Invalidates every entry carrying `tag`, in O(1): each is a miss for every reader at
    /// once, never served again (not even fail-safe); a load that began before this and
    /// answers with `tag` is not stored. The default: after a write, a caller expects no
    /// older value ([Tags](crate#tags); soft: [`expire_tag`](Self::expire_tag)). Fails
    /// only for a bad tag ([`Error::EmptyTag`], [`Error::TagTooLong`]).
    pub fn invalidate_tag(&self, tag: &str) -> Result<(), Error> {
        self.invalidate_tags([tag])
    }

    /// [`invalidate_tag`](Self::invalidate_tag) of several tags (all checked first), at once.
    pub fn invalidate_tags<T: AsRef<str>>(
        &self,
        tags: impl IntoIterator<Item = T>,
    ) -> Result<(), Error> {
        self.table.stamp_tags(tags, true)
    }

    /// Expires every entry carrying `tag`, in O(1), as if its ttl ran out now: served stale
    /// within grace while one refresh runs, else kept as the fail-safe value, else a miss.
    pub fn expire_tag(&self, tag: &str) -> Result<(), Error> {
        self.expire_tags([tag])
    }

    /// [`expire_tag`](Self::expire_tag) of several tags at once.
    pub fn expire_tags<T: AsRef<str>>(
        &self,
        tags: impl IntoIterator<Item = T>,
    ) -> Result<(), Error> {
        self.table.stamp_tags(tags, false)
    }

    /// Removes `key`'s entry. A load of `key` already running will not write back its
    /// (possibly older) result. Returns whether an entry was removed.
    pub fn invalidate(&self, key: &str) -> Result<bool, Error> {
        self.table.invalidate(key)
    }

    /// Invalidates every key of `namespace` in O(1) by moving to a new epoch; returns it.
    /// Loads that began under the old epoch are not stored.
    ///
    /// A namespace longer than `max_key_len` can hold no key, so there is nothing to
    /// invalidate: it is not registered (names must not grow memory) and 0 is returned.
    pub fn bump(&self, namespace: &str) -> u64 {
        if namespace.len() > self.table.cfg.max_key_len {
            return 0;
        }
        self.table.namespaces.bump(namespace)
    }

    /// Drops every entry (O(entries)), and keeps loads already running from storing their
    /// results. For a process that lost track of the shared tier; to invalidate a namespace,
    /// [`bump`](Self::bump) is O(1).
    pub fn clear(&self) {
        self.table.clear();
    }
}
