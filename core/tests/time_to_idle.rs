//! Time-to-idle (sliding expiration): an entry not read for its tti is dropped within its
//! ttl; reads keep it; a loader may give an entry its own tti; `peek` is not a read; a
//! second tier hears of reads at most once per quarter of the tti.

mod common;

use std::sync::{Arc, Mutex};

use common::{ms, secs};
use herdless::{Cache, ConfigError, Loaded, ManualClock};

fn cache(clock: &ManualClock, tti: Option<u64>) -> Cache<u32> {
    let b = Cache::builder()
        .clock(clock.clone())
        .ttl(secs(60))
        .grace(secs(30))
        .max_stale(secs(600))
        .jitter(0.0)
        .without_spawner();
    match tti {
        Some(t) => b.tti(ms(t)),
        None => b,
    }
    .build()
    .unwrap()
}

#[test]
fn an_entry_not_read_for_its_tti_is_dropped_within_its_ttl() {
    let clock = ManualClock::new();
    let cache = cache(&clock, Some(1_000));
    cache.set("k", 1).unwrap();
    clock.set(ms(999));
    assert_eq!(cache.peek("k").map(|p| p.value), Some(Some(1)));
    // The bound: dropped by tti + tti / 16 after the last read, never before tti.
    clock.set(ms(1_063));
    assert_eq!(cache.get("k"), None, "idle for tti (+ a sixteenth): gone");
    assert!(
        cache.peek("k").is_none(),
        "neither stale nor kept for fail-safe"
    );
}

#[test]
fn reads_keep_an_entry_alive_past_its_tti() {
    let clock = ManualClock::new();
    let cache = cache(&clock, Some(1_000));
    cache.set("k", 1).unwrap();
    for t in (200..=5_000).step_by(200) {
        clock.set(ms(t));
        assert_eq!(cache.get("k"), Some(1), "read every 200 ms, at {t} ms");
    }
    clock.set(ms(5_999));
    assert_eq!(cache.get("k"), Some(1), "within tti of the last read");
    clock.set(ms(7_100));
    assert_eq!(cache.get("k"), None);
}

#[test]
fn get_or_load_reads_count_and_an_idle_entry_is_loaded_again() {
    let clock = ManualClock::new();
    let cache = cache(&clock, Some(1_000));
    let loads = Arc::new(Mutex::new(0));
    let load = || {
        let loads = loads.clone();
        move || -> Result<Option<u32>, std::io::Error> {
            *loads.lock().unwrap() += 1;
            Ok(Some(7))
        }
    };
    assert_eq!(cache.get_or_load("k", load()).unwrap(), Some(7));
    for t in [500, 1_000, 1_500, 2_000] {
        clock.set(ms(t));
        assert_eq!(cache.get_or_load("k", load()).unwrap(), Some(7));
    }
    assert_eq!(*loads.lock().unwrap(), 1, "reads within tti hit");
    clock.set(ms(3_100));
    assert_eq!(cache.get_or_load("k", load()).unwrap(), Some(7));
    assert_eq!(*loads.lock().unwrap(), 2, "idle past tti: loaded again");
}

#[test]
fn a_loaders_own_tti_replaces_the_caches() {
    let clock = ManualClock::new();
    let cache = cache(&clock, None);
    cache
        .get_or_load_with("short", |_ctx| {
            Ok::<_, std::io::Error>(Loaded::value(1).tti(ms(100)))
        })
        .unwrap();
    cache.set_with("none", Loaded::value(2)).unwrap();
    cache
        .set_with("long", Loaded::value(3).tti(secs(10)))
        .unwrap();
    clock.set(ms(200));
    assert_eq!(cache.get("short"), None, "its own tti: 100 ms");
    clock.set(secs(59));
    assert_eq!(cache.get("none"), Some(2), "no tti: lives its ttl");
    assert_eq!(cache.get("long"), None, "idle 59 s > its 10 s");
    assert_eq!(
        cache.peek("none").map(|p| p.state),
        Some(herdless::HitState::Fresh)
    );
}

#[test]
fn peek_is_not_a_read() {
    let clock = ManualClock::new();
    let cache = cache(&clock, Some(1_000));
    cache.set("k", 1).unwrap();
    for t in (100..=1_000).step_by(100) {
        clock.set(ms(t));
        assert!(cache.peek("k").is_some());
    }
    clock.set(ms(1_100));
    assert!(cache.peek("k").is_none());
}

#[test]
fn a_second_tier_hears_of_reads_once_per_quarter_of_the_tti() {
    let clock = ManualClock::new();
    let told = Arc::new(Mutex::new(Vec::new()));
    let log = told.clone();
    let cache: Cache<u32> = Cache::builder()
        .clock(clock.clone())
        .jitter(0.0)
        .without_spawner()
        .tti(ms(1_600))
        .idle_reads(move |key, tti| log.lock().unwrap().push((key.to_owned(), tti)))
        .build()
        .unwrap();
    cache.set("k", 1).unwrap();
    cache.set("plain", 2).unwrap();
    for t in (0..=2_000).step_by(10) {
        clock.set(ms(t));
        assert_eq!(cache.get("k"), Some(1));
    }
    let told = told.lock().unwrap();
    // A read stores its time every 100 ms (a sixteenth); the tier is told on the first of
    // those and then every 400 ms (a quarter).
    assert_eq!(told.len(), 5, "{told:?}");
    assert!(told.iter().all(|(k, t)| k == "k" && *t == ms(1_600)));
}

#[test]
fn a_zero_tti_is_refused() {
    let err = Cache::<u32>::builder().tti(ms(0)).build().err();
    assert!(
        matches!(err, Some(ConfigError::ZeroDuration { option: "tti" })),
        "{err:?}"
    );
}
