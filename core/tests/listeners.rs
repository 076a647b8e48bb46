//! Listeners: evictions, expiries without a refresh, failed loads and fail-safe activations
//! are told to the closure registered on the builder, off the engine's locks; a queue that
//! is full drops events and counts them, and never makes the engine wait.

mod common;

use std::sync::{Arc, Mutex};

use common::{OriginDown, secs};
use herdless::{BoxFuture, Cache, Error, Event, EventKind, ManualClock};

type Log = Arc<Mutex<Vec<(EventKind, String, Option<String>)>>>;

fn listening(clock: &ManualClock, log: &Log) -> herdless::Builder<u32> {
    let log = log.clone();
    Cache::builder()
        .clock(clock.clone())
        .jitter(0.0)
        .beta(0.0)
        .without_spawner() // events are then told on the thread that released the locks
        .listener(move |e: Event| {
            let error = e.error.map(|e| e.to_string());
            log.lock().unwrap().push((e.kind, e.key.into(), error));
        })
}

fn kinds(log: &Log) -> Vec<(EventKind, String)> {
    let log = log.lock().unwrap();
    log.iter().map(|(k, key, _)| (*k, key.clone())).collect()
}

#[test]
fn evictions_and_expiries_are_told() {
    let (clock, log) = (ManualClock::new(), Log::default());
    let cache = listening(&clock, &log)
        .capacity(2)
        .shards(1)
        .ttl(secs(10))
        .build()
        .unwrap();
    cache.set("a:1", 1).unwrap();
    cache.set("a:2", 2).unwrap();
    cache.set("a:3", 3).unwrap(); // evicts one of the first two
    assert_eq!(log.lock().unwrap().len(), 1);
    assert_eq!(log.lock().unwrap()[0].0, EventKind::Evicted);
    clock.advance(secs(11));
    assert_eq!(
        cache
            .get_or_load("a:3", || Ok::<_, OriginDown>(Some(30)))
            .unwrap(),
        Some(30)
    );
    assert_eq!(kinds(&log)[1], (EventKind::Expired, "a:3".into()));
}

#[test]
fn a_failed_load_and_the_failsafe_it_activates_are_told_with_the_error() {
    let (clock, log) = (ManualClock::new(), Log::default());
    let cache = listening(&clock, &log)
        .ttl(secs(10))
        .max_stale(secs(60))
        .build()
        .unwrap();
    cache.set("p:1", 1).unwrap();
    clock.advance(secs(11));
    let v = cache
        .get_or_load("p:1", || Err::<Option<u32>, _>(OriginDown(7)))
        .unwrap();
    assert_eq!(v, Some(1), "fail-safe");
    let log = log.lock().unwrap().clone();
    let origin = Some(Error::Load(herdless::LoadError::new(OriginDown(7))).to_string());
    assert_eq!(
        log,
        vec![
            (EventKind::FailSafe, "p:1".into(), origin.clone()),
            (EventKind::LoadFailed, "p:1".into(), origin),
        ]
    );
}

#[test]
fn a_full_queue_drops_events_and_counts_them_without_waiting() {
    // A spawner that never runs its tasks: the drain never starts, the queue fills up.
    let parked: Arc<Mutex<Vec<BoxFuture>>> = Arc::default();
    let held = parked.clone();
    let told = Arc::new(Mutex::new(0));
    let t = told.clone();
    let cache: Cache<u32> = Cache::builder()
        .capacity(1)
        .shards(1)
        .event_queue(2)
        .spawner(move |task| held.lock().unwrap().push(task))
        .listener(move |_| *t.lock().unwrap() += 1)
        .build()
        .unwrap();
    for i in 0..6 {
        cache.set(&format!("k:{i}"), i).unwrap(); // each set from the second evicts one
    }
    assert_eq!(
        *told.lock().unwrap(),
        0,
        "the listener ran on the engine's thread"
    );
    assert_eq!(cache.metrics().total().events_dropped, 3);
    assert_eq!(parked.lock().unwrap().len(), 1, "one drain at a time");
    // The drain runs: the two queued events are told.
    let task = parked.lock().unwrap().pop().unwrap();
    futures_util::FutureExt::now_or_never(task).unwrap();
    assert_eq!(*told.lock().unwrap(), 2);
}

#[test]
fn a_panicking_listener_loses_its_event_only() {
    let calls = Arc::new(Mutex::new(0));
    let c = calls.clone();
    let cache: Cache<u32> = Cache::builder()
        .capacity(1)
        .shards(1)
        .without_spawner()
        .listener(move |_| {
            *c.lock().unwrap() += 1;
            panic!("listener bug");
        })
        .build()
        .unwrap();
    for i in 0..3 {
        cache.set(&format!("k:{i}"), i).unwrap();
    }
    assert_eq!(*calls.lock().unwrap(), 2);
    assert_eq!(cache.get("k:2"), Some(2));
}

#[test]
fn a_muted_listener_makes_no_event_and_counts_no_drop() {
    // A spawner that never runs its tasks: a queued event would stay queued, so a muted
    // engine's events would show as a spawned drain or as drops once the queue is full.
    let parked: Arc<Mutex<Vec<BoxFuture>>> = Arc::default();
    let held = parked.clone();
    let cache: Cache<u32> = Cache::builder()
        .capacity(1)
        .shards(1)
        .event_queue(1)
        .spawner(move |task| held.lock().unwrap().push(task))
        .listener(|_| {})
        .build()
        .unwrap();
    cache.set_listening(false);
    for i in 0..5 {
        cache.set(&format!("k:{i}"), i).unwrap(); // each set from the second evicts one
    }
    assert_eq!(cache.metrics().total().evictions, 4);
    assert_eq!(cache.metrics().total().events_dropped, 0);
    assert!(parked.lock().unwrap().is_empty(), "no drain was started");
    cache.set_listening(true);
    cache.set("k:5", 5).unwrap();
    cache.set("k:6", 6).unwrap();
    assert_eq!(
        parked.lock().unwrap().len(),
        1,
        "unmuted: an event was queued"
    );
    assert_eq!(
        cache.metrics().total().events_dropped,
        1,
        "the queue holds one"
    );
}
