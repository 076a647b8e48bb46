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
        born_ms: 0,
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

/// The node of `cluster` that serves `name`'s slot: the one that answers for it rather
/// than redirecting (MOVED).
fn owner(cluster: &common::Cluster, name: &str) -> usize {
    (0..cluster.nodes.len())
        .find(|&i| {
            redis::cmd("EXISTS")
                .arg(name)
                .query::<i64>(&mut cluster.nodes[i].client())
                .is_ok()
        })
        .expect("a node serves every slot")
}

/// Issue 33 item 11: one node of three stopped (SIGSTOP), a batch over ten namespaces
/// still locks, loads (in its one loader call) and publishes every key of the two healthy
/// nodes; only the stopped node's keys are loaded in the process and kept there, each
/// slot group bounded by `op_timeout` on its own. A second process then loads only those.
#[test]
fn a_batch_publishes_the_keys_of_the_healthy_nodes_while_one_node_stalls() {
    if !common::redis_available() {
        return;
    }
    // Never declared failed while the test stops a node (the healthy ones keep serving).
    let cluster = common::Cluster::start_with(&["--cluster-node-timeout", "60000"]);
    let p = common::unique("stall");
    let op_timeout = Duration::from_millis(300);
    let process = || -> TieredCache<String, Json> {
        let backend = RedisBackend::cluster(cluster.urls())
            .prefix(p.clone())
            .op_timeout(op_timeout)
            .build()
            .expect("backend");
        TieredCache::builder(backend, Json)
            .ttl(Duration::from_secs(600))
            .wait_timeout(Duration::from_secs(2))
            .build()
            .expect("cache")
    };
    let (a, b) = (process(), process());
    let namespaces: Vec<String> = (0..10).map(|i| format!("ns{i}")).collect();
    let keys: Vec<String> = namespaces
        .iter()
        .flat_map(|ns| (0..4).map(move |j| format!("{ns}:k{j}")))
        .collect();
    let where_is: Vec<usize> = keys
        .iter()
        .map(|k| owner(&cluster, &keys::names(&p, k).value))
        .collect();
    let stopped = where_is[0];
    let healthy: Vec<(&String, usize)> = keys
        .iter()
        .zip(where_is.iter().copied())
        .filter(|(_, n)| *n != stopped)
        .collect();
    assert!(
        !healthy.is_empty() && healthy.len() < keys.len(),
        "the namespaces spread over the nodes"
    );
    // Both processes have met the cluster (slots, connections) before the stall.
    for c in [&a, &b] {
        let warm = c.get_or_load("warm:1", || Ok::<_, std::io::Error>(Some("w".into())));
        assert_eq!(warm.unwrap().as_deref(), Some("w"));
    }

    type Calls = Arc<std::sync::Mutex<Vec<Vec<String>>>>;
    let loader = |calls: &Calls, who: &'static str| {
        let calls = calls.clone();
        move |keys: &[String]| {
            calls.lock().unwrap().push(keys.to_vec());
            Ok::<_, std::io::Error>(
                keys.iter()
                    .map(|k| (k.clone(), Some(format!("{who}-{k}"))))
                    .collect::<Vec<_>>(),
            )
        }
    };
    cluster.nodes[stopped].stop();
    let (calls_a, calls_b): (Calls, Calls) = Default::default();
    let t = Instant::now();
    let got = a.get_or_load_many(&keys, loader(&calls_a, "a"));
    let took_a = t.elapsed();
    for (k, v) in keys.iter().zip(got) {
        assert_eq!(v.unwrap(), Some(format!("a-{k}")), "{k}");
    }
    assert_eq!(calls_a.lock().unwrap().len(), 1, "one loader call");
    // Published: read back from the healthy nodes themselves.
    let published = healthy
        .iter()
        .filter(|(k, n)| {
            redis::cmd("EXISTS")
                .arg(keys::names(&p, k).value)
                .query::<i64>(&mut cluster.nodes[*n].client())
                .unwrap()
                == 1
        })
        .count();
    // Another process: the healthy nodes' keys are read, the stopped node's loaded.
    let t = Instant::now();
    let got = b.get_or_load_many(&keys, loader(&calls_b, "b"));
    let took_b = t.elapsed();
    cluster.nodes[stopped].resume();
    let is_healthy = |k: &String| healthy.iter().any(|(h, _)| *h == k);
    let stalled: Vec<String> = keys.iter().filter(|k| !is_healthy(k)).cloned().collect();
    eprintln!(
        "published {published} of {} keys on healthy nodes ({} keys in all); \
         A took {took_a:?}, B took {took_b:?}; B loaded {:?} keys",
        healthy.len(),
        keys.len(),
        calls_b.lock().unwrap().iter().map(Vec::len).sum::<usize>()
    );
    assert_eq!(
        published,
        healthy.len(),
        "every healthy node's key published"
    );
    for (k, v) in keys.iter().zip(got) {
        let who = if is_healthy(k) { "a" } else { "b" };
        assert_eq!(v.unwrap(), Some(format!("{who}-{k}")), "{k}");
    }
    assert_eq!(
        calls_b.lock().unwrap().clone(),
        vec![stalled],
        "the second process loads the stopped node's keys only, in one call"
    );
    // Each slot group waited for its own node only: a stopped node costs about one
    // `op_timeout`, not one per group, and nothing waits past `wait_timeout`.
    for took in [took_a, took_b] {
        assert!(took < op_timeout * 4, "{took:?}");
    }
}
