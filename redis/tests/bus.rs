//! Recovery after a lost bus (PROTOCOL.md section 4): a notice connection killed with
//! `CLIENT KILL TYPE pubsub` is repaired by itself (redis-rs reconnects at once and
//! resubscribes) and the copies held across the gap are dropped; a process whose
//! subscription cannot be made (a server without `HELLO`, so without RESP3) keeps no copy
//! of what it writes, so it never serves one that later writes elsewhere left behind.

mod common;

use std::time::{Duration, Instant};

use herdless_redis::{Json, RedisBackend, TieredCache};

fn cache(url: String, prefix: &str) -> TieredCache<String, Json> {
    let backend = RedisBackend::builder(url)
        .prefix(prefix)
        .isolated()
        .build()
        .expect("backend");
    TieredCache::builder(backend, Json)
        .ttl(Duration::from_secs(60))
        .jitter(0.0)
        .build()
        .expect("cache")
}

#[test]
fn a_killed_bus_is_repaired_and_the_copies_it_held_dropped() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let prefix = common::unique("bus");
    let (a, b) = (cache(srv.url(), &prefix), cache(srv.url(), &prefix));
    let mut c = srv.client();
    let mut took = Vec::new();
    for round in 0..20 {
        b.set("bus:k", format!("v{round}")).unwrap();
        assert_eq!(a.get("bus:k").unwrap(), Some(format!("v{round}")));
        assert!(a.l1().get("bus:k").is_some(), "the read is kept");
        let lost = a.metrics().1.notices_lost;
        let killed = Instant::now();
        let n: i64 = redis::cmd("CLIENT")
            .arg(&["KILL", "TYPE", "pubsub"])
            .query(&mut c)
            .unwrap();
        assert!(n >= 1, "a notice connection was killed");
        // Repaired: resubscribed, the gap counted, the copy held across it dropped.
        while a.metrics().1.notices_lost == lost {
            assert!(killed.elapsed() < Duration::from_secs(10), "not repaired");
            std::thread::sleep(Duration::from_micros(200));
        }
        took.push(killed.elapsed());
        assert!(a.l1().get("bus:k").is_none(), "a copy outlived the gap");
    }
    took.sort();
    eprintln!(
        "repair after CLIENT KILL TYPE pubsub, 20 kills: min {:?}, median {:?}, max {:?}",
        took[0], took[10], took[19]
    );
    assert!(a.metrics().1.subscription_drops >= 20);
}

#[test]
fn without_resp3_a_write_keeps_no_copy() {
    if !common::redis_available() {
        return;
    }
    // No `HELLO`: the RESP3 subscription connection cannot be made (a Redis before 6.0).
    let no_hello = vec!["--rename-command".into(), "HELLO".into(), String::new()];
    let srv = common::Server::start_with(common::free_port(), no_hello);
    let prefix = common::unique("nohello");
    let (a, b) = (cache(srv.url(), &prefix), cache(srv.url(), &prefix));
    a.set("w:k", "mine".into())
        .expect("the write reaches Redis");
    assert!(a.l1().get("w:k").is_none(), "a copy nobody keeps coherent");
    b.set("w:k", "theirs".into()).unwrap();
    assert_ne!(a.get("w:k").unwrap().as_deref(), Some("mine"));
    // A load is served (loaded in this process, not written: its lock could not be asked
    // for unsubscribed), as while Redis is away.
    let v = a
        .get_or_load("w:l", || Ok::<_, std::io::Error>(Some("loaded".into())))
        .unwrap();
    assert_eq!(v.as_deref(), Some("loaded"));
    assert_eq!(b.get("w:l").unwrap(), None, "not written for the fleet");
}
