//! Warm-ups through the call machine ([`TieredCache::warm`], `warm_async`): what each key
//! counts as, the concurrency and its cap by the origin budget, failures, and a warm-up in
//! one process sparing the other processes' loads.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use herdless_redis::memory::MemoryStore;
use herdless_redis::{Json, TieredCache};

fn cache(store: &MemoryStore, budget: Option<usize>) -> TieredCache<String, Json> {
    let backend = store.backend().build().expect("backend");
    TieredCache::builder(backend, Json)
        .ttl(Duration::from_secs(60))
        .jitter(0.0)
        .l1(move |b| match budget {
            Some(n) => b.origin_budget(n),
            None => b,
        })
        .build()
        .expect("cache")
}

/// Counts calls and the most at once.
#[derive(Default)]
struct Gauge {
    calls: AtomicUsize,
    now: AtomicUsize,
    peak: AtomicUsize,
}

impl Gauge {
    fn enter(&self) {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(n, Ordering::SeqCst);
    }
    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("w:{i}")).collect()
}

#[test]
fn a_blocking_warm_up_loads_what_is_not_fresh_and_reports_each_key() {
    let store = MemoryStore::new();
    let c = cache(&store, None);
    c.set("w:0", "kept".into()).unwrap();
    let gauge = Arc::new(Gauge::default());
    let g = gauge.clone();
    let report = c.warm(keys(10), Some(3), move |k| {
        g.enter();
        std::thread::sleep(Duration::from_millis(20));
        g.leave();
        match k {
            "w:1" => Err(std::io::Error::other("down")),
            "w:2" => Ok(None),
            _ => Ok(Some(format!("v{k}"))),
        }
    });
    assert_eq!(report.total, 10);
    assert_eq!(report.skipped, 1, "w:0 was fresh");
    assert_eq!(report.absent, 1);
    assert_eq!(report.loaded, 7);
    assert_eq!(report.failed.len(), 1);
    assert_eq!(report.failed[0].0, "w:1");
    assert_eq!(gauge.calls.load(Ordering::SeqCst), 9);
    assert!(gauge.peak.load(Ordering::SeqCst) <= 3, "at most 3 at once");
    assert_eq!(c.get("w:5").unwrap().as_deref(), Some("vw:5"));
    assert_eq!(c.get("w:0").unwrap().as_deref(), Some("kept"));
}

#[test]
fn the_origin_budget_caps_a_warm_up() {
    let store = MemoryStore::new();
    let c = cache(&store, Some(2));
    let gauge = Arc::new(Gauge::default());
    let g = gauge.clone();
    let report = c.warm(keys(12), Some(8), move |k| {
        g.enter();
        std::thread::sleep(Duration::from_millis(10));
        g.leave();
        Ok::<_, std::io::Error>(Some(k.to_owned()))
    });
    assert_eq!(report.loaded, 12);
    assert!(gauge.peak.load(Ordering::SeqCst) <= 2);
}

#[test]
fn an_async_warm_up_in_one_process_spares_the_others_their_loads() {
    let store = MemoryStore::new();
    let (a, b) = (cache(&store, None), cache(&store, None));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let gauge = Arc::new(Gauge::default());
    let g = gauge.clone();
    let report = rt.block_on(a.warm_async(keys(6), None, move |k| {
        let g = g.clone();
        async move {
            g.enter();
            tokio::time::sleep(Duration::from_millis(10)).await;
            g.leave();
            Ok::<_, std::io::Error>(Some(format!("a{k}")))
        }
    }));
    assert_eq!((report.loaded, report.skipped), (6, 0));
    assert!(
        gauge.peak.load(Ordering::SeqCst) <= 4,
        "the engine's default: 4"
    );
    // The other process finds them in the shared tier: its warm-up loads nothing.
    let loads = Arc::new(AtomicUsize::new(0));
    let l = loads.clone();
    let report = b.warm(keys(6), None, move |_| {
        l.fetch_add(1, Ordering::SeqCst);
        Ok::<_, std::io::Error>(Some("b".to_owned()))
    });
    assert_eq!((report.loaded, report.skipped), (0, 6));
    assert_eq!(loads.load(Ordering::SeqCst), 0);
    assert_eq!(b.get("w:3").unwrap().as_deref(), Some("aw:3"));
}
