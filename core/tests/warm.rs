//! Pre-warming (a cache restarted under live traffic without it sends every hot key to the
//! origin at once):
//! export the hot keys, restart, import, warm; the origin never sees more than the budget at
//! once, and the first requests after the warm-up hit.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use herdless::{Cache, WarmReport};

/// An origin that counts its calls and the most it served at once.
#[derive(Default)]
struct Origin {
    running: AtomicUsize,
    peak: AtomicUsize,
    calls: AtomicUsize,
}

impl Origin {
    fn enter(&self) -> impl Drop + '_ {
        struct Exit<'a>(&'a Origin);
        impl Drop for Exit<'_> {
            fn drop(&mut self) {
                self.0.running.fetch_sub(1, Ordering::SeqCst);
            }
        }
        self.calls.fetch_add(1, Ordering::SeqCst);
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        Exit(self)
    }
}

fn build(budget: usize) -> Cache<String> {
    Cache::builder()
        .ttl(Duration::from_secs(600))
        .origin_budget(budget)
        .build()
        .unwrap()
}

fn value(key: &str) -> Result<Option<String>, std::io::Error> {
    match key {
        k if k.ends_with(":gone") => Ok(None),
        k if k.ends_with(":broken") => Err(std::io::Error::other("origin says no")),
        k => Ok(Some(k.to_uppercase())),
    }
}

#[test]
fn export_restart_import_warm_stays_within_the_budget_and_then_hits() {
    // The old instance served traffic: 50 keys, the lower ids more often.
    let old = build(4);
    for round in 0..50 {
        for i in 0..50 - round {
            let key = format!("p:{i}");
            old.get_or_load(&key, move || value(&format!("p:{i}")))
                .unwrap();
        }
    }
    let json = old.export_hot_keys(30);
    drop(old);

    let new = build(4);
    let keys = new.import_hot_keys(&json).unwrap();
    assert_eq!(keys.len(), 30);
    let origin = Origin::default();
    let seen = std::sync::Mutex::new(Vec::new());
    let report = new.warm_with_progress(
        keys.iter().map(|k| k.key.as_str()),
        16, // asks for more than the budget: the budget wins
        |key: &str| {
            let _call = origin.enter();
            std::thread::sleep(Duration::from_millis(5));
            value(key)
        },
        |r: &WarmReport| seen.lock().unwrap().push(r.done()),
    );
    assert_eq!((report.total, report.loaded, report.skipped), (30, 30, 0));
    assert!(report.failed.is_empty());
    let peak = origin.peak.load(Ordering::SeqCst);
    assert!(
        (1..=4).contains(&peak),
        "peak {peak} within the budget of 4"
    );
    assert_eq!(*seen.lock().unwrap(), (1..=30).collect::<Vec<_>>());

    let before = new.metrics().total();
    for k in &keys {
        assert_eq!(new.get(&k.key), Some(k.key.to_uppercase()));
    }
    let after = new.metrics().total();
    assert_eq!(after.hits - before.hits, 30, "the first requests hit");
    assert_eq!(after.misses, before.misses);

    // Warming again skips what is fresh.
    let again = new.warm(keys.iter().map(|k| k.key.clone()), 4, value);
    assert_eq!((again.loaded, again.skipped), (0, 30));
}

#[test]
fn warm_reports_absent_and_failed_keys_and_goes_on() {
    let cache = build(2);
    let report = cache.warm(["a:1", "a:gone", "a:broken", "a:2"], 8, value);
    assert_eq!((report.loaded, report.absent, report.skipped), (2, 1, 0));
    assert_eq!(report.failed.len(), 1);
    assert_eq!(report.failed[0].0, "a:broken");
    assert_eq!(cache.get("a:2").as_deref(), Some("A:2"));
    let panicky = cache.warm(
        ["b:1"],
        1,
        |_: &str| -> Result<Option<String>, std::io::Error> { panic!("loader bug") },
    );
    assert_eq!(panicky.failed.len(), 1);
    assert!(matches!(
        panicky.failed[0].1,
        herdless::Error::LoaderPanicked { .. }
    ));
}

#[test]
fn warm_async_keeps_to_the_budget_too() {
    let cache = build(3);
    let origin = Arc::new(Origin::default());
    let keys: Vec<String> = (0..40).map(|i| format!("q:{i}")).collect();
    let o = origin.clone();
    let report = futures_executor::block_on(cache.warm_async(&keys, 10, move |key: String| {
        let o = o.clone();
        async move {
            let _call = o.enter();
            // Let the other workers run between the start and the end of this load.
            for _ in 0..3 {
                yield_now().await;
            }
            value(&key)
        }
    }));
    assert_eq!(report.loaded, 40);
    let peak = origin.peak.load(Ordering::SeqCst);
    assert!((2..=3).contains(&peak), "peak {peak}");
    assert!(keys.iter().all(|k| cache.get(k).is_some()));
}

/// Yields once to the executor.
async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            std::task::Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await
}
