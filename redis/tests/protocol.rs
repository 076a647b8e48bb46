//! The wire protocol against a real Redis: locks and tokens, conditional commits, epochs,
//! garbage under a key, and notifications.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use herdless::backend::{
    AcquireRequest, Acquired, Backend, LockToken, Notice, StoredEntry, WriteOutcome,
};
use herdless_redis::{RedisBackend, block_on, now_ms};

fn backend(url: &str) -> RedisBackend {
    RedisBackend::builder(url)
        .prefix(common::unique("p"))
        .build()
        .expect("backend")
}

fn req(have: u64, secret: u8) -> AcquireRequest {
    AcquireRequest {
        now_ms: now_ms(),
        lease: Duration::from_secs(5),
        secret: [secret; 16],
        have_version: have,
    }
}

fn entry(value: &[u8], fresh_ms: u64) -> StoredEntry {
    let now = now_ms();
    StoredEntry {
        value: Some(value.to_vec()),
        fresh_until_ms: now + fresh_ms,
        stale_until_ms: now + fresh_ms,
        retain_until_ms: now + fresh_ms + 60_000,
        load_duration: Duration::from_millis(12),
        version: 0,
        epoch: 0,
        ttl: None,
        tti: None,
        meta: None,
        tags: Vec::new(),
        tag_marks: Vec::new(),
    }
}

fn locked(a: Acquired) -> LockToken {
    match a {
        Acquired::Locked { token, .. } => token,
        other => panic!("expected the lock, got {other:?}"),
    }
}

#[test]
fn lock_commit_read_and_tokens() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let b = backend(&srv.url());
    let key = "users:v1:profile:42";
    let done = block_on(async {
        assert_eq!(b.read(key, now_ms()).await.unwrap(), None);
        let token = locked(b.acquire(key, req(0, 1)).await.unwrap());
        // Someone else is now contended, with the remaining lease.
        match b.acquire(key, req(0, 2)).await.unwrap() {
            Acquired::Contended { stale, remaining } => {
                assert_eq!(stale, None);
                assert!(remaining > Duration::from_secs(3), "{remaining:?}");
            }
            other => panic!("{other:?}"),
        }
        // A foreign token (same epoch, other secret) can neither extend, release nor commit.
        let foreign = LockToken {
            epoch: token.epoch,
            secret: [9; 16],
        };
        assert!(
            !b.extend(key, &foreign, Duration::from_secs(60))
                .await
                .unwrap()
        );
        assert!(!b.release(key, &foreign).await.unwrap());
        assert_eq!(
            b.commit(key, entry(b"x", 60_000), Some(&foreign))
                .await
                .unwrap(),
            WriteOutcome::Superseded
        );
        // The owner can.
        assert!(
            b.extend(key, &token, Duration::from_secs(60))
                .await
                .unwrap()
        );
        let WriteOutcome::Written { version, epoch } = b
            .commit(key, entry(b"v1", 60_000), Some(&token))
            .await
            .unwrap()
        else {
            panic!("commit refused")
        };
        assert_eq!(epoch, 0);
        assert!(
            version > 1_600_000_000_000_000,
            "versions are µs: {version}"
        );
        // The commit released the lock: a release by the old owner is refused.
        assert!(!b.release(key, &token).await.unwrap());
        let got = b.read(key, now_ms()).await.unwrap().expect("a hit");
        assert_eq!(got.value.as_deref(), Some(&b"v1"[..]));
        assert_eq!(got.version, version);
        assert_eq!(got.load_duration, Duration::from_millis(12));
        // A fresh entry answers acquire without a lock; a refresh of that very version
        // takes the lock and sees the entry.
        assert!(
            matches!(b.acquire(key, req(0, 3)).await.unwrap(), Acquired::Fresh(e) if e.version == version)
        );
        match b.acquire(key, req(version, 4)).await.unwrap() {
            Acquired::Locked { stale, token } => {
                assert_eq!(stale.map(|e| e.version), Some(version));
                assert!(b.release(key, &token).await.unwrap());
            }
            other => panic!("{other:?}"),
        }
    });
    done.expect("not on a backend thread");
    // The stored lock value is "<epoch>:<32 hex>" and expires (PX).
    let mut c = srv.client();
    let other = "users:v1:profile:43";
    let t = locked(block_on(b.acquire(other, req(0, 0xab))).unwrap().unwrap());
    let raw: String = redis::cmd("GET")
        .arg(b.names(other).lock)
        .query(&mut c)
        .unwrap();
    assert_eq!(raw, format!("0:{}", "ab".repeat(16)));
    let pttl: i64 = redis::cmd("PTTL")
        .arg(b.names(other).lock)
        .query(&mut c)
        .unwrap();
    assert!(pttl > 0 && pttl <= 5000, "{pttl}");
    assert!(block_on(b.release(other, &t)).unwrap().unwrap());
}

