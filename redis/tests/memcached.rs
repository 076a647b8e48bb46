//! The memcached tier against a private memcached on a free port (stopped by pid): two
//! backends with their own connections stand for two processes. Under CI=true a missing
//! memcached fails the test; elsewhere the test is skipped loudly.

mod common;

use common::memcached::Memcached;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use herdless::backend::{AcquireRequest, Acquired, Backend};
use herdless_redis::memcached::MemcachedBackend;
use herdless_redis::{Json, TieredCache, now_ms};

/// A process of the fleet.
fn backend(mc: &Memcached, prefix: &str) -> MemcachedBackend {
    MemcachedBackend::builder([mc.addr()])
        .prefix(prefix)
        .build()
        .expect("backend")
}

fn cache(b: &MemcachedBackend, ttl: Duration, grace: Duration) -> TieredCache<String, Json> {
    TieredCache::builder(b.clone(), Json)
        .ttl(ttl)
        .grace(grace)
        .build()
        .expect("cache")
}

fn counting(
    calls: &Arc<AtomicUsize>,
    v: &str,
    took: Duration,
) -> impl FnOnce() -> Result<Option<String>, std::io::Error> + Send + 'static {
    let (calls, v) = (calls.clone(), v.to_owned());
    move || {
        calls.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(took);
        Ok(Some(v))
    }
}

#[test]
fn a_cold_herd_in_two_processes_costs_one_load_and_copies_follow_every_write() {
    let Some(mc) = Memcached::start() else { return };
    let p = common::unique("herd");
    let (a, b) = (backend(&mc, &p), backend(&mc, &p));
    let caches = [
        cache(&a, Duration::from_secs(60), Duration::ZERO),
        cache(&b, Duration::from_secs(60), Duration::ZERO),
    ];
    let calls = Arc::new(AtomicUsize::new(0));
    let barrier = Arc::new(Barrier::new(32));
    let answers: Vec<_> = (0..32)
        .map(|i| {
            let (c, calls, barrier) = (caches[i % 2].clone(), calls.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                c.get_or_load(
                    "users:1",
                    counting(&calls, "ada", Duration::from_millis(300)),
                )
                .unwrap()
            })
        })
        .collect();
    for t in answers {
        assert_eq!(t.join().unwrap().as_deref(), Some("ada"));
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "one load for both processes"
    );
    // No copies are kept: a write or delete in one process is what the other reads next.
    caches[0].set("users:1", "grace".to_owned()).unwrap();
    assert_eq!(caches[1].get("users:1").unwrap().as_deref(), Some("grace"));
    caches[1].invalidate("users:1").unwrap();
    assert_eq!(caches[0].get("users:1").unwrap(), None);
    let again = caches[0]
        .get_or_load("users:1", counting(&calls, "back", Duration::ZERO))
        .unwrap();
    assert_eq!(again.as_deref(), Some("back"));
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    // A bump in one process is a miss in the other at once.
    caches[1].bump("users").unwrap();
    assert_eq!(caches[0].get("users:1").unwrap(), None);
    assert_eq!(
        caches[0].metrics().0.total().hits,
        0,
        "no L1 hit: nothing was kept"
    );
}

