//! Fleet-wide single-flight across OS processes (the `fleet_worker` binary).

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use herdless::backend::{Backend, StoredEntry};
use herdless_redis::{FleetOptions, FleetOutcome, RedisBackend, block_on, now_ms};

fn worker() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fleet_worker"))
}

fn field(line: &str, name: &str) -> u64 {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {line}"))
}

/// Writes an entry that is already expired (no grace), so every caller misses.
fn write_expired(b: &RedisBackend, key: &str) {
    let now = now_ms();
    let e = StoredEntry {
        value: Some(b"\"old\"".to_vec()),
        fresh_until_ms: now - 1000,
        stale_until_ms: now - 1000,
        retain_until_ms: now + 600_000,
        load_duration: Duration::from_millis(200),
        version: 0,
        epoch: 0,
        ttl: None,
        tti: None,
        meta: None,
        tags: Vec::new(),
        tag_marks: Vec::new(),
    };
    block_on(b.commit(key, e, None)).unwrap().unwrap();
}

#[test]
fn four_processes_of_500_callers_make_one_loader_call() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let prefix = common::unique("fleet");
    let key = "hot:v1:page:home";
    let counter = format!("{prefix}:loader-calls");
    let b = RedisBackend::builder(srv.url())
        .prefix(prefix.clone())
        .build()
        .unwrap();
    write_expired(&b, key);
    let start_at = now_ms() + 2500;
    let children: Vec<_> = (0..4)
        .map(|_| {
            worker()
                .env("HL_URL", srv.url())
                .env("HL_PREFIX", &prefix)
                .env("HL_KEY", key)
                .env("HL_MODE", "stampede")
                .env("HL_CALLERS", "500")
                .env("HL_LOADER_MS", "200")
                .env("HL_START_AT_MS", start_at.to_string())
                .env("HL_COUNTER", &counter)
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn worker")
        })
        .collect();
    let mut lines = Vec::new();
    for c in children {
        let out = c.wait_with_output().expect("worker output");
        assert!(out.status.success(), "worker failed: {out:?}");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let line = text
            .lines()
            .find(|l| l.starts_with("RESULT"))
            .unwrap_or_else(|| panic!("no RESULT in {text}"))
            .to_owned();
        lines.push(line);
    }
    let mut c = srv.client();
    let total: i64 = redis::cmd("GET").arg(&counter).query(&mut c).unwrap();
    let calls: u64 = lines.iter().map(|l| field(l, "loader_calls")).sum();
    let ok: u64 = lines.iter().map(|l| field(l, "ok")).sum();
    let p99 = lines.iter().map(|l| field(l, "p99_us")).max().unwrap();
    let max = lines.iter().map(|l| field(l, "max_us")).max().unwrap();
    eprintln!(
        "FLEET 4x500 callers, 200 ms loader: loader calls {total}; ok {ok}/2000; per process: {lines:#?}"
    );
    eprintln!(
        "FLEET waiter latency beyond the loader: p99 {:.1} ms, max {:.1} ms (worst process p99)",
        (p99 as f64 / 1000.0) - 200.0,
        (max as f64 / 1000.0) - 200.0
    );
    assert_eq!(total, 1, "exactly one loader call in the whole fleet");
    assert_eq!(calls, 1);
    assert_eq!(ok, 2000, "{lines:?}");
}

#[test]
fn a_leader_killed_holding_the_lock_blocks_the_key_for_at_most_one_lease() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let prefix = common::unique("kill");
    let key = "hot:killed";
    let lease = Duration::from_millis(1500);
    let mut holder = worker()
        .env("HL_URL", srv.url())
        .env("HL_PREFIX", &prefix)
        .env("HL_KEY", key)
        .env("HL_MODE", "hold")
        .env("HL_LEASE_MS", lease.as_millis().to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn holder");
    let mut out = BufReader::new(holder.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "LOCKED");
    // The holder keeps its lease alive past several leases while it lives.
    let b = RedisBackend::builder(srv.url())
        .prefix(prefix)
        .build()
        .unwrap();
    let short = b.fleet(FleetOptions {
        lease,
        wait_timeout: Duration::from_millis(3500),
        recheck: Duration::from_millis(250),
        ..FleetOptions::default()
    });
    let t = Instant::now();
    let waited = short.lead_blocking(key, 0);
    assert!(
        matches!(waited, Err(herdless::Error::WaitTimeout { .. })),
        "the live holder extended its lease: {waited:?}"
    );
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(3400) && took < Duration::from_millis(4500),
        "a waiter gives up at wait_timeout, not later: {took:?}"
    );
    // SIGKILL: no release, no more extensions.
    let killed = Instant::now();
    common::signal(holder.id() as i32, libc::SIGKILL);
    let _ = holder.wait();
    let fleet = b.fleet(FleetOptions {
        lease,
        wait_timeout: Duration::from_secs(5),
        recheck: Duration::from_secs(5),
        ..FleetOptions::default()
    });
    match fleet.lead_blocking(key, 0).unwrap() {
        FleetOutcome::Lead(l) => {
            let after = killed.elapsed();
            eprintln!("KILL another process took over {after:?} after SIGKILL (lease {lease:?})");
            assert!(after <= lease + Duration::from_millis(300), "{after:?}");
            assert!(l.release_blocking().unwrap());
        }
        other => panic!("expected to lead, got {other:?}"),
    }
}

#[test]
fn a_lost_notification_costs_at_most_one_recheck() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let prefix = common::unique("lost");
    let mk = || {
        RedisBackend::builder(srv.url())
            .prefix(prefix.clone())
            .build()
            .unwrap()
    };
    let (a, b) = (mk(), mk());
    let key = "hot:lost";
    let FleetOutcome::Lead(lease) = a
        .fleet(FleetOptions::default())
        .lead_blocking(key, 0)
        .unwrap()
    else {
        panic!("expected to lead")
    };
    let fb = b.fleet(FleetOptions {
        recheck: Duration::from_millis(300),
        ..FleetOptions::default()
    });
    let waiter = std::thread::spawn(move || {
        let t = Instant::now();
        (fb.lead_blocking(key, 0), t.elapsed())
    });
    std::thread::sleep(Duration::from_millis(100));
    // The value lands and the lock goes without any notification (as if the message was
    // lost): only the waiter's re-check can find it.
    let now = now_ms();
    let bytes = herdless_redis::wire::encode(&StoredEntry {
        value: Some(b"\"v\"".to_vec()),
        fresh_until_ms: now + 60_000,
        stale_until_ms: now + 60_000,
        retain_until_ms: now + 60_000,
        load_duration: Duration::from_millis(1),
        version: 1,
        epoch: 0,
        ttl: None,
        tti: None,
        meta: None,
        tags: Vec::new(),
        tag_marks: Vec::new(),
    });
    let n = a.names(key);
    let mut c = srv.client();
    let _: () = redis::cmd("SET")
        .arg(&n.value)
        .arg(bytes)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("DEL").arg(&n.lock).query(&mut c).unwrap();
    let (got, took) = waiter.join().unwrap();
    assert!(matches!(got.unwrap(), FleetOutcome::Fresh(_)));
    assert!(took < Duration::from_millis(1000), "{took:?}");
    assert!(b.metrics().fleet_wait_rechecks >= 1);
    drop(lease); // its release finds the lock gone and publishes nothing
}
