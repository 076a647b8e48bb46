//! The two-tier cache: L1 in front of Redis, coherence across processes (two backends with
//! their own connections and origin ids stand for two processes), codecs, blocking rules.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use herdless_redis::{Json, RedisBackend, TieredCache};

fn cache(url: &str, prefix: &str) -> TieredCache<String, Json> {
    let b = RedisBackend::builder(url)
        .prefix(prefix)
        .isolated()
        .build()
        .expect("backend");
    TieredCache::builder(b, Json)
        .ttl(Duration::from_secs(60))
        .build()
        .expect("cache")
}

fn counting(
    calls: &Arc<AtomicUsize>,
    v: &str,
) -> impl FnOnce() -> Result<Option<String>, std::io::Error> + Send + 'static {
    let (calls, v) = (calls.clone(), v.to_owned());
    move || {
        calls.fetch_add(1, Ordering::SeqCst);
        Ok(Some(v))
    }
}

#[test]
fn a_value_loaded_in_one_process_is_read_by_another_without_loading() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let p = common::unique("t");
    let (a, b) = (cache(&srv.url(), &p), cache(&srv.url(), &p));
    let calls = Arc::new(AtomicUsize::new(0));
    let key = "users:1";
    assert_eq!(
        a.get_or_load(key, counting(&calls, "ada"))
            .unwrap()
            .as_deref(),
        Some("ada")
    );
    assert_eq!(
        b.get_or_load(key, counting(&calls, "other"))
            .unwrap()
            .as_deref(),
        Some("ada")
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    // B adopted the shared entry: no load counted there, a Redis hit instead.
    let (l1, l2) = b.metrics();
    assert_eq!(l1.total().loads, 0);
    assert_eq!(l2.l2_hits, 1);
    // The next read is an L1 hit: no Redis traffic.
    assert_eq!(
        b.get_or_load(key, counting(&calls, "x"))
            .unwrap()
            .as_deref(),
        Some("ada")
    );
    assert_eq!(b.metrics().1.l2_hits, 1);
    assert_eq!(b.metrics().0.total().hits, 1);
    // Absences are shared too.
    let none = a
        .get_or_load("users:404", || Ok::<_, std::io::Error>(None))
        .unwrap();
    assert_eq!(none, None);
    assert_eq!(
        b.get_or_load("users:404", counting(&calls, "y")).unwrap(),
        None
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[test]
fn set_invalidate_and_bump_reach_the_l1_of_other_processes() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let p = common::unique("t");
    let (a, b) = (cache(&srv.url(), &p), cache(&srv.url(), &p));
    let calls = Arc::new(AtomicUsize::new(0));
    assert_eq!(
        b.get_or_load("cfg:flags", counting(&calls, "v1"))
            .unwrap()
            .as_deref(),
        Some("v1")
    );
    assert_eq!(b.l1().get("cfg:flags").map(|l| l.value), Some("v1".into()));
    a.set("cfg:flags", "v2".into()).unwrap();
    assert!(
        common::eventually(Duration::from_secs(5), || b.l1().get("cfg:flags").is_none()),
        "set drops B's copy"
    );
    assert_eq!(
        b.get_or_load("cfg:flags", counting(&calls, "no"))
            .unwrap()
            .as_deref(),
        Some("v2")
    );
    assert!(a.invalidate("cfg:flags").unwrap());
    assert!(
        common::eventually(Duration::from_secs(5), || b.l1().get("cfg:flags").is_none()),
        "invalidate drops B's copy"
    );
    assert_eq!(
        b.get_or_load("cfg:flags", counting(&calls, "v3"))
            .unwrap()
            .as_deref(),
        Some("v3")
    );
    assert_eq!(a.bump("cfg").unwrap(), 1);
    assert!(
        common::eventually(Duration::from_secs(5), || b.l1().get("cfg:flags").is_none()),
        "bump drops B's copy"
    );
    assert_eq!(a.get("cfg:flags").unwrap(), None, "bumped in Redis too");
    assert_eq!(
        b.get_or_load("cfg:flags", counting(&calls, "v4"))
            .unwrap()
            .as_deref(),
        Some("v4")
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(a.get("cfg:flags").unwrap().as_deref(), Some("v4"));
}

#[test]
fn bytes_of_another_codec_are_a_miss_and_a_metric() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let p = common::unique("t");
    let raw = TieredCache::builder(
        RedisBackend::builder(srv.url())
            .prefix(p.clone())
            .build()
            .unwrap(),
        herdless_redis::RawBytes,
    )
    .build()
    .unwrap();
    raw.set("blob:1", vec![0x80, 0x04, 0x95]).unwrap(); // not JSON
    let json = cache(&srv.url(), &p);
    let calls = Arc::new(AtomicUsize::new(0));
    let v = json
        .get_or_load("blob:1", counting(&calls, "fresh"))
        .unwrap();
    assert_eq!(v.as_deref(), Some("fresh"));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(json.metrics().1.corrupt_entries, 1);
}

#[test]
fn blocking_api_works_inside_a_foreign_runtime_and_refuses_the_backend_threads() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let c = cache(&srv.url(), &common::unique("t"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let c2 = c.clone();
    let v = rt.block_on(async move {
        // A blocking call on the only thread of a current-thread runtime: no deadlock.
        c2.get_or_load("rt:1", || {
            Ok::<_, std::io::Error>(Some("sync-in-async".into()))
        })
    });
    assert_eq!(v.unwrap().as_deref(), Some("sync-in-async"));
    let c3 = c.clone();
    let inside = rt.block_on(async move {
        c3.get_or_load_async("rt:2", || async {
            Ok::<_, std::io::Error>(Some("async".into()))
        })
        .await
    });
    assert_eq!(inside.unwrap().as_deref(), Some("async"));
    let c4 = c.clone();
    let on_backend = c
        .backend()
        .handle()
        .spawn(async move { c4.get("rt:1").map_err(|e| e.to_string()) });
    let r = herdless_redis::block_on(on_backend).unwrap().unwrap();
    assert!(r.unwrap_err().contains("own runtime thread"));
}

#[test]
fn concurrent_callers_in_one_process_make_one_lock_attempt() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let c = cache(&srv.url(), &common::unique("t"));
    let calls = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..32)
        .map(|_| {
            let (c, calls) = (c.clone(), calls.clone());
            std::thread::spawn(move || {
                c.get_or_load("hot:1", move || {
                    calls.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(100));
                    Ok::<_, std::io::Error>(Some("v".into()))
                })
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap().unwrap().as_deref(), Some("v"));
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let m = c.metrics().1;
    assert_eq!(m.fleet_locks_acquired, 1);
    assert_eq!(m.fleet_locks_contended, 0);
    assert_eq!(c.metrics().0.total().coalesced_waiters, 31);
}

#[test]
fn a_cold_process_serves_a_stale_shared_entry_at_once_and_refreshes_it_for_the_fleet() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let backend = backend_with_stale(&srv, "page:home");
    let c: TieredCache<String, Json> = TieredCache::builder(backend, Json)
        .grace(Duration::from_secs(60))
        .build()
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let t = std::time::Instant::now();
    let slow = {
        let calls = calls.clone();
        move || {
            calls.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(500));
            Ok::<_, std::io::Error>(Some("fresh".to_string()))
        }
    };
    assert_eq!(
        c.get_or_load("page:home", slow).unwrap().as_deref(),
        Some("stale")
    );
    assert!(
        t.elapsed() < Duration::from_millis(400),
        "served at once: {:?}",
        t.elapsed()
    );
    // The refresh lands in Redis for everyone, and this process picks it up.
    assert!(common::eventually(Duration::from_secs(5), || {
        c.get_or_load("page:home", || {
            Ok::<_, std::io::Error>(Some("again".into()))
        })
        .unwrap()
        .as_deref()
            == Some("fresh")
    }));
    assert_eq!(calls.load(Ordering::SeqCst), 1, "one refresh for the fleet");
}