#[test]
fn a_stale_entry_is_served_while_one_process_refreshes_it() {
    let Some(mc) = Memcached::start() else { return };
    let p = common::unique("swr");
    let (a, b) = (backend(&mc, &p), backend(&mc, &p));
    let (ca, cb) = (
        cache(&a, Duration::from_millis(300), Duration::from_secs(30)),
        cache(&b, Duration::from_millis(300), Duration::from_secs(30)),
    );
    let calls = Arc::new(AtomicUsize::new(0));
    ca.get_or_load("k:1", counting(&calls, "v1", Duration::ZERO))
        .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    // Past its fresh time: both processes serve v1 at once; one refresh runs for the fleet.
    let started = Instant::now();
    let ta = ca
        .get_or_load("k:1", counting(&calls, "v2", Duration::from_millis(300)))
        .unwrap();
    let tb = cb
        .get_or_load("k:1", counting(&calls, "v2", Duration::from_millis(300)))
        .unwrap();
    assert_eq!((ta.as_deref(), tb.as_deref()), (Some("v1"), Some("v1")));
    assert!(
        started.elapsed() < Duration::from_millis(250),
        "{:?}",
        started.elapsed()
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while cb.get("k:1").unwrap().as_deref() != Some("v2") {
        assert!(Instant::now() < deadline, "the refresh never landed");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "one refresh for both processes"
    );
}

#[test]
fn a_dead_leader_holds_the_key_one_lease_and_a_set_defeats_a_running_load() {
    let Some(mc) = Memcached::start() else { return };
    let p = common::unique("dead");
    let (a, b) = (backend(&mc, &p), backend(&mc, &p));
    let req = AcquireRequest {
        now_ms: now_ms(),
        lease: Duration::from_secs(1),
        secret: [7; 16],
        have_version: 0,
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    // A leader that wins the lease and dies (never commits nor releases).
    let won = rt.block_on(a.acquire("k:1", req.clone())).unwrap();
    assert!(
        matches!(won, Acquired::Locked { stale: None, .. }),
        "{won:?}"
    );
    let other = rt
        .block_on(b.acquire(
            "k:1",
            AcquireRequest {
                secret: [8; 16],
                ..req.clone()
            },
        ))
        .unwrap();
    assert!(
        matches!(other, Acquired::Contended { stale: None, .. }),
        "{other:?}"
    );
    let cb = cache(&b, Duration::from_secs(60), Duration::ZERO);
    let calls = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let v = cb
        .get_or_load("k:1", counting(&calls, "v", Duration::ZERO))
        .unwrap();
    assert_eq!(v.as_deref(), Some("v"));
    assert!(
        started.elapsed() < Duration::from_millis(2500),
        "{:?}",
        started.elapsed()
    );
    // A load running while another process writes: its commit is refused.
    let Acquired::Locked { token, .. } = rt
        .block_on(a.acquire(
            "k:2",
            AcquireRequest {
                now_ms: now_ms(),
                ..req
            },
        ))
        .unwrap()
    else {
        panic!("k:2 is cold")
    };
    cb.set("k:2", "written".to_owned()).unwrap();
    let entry = herdless_redis::new_entry(
        Some(b"\"loaded\"".to_vec()),
        Duration::from_secs(60),
        Duration::ZERO,
        Duration::from_secs(60),
        Duration::ZERO,
    );
    let out = rt.block_on(a.commit("k:2", entry, Some(&token))).unwrap();
    assert_eq!(out, herdless::backend::WriteOutcome::Superseded);
    assert_eq!(cb.get("k:2").unwrap().as_deref(), Some("written"));
}

#[test]
fn bad_bytes_a_lost_epoch_and_a_stopped_server_are_misses_or_clear_errors() {
    let Some(mut mc) = Memcached::start() else {
        return;
    };
    let p = common::unique("bad");
    let b = backend(&mc, &p);
    let c = cache(&b, Duration::from_secs(60), Duration::ZERO);
    let calls = Arc::new(AtomicUsize::new(0));
    c.set("ns:1", "kept".to_owned()).unwrap();
    // Bytes that are not an entry: a miss, counted, then loaded over.
    let name = format!("{p}:{{ns}}:v:ns:1");
    mc.put(&name, b"garbage");
    assert_eq!(c.get("ns:1").unwrap(), None);
    assert!(c.metrics().1.corrupt_entries >= 1);
    let v = c
        .get_or_load("ns:1", counting(&calls, "fresh", Duration::ZERO))
        .unwrap();
    assert_eq!(v.as_deref(), Some("fresh"));
    // An empty value (herdless never writes one): claimed over and loaded, not waited on.
    mc.put(&format!("{p}:{{ns}}:v:ns:4"), b"");
    let started = Instant::now();
    let v = c
        .get_or_load("ns:4", counting(&calls, "over", Duration::ZERO))
        .unwrap();
    assert_eq!(v.as_deref(), Some("over"));
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    // The epoch evicted: the entries written under it are never served again.
    assert!(
        mc.raw(format!("md {p}:{{ns}}:e\r\n").as_bytes())
            .starts_with("HD")
    );
    assert_eq!(c.get("ns:1").unwrap(), None);
    // Tags are refused, with an error that says so.
    let tagged = herdless::Loaded::value("t".to_owned()).tags(["tag"]);
    let err = c.set_with("ns:2", tagged).unwrap_err();
    assert!(err.to_string().contains("tags"), "{err}");
    // memcached stopped: loads are served in the process, writes fail clearly.
    mc.kill();
    let v = c
        .get_or_load("ns:3", counting(&calls, "local", Duration::ZERO))
        .unwrap();
    assert_eq!(v.as_deref(), Some("local"));
    assert!(c.set("ns:3", "x".to_owned()).is_err());
    assert!(c.metrics().1.backend_errors >= 2);
}

#[test]
fn a_fleet_on_two_memcached_servers_shares_one_load_per_key() {
    let (Some(m1), Some(m2)) = (Memcached::start(), Memcached::start()) else {
        return;
    };
    let p = common::unique("two");
    let servers = [m1.addr(), m2.addr()];
    let make = || {
        let b = MemcachedBackend::builder(servers.clone())
            .prefix(&p)
            .build()
            .expect("backend");
        cache(&b, Duration::from_secs(60), Duration::ZERO)
    };
    let (a, b) = (make(), make());
    let calls = Arc::new(AtomicUsize::new(0));
    // Keys of many namespaces: their items and epochs spread over both servers.
    for i in 0..40 {
        let key = format!("ns{i}:k");
        let ta = {
            let (a, calls, key) = (a.clone(), calls.clone(), key.clone());
            std::thread::spawn(move || {
                a.get_or_load(&key, counting(&calls, "v", Duration::from_millis(50)))
                    .unwrap()
            })
        };
        let vb = b
            .get_or_load(&key, counting(&calls, "v", Duration::from_millis(50)))
            .unwrap();
        assert_eq!(
            (ta.join().unwrap(), vb),
            (Some("v".into()), Some("v".into()))
        );
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        40,
        "one load per key for both processes"
    );
    let stored = |m: &Memcached| m.raw(b"stats\r\n").contains("STAT curr_items 0\r\n");
    assert!(!stored(&m1) && !stored(&m2), "both servers hold items");
    a.invalidate("ns7:k").unwrap();
    assert_eq!(b.get("ns7:k").unwrap(), None);
}

#[test]
fn a_value_kept_forever_is_read_back() {
    let Some(mc) = Memcached::start() else { return };
    let p = common::unique("forever");
    let b = backend(&mc, &p);
    // Django's "forever" (50 years): past memcached's 2038 horizon for absolute times.
    let c = cache(&b, Duration::from_secs(50 * 365 * 86_400), Duration::ZERO);
    c.set("k:1", "kept".to_owned()).unwrap();
    assert_eq!(c.get("k:1").unwrap().as_deref(), Some("kept"));
}
