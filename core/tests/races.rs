//! The write race (a slow rebuild must not overwrite a fresh write): a load reads the database,
//! the application then writes a new version and invalidates (or sets, or bumps), and only
//! then does the slow load finish. Its old data must not land in the cache, and callers who
//! arrive after the write must not be handed it either.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use common::{Load, Origin, Sim, Task, ms, secs};
use herdless::{Cache, Error};

const KEY: &str = "orders:v1:order:7";

/// The database: a row whose version the application bumps on each write.
#[derive(Default)]
struct Db(AtomicU64);

impl Db {
    fn write(&self, v: u64) {
        self.0.store(v, Ordering::SeqCst);
    }
}

struct World {
    sim: Sim,
    cache: Cache<u64>,
    db: Arc<Db>,
    origin: Arc<Origin>,
}

impl World {
    fn new() -> Self {
        let sim = Sim::new();
        let cache = sim.builder().ttl(secs(60)).build().unwrap();
        let db = Arc::new(Db::default());
        db.write(1);
        Self {
            sim,
            cache,
            db,
            origin: Origin::new(),
        }
    }

    /// A loader that reads the row when it starts and answers 200 ms later: a slow query.
    fn loader(&self) -> impl FnOnce() -> Load<u64> + Send + use<> {
        let (db, origin, clock) = (self.db.clone(), self.origin.clone(), self.sim.clock.clone());
        move || {
            let read = db.0.load(Ordering::SeqCst);
            origin.loader(&clock, ms(200), Ok(Some(read)))()
        }
    }

    fn request(&self) -> Task<Result<Option<u64>, Error>> {
        let (cache, loader) = (self.cache.clone(), self.loader());
        self.sim
            .spawn(async move { cache.get_or_load_async(KEY, loader).await })
    }
}

/// Runs the race: a slow load of version 1 starts, at 100 ms the application writes
/// version 2 and calls `write_back`, a second request arrives at 150 ms, and time runs out.
/// Answers what the two requests got.
fn race(w: &mut World, write_back: impl FnOnce(&Cache<u64>)) -> (Option<u64>, Option<u64>) {
    let slow = w.request();
    w.sim.advance(ms(100));
    w.db.write(2);
    write_back(&w.cache);
    w.sim.advance(ms(50));
    let late = w.request();
    w.sim.advance(secs(1));
    let (slow, late) = (slow.take().unwrap(), late.take().unwrap());
    assert_eq!(herdless::driver::flights_in_progress(&w.cache), 0);
    (slow, late)
}

#[test]
fn a_load_that_began_before_invalidate_does_not_write_back() {
    let mut w = World::new();
    let (slow, late) = race(&mut w, |c| {
        c.invalidate(KEY).unwrap();
    });
    assert_eq!(slow, Some(1), "the slow request answers what it read");
    assert_eq!(
        late,
        Some(2),
        "a request after the invalidation must not get version 1"
    );
    assert_eq!(w.cache.get(KEY), Some(2));
    assert_eq!(w.origin.calls(), 2);
}

#[test]
fn a_load_that_began_before_set_does_not_overwrite_it() {
    let mut w = World::new();
    let (slow, late) = race(&mut w, |c| c.set(KEY, 2).unwrap());
    assert_eq!(slow, Some(1));
    assert_eq!(late, Some(2));
    assert_eq!(
        w.cache.get(KEY),
        Some(2),
        "the set value survived the slow load"
    );
    assert_eq!(
        w.origin.calls(),
        1,
        "the set value is served, no second load"
    );
}

#[test]
fn a_load_that_began_before_bump_does_not_write_back() {
    let mut w = World::new();
    let (slow, late) = race(&mut w, |c| {
        c.bump("orders");
    });
    assert_eq!(slow, Some(1));
    assert_eq!(
        late,
        Some(2),
        "a request after the bump must not get version 1"
    );
    assert_eq!(w.cache.get(KEY), Some(2));
    assert_eq!(w.origin.calls(), 2);
}

#[test]
fn bump_reaches_only_its_own_namespace() {
    let w = World::new();
    w.cache.set("orders:v1:order:1", 1).unwrap();
    w.cache.set("orders-archive:v1:order:1", 1).unwrap();
    w.cache.set("users:v1:user:1", 1).unwrap();
    assert_eq!(w.cache.bump("orders"), 1);
    assert_eq!(w.cache.get("orders:v1:order:1"), None);
    assert_eq!(w.cache.get("orders-archive:v1:order:1"), Some(1));
    assert_eq!(w.cache.get("users:v1:user:1"), Some(1));
    // A write after the bump lives under the new epoch.
    w.cache.set("orders:v1:order:1", 2).unwrap();
    assert_eq!(w.cache.get("orders:v1:order:1"), Some(2));
    assert_eq!(w.cache.bump("orders"), 2);
    assert_eq!(w.cache.get("orders:v1:order:1"), None);
}

#[test]
fn invalidate_without_a_load_removes_the_entry() {
    let w = World::new();
    assert!(!w.cache.invalidate(KEY).unwrap());
    w.cache.set(KEY, 5).unwrap();
    assert!(w.cache.invalidate(KEY).unwrap());
    assert_eq!(w.cache.get(KEY), None);
}

#[test]
fn a_load_that_began_before_clear_does_not_write_back() {
    let mut w = World::new();
    w.cache.set("users:v1:user:1", 1).unwrap();
    let (slow, late) = race(&mut w, |c| c.clear());
    assert_eq!(slow, Some(1));
    assert_eq!(
        late,
        Some(2),
        "a request after clear must not get version 1"
    );
    assert_eq!(w.cache.get(KEY), Some(2));
    assert_eq!(
        w.cache.get("users:v1:user:1"),
        None,
        "clear drops every key"
    );
    assert_eq!(w.cache.metrics().entries, 1);
    assert_eq!(w.origin.calls(), 2);
}