/// A backend on `srv` with a fresh prefix, where another process left a stale copy of
/// `"stale"` under `key` (fresh until 1 s ago, in grace for a minute).
fn backend_with_stale(srv: &common::Server, key: &str) -> RedisBackend {
    let backend = RedisBackend::builder(srv.url())
        .prefix(common::unique("t"))
        .build()
        .unwrap();
    let now = herdless_redis::now_ms();
    let stale = herdless::backend::StoredEntry {
        value: Some(b"\"stale\"".to_vec()),
        fresh_until_ms: now - 1000,
        stale_until_ms: now + 60_000,
        retain_until_ms: now + 60_000,
        load_duration: Duration::from_millis(500),
        version: 0,
        epoch: 0,
        ttl: None,
        tti: None,
        meta: None,
        tags: Vec::new(),
        tag_marks: Vec::new(),
    };
    herdless_redis::block_on(herdless::backend::Backend::commit(
        &backend, key, stale, None,
    ))
    .unwrap()
    .unwrap();
    backend
}

#[test]
fn a_stale_shared_entry_is_not_refreshed_past_a_spent_origin_budget() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let backend = backend_with_stale(&srv, "page:home");
    let c: TieredCache<String, Json> = TieredCache::builder(backend, Json)
        .grace(Duration::from_secs(60))
        .l1(|b| b.origin_budget(1))
        .build()
        .unwrap();
    // The one origin slot is taken by a load of another key, held until `release` is sent.
    let (release, held) = std::sync::mpsc::channel::<()>();
    let busy = {
        let c = c.clone();
        std::thread::spawn(move || {
            c.get_or_load("report:big", move || {
                held.recv().ok();
                Ok::<_, std::io::Error>(Some("big".to_string()))
            })
        })
    };
    assert!(common::eventually(Duration::from_secs(5), || c
        .l1()
        .budget_in_use()
        == 1));
    let (called, calls) = std::sync::mpsc::channel::<()>();
    let refresh = move || {
        called.send(()).ok();
        Ok::<_, std::io::Error>(Some("fresh".to_string()))
    };
    // Served the stale copy at once, and the origin is left alone: its slot is taken.
    assert_eq!(
        c.get_or_load("page:home", refresh.clone())
            .unwrap()
            .as_deref(),
        Some("stale")
    );
    assert!(
        calls.recv_timeout(Duration::from_millis(300)).is_err(),
        "a refresh called the origin past its budget"
    );
    assert_eq!(c.l1().budget_in_use(), 1);
    // Once the slot is free, a later read of the stale copy refreshes it.
    release.send(()).unwrap();
    assert_eq!(busy.join().unwrap().unwrap().as_deref(), Some("big"));
    assert!(common::eventually(Duration::from_secs(5), || {
        c.get_or_load("page:home", refresh.clone())
            .unwrap()
            .as_deref()
            == Some("fresh")
    }));
    assert!(
        calls.try_recv().is_ok(),
        "refreshed once the budget allowed"
    );
}

