//! Races of a writer with a namespace's retirement, the interleavings forced by hand: the
//! writer looked the record up before the retirement and reads the epoch to store under
//! after it.

use core::time::Duration;

use super::Table;
use crate::clock::ManualClock;
use crate::config::Builder;
use crate::epoch::Namespace;
use crate::flight::Outcome;
use crate::sync::Arc;

/// A table that keeps one namespace record: using a second one retires the first.
fn table() -> Table<u32> {
    let b = Builder::default()
        .clock(ManualClock::new())
        .shards(1)
        .max_namespaces(1)
        .seed(7);
    Table::new(b.into_parts().expect("valid options"))
}

impl Table<u32> {
    fn get(&self, key: &str) -> Option<u32> {
        self.get_with(key, |v| *v)
    }

    /// A load of `key` begun with the namespace record `ns`, answering `value`.
    fn load_under(&self, key: &str, ns: Arc<Namespace>, value: u32) {
        let hash = self.hash(key);
        let flight = {
            let mut shard = self.shard(hash).write();
            self.start_flight(&mut shard, (key, hash), ns, self.now(), false)
                .expect("room for a flight")
        };
        let outcome = Outcome::Loaded(Some(value));
        self.finish(&flight, outcome, Duration::ZERO, None, self.now());
    }
}

/// A load of `a:k` whose lookup found namespace `a`'s record, retired (by the use of `b`)
/// before the flight read its epoch: its result must stay within reach of `bump("a")`.
#[test]
fn a_load_starting_as_its_namespace_is_retired_is_reached_by_the_next_bump() {
    let t = &table();
    let key = "a:k";
    let looked_up = t.namespaces.get("a");
    t.namespaces.get("b"); // retires "a"
    t.load_under(key, looked_up, 1);
    assert_eq!(t.get(key), Some(1), "stored");
    t.namespaces.bump("a");
    assert_eq!(t.get(key), None, "a bumped namespace served an old value");
}

/// The same race at the entry's own record: a refresh (or a fail-safe load) takes the
/// namespace from the entry it read, whose record is retired before the flight begins.
#[test]
fn a_refresh_of_an_entry_whose_namespace_was_retired_is_reached_by_the_next_bump() {
    let t = &table();
    let key = "a:k";
    t.write(key, Some(1), None).unwrap();
    let hash = t.hash(key);
    let entry_ns = {
        let shard = t.shard(hash).read();
        shard.store.get(hash, key).expect("stored").entry.ns.clone()
    };
    t.namespaces.get("b"); // retires "a": the entry dies with its record
    assert_eq!(t.get(key), None, "retiring invalidates");
    t.load_under(key, entry_ns, 2);
    t.namespaces.bump("a");
    assert_eq!(t.get(key), None, "a bumped namespace served an old value");
}
