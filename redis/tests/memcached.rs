//! The memcached tier against a private memcached on a free port (stopped by pid): two
//! backends with their own connections stand for two processes. Under CI=true a missing
//! memcached fails the test; elsewhere the test is skipped loudly.

mod common;

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use herdless::backend::{AcquireRequest, Acquired, Backend};
use herdless_redis::memcached::MemcachedBackend;
use herdless_redis::{Json, TieredCache, now_ms};

/// A private memcached.
struct Memcached {
    port: u16,
    child: Child,
}

impl Memcached {
    /// Starts one, or `None` (skipped loudly; under CI=true, a failure) without memcached.
    fn start() -> Option<Memcached> {
        let found = Command::new("memcached")
            .arg("-V")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!(
                    "memcached is not installed, and CI=true requires the memcached tests to run"
                );
            }
            eprintln!("SKIPPED: memcached not found on PATH; the memcached tests did not run");
            return None;
        }
        let port = common::free_port();
        let mut cmd = Command::new("memcached");
        cmd.args(["-l", "127.0.0.1", "-U", "0", "-p", &port.to_string()]);
        // memcached refuses to run as root unless told which user to be.
        if std::env::var("USER").is_ok_and(|u| u == "root") || is_root() {
            cmd.args(["-u", "root"]);
        }
        let child = cmd.stdout(Stdio::null()).spawn().expect("start memcached");
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "memcached did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(Memcached { port, child })
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// A process of the fleet.
    fn backend(&self, prefix: &str) -> MemcachedBackend {
        MemcachedBackend::builder([self.addr()])
            .prefix(prefix)
            .build()
            .expect("backend")
    }

    /// Sends raw protocol lines, answering what memcached said.
    fn raw(&self, lines: &str) -> String {
        use std::io::{Read, Write};
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        s.write_all(lines.as_bytes()).expect("write");
        s.write_all(b"mn\r\n").expect("write");
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while !out.ends_with(b"MN\r\n") {
            let n = s.read(&mut buf).expect("read");
            assert!(n > 0, "memcached closed the connection");
            out.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0"))
}

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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
    let (a, b) = (mc.backend(&p), mc.backend(&p));
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
    let (a, b) = (mc.backend(&p), mc.backend(&p));
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
    let (a, b) = (mc.backend(&p), mc.backend(&p));
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
    let other = rt.block_on(b.acquire("k:1", req.clone())).unwrap();
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
    let b = mc.backend(&p);
    let c = cache(&b, Duration::from_secs(60), Duration::ZERO);
    let calls = Arc::new(AtomicUsize::new(0));
    c.set("ns:1", "kept".to_owned()).unwrap();
    // Bytes that are not an entry: a miss, counted, then loaded over.
    let name = format!("{p}:{{ns}}:v:ns:1");
    assert!(
        mc.raw(&format!("ms {name} 7 T60\r\ngarbage\r\n"))
            .starts_with("HD")
    );
    assert_eq!(c.get("ns:1").unwrap(), None);
    assert!(c.metrics().1.corrupt_entries >= 1);
    let v = c
        .get_or_load("ns:1", counting(&calls, "fresh", Duration::ZERO))
        .unwrap();
    assert_eq!(v.as_deref(), Some("fresh"));
    // The epoch evicted: the entries written under it are never served again.
    assert!(mc.raw(&format!("md {p}:{{ns}}:e\r\n")).starts_with("HD"));
    assert_eq!(c.get("ns:1").unwrap(), None);
    // Tags are refused, with an error that says so.
    let tagged = herdless::Loaded::value("t".to_owned()).tags(["tag"]);
    let err = c.set_with("ns:2", tagged).unwrap_err();
    assert!(err.to_string().contains("tags"), "{err}");
    // memcached stopped: loads are served in the process, writes fail clearly.
    let _ = mc.child.kill();
    let _ = mc.child.wait();
    let v = c
        .get_or_load("ns:3", counting(&calls, "local", Duration::ZERO))
        .unwrap();
    assert_eq!(v.as_deref(), Some("local"));
    assert!(c.set("ns:3", "x".to_owned()).is_err());
    assert!(c.metrics().1.backend_errors >= 2);
}