#[test]
fn a_hung_async_loader_is_dropped_at_the_hard_timeout_and_the_lock_released() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let p = common::unique("t");
    let backend = RedisBackend::builder(srv.url())
        .prefix(p.clone())
        .build()
        .unwrap();
    let c: TieredCache<String, Json> = TieredCache::builder(backend, Json)
        .hard_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let t = std::time::Instant::now();
    let r = herdless_redis::block_on(c.get_or_load_async("slow:1", || async {
        std::future::pending::<()>().await;
        Ok::<_, std::io::Error>(Some("never".to_string()))
    }))
    .unwrap();
    assert!(
        matches!(r, Err(herdless::Error::LoadTimeout { .. })),
        "{r:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    // The fleet lock was released: the next caller leads at once.
    let v = c
        .get_or_load("slow:1", || Ok::<_, std::io::Error>(Some("ok".into())))
        .unwrap();
    assert_eq!(v.as_deref(), Some("ok"));
    assert_eq!(c.metrics().1.fleet_locks_contended, 0);
}

#[test]
fn a_two_tier_cache_tells_the_jitter_its_shared_entries_get() {
    // The L1 in front of a shared tier has no jitter (the writer jitters the shared entry
    // once, for the fleet). A binding that asked the L1 was told 0 and let Django's
    // timeouts run up to 10% long on the Redis tier (Django's test_cache_page_timeout).
    use herdless_redis::{TierAddress, TierOptions, TwoTier, Versioned};
    let build = |tier: Option<TierOptions>| {
        let l1 = herdless::Cache::<Versioned<String>>::builder()
            .ttl(Duration::from_secs(7))
            .jitter(0.3);
        TwoTier::build(l1, tier).expect("engine")
    };
    let memory = build(None);
    assert_eq!(memory.lifetimes().jitter, 0.3);
    let shared = build(Some(TierOptions {
        address: TierAddress::Memory(common::unique("jitter")),
        prefix: None,
        lease: None,
    }));
    assert_eq!(shared.l1().options().jitter, 0.0, "the L1 has none");
    let life = shared.lifetimes();
    assert_eq!((life.jitter, life.ttl), (0.3, Duration::from_secs(7)));
}

