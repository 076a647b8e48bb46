//! The basics, end to end on the real clock: load once, hit, set, invalidate, bump.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use herdless::Cache;

#[test]
fn loads_once_then_hits() {
    let cache: Cache<u32> = Cache::new();
    let calls = Arc::new(AtomicUsize::new(0));
    for _ in 0..3 {
        let c = calls.clone();
        let v = cache
            .get_or_load("ns:k", move || {
                c.fetch_add(1, Ordering::SeqCst);
                Ok::<_, std::io::Error>(Some(7))
            })
            .unwrap();
        assert_eq!(v, Some(7));
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    cache.set("ns:k", 8).unwrap();
    assert_eq!(cache.get("ns:k"), Some(8));
    cache.bump("ns");
    assert_eq!(cache.get("ns:k"), None);
    let m = cache.metrics();
    assert_eq!(m.total().loads, 1);
    assert!(
        cache
            .prometheus()
            .contains("herdless_hits_total{namespace=\"ns\"} 3")
    );
}

#[test]
fn threads_coalesce_on_one_load() {
    let cache: Cache<u32> = Cache::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..32)
        .map(|_| {
            let (cache, calls) = (cache.clone(), calls.clone());
            std::thread::spawn(move || {
                cache
                    .get_or_load("hot", move || {
                        calls.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(100));
                        Ok::<_, std::io::Error>(Some(1))
                    })
                    .unwrap()
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), Some(1));
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(herdless::driver::flights_in_progress(&cache), 0);
}
