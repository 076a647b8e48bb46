//! The fleet's lock on a key held outside a load (`Fleet::try_lock`, `Fleet::lock_until`,
//! `TwoTier::lock`), against a real Redis: holders in different "processes" (backends with
//! their own connections and origins) exclude each other, a live holder keeps its lock past
//! many leases, a dead one loses it at lease expiry, and the lock is the one loads take.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use herdless::backend::{AcquireRequest, Acquired, Backend};
use herdless_redis::memory::MemoryStore;
use herdless_redis::{
    Fleet, FleetOptions, FleetOutcome, LOCK_ONLY, RedisBackend, block_on, now_ms,
};

fn options(lease: Duration) -> FleetOptions {
    FleetOptions {
        lease,
        wait_timeout: Duration::from_secs(10),
        ..FleetOptions::default()
    }
}

fn backend(url: &str, prefix: &str) -> RedisBackend {
    RedisBackend::builder(url)
        .prefix(prefix.to_owned())
        .build()
        .unwrap()
}

/// Six holders of one key, each its own backend, each taking the lock ten times: never two
/// inside at once, every take answered.
fn contend(fleets: Vec<Fleet>) {
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let taken = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = fleets
        .into_iter()
        .map(|fleet| {
            let (inside, most, taken) = (inside.clone(), most.clone(), taken.clone());
            thread::spawn(move || {
                for _ in 0..10 {
                    let lock = fleet
                        .lock_blocking("jobs:nightly", Some(Duration::from_secs(20)))
                        .unwrap()
                        .expect("taken within the timeout");
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    thread::sleep(Duration::from_millis(3));
                    inside.fetch_sub(1, Ordering::SeqCst);
                    taken.fetch_add(1, Ordering::SeqCst);
                    assert!(lock.release_blocking().unwrap(), "released by its holder");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(most.load(Ordering::SeqCst), 1, "two holders at once");
    assert_eq!(taken.load(Ordering::SeqCst), 60);
}

#[test]
fn holders_in_different_processes_exclude_each_other() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let prefix = common::unique("lock");
    let backends: Vec<_> = (0..6).map(|_| backend(&srv.url(), &prefix)).collect();
    let fleets = backends
        .iter()
        .map(|b| b.fleet(options(Duration::from_secs(5))))
        .collect();
    contend(fleets);

    // A try of a held lock answers at once; a release by its holder frees it for the other.
    let (a, b) = (
        backends[0].fleet(FleetOptions::default()),
        backends[1].fleet(FleetOptions::default()),
    );
    let held = block_on(a.try_lock("jobs:one")).unwrap().unwrap().unwrap();
    assert!(block_on(b.try_lock("jobs:one")).unwrap().unwrap().is_none());
    let until = Instant::now() + Duration::from_millis(300);
    assert!(
        block_on(b.lock_until("jobs:one", Some(until)))
            .unwrap()
            .unwrap()
            .is_none()
    );
    // A waiter is woken by the release (the `r` notification), not by its deadline.
    let waiter = thread::spawn(move || {
        b.lock_blocking("jobs:one", Some(Duration::from_secs(30)))
            .unwrap()
    });
    thread::sleep(Duration::from_millis(200));
    assert!(held.release_blocking().unwrap());
    let second = waiter
        .join()
        .unwrap()
        .expect("the waiter takes it after the release");
    assert!(!second.is_lost());
    drop(second); // released in the background
    assert!(common::eventually(Duration::from_secs(5), || {
        block_on(a.try_lock("jobs:one")).unwrap().unwrap().is_some()
    }));
}

#[test]
fn a_live_holder_keeps_its_lock_and_a_dead_one_loses_it_at_lease_expiry() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let prefix = common::unique("lock");
    let lease = Duration::from_millis(600);
    let holder = backend(&srv.url(), &prefix);
    let other = backend(&srv.url(), &prefix).fleet(options(lease));

    // Extended in the background: still held after five leases.
    let held = holder
        .fleet(options(lease))
        .lock_blocking("jobs:long", None)
        .unwrap()
        .unwrap();
    thread::sleep(lease * 5);
    assert!(!held.is_lost());
    assert!(
        block_on(other.try_lock("jobs:long"))
            .unwrap()
            .unwrap()
            .is_none()
    );

    // The holder dies: its runtime (the extension) stops, nothing is released. The key is
    // free again once the lease runs out, and a waiter then takes it.
    let died = Instant::now();
    holder.close();
    std::mem::forget(held);
    let taken = other
        .lock_blocking("jobs:long", Some(Duration::from_secs(30)))
        .unwrap()
        .expect("free at lease expiry");
    assert!(died.elapsed() < Duration::from_secs(30));
    drop(taken);

    // A lock taken raw (the `acquire` script, LOCK_ONLY) and never extended nor released:
    // a waiter gets it once its lease ran out.
    let raw = backend(&srv.url(), &prefix);
    let req = AcquireRequest {
        now_ms: now_ms(),
        lease,
        secret: [7; 16],
        have_version: LOCK_ONLY,
    };
    let got = block_on(raw.acquire("jobs:raw", req)).unwrap().unwrap();
    assert!(matches!(got, Acquired::Locked { .. }), "{got:?}");
    assert!(
        block_on(other.try_lock("jobs:raw"))
            .unwrap()
            .unwrap()
            .is_none()
    );
    let taken = other
        .lock_blocking("jobs:raw", Some(Duration::from_secs(30)))
        .unwrap()
        .expect("free once the lease ran out");
    assert!(taken.release_blocking().unwrap());
}

#[test]
fn the_lock_is_the_one_loads_take() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let prefix = common::unique("lock");
    let a = backend(&srv.url(), &prefix).fleet(options(Duration::from_secs(5)));
    let b = backend(&srv.url(), &prefix).fleet(FleetOptions {
        wait_timeout: Duration::from_millis(400),
        ..FleetOptions::default()
    });
    // Held by a lock: a load of the key waits (and times out here) instead of leading.
    let held = a.lock_blocking("pages:home", None).unwrap().unwrap();
    let waited = b.lead_blocking("pages:home", 0);
    assert!(
        matches!(waited, Err(herdless::Error::WaitTimeout { .. })),
        "{waited:?}"
    );
    assert!(held.release_blocking().unwrap());
    // Led by a load: the lock waits for the leader.
    let FleetOutcome::Lead(lease) = b.lead_blocking("pages:home", 0).unwrap() else {
        panic!("the load leads a free key");
    };
    assert!(
        block_on(a.try_lock("pages:home"))
            .unwrap()
            .unwrap()
            .is_none()
    );
    assert!(lease.release_blocking().unwrap());
    // A set of the key breaks a held lock, as it breaks a load's: the holder sees it lost.
    let held = a.lock_blocking("pages:home", None).unwrap().unwrap();
    block_on(b.invalidate("pages:home")).unwrap().unwrap();
    assert!(
        block_on(b.try_lock("pages:home"))
            .unwrap()
            .unwrap()
            .is_some()
    );
    assert!(common::eventually(Duration::from_secs(10), || held.is_lost()));
    assert!(!held.release_blocking().unwrap(), "no longer its lock");
}

#[test]
fn the_memory_tier_locks_the_same_way() {
    let store = MemoryStore::new();
    let fleets = (0..6)
        .map(|_| {
            store
                .backend()
                .build()
                .unwrap()
                .fleet(options(Duration::from_secs(5)))
        })
        .collect();
    contend(fleets);
}
