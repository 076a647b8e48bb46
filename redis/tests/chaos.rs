//! Redis killed, restarted empty, and SIGSTOPped mid-load: no hang, no panic, no newer
//! value overwritten, loader calls bounded, recovery without restarting the process.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use herdless_redis::{Json, RedisBackend, TieredCache};

fn cache(url: &str, prefix: &str) -> TieredCache<String, Json> {
    let b = RedisBackend::builder(url)
        .prefix(prefix)
        .isolated()
        .op_timeout(Duration::from_millis(300))
        .connect_timeout(Duration::from_millis(200))
        .heartbeat(Duration::from_millis(200))
        .build()
        .expect("backend");
    TieredCache::builder(b, Json)
        .ttl(Duration::from_secs(60))
        .lease(Duration::from_secs(1))
        .wait_timeout(Duration::from_secs(2))
        .build()
        .expect("cache")
}

fn loader(
    calls: &Arc<AtomicUsize>,
    v: &str,
    ms: u64,
) -> impl FnOnce() -> Result<Option<String>, std::io::Error> + Send + 'static {
    let (calls, v) = (calls.clone(), v.to_owned());
    move || {
        calls.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(ms));
        Ok(Some(v))
    }
}

fn in_redis(srv: &common::Server, c: &TieredCache<String, Json>, key: &str) -> Option<String> {
    let raw: Option<Vec<u8>> = redis::cmd("GET")
        .arg(c.backend().redis().expect("redis").names(key).value)
        .query(&mut srv.client())
        .ok()?;
    let e = herdless_redis::wire::decode(&raw?).ok()?;
    serde_json::from_slice(&e.value?).ok()
}

#[test]
fn redis_down_serves_l1_coalesces_locally_and_recovers_by_itself() {
    if !common::redis_available() {
        return;
    }
    let mut srv = common::Server::start();
    let p = common::unique("down");
    let a = cache(&srv.url(), &p);
    let calls = Arc::new(AtomicUsize::new(0));
    assert_eq!(
        a.get_or_load("k:cached", loader(&calls, "v", 0))
            .unwrap()
            .as_deref(),
        Some("v")
    );
    srv.kill();

    // L1 hits need no Redis.
    let t = Instant::now();
    assert_eq!(
        a.get_or_load("k:cached", loader(&calls, "x", 0))
            .unwrap()
            .as_deref(),
        Some("v")
    );
    assert!(t.elapsed() < Duration::from_millis(50));
    // A miss loads once for the process, however many callers.
    let t = Instant::now();
    let threads: Vec<_> = (0..16)
        .map(|_| {
            let (a, l) = (a.clone(), loader(&calls, "local", 100));
            std::thread::spawn(move || a.get_or_load("k:new", l))
        })
        .collect();
    for th in threads {
        assert_eq!(th.join().unwrap().unwrap().as_deref(), Some("local"));
    }
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "no hang: {:?}",
        t.elapsed()
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert!(a.metrics().1.backend_errors > 0);
    assert!(
        a.metrics().0.total().backend_errors > 0,
        "the engine's metric counts them too"
    );
    // Writes fail fast and say so.
    let t = Instant::now();
    assert!(a.set("k:cached", "w".into()).is_err());
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert_eq!(
        a.l1().get("k:cached"),
        None,
        "a failed set drops the now-unknown L1 copy"
    );

    srv.restart(); // empty, same port
    // The same process uses Redis again, by itself.
    let recovered = common::eventually(Duration::from_secs(10), || {
        let _ = a.get_or_load("k:after", loader(&calls, "shared", 0));
        in_redis(&srv, &a, "k:after").as_deref() == Some("shared") || {
            let _ = a.invalidate("k:after");
            false
        }
    });
    assert!(recovered, "writes reach Redis again after it restarted");
    // Notifications recover too: another process's set drops this L1 copy.
    let b = cache(&srv.url(), &p);
    let _ = a.get_or_load("k:notify", loader(&calls, "one", 0)).unwrap();
    let dropped = common::eventually(Duration::from_secs(10), || {
        b.set("k:notify", "two".into()).is_ok() && {
            std::thread::sleep(Duration::from_millis(50));
            a.l1().get("k:notify").is_none()
        }
    });
    assert!(dropped, "the subscription came back after the restart");
    assert!(
        a.metrics().1.notices_lost >= 1,
        "the gap was noticed and the L1 cleared"
    );
}

