//! Closing the fleet engine (`TwoTier::close`, what the bindings' `close()` call): a closed
//! cache refuses every call with `Error::Closed`, a call in flight that still needs the
//! tier answers it at once, and the tier's connections and thread are released at once
//! (issue 33 item 5).

mod common;

use std::time::{Duration, Instant};

use herdless::{Error, Lookup};
use herdless_redis::memory::{Fault, MemoryStore};
use herdless_redis::two_tier::{Get, ManyStep, Step};
use herdless_redis::{Json, TierAddress, TierOptions, TwoTier, block_on};

/// One test of this file at a time: the last one counts the process's threads and pollers.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn engine(address: &str, prefix: Option<String>) -> TwoTier<String> {
    let tier = TierOptions {
        address: TierAddress::parse(address).expect("address"),
        prefix,
        lease: None,
    };
    TwoTier::build(herdless::Cache::builder(), Some(tier)).expect("engine")
}

fn closed<T: std::fmt::Debug>(r: Result<T, Error>) -> bool {
    matches!(r, Err(Error::Closed))
}

#[test]
fn a_closed_engine_refuses_every_call_with_closed() {
    let _one = one_at_a_time();
    let tt = engine("memory://close-refuses", None);
    block_on(tt.set("k:1", "v".into(), None, &Json).unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(tt.l1().get("k:1").map(|v| v.value).as_deref(), Some("v"));
    assert!(!tt.is_closed());
    tt.close();
    tt.close(); // idempotent
    assert!(tt.is_closed());
    assert!(closed(tt.check_open()));
    // Its entries are gone: a hit path that reads the L1 itself finds nothing.
    assert!(tt.l1().get("k:1").is_none());
    assert!(closed(tt.get("k:1").map(|_: Get<String>| ())));
    assert!(closed(tt.set("k:1", "w".into(), None, &Json).map(|_| ())));
    assert!(closed(tt.set_absent("k:1").map(|_| ())));
    assert!(closed(tt.invalidate("k:1").map(|_| ())));
    assert!(closed(tt.invalidate_tags(["t"]).map(|_| ())));
    assert!(closed(tt.expire_tags(["t"]).map(|_| ())));
    assert!(closed(block_on(tt.bump("k")).unwrap()));
    // A load is refused before any loader runs, and its waiters with it.
    let Ok(Lookup::Lead(guard)) = tt.l1().lookup("k:2") else {
        panic!("a miss leads");
    };
    match tt.lead(guard, None) {
        Step::Done(r) => assert!(closed(r)),
        other => panic!("a closed engine took {other:?}"),
    }
    // A batch too: every key answers Closed, and its loader is never called.
    let mut many = tt.get_many(["k:3", "k:4"]);
    let answers = loop {
        match many.step() {
            ManyStep::Tier(p) => many.resume(block_on(p).unwrap(), &Json),
            ManyStep::Done(a) => break a,
            ManyStep::Load(keys) => panic!("the loader was called for {keys:?}"),
            _ => panic!("unexpected step"),
        }
    };
    assert_eq!(answers.len(), 2);
    assert!(answers.into_iter().all(closed));
}

#[test]
fn an_engine_without_a_shared_tier_closes_the_same_way() {
    let _one = one_at_a_time();
    let tt: TwoTier<String> = TwoTier::build(herdless::Cache::builder(), None).unwrap();
    block_on(tt.set("k:1", "v".into(), None, &Json).unwrap())
        .unwrap()
        .unwrap();
    tt.close();
    assert!(tt.l1().get("k:1").is_none());
    assert!(closed(tt.get("k:1").map(|_| ())));
    let Ok(Lookup::Lead(guard)) = tt.l1().lookup("k:1") else {
        panic!("a miss leads");
    };
    assert!(matches!(
        tt.lead(guard, None),
        Step::Done(Err(Error::Closed))
    ));
}

/// A write waiting for a stalled tier is woken by the close and answers `Closed`, long
/// before its operation timeout (30 s here) would have ended it.
#[test]
fn a_closed_tiered_cache_refuses_its_calls_and_every_clone_is_closed() {
    let _one = one_at_a_time();
    let backend = MemoryStore::new().backend().build().unwrap();
    let cache: herdless_redis::TieredCache<String, Json> =
        herdless_redis::TieredCache::builder(backend, Json)
            .build()
            .unwrap();
    let other = cache.clone();
    cache.set("k:1", "v".into()).unwrap();
    cache.close();
    assert!(other.is_closed());
    assert!(closed(other.get("k:1")));
    assert!(closed(
        other.get_or_load("k:2", || Ok::<_, std::io::Error>(Some("x".into())))
    ));
    let many = other.get_or_load_many(["k:3"], |_: &[String]| Ok::<_, std::io::Error>(vec![]));
    assert!(matches!(many[0], Err(Error::Closed)), "{many:?}");
    cache.close();
}

#[test]
fn a_write_in_flight_answers_closed_when_the_engine_closes() {
    let _one = one_at_a_time();
    let store = MemoryStore::named("close-in-flight");
    let tt = engine("memory://close-in-flight", None);
    store.set_fault(Some(Fault::Stall));
    let pending = tt.set("k:1", "v".into(), None, &Json).unwrap();
    let closer = {
        let tt = tt.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            tt.close();
        })
    };
    let began = Instant::now();
    let r = block_on(pending).unwrap();
    closer.join().unwrap();
    store.set_fault(None);
    assert!(closed(r));
    assert!(
        began.elapsed() < Duration::from_secs(20),
        "{:?}",
        began.elapsed()
    );
    assert!(tt.l1().get("k:1").is_none());
}

