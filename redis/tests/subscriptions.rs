//! Notification subscriptions stay bounded however many namespaces a process touches: one
//! pattern subscription on a standalone server; on a Cluster (sharded pub/sub has no
//! patterns) at most 1,024 sharded channels, the least recently used dropped together with
//! the first tier's copies of its namespace, which no notice would reach any more.

mod common;

use std::time::Duration;

use herdless_redis::{Json, RedisBackend, TieredCache};

fn cache(backend: RedisBackend) -> TieredCache<String, Json> {
    TieredCache::builder(backend, Json)
        .ttl(Duration::from_secs(60))
        .jitter(0.0)
        .build()
        .expect("cache")
}

#[test]
fn a_standalone_process_holds_one_subscription_for_every_namespace() {
    if !common::redis_available() {
        return;
    }
    let srv = common::Server::start();
    let prefix = common::unique("s");
    let mk = || {
        RedisBackend::builder(srv.url())
            .prefix(prefix.clone())
            .isolated()
            .build()
            .unwrap()
    };
    let (a, b) = (cache(mk()), cache(mk()));
    for i in 0..3_000 {
        let key = format!("ns{i}:k");
        a.get_or_load(&key, || Ok::<_, std::io::Error>(Some("v".into())))
            .unwrap();
    }
    assert_eq!(a.backend().redis().unwrap().subscriptions(), 1);
    let mut c = srv.client();
    let numpat: i64 = redis::cmd("PUBSUB").arg("NUMPAT").query(&mut c).unwrap();
    assert_eq!(numpat, 1, "one pattern for 3,000 namespaces");
    let channels: Vec<String> = redis::cmd("PUBSUB").arg("CHANNELS").query(&mut c).unwrap();
    assert!(channels.is_empty(), "{} plain channels", channels.len());
    // Notices still reach every namespace's copies.
    b.set("ns2999:k", "new".into()).unwrap();
    assert!(common::eventually(Duration::from_secs(5), || {
        a.l1().get("ns2999:k").is_none()
    }));
    // Messages on one namespace's channel naming another's key are ignored. (The key is
    // loaded again first: on a loaded machine the 3,000 loads above can outlast its ttl.)
    a.get_or_load("ns5:k", || Ok::<_, std::io::Error>(Some("v".into())))
        .unwrap();
    assert!(a.l1().get("ns5:k").is_some());
    let _: i64 = redis::cmd("PUBLISH")
        .arg(herdless_redis::keys::channel(&prefix, "ns1"))
        .arg("d:forger:0:ns5:k")
        .query(&mut c)
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        a.l1().get("ns5:k").is_some(),
        "a forged notice dropped another namespace"
    );
}

#[test]
fn a_cluster_process_keeps_at_most_1024_sharded_subscriptions() {
    if !common::redis_available() {
        return;
    }
    let cluster = common::Cluster::start();
    let backend = RedisBackend::cluster(cluster.urls())
        .prefix(common::unique("cs"))
        .build()
        .unwrap();
    let a = cache(backend);
    for i in 0..1_100 {
        let key = format!("ns{i}:k");
        a.get_or_load(&key, || Ok::<_, std::io::Error>(Some("v".into())))
            .unwrap();
    }
    let held = a.backend().redis().unwrap().subscriptions();
    assert_eq!(held, 1_024);
    // The first namespaces' subscriptions were dropped, and their copies with them.
    assert!(
        a.l1().get("ns0:k").is_none(),
        "an unwatched namespace's copy was kept"
    );
    assert!(a.l1().get("ns1099:k").is_some());
    let total: i64 = cluster
        .nodes
        .iter()
        .map(|n| {
            let chans: Vec<String> = redis::cmd("PUBSUB")
                .arg("SHARDCHANNELS")
                .query(&mut n.client())
                .unwrap();
            chans.len() as i64
        })
        .sum();
    assert!(total <= 1_024, "{total} sharded channels subscribed");
}