#[test]
fn a_load_older_than_a_redis_restart_does_not_overwrite_newer_data() {
    if !common::redis_available() {
        return;
    }
    let mut srv = common::Server::start();
    let p = common::unique("restart");
    let a = cache(&srv.url(), &p);
    let calls = Arc::new(AtomicUsize::new(0));
    let slow = {
        let (a, l) = (a.clone(), loader(&calls, "old", 1500));
        std::thread::spawn(move || {
            let t = Instant::now();
            (a.get_or_load("k", l), t.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    srv.restart(); // the old leader's lock is gone with everything else
    let c = cache(&srv.url(), &p); // a process started after the restart
    assert_eq!(
        c.get_or_load("k", loader(&calls, "new", 0))
            .unwrap()
            .as_deref(),
        Some("new")
    );
    let (old, took) = slow.join().unwrap();
    assert_eq!(
        old.unwrap().as_deref(),
        Some("old"),
        "the slow caller still gets its load"
    );
    assert!(took < Duration::from_millis(1500 + 1000), "{took:?}");
    assert_eq!(
        in_redis(&srv, &c, "k").as_deref(),
        Some("new"),
        "not overwritten"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let m = a.metrics().1;
    assert!(m.superseded_commits + m.backend_errors >= 1, "{m:?}");
}

#[test]
fn a_redis_stalled_mid_load_holds_nobody_and_the_stale_leader_cannot_overwrite() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let p = common::unique("stop");
    let a = cache(&srv.url(), &p);
    let c = cache(&srv.url(), &p);
    let calls = Arc::new(AtomicUsize::new(0));
    let slow = {
        let (a, l) = (a.clone(), loader(&calls, "old", 2500));
        std::thread::spawn(move || {
            let t = Instant::now();
            (a.get_or_load("k", l), t.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    srv.stop();
    // While Redis hangs, callers are bounded by the operation timeout and load locally.
    let t = Instant::now();
    assert_eq!(
        c.get_or_load("k2", loader(&calls, "local", 0))
            .unwrap()
            .as_deref(),
        Some("local")
    );
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "no hang: {:?}",
        t.elapsed()
    );
    std::thread::sleep(Duration::from_millis(1500)); // stalled longer than the 1 s lease
    srv.resume();
    // The lock ran out on Redis's clock; another process leads and writes newer data.
    let fresh = common::eventually(Duration::from_secs(5), || {
        let _ = c.invalidate("k").ok();
        c.get_or_load("k", loader(&calls, "new", 0))
            .is_ok_and(|v| v.as_deref() == Some("new"))
            && in_redis(&srv, &c, "k").as_deref() == Some("new")
    });
    assert!(fresh);
    let (old, took) = slow.join().unwrap();
    assert_eq!(old.unwrap().as_deref(), Some("old"));
    assert!(took < Duration::from_millis(2500 + 1000), "{took:?}");
    assert_eq!(
        in_redis(&srv, &c, "k").as_deref(),
        Some("new"),
        "the stalled leader's write was refused"
    );
    assert!(calls.load(Ordering::SeqCst) <= 4, "loader calls bounded");
}

/// A Redis stall (SIGSTOP) while a leader asks for the lock: the leader gives up at
/// `op_timeout` and loads for itself; its acquire still runs when Redis resumes, but the
/// lock it takes is forgotten at once. Measured: how long after Redis answers again a new
/// caller in another process gets its value (a forgotten lock kept would make it wait a
/// whole lease, then time out). Also: the value loaded during the stall is not kept past
/// its TTL in memory.
#[test]
fn after_a_stall_the_fleet_recovers_within_a_round_trip() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let p = common::unique("stall");
    let lease = Duration::from_secs(5);
    let mk = || {
        let b = RedisBackend::builder(srv.url())
            .prefix(p.clone())
            .op_timeout(Duration::from_millis(300))
            .connect_timeout(Duration::from_millis(200))
            .heartbeat(Duration::from_millis(200))
            .build()
            .expect("backend");
        TieredCache::<String, Json>::builder(b, Json)
            .ttl(Duration::from_secs(60))
            .lease(lease)
            .wait_timeout(lease)
            .build()
            .expect("cache")
    };
    let (a, b) = (mk(), mk());
    let calls = Arc::new(AtomicUsize::new(0));
    // Subscribed before the stall (as a running service is).
    for c in [&a, &b] {
        c.get_or_load("st:warm", loader(&calls, "w", 0)).unwrap();
    }
    let mut worst = Duration::ZERO;
    for round in 0..3 {
        let key = format!("st:{round}");
        srv.stop();
        let t = Instant::now();
        let v = a.get_or_load(&key, loader(&calls, "local", 0)).unwrap();
        assert_eq!(v.as_deref(), Some("local"));
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "the leader was held {:?}",
            t.elapsed()
        );
        std::thread::sleep(Duration::from_millis(200));
        srv.resume();
        let resumed = Instant::now();
        let got = b.get_or_load(&key, loader(&calls, "shared", 0));
        let took = resumed.elapsed();
        assert_eq!(got.unwrap().as_deref(), Some("shared"), "round {round}");
        worst = worst.max(took);
    }
    eprintln!(
        "stall recovery: a new caller answered {worst:?} after Redis resumed (worst of 3; lease {lease:?})"
    );
    assert!(worst < Duration::from_secs(1), "recovery took {worst:?}");
}