#[test]
fn caches_of_one_process_over_one_redis_see_each_others_changes_at_once() {
    // Two caches of one process (two Django aliases, two `Cache(redis=...)`) over the same
    // Redis, database and prefix: a change through one reaches the other's L1 before the
    // call returns, not one pub/sub delivery later (a read right after it was stale about
    // one time in five: set 66, bump 75 of 300 in Python).
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let p = common::unique("t");
    let joined = || {
        let b = RedisBackend::builder(srv.url()).prefix(&p).build().unwrap();
        TieredCache::builder(b, Json)
            .ttl(Duration::from_secs(60))
            .build()
            .expect("cache")
    };
    let (a, b) = (joined(), joined());
    // Only a cache that would hear the message through Redis is told it sooner: one that
    // never subscribed (it read nothing, wrote nothing) is not.
    a.set("cfg:first", "1".into()).unwrap();
    assert_eq!(b.metrics().1.notices, 0);
    for i in 0..100 {
        let v = format!("v{i}");
        a.set("cfg:flags", v.clone()).unwrap();
        assert_eq!(b.get("cfg:flags").unwrap(), Some(v), "a write, at once");
        assert!(b.l1().get("cfg:flags").is_some(), "B keeps its copy");
        a.invalidate("cfg:flags").unwrap();
        assert_eq!(b.get("cfg:flags").unwrap(), None, "a delete, at once");
        a.set("cfg:flags", "w".into()).unwrap();
        assert_eq!(b.get("cfg:flags").unwrap().as_deref(), Some("w"));
        a.bump("cfg").unwrap();
        assert_eq!(b.get("cfg:flags").unwrap(), None, "a bump, at once");
        let page = herdless::Loaded::value("page".to_string()).tags(["product:1"]);
        a.set_with("pages:1", page).unwrap();
        assert_eq!(b.get("pages:1").unwrap().as_deref(), Some("page"));
        a.invalidate_tag("product:1").unwrap();
        assert_eq!(b.get("pages:1").unwrap(), None, "a tag, at once");
    }
    // Redis brings B the same messages afterwards: each is applied once. A foreign message
    // published last (pub/sub keeps the order) tells when they have all arrived.
    a.set("zz:1", "s".into()).unwrap();
    assert!(b.get("zz:1").unwrap().is_some());
    let _: i64 = redis::cmd("PUBLISH")
        .arg(herdless_redis::keys::channel(&p, "zz"))
        .arg("d:feed:0:zz:1")
        .query(&mut srv.client())
        .unwrap();
    assert!(common::eventually(Duration::from_secs(5), || b
        .l1()
        .get("zz:1")
        .is_none()));
    // Six changes an iteration but the first write (B had not subscribed yet), the write
    // of zz:1 and the foreign message.
    assert_eq!(b.metrics().1.notices, 100 * 6 - 1 + 2);
}
