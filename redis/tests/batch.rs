//! Batch loads on the fleet tier (`TieredCache::get_or_load_many`): the locks and entries of
//! the keys a process leads are asked for in one round trip, one loader call loads what the
//! fleet hands the process, and every key is loaded once in the whole fleet. Several
//! `TieredCache`s, each with its own backend (connections, origin id), stand for several
//! processes, as in tests/tiered.rs.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use herdless::Error;
use herdless_redis::memory::MemoryStore;
use herdless_redis::{Json, RedisBackend, SharedTier, TieredCache, block_on};

type Found = HashMap<String, Option<u64>>;

fn cache(tier: impl Into<SharedTier>) -> TieredCache<u64, Json> {
    TieredCache::builder(tier, Json)
        .ttl(Duration::from_secs(600))
        .build()
        .expect("cache")
}

fn redis(url: &str, prefix: &str) -> TieredCache<u64, Json> {
    cache(
        RedisBackend::builder(url)
            .prefix(prefix)
            .build()
            .expect("backend"),
    )
}

fn value_of(key: &str) -> u64 {
    key.rsplit(':').next().unwrap().parse::<u64>().unwrap() * 10
}

fn key(n: usize) -> String {
    format!("p:{n}")
}

/// A loader answering every key with its value, recording the keys of each call.
fn recording(
    calls: &Arc<Mutex<Vec<Vec<String>>>>,
    pause: Duration,
) -> impl Fn(&[String]) -> Result<Found, std::io::Error> + Send + Sync + 'static {
    let calls = calls.clone();
    move |keys: &[String]| {
        calls.lock().unwrap().push(keys.to_vec());
        std::thread::sleep(pause);
        Ok(keys
            .iter()
            .map(|k| (k.clone(), Some(value_of(k))))
            .collect())
    }
}

#[test]
fn a_batch_asks_redis_for_its_locks_in_one_round_trip_and_the_next_process_reads_them() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let p = common::unique("batch");
    let (a, b) = (redis(&srv.url(), &p), redis(&srv.url(), &p));
    let calls = Arc::new(Mutex::new(Vec::new()));
    let keys: Vec<_> = (0..10).map(key).collect();
    let got = a.get_or_load_many(&keys, recording(&calls, Duration::ZERO));
    let want: Vec<_> = keys.iter().map(|k| Some(value_of(k))).collect();
    assert_eq!(
        got.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
        want
    );
    assert_eq!(calls.lock().unwrap().clone(), vec![keys.clone()]);
    let (l1, l2) = a.metrics();
    assert_eq!(l2.batch_round_trips, 1, "one round trip for ten locks");
    assert_eq!(l2.fleet_locks_acquired, 10);
    assert_eq!(l2.commits, 10);
    assert_eq!(l1.total().batch_loads, 1);

    // Another process: ten keys in Redis, five new ones loaded in one call.
    let more: Vec<_> = (0..15).map(key).collect();
    let got = b.get_or_load_many(&more, recording(&calls, Duration::ZERO));
    for (k, v) in more.iter().zip(got) {
        assert_eq!(v.unwrap(), Some(value_of(k)), "{k}");
    }
    assert_eq!(
        calls.lock().unwrap()[1],
        (10..15).map(key).collect::<Vec<_>>()
    );
    let (l1, l2) = b.metrics();
    assert_eq!(l2.batch_round_trips, 1);
    assert_eq!(
        l2.l2_hits, 10,
        "the first process's entries were read, not loaded"
    );
    assert_eq!(l1.total().loads, 5);
}