#[test]
fn versions_only_grow_and_a_set_breaks_a_running_load() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let b = backend(&srv.url());
    let key = "orders:1";
    let done = block_on(async {
        let token = locked(b.acquire(key, req(0, 1)).await.unwrap());
        // A direct write lands, and the load that began before it cannot overwrite it.
        let WriteOutcome::Written { version: v1, .. } =
            b.commit(key, entry(b"set", 60_000), None).await.unwrap()
        else {
            panic!()
        };
        assert!(!b.extend(key, &token, Duration::from_secs(5)).await.unwrap());
        assert_eq!(
            b.commit(key, entry(b"old load", 60_000), Some(&token))
                .await
                .unwrap(),
            WriteOutcome::Superseded
        );
        let WriteOutcome::Written { version: v2, .. } =
            b.commit(key, entry(b"set2", 60_000), None).await.unwrap()
        else {
            panic!()
        };
        assert!(v2 > v1);
        // Deleted and written again: still a higher version (time-based, not a counter).
        assert!(b.invalidate(key).await.unwrap());
        assert!(!b.invalidate(key).await.unwrap());
        let WriteOutcome::Written { version: v3, .. } =
            b.commit(key, entry(b"set3", 60_000), None).await.unwrap()
        else {
            panic!()
        };
        assert!(v3 > v2);
        // An invalidation breaks a running load too.
        let token = locked(b.acquire(key, req(v3, 2)).await.unwrap());
        b.invalidate(key).await.unwrap();
        assert_eq!(
            b.commit(key, entry(b"late", 60_000), Some(&token))
                .await
                .unwrap(),
            WriteOutcome::Superseded
        );
        assert_eq!(b.read(key, now_ms()).await.unwrap(), None);
    });
    done.expect("not on a backend thread");
}

#[test]
fn epochs_invalidate_in_o1_and_stop_older_loads() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let b = backend(&srv.url());
    let done = block_on(async {
        b.commit("cat:a", entry(b"a", 60_000), None).await.unwrap();
        b.commit("cat:b", entry(b"b", 60_000), None).await.unwrap();
        b.commit("dog:a", entry(b"d", 60_000), None).await.unwrap();
        let old = locked(b.acquire("cat:c", req(0, 1)).await.unwrap());
        assert_eq!(b.bump("cat").await.unwrap(), 1);
        assert_eq!(b.read("cat:a", now_ms()).await.unwrap(), None);
        assert_eq!(b.read("cat:b", now_ms()).await.unwrap(), None);
        assert!(b.read("dog:a", now_ms()).await.unwrap().is_some());
        // The bump freed the old-epoch lock for a new leader at once...
        let new = locked(b.acquire("cat:c", req(0, 2)).await.unwrap());
        assert_eq!(new.epoch, 1);
        // ...and the old leader's commit is refused.
        assert_eq!(
            b.commit("cat:c", entry(b"old", 60_000), Some(&old))
                .await
                .unwrap(),
            WriteOutcome::Superseded
        );
        assert!(matches!(
            b.commit("cat:c", entry(b"new", 60_000), Some(&new))
                .await
                .unwrap(),
            WriteOutcome::Written { epoch: 1, .. }
        ));
        assert_eq!(
            b.read("cat:c", now_ms())
                .await
                .unwrap()
                .unwrap()
                .value
                .as_deref(),
            Some(&b"new"[..])
        );
    });
    done.expect("not on a backend thread");
}

