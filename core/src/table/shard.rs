//! One shard of the table: the entries of its keys and their flight records, under one lock.

use hashbrown::HashTable;

use crate::admission::Sketch;
use crate::epoch::Namespace;
use crate::expiry::Lifetimes;
use crate::flight::Flight;
use crate::rng::ShardRng;
use crate::store::Store;
use crate::sync::Arc;

pub(crate) struct Shard<V> {
    pub(crate) store: Store<V>,
    /// At most one flight record per key: the load in progress.
    pub(crate) flights: HashTable<Arc<Flight<V>>>,
    /// The namespace a miss here last looked up: misses of one namespace skip the
    /// registry's lock and hash (see [`Namespaces::get_cached`](crate::epoch::Namespaces::get_cached)).
    pub(crate) last_ns: Option<Arc<Namespace>>,
    /// This shard's jitter generator, unless jitter draws from the table's (see
    /// [`SharedRng::per_shard`](crate::rng::SharedRng::per_shard)).
    pub(crate) rng: ShardRng,
    /// A flight that ended alone, kept for the next one's record (see [`Flight::renew`]).
    pub(crate) spare: Option<Arc<Flight<V>>>,
}

impl<V> Shard<V> {
    pub(crate) fn new(
        capacity: u64,
        hasher: hashbrown::DefaultHashBuilder,
        life: Lifetimes,
        sketch: Option<Sketch>,
        rng: ShardRng,
    ) -> Self {
        Self {
            store: Store::new(capacity, hasher, life, sketch),
            flights: HashTable::new(),
            last_ns: None,
            rng,
            spare: None,
        }
    }

    /// The load of `key` in progress, if any.
    #[inline]
    pub(crate) fn flight(&self, hash: u64, key: &str) -> Option<&Arc<Flight<V>>> {
        // Most shards have no load running: no probe of an empty table.
        if self.flights.is_empty() {
            return None;
        }
        self.flights.find(hash, |f| &*f.key == key)
    }

    /// Removes `flight`'s record if it is still the key's current one.
    pub(crate) fn remove_flight(&mut self, flight: &Flight<V>) -> bool {
        match self.flights.find_entry(flight.hash, |f| f.id == flight.id) {
            Ok(e) => {
                e.remove();
                true
            }
            Err(_) => false,
        }
    }
}