#[test]
fn four_processes_of_concurrent_batches_load_every_key_once_fleet_wide() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let p = common::unique("batch4");
    let fleet: Vec<_> = (0..4).map(|_| redis(&srv.url(), &p)).collect();
    let calls = Arc::new(Mutex::new(Vec::<Vec<String>>::new()));
    let start = Arc::new(Barrier::new(20));
    let mut threads = Vec::new();
    for c in 0..20 {
        let (cache, calls, start) = (fleet[c % 4].clone(), calls.clone(), start.clone());
        threads.push(std::thread::spawn(move || {
            // 50 keys of 100; neighbours share 45.
            let keys: Vec<_> = (0..50).map(|j| key((c * 5 + j) % 100)).collect();
            start.wait();
            let got = cache.get_or_load_many(&keys, recording(&calls, Duration::from_millis(50)));
            for (k, v) in keys.iter().zip(got) {
                assert_eq!(v.unwrap(), Some(value_of(k)), "{k}");
            }
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    let mut per_key = HashMap::<String, usize>::new();
    for call in calls.lock().unwrap().iter() {
        for k in call {
            *per_key.entry(k.clone()).or_default() += 1;
        }
    }
    assert_eq!(per_key.len(), 100);
    let twice: Vec<_> = per_key.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "loaded more than once in the fleet: {twice:?}"
    );
    assert!(
        calls.lock().unwrap().len() <= 20,
        "at most one call per batch"
    );
}

#[test]
fn on_the_memory_tier_a_failing_loader_fails_every_key_and_releases_the_locks() {
    let store = MemoryStore::new();
    let (a, b) = (
        cache(store.backend().build().unwrap()),
        cache(store.backend().build().unwrap()),
    );
    let keys = vec![key(1), key(2)];
    let got = a.get_or_load_many(&keys, |_: &[String]| {
        Err::<Found, _>(std::io::Error::other("database down"))
    });
    for v in got {
        match v {
            Err(Error::Load(e)) => assert_eq!(e.to_string(), "database down"),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(a.metrics().1.batch_round_trips, 1);
    // The locks went back: another process loads at once (no wait for a lease).
    let calls = Arc::new(Mutex::new(Vec::new()));
    let got = b.get_or_load_many(&keys, recording(&calls, Duration::ZERO));
    assert_eq!(
        got.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
        vec![Some(10), Some(20)]
    );
    assert_eq!(b.metrics().1.fleet_wait_timeouts, 0);
    assert_eq!(calls.lock().unwrap().len(), 1);
}

#[test]
fn the_async_batch_omits_absent_keys_and_shares_the_absences() {
    block_on(async_batch_omits_absent_keys_and_shares_the_absences()).unwrap();
}

async fn async_batch_omits_absent_keys_and_shares_the_absences() {
    let store = MemoryStore::new();
    let (a, b) = (
        cache(store.backend().build().unwrap()),
        cache(store.backend().build().unwrap()),
    );
    let got = a
        .get_or_load_many_async(vec![key(1), key(2)], |keys: Vec<String>| async move {
            Ok::<_, std::io::Error>(vec![(keys[0].clone(), Some(1u64))])
        })
        .await;
    assert_eq!(got[0].as_ref().unwrap(), &Some(1));
    assert_eq!(got[1].as_ref().unwrap(), &None, "omitted: absent");
    let got = b
        .get_or_load_many_async(vec![key(2)], |_: Vec<String>| async move {
            Ok::<Found, std::io::Error>(Found::new())
        })
        .await;
    assert_eq!(got[0].as_ref().unwrap(), &None);
    assert_eq!(
        b.metrics().0.total().loads,
        0,
        "the absence came from the shared tier"
    );
}

#[test]
fn on_a_cluster_a_batch_takes_one_round_trip_per_slot_group() {
    if !common::redis_available() {
        return;
    }
    let cluster = common::Cluster::start();
    let p = common::unique("bcl");
    let mk = || {
        cache(
            RedisBackend::cluster(cluster.urls())
                .prefix(p.clone())
                .build()
                .expect("backend"),
        )
    };
    let (a, b) = (mk(), mk());
    // Three namespaces: three slots (a namespace is one hash tag), four keys each.
    let keys: Vec<String> = ["users", "orders", "cart"]
        .iter()
        .flat_map(|ns| (1..=4).map(move |n| format!("{ns}:{n}")))
        .collect();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let got = a.get_or_load_many(&keys, recording(&calls, Duration::ZERO));
    for (k, v) in keys.iter().zip(got) {
        assert_eq!(v.unwrap(), Some(value_of(k)), "{k}");
    }
    assert_eq!(
        calls.lock().unwrap().len(),
        1,
        "one loader call for three slots"
    );
    assert_eq!(
        a.metrics().1.batch_round_trips,
        3,
        "one round trip per slot group"
    );
    let got = b.get_or_load_many(&keys, recording(&calls, Duration::ZERO));
    assert!(got.iter().all(Result::is_ok));
    assert_eq!(
        calls.lock().unwrap().len(),
        1,
        "the other process reads them all"
    );
    assert_eq!(b.metrics().1.l2_hits, 12);
}

/// A `RESULT` line's `name=` field.
fn field(line: &str, name: &str) -> u64 {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {line}"))
}

#[test]
fn four_os_processes_of_five_concurrent_batches_load_every_key_once() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let prefix = common::unique("bproc");
    let counter = format!("{prefix}:loads");
    let start_at = herdless_redis::now_ms() + 1500;
    let children: Vec<_> = (0..4)
        .map(|i| {
            std::process::Command::new(env!("CARGO_BIN_EXE_fleet_worker"))
                .env("HL_URL", srv.url())
                .env("HL_PREFIX", &prefix)
                .env("HL_KEY", "page")
                .env("HL_MODE", "batch")
                .env("HL_INDEX", i.to_string())
                .env("HL_CALLERS", "5")
                .env("HL_LOADER_MS", "100")
                .env("HL_START_AT_MS", start_at.to_string())
                .env("HL_COUNTER", &counter)
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("spawn worker")
        })
        .collect();
    let mut calls = 0;
    for c in children {
        let out = c.wait_with_output().expect("worker output");
        assert!(out.status.success(), "worker failed: {out:?}");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let line = text
            .lines()
            .find(|l| l.starts_with("RESULT"))
            .expect("RESULT");
        assert_eq!(field(line, "ok"), 5 * 50, "{line}");
        calls += field(line, "calls");
    }
    let loads: HashMap<String, i64> = redis::cmd("HGETALL")
        .arg(&counter)
        .query(&mut srv.client())
        .unwrap();
    assert_eq!(loads.len(), 100, "every key loaded");
    let twice: Vec<_> = loads.iter().filter(|(_, n)| **n != 1).collect();
    assert!(
        twice.is_empty(),
        "loaded more than once in the fleet: {twice:?}"
    );
    assert!(calls <= 20, "at most one loader call per batch: {calls}");
}

#[test]
fn a_batch_loader_hung_past_the_hard_timeout_times_its_keys_out_and_hands_the_locks_back() {
    let store = MemoryStore::new();
    let mk = || {
        TieredCache::<u64, Json>::builder(store.backend().build().unwrap(), Json)
            .ttl(Duration::from_secs(600))
            .hard_timeout(Duration::from_millis(200))
            .build()
            .unwrap()
    };
    let (a, b) = (mk(), mk());
    let keys = vec![key(1), key(2)];
    let started = std::time::Instant::now();
    let got = block_on(
        a.get_or_load_many_async(keys.clone(), |_: Vec<String>| async {
            std::future::pending::<()>().await;
            Ok::<Found, std::io::Error>(Found::new())
        }),
    )
    .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    for v in got {
        assert!(matches!(v, Err(Error::LoadTimeout { .. })), "{v:?}");
    }
    let calls = Arc::new(Mutex::new(Vec::new()));
    let got = b.get_or_load_many(&keys, recording(&calls, Duration::ZERO));
    assert!(got.iter().all(|v| v.is_ok()));
    assert_eq!(
        b.metrics().1.fleet_wait_timeouts,
        0,
        "the locks were handed back"
    );
}

#[test]
fn stale_keys_of_a_batch_are_served_and_refreshed_in_one_background_call() {
    let store = MemoryStore::new();
    let a = TieredCache::<u64, Json>::builder(store.backend().build().unwrap(), Json)
        .ttl(Duration::from_millis(100))
        .grace(Duration::from_secs(60))
        .beta(0.0)
        .build()
        .unwrap();
    let keys: Vec<_> = (0..5).map(key).collect();
    let calls = Arc::new(Mutex::new(Vec::new()));
    a.get_or_load_many(&keys, recording(&calls, Duration::ZERO));
    std::thread::sleep(Duration::from_millis(150));
    let slow = Duration::from_millis(300);
    let started = std::time::Instant::now();
    let got = a.get_or_load_many(&keys, recording(&calls, slow));
    assert!(started.elapsed() < slow, "stale values are served at once");
    assert!(got.iter().all(|v| v.is_ok()));
    assert!(
        common::eventually(Duration::from_secs(5), || calls.lock().unwrap().len() == 2),
        "one refresh call: {:?}",
        calls.lock().unwrap()
    );
    assert_eq!(
        calls.lock().unwrap()[1],
        keys,
        "the five stale keys in one call"
    );
}

/// A batch whose blocking loader hangs past the hard timeout hands its keys' fleet locks
/// back at that timeout (its loader cannot be stopped), so another process leads them
/// instead of waiting behind it until `wait_timeout` (issue 33 item 3); the late answer is
/// not published over the other process's value.
fn a_hung_batch_loader_holds_its_fleet_locks_at_most_the_hard_timeout(
    tier: impl Fn() -> SharedTier,
) {
    let hung = |t: SharedTier| {
        TieredCache::<u64, Json>::builder(t, Json)
            .ttl(Duration::from_secs(600))
            .hard_timeout(Duration::from_millis(300))
            .build()
            .expect("cache")
    };
    let (a, b) = (hung(tier()), cache(tier()));
    let (release, hang) = std::sync::mpsc::channel::<()>();
    let hang = Arc::new(Mutex::new(hang));
    let started = Arc::new(Barrier::new(2));
    let leader = {
        let (a, started) = (a.clone(), started.clone());
        std::thread::spawn(move || {
            a.get_or_load_many(&[key(1), key(2)], move |keys: &[String]| {
                started.wait();
                // Hangs until the test is done (far past the other process's wait_timeout).
                let _ = hang.lock().unwrap().recv_timeout(Duration::from_secs(30));
                Ok::<Found, std::io::Error>(keys.iter().map(|k| (k.clone(), Some(1))).collect())
            })
        })
    };
    started.wait();
    // B arrives while A's loader hangs: it must lead once A's locks are handed back.
    let got = b.get_or_load_many(&[key(1), key(2)], |keys: &[String]| {
        Ok::<Found, std::io::Error>(
            keys.iter()
                .map(|k| (k.clone(), Some(value_of(k))))
                .collect(),
        )
    });
    let got: Vec<_> = got
        .into_iter()
        .map(|r| r.expect("B loads the keys itself"))
        .collect();
    assert_eq!(got, vec![Some(10), Some(20)]);
    let cut = a.metrics().1.leases_cut;
    assert!(cut >= 2, "{cut} locks cut");
    release.send(()).unwrap();
    let late = leader.join().unwrap();
    assert_eq!(late.len(), 2);
    // A's late answer was not published over B's.
    let c = cache(tier());
    assert_eq!(c.get(&key(1)).unwrap(), Some(10));
}

#[test]
fn on_the_memory_tier_a_hung_batch_loader_holds_its_locks_at_most_the_hard_timeout() {
    let store = MemoryStore::new();
    a_hung_batch_loader_holds_its_fleet_locks_at_most_the_hard_timeout(|| {
        store.backend().build().unwrap().into()
    });
}

#[test]
fn on_redis_a_hung_batch_loader_holds_its_locks_at_most_the_hard_timeout() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let p = common::unique("hung");
    a_hung_batch_loader_holds_its_fleet_locks_at_most_the_hard_timeout(|| {
        RedisBackend::builder(srv.url())
            .prefix(&p)
            .build()
            .expect("backend")
            .into()
    });
}