#[test]
fn garbage_under_a_key_is_a_miss_and_a_metric() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let b = backend(&srv.url());
    let mut c = srv.client();
    let garbage: [&[u8]; 5] = [
        b"",
        b"hello",
        b"hl\x01",
        b"{\"json\":\"from another cache\"}",
        &[0xff; 300],
    ];
    for (i, g) in garbage.iter().enumerate() {
        let key = format!("junk:{i}");
        let _: () = redis::cmd("SET")
            .arg(b.names(&key).value)
            .arg(*g)
            .query(&mut c)
            .unwrap();
        assert_eq!(block_on(b.read(&key, now_ms())).unwrap().unwrap(), None);
        // The lock script treats it as a miss too, and a commit replaces it.
        let t = locked(block_on(b.acquire(&key, req(0, 1))).unwrap().unwrap());
        block_on(b.commit(&key, entry(b"ok", 60_000), Some(&t)))
            .unwrap()
            .unwrap();
        assert!(block_on(b.read(&key, now_ms())).unwrap().unwrap().is_some());
    }
    assert!(b.metrics().corrupt_entries >= 2 * garbage.len() as u64 - 1);
    // A garbage epoch is a miss (counted), never an error, and the lock script repairs it.
    let _: () = redis::cmd("SET")
        .arg(herdless_redis::keys::epoch_key(b.prefix(), "badep"))
        .arg("not a number")
        .query(&mut c)
        .unwrap();
    let before = b.metrics().corrupt_entries;
    assert_eq!(
        block_on(b.read("badep:1", now_ms())).unwrap().unwrap(),
        None
    );
    locked(block_on(b.acquire("badep:1", req(0, 1))).unwrap().unwrap());
    assert_eq!(b.metrics().corrupt_entries, before + 2);
    assert_eq!(b.metrics().backend_errors, 0);
}

/// Corrupt shared state heals itself (PROTOCOL.md, "Repairs"), in one place, counted:
/// keys of the wrong Redis type are deleted, an epoch that is not a plain decimal integer
/// below 2^53 is reset forward to the server's clock (so no entry of an older epoch becomes
/// current again), and `bump`, the operator's repair tool, works on a corrupt epoch.
#[test]
fn corrupt_shared_state_repairs_itself() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let b = backend(&srv.url());
    let mut c = srv.client();
    let n = b.names("wt:1");
    // A value and a lock of the wrong type: the lock script deletes both and leads.
    let _: () = redis::cmd("RPUSH")
        .arg(&n.value)
        .arg("x")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg(&n.lock)
        .arg("f")
        .arg("v")
        .query(&mut c)
        .unwrap();
    let t = locked(block_on(b.acquire("wt:1", req(0, 1))).unwrap().unwrap());
    block_on(b.commit("wt:1", entry(b"ok", 60_000), Some(&t)))
        .unwrap()
        .unwrap();
    assert!(
        block_on(b.read("wt:1", now_ms()))
            .unwrap()
            .unwrap()
            .is_some()
    );
    for (i, bad) in [
        "text",
        "1.5",
        "-3",
        "inf",
        "0x10",
        "1e3",
        " 7",
        "18446744073709551616",
    ]
    .iter()
    .enumerate()
    {
        let ns = format!("ep{i}");
        let epoch_key = herdless_redis::keys::epoch_key(b.prefix(), &ns);
        let _: () = redis::cmd("SET")
            .arg(&epoch_key)
            .arg(*bad)
            .query(&mut c)
            .unwrap();
        let key = format!("{ns}:1");
        assert_eq!(
            block_on(b.read(&key, now_ms())).unwrap().unwrap(),
            None,
            "{bad}"
        );
        let t = locked(block_on(b.acquire(&key, req(0, 1))).unwrap().unwrap());
        assert!(
            t.epoch >= now_ms() - 60_000,
            "{bad} reset forward to the clock: {}",
            t.epoch
        );
        let text: String = redis::cmd("GET").arg(&epoch_key).query(&mut c).unwrap();
        assert_eq!(
            herdless_redis::parse_epoch(text.as_bytes()),
            Some(t.epoch),
            "{bad}"
        );
    }
    // bump on a corrupt epoch repairs it first, then moves it on.
    let epoch_key = herdless_redis::keys::epoch_key(b.prefix(), "bumped");
    let _: () = redis::cmd("SET")
        .arg(&epoch_key)
        .arg("garbage")
        .query(&mut c)
        .unwrap();
    let e = block_on(b.bump("bumped")).unwrap().unwrap();
    assert!(e > (now_ms() - 60_000) * 1000);
    let _: () = redis::cmd("DEL").arg(&epoch_key).query(&mut c).unwrap();
    let _: () = redis::cmd("HSET")
        .arg(&epoch_key)
        .arg("f")
        .arg("v")
        .query(&mut c)
        .unwrap();
    let e2 = block_on(b.bump("bumped")).unwrap().unwrap();
    assert!(
        e2 > e,
        "a wrongly typed epoch is reset forward too: {e2} after {e}"
    );
    assert_eq!(b.metrics().backend_errors, 0);
    assert!(b.metrics().corrupt_entries >= 11);
}

