//! Metrics (a stampede nobody can see cannot be fixed): a small scripted day of one
//! cache, and the counters it must show, per namespace, in the snapshot and in Prometheus
//! text.

mod common;

use std::sync::Arc;

use common::{Origin, OriginDown, Sim, Task, ms, secs};
use herdless::{Cache, Error};

fn request(
    sim: &Sim,
    cache: &Cache<u32>,
    origin: &Arc<Origin>,
    key: &str,
    answer: Result<Option<u32>, OriginDown>,
) -> Task<Result<Option<u32>, Error>> {
    let (cache, key) = (cache.clone(), key.to_string());
    let loader = origin.loader(&sim.clock, ms(200), answer);
    sim.spawn(async move { cache.get_or_load_async(&key, loader).await })
}

#[test]
fn counters_match_a_scripted_scenario_and_prometheus_shows_them_by_namespace() {
    let mut sim = Sim::new();
    let cache: Cache<u32> = sim
        .builder()
        .capacity(4)
        .shards(1)
        .ttl(secs(60))
        .grace(secs(10))
        .jitter(0.0)
        .beta(0.0)
        .build()
        .unwrap();
    let origin = Origin::new();

    // A cold key and a herd of three: 1 load, 2 coalesced waiters.
    let herd: Vec<_> = (0..3)
        .map(|_| request(&sim, &cache, &origin, "users:1", Ok(Some(1))))
        .collect();
    sim.advance(ms(200));
    herd.iter()
        .for_each(|r| assert_eq!(r.take().unwrap(), Some(1)));
    // Five hits.
    for _ in 0..5 {
        assert_eq!(cache.get("users:1"), Some(1));
    }
    // A missing user, cached as absent, then asked for again: a negative hit.
    let r = request(&sim, &cache, &origin, "users:404", Ok(None));
    sim.advance(ms(200));
    assert_eq!(r.take().unwrap(), None);
    let r = request(&sim, &cache, &origin, "users:404", Ok(Some(9)));
    sim.run();
    assert_eq!(r.take().unwrap(), None);
    // The origin fails for an order.
    let r = request(&sim, &cache, &origin, "orders:1", Err(OriginDown(1)));
    sim.advance(ms(200));
    assert!(r.take().is_err());
    // users:1 goes stale: served at once, one background refresh.
    sim.advance(secs(61));
    let r = request(&sim, &cache, &origin, "users:1", Ok(Some(2)));
    sim.run();
    assert_eq!(r.take().unwrap(), Some(1));
    sim.advance(ms(200));
    assert_eq!(cache.get("users:1"), Some(2));
    // Three more order keys overflow the capacity of 4 by one: the absence of users:404,
    // dead by now, is evicted.
    for i in 2..5 {
        cache.set(&format!("orders:{i}"), i).unwrap();
    }

    let m = cache.metrics();
    let users = &m.namespace("users").unwrap().counters;
    assert_eq!(
        users.hits,
        5 + 1,
        "five reads and the refreshed value read back"
    );
    assert_eq!(users.negative_hits, 1);
    assert_eq!(users.stale_served, 1);
    assert_eq!(users.misses, 3 + 1);
    assert_eq!(users.loads, 3, "users:1 twice, users:404 once");
    assert_eq!(users.lock_acquired, 2);
    assert_eq!(users.lock_contended, 2);
    assert_eq!(users.coalesced_waiters, 2);
    assert_eq!(users.refreshes, 1);
    assert_eq!(users.early_refreshes, 0);
    assert_eq!(users.load_errors, 0);
    let orders = &m.namespace("orders").unwrap().counters;
    assert_eq!((orders.loads, orders.load_errors, orders.misses), (1, 1, 1));
    assert_eq!(m.total().evictions, 1);
    assert_eq!(m.entries, 4);
    assert_eq!(m.loads_in_flight, 0);
    let load_durations = &m.namespace("users").unwrap().load_duration;
    assert_eq!(load_durations.counts.iter().sum::<u64>(), 3);
    assert_eq!(load_durations.sum, ms(600));
    let waits = &m.namespace("users").unwrap().lock_wait;
    assert_eq!(waits.counts.iter().sum::<u64>(), 2);
    assert_eq!(waits.sum, ms(400));

    let text = cache.prometheus();
    for line in [
        "herdless_hits_total{namespace=\"users\"} 6",
        "herdless_misses_total{namespace=\"users\"} 4",
        "herdless_stale_served_total{namespace=\"users\"} 1",
        "herdless_negative_hits_total{namespace=\"users\"} 1",
        "herdless_loads_total{namespace=\"users\"} 3",
        "herdless_load_errors_total{namespace=\"orders\"} 1",
        "herdless_coalesced_waiters_total{namespace=\"users\"} 2",
        "herdless_lock_acquired_total{namespace=\"users\"} 2",
        "herdless_lock_contended_total{namespace=\"users\"} 2",
        "herdless_early_refreshes_total{namespace=\"users\"} 0",
        "herdless_backend_errors_total{namespace=\"users\"} 0",
        "herdless_load_duration_seconds_count{namespace=\"users\"} 3",
        "herdless_load_duration_seconds_sum{namespace=\"users\"} 0.6",
        "herdless_lock_wait_seconds_count{namespace=\"users\"} 2",
        "herdless_lock_wait_seconds_bucket{namespace=\"users\",le=\"+Inf\"} 2",
        "herdless_entries 4",
        "herdless_loads_in_flight 0",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
    // Every metric name is declared once, with its type.
    for (name, kind) in [
        ("hits_total", "counter"),
        ("misses_total", "counter"),
        ("stale_served_total", "counter"),
        ("negative_hits_total", "counter"),
        ("loads_total", "counter"),
        ("load_errors_total", "counter"),
        ("load_duration_seconds", "histogram"),
        ("coalesced_waiters_total", "counter"),
        ("lock_acquired_total", "counter"),
        ("lock_contended_total", "counter"),
        ("lock_wait_seconds", "histogram"),
        ("early_refreshes_total", "counter"),
        ("backend_errors_total", "counter"),
        ("evictions_total", "counter"),
    ] {
        let decl = format!("# TYPE herdless_{name} {kind}");
        assert_eq!(text.lines().filter(|l| *l == decl).count(), 1, "{decl}");
        assert!(text.contains(&format!("# HELP herdless_{name} ")));
    }
    let evictions: u64 = text
        .lines()
        .filter(|l| l.starts_with("herdless_evictions_total{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(evictions, 1);
}

#[test]
fn a_namespace_that_could_break_the_exposition_is_shown_as_other() {
    let sim = Sim::new();
    let cache: Cache<u32> = sim.builder().build().unwrap();
    cache.set("we\"ird\\ns\n:1", 1).unwrap();
    assert_eq!(cache.get("we\"ird\\ns\n:1"), Some(1));
    let text = cache.prometheus();
    assert!(
        text.contains("herdless_hits_total{namespace=\"(other)\"} 1"),
        "{text}"
    );
    assert!(!text.contains("we\""), "{text}");
}

/// Keys made from request input (a URL used as a key is its own namespace) must not become
/// unbounded labels, nor put a token of a URL into the exposition: namespaces that are not
/// plain words, and those past MAX_LABELLED_NAMESPACES, are summed as OTHER_NAMESPACE.
#[test]
fn request_input_never_becomes_a_label_and_labels_are_bounded() {
    use herdless::{MAX_LABELLED_NAMESPACES, OTHER_NAMESPACE};
    let cache: Cache<u32> = Cache::builder().capacity(10_000).build().unwrap();
    for i in 0..300 {
        cache
            .set(&format!("/search?q={i}&reset_token=SECRET-{i}"), 1)
            .unwrap();
        assert_eq!(
            cache.get(&format!("/search?q={i}&reset_token=SECRET-{i}")),
            Some(1)
        );
    }
    for i in 0..(MAX_LABELLED_NAMESPACES + 50) {
        // ns0 is the busiest: it keeps its label whatever the order.
        for _ in 0..(if i == 0 { 5 } else { 1 }) {
            assert_eq!(cache.get(&format!("ns{i}:v1:k")), None);
        }
    }
    let text = cache.prometheus();
    assert!(
        !text.contains("SECRET"),
        "a token of a URL reached the exposition"
    );
    let hits: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("herdless_hits_total{"))
        .collect();
    assert_eq!(hits.len(), MAX_LABELLED_NAMESPACES + 1, "{hits:?}");
    let other = format!("herdless_hits_total{{namespace=\"{OTHER_NAMESPACE}\"}} 300");
    assert!(hits.contains(&other.as_str()), "{hits:?}");
    assert!(text.contains("herdless_misses_total{namespace=\"ns0\"} 5"));
    // The snapshot itself keeps every namespace.
    assert_eq!(
        cache.metrics().namespaces.len(),
        300 + MAX_LABELLED_NAMESPACES + 50
    );
}

/// A waiter's wait is counted to the end of the load it waited for, not to whenever it
/// was next polled: a herd read late (a busy event loop, a thread woken late) shows the
/// origin's time, and reading it costs no clock reading per waiter.
#[test]
fn a_wait_is_counted_to_the_end_of_the_load_however_late_the_waiter_reads_it() {
    let mut sim = Sim::new();
    let cache: Cache<u32> = sim.builder().ttl(secs(60)).build().unwrap();
    let herdless::Lookup::Lead(guard) = cache.lookup("users:7").unwrap() else {
        panic!("leads")
    };
    sim.advance(ms(50));
    let herdless::Lookup::Wait(waiter) = cache.lookup("users:7").unwrap() else {
        panic!("waits")
    };
    sim.advance(ms(150));
    assert_eq!(guard.complete(Ok(Some(7))).unwrap(), Some(7));
    sim.advance(ms(800));
    assert_eq!(waiter.wait().unwrap(), herdless::Waited::Loaded(Some(7)));
    let waits = cache
        .metrics()
        .namespace("users")
        .unwrap()
        .lock_wait
        .clone();
    assert_eq!(waits.counts.iter().sum::<u64>(), 1);
    assert_eq!(waits.sum, ms(150), "from its arrival to the load's end");
}
