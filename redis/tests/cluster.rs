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
        tti: None,
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

type Calls = Arc<std::sync::Mutex<Vec<Vec<String>>>>;

/// Two processes of a fleet over a three-node cluster, and a batch of 40 keys over ten
/// namespaces, some of whose slots are on the node the test stops.
struct Stall {
    cluster: common::Cluster,
    prefix: String,
    op_timeout: Duration,
    a: TieredCache<String, Json>,
    b: TieredCache<String, Json>,
    keys: Vec<String>,
    /// The node the test stops.
    stopped: usize,
    /// The keys of the other nodes, each with its node.
    healthy: Vec<(String, usize)>,
}

impl Stall {
    fn start() -> Stall {
        // Never declared failed while the test stops a node (the healthy ones serve on).
        let cluster = common::Cluster::start_with(&["--cluster-node-timeout", "60000"]);
        let prefix = common::unique("stall");
        let op_timeout = Duration::from_millis(300);
        let process = || -> TieredCache<String, Json> {
            let backend = RedisBackend::cluster(cluster.urls())
                .prefix(prefix.clone())
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
        let keys: Vec<String> = (0..10)
            .flat_map(|ns| (0..4).map(move |j| format!("ns{ns}:k{j}")))
            .collect();
        let where_is: Vec<usize> = keys
            .iter()
            .map(|k| owner(&cluster, &keys::names(&prefix, k).value))
            .collect();
        let stopped = where_is[0];
        let healthy: Vec<(String, usize)> = keys
            .iter()
            .cloned()
            .zip(where_is.iter().copied())
            .filter(|(_, n)| *n != stopped)
            .collect();
        assert!(
            !healthy.is_empty() && healthy.len() < keys.len(),
            "the namespaces spread over the nodes"
        );
        // Both processes have met the cluster (slots, connections) and subscribed to every
        // namespace before the stall, as processes that ran a while have: their acquires
        // then reach the stopped node (and run there when it resumes).
        for c in [&a, &b] {
            for ns in 0..10 {
                let warm = c.get_or_load(&format!("ns{ns}:warm"), || {
                    Ok::<_, std::io::Error>(Some("w".into()))
                });
                assert_eq!(warm.unwrap().as_deref(), Some("w"));
            }
        }
        Stall {
            cluster,
            prefix,
            op_timeout,
            a,
            b,
            keys,
            stopped,
            healthy,
        }
    }

    fn is_healthy(&self, key: &str) -> bool {
        self.healthy.iter().any(|(h, _)| h == key)
    }

    /// The keys of the stopped node.
    fn stalled(&self) -> Vec<String> {
        let keys = self.keys.iter();
        keys.filter(|k| !self.is_healthy(k)).cloned().collect()
    }

    /// How many keys of the healthy nodes are in Redis, read back from those nodes.
    fn published(&self) -> usize {
        let names = |k: &str| keys::names(&self.prefix, k).value;
        self.healthy
            .iter()
            .filter(|(k, n)| {
                let mut c = self.cluster.nodes[*n].client();
                redis::cmd("EXISTS")
                    .arg(names(k))
                    .query::<i64>(&mut c)
                    .unwrap()
                    == 1
            })
            .count()
    }

    fn stop(&self) {
        self.cluster.nodes[self.stopped].stop();
    }

    fn resume(&self) {
        self.cluster.nodes[self.stopped].resume();
    }

    /// The second process's batch over the same keys, while the node is stopped: the
    /// healthy nodes' keys are read (process A's values), the stopped node's loaded here,
    /// in one call.
    fn second_process_loads_only_the_stopped_nodes_keys(&self) {
        let calls = Calls::default();
        let t = Instant::now();
        let got = self.b.get_or_load_many(&self.keys, loader(&calls, "b"));
        let took = t.elapsed();
        eprintln!(
            "B took {took:?} and loaded {} keys",
            calls.lock().unwrap().iter().map(Vec::len).sum::<usize>()
        );
        for (k, v) in self.keys.iter().zip(got) {
            let who = if self.is_healthy(k) { "a" } else { "b" };
            assert_eq!(v.unwrap(), Some(format!("{who}-{k}")), "{k}");
        }
        assert_eq!(calls.lock().unwrap().clone(), vec![self.stalled()]);
        assert!(took < self.op_timeout * 4, "{took:?}");
    }
}

/// What a test loader answers.
type Found = Result<Vec<(String, Option<String>)>, std::io::Error>;

/// A loader answering `<who>-<key>` for every key, recording its calls.
fn loader(calls: &Calls, who: &'static str) -> impl Fn(&[String]) -> Found + Send + Sync + 'static {
    let calls = calls.clone();
    move |keys: &[String]| {
        calls.lock().unwrap().push(keys.to_vec());
        Ok(keys
            .iter()
            .map(|k| (k.clone(), Some(format!("{who}-{k}"))))
            .collect())
    }
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
    let s = Stall::start();
    s.stop();
    let calls = Calls::default();
    let t = Instant::now();
    let got = s.a.get_or_load_many(&s.keys, loader(&calls, "a"));
    let took = t.elapsed();
    for (k, v) in s.keys.iter().zip(got) {
        assert_eq!(v.unwrap(), Some(format!("a-{k}")), "{k}");
    }
    assert_eq!(calls.lock().unwrap().len(), 1, "one loader call");
    let published = s.published();
    eprintln!(
        "published {published} of {} keys on healthy nodes ({} keys in all); A took {took:?}",
        s.healthy.len(),
        s.keys.len(),
    );
    assert_eq!(
        published,
        s.healthy.len(),
        "every healthy node's key published"
    );
    // Each slot group waited for its own node only: a stopped node costs about one
    // `op_timeout`, not one per group.
    assert!(took < s.op_timeout * 4, "{took:?}");
    s.second_process_loads_only_the_stopped_nodes_keys();
    s.resume();
    // Back: what the stopped node ran late (the acquires both processes gave up on) left
    // no lock behind for long (each is forgotten, well before its 5 s lease ends), and
    // none of its keys was published.
    let mut node = s.cluster.nodes[s.stopped].client();
    std::thread::sleep(Duration::from_millis(200));
    for k in s.stalled() {
        let n = keys::names(&s.prefix, &k);
        let gone = common::eventually(Duration::from_secs(2), || {
            redis::cmd("EXISTS")
                .arg(&n.lock)
                .query::<i64>(&mut node)
                .unwrap()
                == 0
        });
        assert!(gone, "{k}: its lock is forgotten");
        let value: i64 = redis::cmd("EXISTS").arg(&n.value).query(&mut node).unwrap();
        assert_eq!(value, 0, "{k}: loaded in each process, never published");
    }
}

/// The node stops while the batch's loader runs (its locks were taken): the publishes of
/// the healthy nodes' keys are not held back by the stopped node's, and the caller is
/// answered about one `op_timeout` after its loader, with every value.
#[test]
fn a_node_stalling_during_a_batchs_load_holds_back_only_its_own_publishes() {
    if !common::redis_available() {
        return;
    }
    let s = Stall::start();
    let calls = Calls::default();
    let (load, node) = (loader(&calls, "a"), s.cluster.nodes[s.stopped].pid());
    let returned = Arc::new(std::sync::Mutex::new(None));
    let at = returned.clone();
    let got = s.a.get_or_load_many(&s.keys, move |keys: &[String]| {
        common::stop(node);
        let answer = load(keys);
        *at.lock().unwrap() = Some(Instant::now());
        answer
    });
    let after_loader = returned.lock().unwrap().expect("the loader ran").elapsed();
    for (k, v) in s.keys.iter().zip(got) {
        assert_eq!(v.unwrap(), Some(format!("a-{k}")), "{k}");
    }
    assert_eq!(calls.lock().unwrap().clone(), vec![s.keys.clone()]);
    let published = s.published();
    eprintln!(
        "published {published} of {} keys on healthy nodes; answered {after_loader:?} after \
         the loader returned",
        s.healthy.len(),
    );
    assert_eq!(
        published,
        s.healthy.len(),
        "every healthy node's key published"
    );
    assert!(after_loader < s.op_timeout * 3, "{after_loader:?}");
    s.second_process_loads_only_the_stopped_nodes_keys();
    s.resume();
}

/// The entries of a batch are on healthy nodes but their tag's stamps on the stopped one:
/// they cannot be judged, so they are loaded in the process, and that costs the batch
/// about one `op_timeout` for all of them (their stamps asked together, then each key's
/// judged at once), not one per key.
#[test]
fn a_batch_whose_tags_sit_on_a_stopped_node_waits_for_it_once() {
    if !common::redis_available() {
        return;
    }
    let s = Stall::start();
    let tag = (0..)
        .map(|i| format!("tag{i}"))
        .find(|t| owner(&s.cluster, &keys::tag_key(&s.prefix, t)) == s.stopped)
        .expect("a tag on the stopped node");
    let healthy: Vec<String> = s.healthy.iter().map(|(k, _)| k.clone()).collect();
    for k in &healthy {
        let tagged = herdless::Loaded::value(format!("a-{k}")).tags(vec![tag.clone()]);
        s.a.set_with(k, tagged).unwrap();
    }
    s.stop();
    let calls = Calls::default();
    let t = Instant::now();
    let got = s.b.get_or_load_many(&healthy, loader(&calls, "b"));
    let took = t.elapsed();
    s.resume();
    eprintln!(
        "{} tagged keys, tag stamps on the stopped node: {took:?}",
        healthy.len()
    );
    for (k, v) in healthy.iter().zip(got) {
        assert_eq!(v.unwrap(), Some(format!("b-{k}")), "{k}: loaded here");
    }
    assert_eq!(calls.lock().unwrap().clone(), vec![healthy.clone()]);
    assert!(took < s.op_timeout * 4, "{took:?}");
}