#[test]
fn expired_and_stale_entries() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let b = backend(&srv.url());
    let done = block_on(async {
        let now = now_ms();
        let mut e = entry(b"s", 0);
        e.fresh_until_ms = now - 1000;
        e.stale_until_ms = now + 60_000;
        b.commit("st:1", e, None).await.unwrap();
        let got = b
            .read("st:1", now_ms())
            .await
            .unwrap()
            .expect("within grace");
        assert!(!got.is_fresh(now_ms()));
        // A miss finds the stale entry and takes the lock to refresh it...
        let t = match b.acquire("st:1", req(0, 1)).await.unwrap() {
            Acquired::Locked { token, stale } => {
                assert!(stale.is_some());
                token
            }
            other => panic!("{other:?}"),
        };
        // ...the next caller is contended and gets the stale entry to serve meanwhile.
        assert!(matches!(
            b.acquire("st:1", req(0, 2)).await.unwrap(),
            Acquired::Contended { stale: Some(_), .. }
        ));
        b.release("st:1", &t).await.unwrap();
        // Past grace: nothing to serve.
        let mut dead = entry(b"d", 0);
        dead.fresh_until_ms = now - 2000;
        dead.stale_until_ms = now - 1000;
        b.commit("st:2", dead, None).await.unwrap();
        assert_eq!(b.read("st:2", now_ms()).await.unwrap(), None);
        assert!(matches!(
            b.acquire("st:2", req(0, 3)).await.unwrap(),
            Acquired::Locked { stale: None, .. }
        ));
    });
    done.expect("not on a backend thread");
}

#[test]
fn notifications_reach_watches_and_listeners_of_other_processes() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let prefix = common::unique("n");
    let mk = || {
        RedisBackend::builder(srv.url())
            .prefix(prefix.clone())
            .isolated()
            .build()
            .unwrap()
    };
    let (a, b) = (mk(), mk());
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let s = seen.clone();
    b.listen(Arc::new(move |n: Notice<'_>| {
        s.lock().unwrap().push(format!("{n:?}"));
    }));
    let own: Arc<Mutex<Vec<String>>> = Arc::default();
    let o = own.clone();
    a.listen(Arc::new(move |n: Notice<'_>| {
        o.lock().unwrap().push(format!("{n:?}"));
    }));
    let _rt = b.handle().enter();
    let done = block_on(async {
        let mut watch = b.watch("ns:k").await.unwrap();
        // Subscribe `a` too, so it would hear its own messages if they were not filtered.
        drop(a.watch("ns:k").await.unwrap());
        a.commit("ns:k", entry(b"v", 60_000), None).await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), watch.changed())
            .await
            .expect("woken by the commit");
        a.invalidate("ns:k").await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), watch.changed())
            .await
            .expect("woken by the invalidation");
        a.bump("ns").await.unwrap();
    });
    done.expect("not on a backend thread");
    assert!(common::eventually(Duration::from_secs(5), || seen
        .lock()
        .unwrap()
        .len()
        >= 3));
    let seen = seen.lock().unwrap().clone();
    assert!(seen[0].starts_with("Written { key: \"ns:k\""), "{seen:?}");
    assert!(seen[0].contains("awaited: true"), "{seen:?}");
    assert_eq!(seen[1], "Invalidated { key: \"ns:k\" }");
    assert_eq!(seen[2], "Bumped { namespace: \"ns\", epoch: 1 }");
    assert!(own.lock().unwrap().is_empty(), "own changes are not told");
}

#[test]
fn protocol_md_quotes_the_scripts_verbatim() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../PROTOCOL.md"))
        .expect("PROTOCOL.md at the repository root");
    let (prelude, bodies) = herdless_redis::scripts::parts();
    assert!(doc.contains(prelude), "the prelude");
    for (name, body) in bodies {
        assert!(doc.contains(body), "script {name} differs from PROTOCOL.md");
    }
}
