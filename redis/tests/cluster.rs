//! A local three-node Redis Cluster started by the test: hash tags keep a namespace's value,
//! lock, epoch and channel in one slot; sharded pub/sub wakes waiters.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use herdless::backend::Backend;
use herdless_redis::{FleetOptions, FleetOutcome, Json, RedisBackend, TieredCache, block_on, keys};

#[test]
fn three_node_cluster() {
    if !common::redis_available() {
        return;
    }
    let cluster = common::Cluster::start();
    let p = common::unique("cl");
    let mk = || {
        RedisBackend::cluster(cluster.urls())
            .prefix(p.clone())
            .build()
            .expect("backend")
    };
    let (ba, bb) = (mk(), mk());
    // Redis agrees that a namespace lives in one slot, and namespaces spread over nodes.
    let mut c = cluster.nodes[0].client();
    let mut slots = std::collections::HashSet::new();
    for ns in ["users", "orders", "cart", "geo", "feed", "ads"] {
        let n = ba.names(&format!("{ns}:v1:x:1"));
        let s: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(&n.value)
            .query(&mut c)
            .unwrap();
        for k in [&n.lock, &n.epoch, &n.channel] {
            let s2: u16 = redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(k)
                .query(&mut c)
                .unwrap();
            assert_eq!(s, s2, "{k}");
        }
        assert_eq!(keys::slot(&n.value), s);
        slots.insert(s);
    }
    assert!(slots.len() > 1);

    let a: TieredCache<String, Json> = TieredCache::builder(ba.clone(), Json).build().unwrap();
    let b: TieredCache<String, Json> = TieredCache::builder(bb.clone(), Json).build().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    for ns in ["users", "orders", "cart", "geo"] {
        let key = format!("{ns}:1");
        let l = {
            let calls = calls.clone();
            move || {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok::<_, std::io::Error>(Some(format!("v-{}", 1)))
            }
        };
        assert_eq!(a.get_or_load(&key, l).unwrap().as_deref(), Some("v-1"));
        let never = || Ok::<_, std::io::Error>(Some("never".to_string()));
        assert_eq!(b.get_or_load(&key, never).unwrap().as_deref(), Some("v-1"));
    }
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    // Sharded notifications: B's L1 copy drops on A's set and bump.
    a.set("users:1", "v-2".into()).unwrap();
    assert!(common::eventually(Duration::from_secs(5), || b
        .l1()
        .get("users:1")
        .is_none()));
    assert_eq!(b.get("users:1").unwrap().as_deref(), Some("v-2"));
    a.bump("orders").unwrap();
    assert!(common::eventually(Duration::from_secs(5), || b
        .l1()
        .get("orders:1")
        .is_none()));
    assert_eq!(b.get("orders:1").unwrap(), None);

    // A waiter in another process is woken by the leader's publish, not by its re-check.
    let fa = ba.fleet(FleetOptions::default());
    let fb = bb.fleet(FleetOptions {
        recheck: Duration::from_secs(10),
        ..FleetOptions::default()
    });
    let FleetOutcome::Lead(lease) = fa.lead_blocking("feed:hot", 0).unwrap() else {
        panic!("expected to lead")
    };
    let waiter = std::thread::spawn(move || {
        let t = Instant::now();
        (fb.lead_blocking("feed:hot", 0), t.elapsed())
    });
    std::thread::sleep(Duration::from_millis(300));
    let now = herdless_redis::now_ms();
    let entry = herdless::backend::StoredEntry {
        value: Some(b"\"hot\"".to_vec()),
        fresh_until_ms: now + 60_000,
        stale_until_ms: now + 60_000,
        retain_until_ms: now + 60_000,
        load_duration: Duration::from_millis(300),
        version: 0,
        epoch: 0,
        ttl: None,
        meta: None,
        tags: Vec::new(),
        tag_marks: Vec::new(),
    };
    lease.publish_blocking(entry).unwrap();
    let (got, took) = waiter.join().unwrap();
    assert!(
        matches!(got.unwrap(), FleetOutcome::Fresh(e) if e.value.as_deref() == Some(&b"\"hot\""[..]))
    );
    assert!(
        took < Duration::from_secs(2),
        "woken by the notification: {took:?}"
    );
    // Garbage is a miss on the cluster too.
    let _: () = redis::cmd("SET")
        .arg(ba.names("ads:1").value)
        .arg("garbage")
        .query(
            &mut redis::cluster::ClusterClient::new(cluster.urls())
                .unwrap()
                .get_connection()
                .unwrap(),
        )
        .unwrap();
    assert_eq!(
        block_on(ba.read("ads:1", herdless_redis::now_ms()))
            .unwrap()
            .unwrap(),
        None
    );
    assert!(ba.metrics().corrupt_entries >= 1);
}
