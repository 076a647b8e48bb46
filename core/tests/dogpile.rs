//! The dogpile (the thundering herd): a hot key expires while thousands of requests are
//! in flight. A naive cache-aside sends every one of them to the origin; herdless sends one.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{Origin, Sim, ms, secs};
use herdless::Cache;

#[test]
fn five_thousand_callers_on_an_expired_key_make_one_load() {
    let mut sim = Sim::new();
    let cache: Cache<String> = sim.builder().ttl(secs(60)).build().unwrap();
    let origin = Origin::new();
    let key = "products:v1:product:42";

    // The key was loaded once (its load took 200 ms), then expired.
    let first = {
        let cache = cache.clone();
        let loader = origin.loader(&sim.clock, ms(200), Ok(Some("v1".to_string())));
        sim.spawn(async move { cache.get_or_load_async(key, loader).await })
    };
    sim.advance(ms(200));
    assert_eq!(first.take().unwrap().as_deref(), Some("v1"));
    sim.advance(secs(73)); // past ttl * (1 + 0.2/2)
    assert_eq!(cache.get(key), None, "the key must have expired");
    let before = cache.metrics().total();

    // 5,000 requests arrive at once, each with its own loader.
    let callers: Vec<_> = (0..5_000)
        .map(|_| {
            let cache = cache.clone();
            let loader = origin.loader(&sim.clock, ms(200), Ok(Some("v2".to_string())));
            sim.spawn(async move { cache.get_or_load_async(key, loader).await })
        })
        .collect();
    sim.run();
    assert_eq!(origin.calls(), 2, "one loader call for the whole herd");
    assert_eq!(herdless::driver::flights_in_progress(&cache), 1);
    assert!(
        callers.iter().all(|c| !c.is_done()),
        "everyone waits for the one load"
    );

    sim.advance(ms(200));
    for c in &callers {
        assert_eq!(c.take().unwrap().as_deref(), Some("v2"));
    }
    assert_eq!(origin.calls(), 2);
    assert_eq!(origin.peak(), 1);
    assert_eq!(
        herdless::driver::flights_in_progress(&cache),
        0,
        "no flight record left behind"
    );

    let m = cache.metrics().total();
    assert_eq!(m.loads - before.loads, 1);
    assert_eq!(m.coalesced_waiters - before.coalesced_waiters, 4_999);
    assert_eq!(m.lock_acquired - before.lock_acquired, 1);
    assert_eq!(m.lock_contended - before.lock_contended, 4_999);
    assert_eq!(m.misses - before.misses, 5_000);
    assert_eq!(m.load_errors, 0);
    let ns = cache.metrics();
    let waits = &ns.namespace("products").unwrap().lock_wait;
    assert_eq!(waits.counts.iter().sum::<u64>(), 4_999);
}

#[test]
fn threads_on_the_real_clock_share_one_load() {
    // The same herd with the blocking API: 64 threads, a loader that takes 200 ms of real
    // time. Only the count matters here; the timeout only catches a hang.
    let cache: Cache<u64> = Cache::builder().wait_timeout(secs(30)).build().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let barrier = Arc::new(std::sync::Barrier::new(64));
    let threads: Vec<_> = (0..64)
        .map(|_| {
            let (cache, calls, barrier) = (cache.clone(), calls.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                cache.get_or_load("hot:key", move || {
                    calls.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(200));
                    Ok::<_, std::io::Error>(Some(7))
                })
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap().unwrap(), Some(7));
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(herdless::driver::flights_in_progress(&cache), 0);
    let m = cache.metrics().total();
    assert_eq!(m.loads, 1);
    assert_eq!(m.coalesced_waiters + m.hits, 63);
}