/// Threads of this process named like the backends' runtimes.
fn runtime_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|t| {
                    std::fs::read_to_string(t.path().join("comm"))
                        .is_ok_and(|c| c.trim() == "herdless-redis")
                })
                .count()
        })
        .unwrap_or(0)
}

/// The pollers (epoll file descriptors) of this process: one per live runtime.
fn pollers() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|f| {
                    std::fs::read_link(f.path())
                        .is_ok_and(|l| l.to_string_lossy().contains("eventpoll"))
                })
                .count()
        })
        .unwrap_or(0)
}

fn connected_clients(server: &common::Server) -> usize {
    let info: String = redis::cmd("INFO")
        .arg("clients")
        .query(&mut server.client())
        .unwrap();
    let line = info
        .lines()
        .find(|l| l.starts_with("connected_clients:"))
        .unwrap();
    line["connected_clients:".len()..].trim().parse().unwrap()
}

#[test]
fn closing_releases_the_connections_and_the_thread_at_once() {
    let _one = one_at_a_time();
    if !common::redis_available() {
        return;
    }
    let server = common::Server::start();
    let prefix = common::unique("close");
    let (clients, threads, polls) = (connected_clients(&server), runtime_threads(), pollers());
    let engines: Vec<TwoTier<String>> = (0..20)
        .map(|i| {
            let tt = engine(&server.url(), Some(prefix.clone()));
            let key = format!("k:{i}");
            block_on(tt.set(&key, "v".into(), None, &Json).unwrap())
                .unwrap()
                .unwrap();
            tt
        })
        .collect();
    // Each holds a command and a subscription connection, a runtime thread and its poller.
    assert!(connected_clients(&server) >= clients + 40);
    assert!(runtime_threads() >= threads + 20);
    assert!(pollers() >= polls + 20);
    for tt in &engines {
        tt.close();
    }
    // Still referenced, yet released (a runtime that just ended may still be going).
    assert!(
        common::eventually(Duration::from_secs(10), || connected_clients(&server)
            <= clients),
        "{} Redis clients after closing (before: {clients})",
        connected_clients(&server)
    );
    assert!(
        common::eventually(Duration::from_secs(10), || runtime_threads() <= threads + 3),
        "{} runtime threads after closing (before: {threads})",
        runtime_threads()
    );
    assert!(
        common::eventually(Duration::from_secs(10), || pollers() <= polls + 3),
        "{} pollers after closing (before: {polls})",
        pollers()
    );
    // Let go of, its counters kept.
    assert!(engines.iter().all(|tt| tt.tier().is_none()));
    assert!(engines.iter().all(|tt| tt.tier_metrics().commits >= 1));
    drop(engines);
}
