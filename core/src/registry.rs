//! A bounded registry of named records (namespaces, tags): name -> `Arc<record>`, made on
//! first use. Names are user input, so past `max` records the one least recently looked up
//! (second chance: a clock hand over the records) is retired to make room. What retiring
//! means is the caller's: it runs under the registry's lock, so no record can be made or
//! found meanwhile.

use alloc::boxed::Box;
use alloc::collections::VecDeque;

use hashbrown::HashMap;

use crate::sync::{Arc, AtomicBool, Ordering, RwLock};

/// A record of a [`Registry`].
pub(crate) trait Record {
    /// Its name, its key in the registry.
    fn name(&self) -> &str;
    /// Looked up since the clock hand last passed (starts `true`).
    fn used(&self) -> &AtomicBool;
}

pub(crate) struct Registry<R> {
    inner: RwLock<Table<R>>,
    max: usize,
}

struct Table<R> {
    map: HashMap<Box<str>, Arc<R>>,
    /// The clock: records in the order the hand visits them.
    hand: VecDeque<Arc<R>>,
}

impl<R: Record> Registry<R> {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            inner: RwLock::new(Table {
                map: HashMap::new(),
                hand: VecDeque::new(),
            }),
            max: max.max(1),
        }
    }

    /// Calls `f` with `name`'s record, if any (marked as used), while no record can be made
    /// or retired.
    pub(crate) fn with<T>(&self, name: &str, f: impl FnOnce(Option<&Arc<R>>) -> T) -> T {
        let t = self.inner.read();
        let r = t.map.get(name);
        if let Some(r) = r {
            r.used().store(true, Ordering::Relaxed);
        }
        f(r)
    }

    /// The record named `name`, made by `make` on first use. To stay within `max` records,
    /// `retire` is called on each record the clock hand retires, under the registry's lock.
    pub(crate) fn get(
        &self,
        name: &str,
        make: impl FnOnce(&str) -> R,
        mut retire: impl FnMut(&R),
    ) -> Arc<R> {
        if let Some(r) = self.with(name, |r| r.cloned()) {
            return r;
        }
        let mut t = self.inner.write();
        if let Some(r) = t.map.get(name) {
            return r.clone();
        }
        while t.map.len() >= self.max {
            let Some(r) = Self::unused(&mut t) else { break };
            t.map.remove(r.name());
            retire(&r);
        }
        let r = Arc::new(make(name));
        t.map.insert(name.into(), r.clone());
        t.hand.push_back(r.clone());
        r
    }

    /// Takes out of the clock the first record found unused since the hand's last pass.
    fn unused(t: &mut Table<R>) -> Option<Arc<R>> {
        while let Some(r) = t.hand.pop_front() {
            if r.used().swap(false, Ordering::Relaxed) {
                t.hand.push_back(r);
                continue;
            }
            return Some(r);
        }
        None
    }

    /// Retires `record` now if it is still its name's record: `retire` runs on it under the
    /// registry's lock.
    pub(crate) fn remove(&self, record: &Arc<R>, retire: impl FnOnce(&R)) {
        let mut t = self.inner.write();
        let name = record.name();
        if t.map.get(name).is_some_and(|r| Arc::ptr_eq(r, record)) {
            t.map.remove(name);
            t.hand.retain(|r| !Arc::ptr_eq(r, record));
            retire(record);
        }
    }

    /// Calls `f` on every record.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&R)) {
        for r in self.inner.read().map.values() {
            f(r);
        }
    }

    /// Records held now.
    pub(crate) fn len(&self) -> usize {
        self.inner.read().map.len()
    }
}
