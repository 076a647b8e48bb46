//! Writes from outside herdless (PROTOCOL.md section 4): the server's key tracking drops
//! the copies of a value key another program set, deleted or flushed; herdless's own
//! writes, deletes and idle touches are not mistaken for outside ones (the writer keeps
//! its copy); a server that refuses tracking is served as before; a killed subscription
//! connection is asked for tracking again.

mod common;

use std::time::{Duration, Instant};

use herdless_redis::{Json, RedisBackend, TieredCache, keys};

fn cache(url: String, prefix: &str, tti: Option<Duration>) -> TieredCache<String, Json> {
    let backend = RedisBackend::builder(url)
        .prefix(prefix)
        .isolated()
        .build()
        .expect("backend");
    let mut b = TieredCache::builder(backend, Json)
        .ttl(Duration::from_secs(60))
        .jitter(0.0);
    if let Some(tti) = tti {
        b = b.tti(tti);
    }
    b.build().expect("cache")
}

/// Two processes of one fleet on `srv`, over a prefix of their own (returned with them).
fn pair(
    srv: &common::Server,
    name: &str,
    tti: Option<Duration>,
) -> (String, TieredCache<String, Json>, TieredCache<String, Json>) {
    let prefix = common::unique(name);
    let (a, b) = (
        cache(srv.url(), &prefix, tti),
        cache(srv.url(), &prefix, tti),
    );
    (prefix, a, b)
}

/// Waits (at most 5 s) until `a` holds no copy of `key`.
fn until_dropped(a: &TieredCache<String, Json>, key: &str) -> Duration {
    let t = Instant::now();
    while a.l1().get(key).is_some() {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{key}: the copy stayed"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
    t.elapsed()
}

fn outside(a: &TieredCache<String, Json>) -> u64 {
    a.metrics().1.outside_invalidations
}

#[test]
fn outside_sets_deletes_and_flushes_drop_the_copies() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let (prefix, a, b) = pair(&srv, "track", None);
    let mut c = srv.client();
    for k in ["t:1", "t:2", "t:3", "u:1"] {
        b.set(k, format!("{k}-v1")).unwrap();
        assert_eq!(a.get(k).unwrap(), Some(format!("{k}-v1")));
        assert!(a.l1().get(k).is_some(), "the read is kept");
    }
    let value = |k: &str| keys::names(&prefix, k).value;
    let () = redis::cmd("SET")
        .arg(value("t:1"))
        .arg("written by another program")
        .query(&mut c)
        .unwrap();
    let took_set = until_dropped(&a, "t:1");
    assert_eq!(a.get("t:1").unwrap(), None, "not an entry: a miss");
    let _: i64 = redis::cmd("DEL").arg(value("t:2")).query(&mut c).unwrap();
    let took_del = until_dropped(&a, "t:2");
    assert_eq!(a.get("t:2").unwrap(), None);
    let _: i64 = redis::cmd("PEXPIRE")
        .arg(value("t:3"))
        .arg(1)
        .query(&mut c)
        .unwrap();
    until_dropped(&a, "t:3");
    assert!(outside(&a) >= 3, "{:?}", a.metrics().1);
    assert!(
        a.l1().get("u:1").is_some(),
        "an untouched key keeps its copy"
    );
    let lost = a.metrics().1.notices_lost;
    let () = redis::cmd("FLUSHDB").query(&mut c).unwrap();
    until_dropped(&a, "u:1");
    assert_eq!(a.metrics().1.notices_lost, lost + 1, "a flush is a loss");
    eprintln!("outside SET dropped the copy in {took_set:?}, DEL in {took_del:?}");
}

#[test]
fn herdless_s_own_changes_are_not_taken_for_outside_ones() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    // Long enough that no entry of the test expires in Redis (an expiry is reported as a
    // change no notice announced, as it should be).
    let tti = Some(Duration::from_secs(2));
    let (_, a, b) = pair(&srv, "own", tti);
    for round in 0..50 {
        a.set("own:k", format!("a{round}")).unwrap();
        b.set("own:j", format!("b{round}")).unwrap();
        // b's notice reaches a when it does: a reads b's value within a moment.
        let t = Instant::now();
        while a.get("own:j").unwrap() != Some(format!("b{round}")) {
            assert!(t.elapsed() < Duration::from_secs(5), "b's write unheard");
            std::thread::sleep(Duration::from_micros(200));
        }
        a.invalidate("own:gone").unwrap();
        let loaded = a
            .get_or_load(&format!("own:l{round}"), || {
                Ok::<_, std::io::Error>(Some("l".into()))
            })
            .unwrap();
        assert_eq!(loaded.as_deref(), Some("l"));
    }
    // Reads past a quarter of the tti touch the shared entries (`i` notices).
    for _ in 0..6 {
        std::thread::sleep(Duration::from_millis(150));
        assert!(a.get("own:k").unwrap().is_some());
        assert!(b.get("own:k").unwrap().is_some());
    }
    std::thread::sleep(Duration::from_millis(100));
    assert!(a.metrics().1.idle_touches > 0);
    assert!(
        a.l1().get("own:k").is_some(),
        "the writer keeps its own copy"
    );
    assert_eq!(outside(&a), 0, "{:?}", a.metrics().1);
    assert_eq!(outside(&b), 0, "{:?}", b.metrics().1);
}

#[test]
fn a_server_that_refuses_tracking_serves_copies_as_before() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let mut c = srv.client();
    let () = redis::cmd("ACL")
        .arg(&["SETUSER", "default", "-client|tracking"])
        .query(&mut c)
        .unwrap();
    let (_, a, b) = pair(&srv, "refused", None);
    b.set("r:1", "v1".into()).unwrap();
    assert_eq!(a.get("r:1").unwrap().as_deref(), Some("v1"));
    assert!(
        a.l1().get("r:1").is_some(),
        "copies are kept without tracking"
    );
    assert_eq!(a.metrics().1.tracking_refused, 1);
    b.set("r:1", "v2".into()).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        a.get("r:1").unwrap().as_deref(),
        Some("v2"),
        "herdless's notices still reach the copy"
    );
}

#[test]
fn a_killed_subscription_is_asked_for_tracking_again() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let (prefix, a, b) = pair(&srv, "retrack", None);
    let mut c = srv.client();
    for round in 0..5 {
        b.set("k:1", format!("v{round}")).unwrap();
        assert_eq!(a.get("k:1").unwrap(), Some(format!("v{round}")));
        let lost = a.metrics().1.notices_lost;
        let _: i64 = redis::cmd("CLIENT")
            .arg(&["KILL", "TYPE", "pubsub"])
            .query(&mut c)
            .unwrap();
        let t = Instant::now();
        while a.metrics().1.notices_lost == lost {
            assert!(t.elapsed() < Duration::from_secs(10), "not repaired");
            std::thread::sleep(Duration::from_micros(200));
        }
        // The gap's copies are gone; a copy read now is followed again.
        assert_eq!(a.get("k:1").unwrap(), Some(format!("v{round}")));
        assert!(a.l1().get("k:1").is_some());
        let () = redis::cmd("SET")
            .arg(keys::names(&prefix, "k:1").value)
            .arg("outside")
            .query(&mut c)
            .unwrap();
        until_dropped(&a, "k:1");
    }
}
