//! Batch loads (`get_or_load_many_async`) on virtual time: one loader call for the true
//! misses of a request, each key single-flight with every other caller (single loads and
//! other batches), and every policy of a single load applied per key.

mod common;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Origin, OriginDown, Sim, Task, ms, secs, sleep};
use herdless::{Builder, Cache, Error, HitState, ManualClock};

type Answers = Vec<Result<Option<u64>, Error>>;
type Found = HashMap<String, Option<u64>>;
type BatchLoad = Pin<Box<dyn Future<Output = Result<Found, OriginDown>> + Send>>;

/// The value the origin holds for a key: its number times ten (`"p:7"` is 70).
fn value_of(key: &str) -> u64 {
    key.rsplit(':').next().unwrap().parse::<u64>().unwrap() * 10
}

fn key(n: usize) -> String {
    format!("p:{n}")
}

/// An origin answering batches: records the keys of every call and how often each key was
/// loaded; a call takes `took` of virtual time.
#[derive(Default)]
struct BatchOrigin {
    calls: Mutex<Vec<Vec<String>>>,
    per_key: Mutex<HashMap<String, usize>>,
    running: Arc<Origin>,
}

impl BatchOrigin {
    fn new() -> Arc<Self> {
        Arc::default()
    }

    fn calls(&self) -> Vec<Vec<String>> {
        self.calls.lock().unwrap().clone()
    }

    fn loads_of(&self, key: &str) -> usize {
        self.per_key.lock().unwrap().get(key).copied().unwrap_or(0)
    }

    /// A loader whose call answers `answer(keys)` after `took`.
    fn loader(
        self: &Arc<Self>,
        clock: &ManualClock,
        took: Duration,
        answer: impl Fn(&[String]) -> Result<Found, OriginDown> + Send + Sync + 'static,
    ) -> impl Fn(Vec<String>) -> BatchLoad + Send + Sync + 'static {
        let (origin, clock, answer) = (self.clone(), clock.clone(), Arc::new(answer));
        move |keys: Vec<String>| {
            let (origin, clock, answer) = (origin.clone(), clock.clone(), answer.clone());
            Box::pin(async move {
                origin.calls.lock().unwrap().push(keys.clone());
                for k in &keys {
                    *origin.per_key.lock().unwrap().entry(k.clone()).or_default() += 1;
                }
                let _running = origin.running.enter();
                sleep(&clock, took).await;
                answer(&keys)
            }) as BatchLoad
        }
    }

    /// A loader that answers every key with its value.
    fn values(
        self: &Arc<Self>,
        clock: &ManualClock,
        took: Duration,
    ) -> impl Fn(Vec<String>) -> BatchLoad + Send + Sync + 'static {
        self.loader(clock, took, |keys| {
            Ok(keys
                .iter()
                .map(|k| (k.clone(), Some(value_of(k))))
                .collect())
        })
    }
}

fn builder(sim: &Sim) -> Builder<u64> {
    sim.builder()
        .ttl(secs(60))
        .jitter(0.0)
        .beta(0.0)
        .wait_timeout(secs(30))
}

fn batch<L>(sim: &Sim, cache: &Cache<u64>, keys: Vec<String>, loader: L) -> Task<Answers>
where
    L: Fn(Vec<String>) -> BatchLoad + Send + Sync + 'static,
{
    let cache = cache.clone();
    sim.spawn(async move { cache.get_or_load_many_async(keys, loader).await })
}

fn single(
    sim: &Sim,
    cache: &Cache<u64>,
    key: &str,
    took: Duration,
    v: u64,
) -> Task<Result<Option<u64>, Error>> {
    let (cache, key) = (cache.clone(), key.to_string());
    let loader = Origin::new().loader(&sim.clock, took, Ok(Some(v)));
    sim.spawn(async move { cache.get_or_load_async(&key, loader).await })
}

fn values(answers: &Answers) -> Vec<Option<u64>> {
    answers
        .iter()
        .map(|a| a.as_ref().unwrap().to_owned())
        .collect()
}

#[test]
fn twenty_callers_of_fifty_keys_each_load_every_key_once_in_one_call_per_caller() {
    let mut sim = Sim::new();
    let cache = builder(&sim).build().unwrap();
    let origin = BatchOrigin::new();
    // Caller c asks for keys 5c .. 5c+50 (mod 100): neighbours share 45 keys, every key is
    // asked for by ten callers.
    let asks: Vec<Vec<String>> = (0..20)
        .map(|c| (0..50).map(|j| key((c * 5 + j) % 100)).collect())
        .collect();
    let callers: Vec<_> = asks
        .iter()
        .map(|keys| {
            batch(
                &sim,
                &cache,
                keys.clone(),
                origin.values(&sim.clock, ms(100)),
            )
        })
        .collect();
    sim.advance(ms(100));
    for (keys, caller) in asks.iter().zip(&callers) {
        let got = values(&caller.take());
        let want: Vec<_> = keys.iter().map(|k| Some(value_of(k))).collect();
        assert_eq!(got, want, "every caller gets the right value of every key");
    }
    for n in 0..100 {
        assert_eq!(origin.loads_of(&key(n)), 1, "{} loaded once", key(n));
    }
    let calls = origin.calls();
    assert!(calls.len() <= 20, "at most one loader call per caller");
    assert_eq!(
        calls[0].len(),
        50,
        "the first caller loads all its keys in one call"
    );
    let m = cache.metrics().total();
    assert_eq!(m.loads, 100);
    assert_eq!(m.batch_loads, calls.len() as u64);
    assert_eq!(herdless::driver::flights_in_progress(&cache), 0);
}

#[test]
fn duplicates_are_loaded_once_and_answered_in_the_request_order() {
    let mut sim = Sim::new();
    let cache = builder(&sim).build().unwrap();
    let origin = BatchOrigin::new();
    let keys = vec![key(2), key(1), key(2), key(3), key(1)];
    let call = batch(&sim, &cache, keys, origin.values(&sim.clock, ms(10)));
    sim.advance(ms(10));
    assert_eq!(
        values(&call.take()),
        vec![Some(20), Some(10), Some(20), Some(30), Some(10)]
    );
    assert_eq!(origin.calls(), vec![vec![key(2), key(1), key(3)]]);
}

#[test]
fn a_batch_of_stale_absent_fresh_cold_keys_and_one_a_single_caller_loads() {
    let mut sim = Sim::new();
    let cache = builder(&sim).ttl(secs(10)).grace(secs(5)).build().unwrap();
    let origin = BatchOrigin::new();
    cache.set(&key(1), 1).unwrap(); // stale after 11 s
    sim.advance(secs(11));
    cache.set(&key(2), 2).unwrap(); // fresh
    cache.set_absent(&key(3)).unwrap(); // a cached absence
    let loading = single(&sim, &cache, &key(4), ms(300), 44); // being loaded
    sim.run();
    let keys = vec![key(1), key(2), key(3), key(4), key(5)];
    let call = batch(&sim, &cache, keys, origin.values(&sim.clock, ms(100)));
    sim.run();
    assert_eq!(
        origin.calls(),
        vec![vec![key(5)], vec![key(1)]],
        "the cold key in the caller's call; the stale key's refresh on the spawner"
    );
    sim.advance(ms(300));
    assert_eq!(
        values(&call.take()),
        vec![Some(1), Some(2), None, Some(44), Some(50)],
        "stale served, fresh, absent, the single caller's value, loaded"
    );
    assert_eq!(loading.take().unwrap(), Some(44));
    let refreshed = cache.peek(&key(1)).unwrap();
    assert_eq!(
        (refreshed.value, refreshed.state),
        (Some(10), HitState::Fresh)
    );
    assert_eq!(cache.metrics().total().stale_served, 1);
}

#[test]
fn the_refreshes_of_a_batch_go_to_one_background_call() {
    let mut sim = Sim::new();
    let cache = builder(&sim).ttl(secs(10)).grace(secs(5)).build().unwrap();
    let origin = BatchOrigin::new();
    for n in 0..10 {
        cache.set(&key(n), n as u64).unwrap();
    }
    sim.advance(secs(11));
    let keys: Vec<_> = (0..10).map(key).collect();
    let call = batch(
        &sim,
        &cache,
        keys.clone(),
        origin.values(&sim.clock, ms(100)),
    );
    sim.run();
    assert!(call.is_done(), "stale keys are served without waiting");
    assert_eq!(values(&call.take()), (0..10).map(Some).collect::<Vec<_>>());
    sim.advance(ms(100));
    assert_eq!(
        origin.calls(),
        vec![keys],
        "one refresh call for the ten stale keys"
    );
    assert_eq!(cache.get(&key(3)), Some(30));
    assert_eq!(cache.metrics().total().refreshes, 10);
}

#[test]
fn a_key_set_or_invalidated_while_the_loader_runs_is_not_overwritten() {
    let mut sim = Sim::new();
    let cache = builder(&sim).build().unwrap();
    let origin = BatchOrigin::new();
    let keys = vec![key(1), key(2), key(3)];
    let call = batch(&sim, &cache, keys, origin.values(&sim.clock, secs(1)));
    sim.advance(ms(500));
    cache.set(&key(1), 111).unwrap();
    cache.invalidate(&key(2)).unwrap();
    sim.advance(ms(500));
    assert_eq!(
        values(&call.take()),
        vec![Some(10), Some(20), Some(30)],
        "the caller gets what its loader answered"
    );
    assert_eq!(cache.get(&key(1)), Some(111), "the set value is kept");
    assert_eq!(
        cache.peek(&key(2)),
        None,
        "the invalidated key is not stored"
    );
    assert_eq!(cache.get(&key(3)), Some(30));
}

#[test]
fn keys_the_loader_omits_or_marks_absent_are_negative_cached() {
    let mut sim = Sim::new();
    let cache = builder(&sim).negative_ttl(secs(5)).build().unwrap();
    let origin = BatchOrigin::new();
    let loader = origin.loader(&sim.clock, ms(10), |keys| {
        // Key 1 absent, key 2 omitted, key 3 found, and a key nobody asked for.
        Ok(HashMap::from([
            (keys[0].clone(), None),
            (keys[2].clone(), Some(3)),
            (key(99), Some(99)),
        ]))
    });
    let call = batch(&sim, &cache, vec![key(1), key(2), key(3)], loader);
    sim.advance(ms(10));
    assert_eq!(values(&call.take()), vec![None, None, Some(3)]);
    for k in [key(1), key(2)] {
        let seen = cache.peek(&k).expect("the absence is cached");
        assert_eq!(seen.value, None);
    }
    assert!(
        cache.peek(&key(99)).is_none(),
        "an answer nobody asked for is ignored"
    );
    let again = batch(
        &sim,
        &cache,
        vec![key(1), key(2)],
        origin.values(&sim.clock, ms(10)),
    );
    sim.run();
    assert_eq!(values(&again.take()), vec![None, None]);
    assert_eq!(
        origin.calls().len(),
        1,
        "absences are hits until negative_ttl"
    );
    assert_eq!(cache.metrics().total().negative_hits, 2);
}

#[test]
fn a_failing_loader_fails_every_missing_key_and_its_waiters_with_its_error() {
    let mut sim = Sim::new();
    let cache = builder(&sim).max_stale(secs(3_600)).build().unwrap();
    let origin = BatchOrigin::new();
    cache.set(&key(1), 1).unwrap(); // kept for fail-safe past its TTL
    sim.advance(secs(61));
    cache.set(&key(2), 2).unwrap(); // fresh: a hit
    let loader = origin.loader(&sim.clock, ms(100), |_| Err(OriginDown(7)));
    let call = batch(&sim, &cache, vec![key(1), key(2), key(3)], loader);
    sim.run();
    let waiter = single(&sim, &cache, &key(3), ms(1), 0);
    sim.advance(ms(100));
    let answers = call.take();
    assert_eq!(answers[0].as_ref().unwrap(), &Some(1), "fail-safe value");
    assert_eq!(answers[1].as_ref().unwrap(), &Some(2), "a hit");
    match &answers[2] {
        Err(Error::Load(e)) => assert_eq!(e.downcast_ref::<OriginDown>(), Some(&OriginDown(7))),
        other => panic!("key 3 answered {other:?}"),
    }
    assert!(
        matches!(waiter.take(), Err(Error::Load(_))),
        "its waiter shares the error"
    );
    assert_eq!(cache.peek(&key(3)), None, "errors are not cached");
    let again = batch(
        &sim,
        &cache,
        vec![key(3)],
        origin.values(&sim.clock, ms(10)),
    );
    sim.advance(ms(10));
    assert_eq!(values(&again.take()), vec![Some(30)]);
    assert_eq!(cache.metrics().total().load_errors, 2);
}

#[test]
fn a_loader_hung_past_the_hard_timeout_is_dropped_and_its_keys_time_out() {
    let mut sim = Sim::new();
    let cache = builder(&sim).hard_timeout(secs(5)).build().unwrap();
    let origin = BatchOrigin::new();
    let call = batch(
        &sim,
        &cache,
        vec![key(1), key(2)],
        origin.values(&sim.clock, secs(30)),
    );
    sim.run();
    let waiter = single(&sim, &cache, &key(2), ms(1), 0);
    sim.advance(secs(5));
    for a in call.take() {
        assert!(matches!(a, Err(Error::LoadTimeout { after }) if after == secs(5)));
    }
    assert!(matches!(waiter.take(), Err(Error::LoadTimeout { .. })));
    assert_eq!(origin.running.running(), 0, "the hung call was dropped");
    assert_eq!(herdless::driver::flights_in_progress(&cache), 0);
    assert_eq!(cache.metrics().total().load_timeouts, 2);
}

#[test]
fn a_key_whose_leader_goes_away_is_loaded_by_the_batch_in_a_second_call() {
    let mut sim = Sim::new();
    let cache = builder(&sim).build().unwrap();
    let origin = BatchOrigin::new();
    let herdless::Lookup::Lead(guard) = cache.lookup(&key(2)).unwrap() else {
        panic!("the first caller leads")
    };
    let call = batch(
        &sim,
        &cache,
        vec![key(1), key(2)],
        origin.values(&sim.clock, ms(10)),
    );
    sim.advance(ms(10));
    assert!(!call.is_done(), "key 2 is waited for");
    guard.abandon();
    sim.advance(ms(10));
    assert_eq!(values(&call.take()), vec![Some(10), Some(20)]);
    assert_eq!(origin.calls(), vec![vec![key(1)], vec![key(2)]]);
}

#[test]
fn max_batch_splits_the_misses_into_several_calls() {
    let mut sim = Sim::new();
    let cache = builder(&sim).max_batch(10).build().unwrap();
    let origin = BatchOrigin::new();
    let keys: Vec<_> = (0..25).map(key).collect();
    let call = batch(&sim, &cache, keys, origin.values(&sim.clock, ms(10)));
    sim.advance(ms(30));
    assert_eq!(
        values(&call.take()),
        (0..25).map(|n| Some(n * 10)).collect::<Vec<_>>()
    );
    let sizes: Vec<_> = origin.calls().iter().map(Vec::len).collect();
    assert_eq!(sizes, vec![10, 10, 5]);
    assert_eq!(cache.metrics().total().batch_loads, 3);
}

#[test]
fn a_loader_call_takes_one_unit_of_the_origin_budget() {
    let mut sim = Sim::new();
    let cache = builder(&sim).origin_budget(2).build().unwrap();
    let origin = BatchOrigin::new();
    let call = batch(
        &sim,
        &cache,
        (0..20).map(key).collect(),
        origin.values(&sim.clock, ms(10)),
    );
    sim.run();
    assert_eq!(cache.budget_in_use(), 1, "twenty keys, one unit");
    sim.advance(ms(10));
    assert_eq!(call.take().len(), 20);
    assert_eq!(cache.budget_in_use(), 0);
}

#[test]
fn batch_loads_are_counted_per_namespace() {
    let mut sim = Sim::new();
    let cache = builder(&sim).build().unwrap();
    let origin = BatchOrigin::new();
    let keys = vec!["a:1".to_string(), "a:2".to_string(), "b:3".to_string()];
    let call = batch(&sim, &cache, keys, origin.values(&sim.clock, ms(10)));
    sim.advance(ms(10));
    assert_eq!(values(&call.take()), vec![Some(10), Some(20), Some(30)]);
    let m = cache.metrics();
    let (a, b) = (
        &m.namespace("a").unwrap().counters,
        &m.namespace("b").unwrap().counters,
    );
    assert_eq!((a.batch_loads, a.loads), (1, 2));
    assert_eq!((b.batch_loads, b.loads), (1, 1));
}

#[test]
fn a_bad_key_is_answered_its_error_and_the_others_load() {
    let mut sim = Sim::new();
    let cache = builder(&sim).max_key_len(8).build().unwrap();
    let origin = BatchOrigin::new();
    let keys = vec![String::new(), key(1), "p:123456789".to_string()];
    let call = batch(&sim, &cache, keys, origin.values(&sim.clock, ms(10)));
    sim.advance(ms(10));
    let answers = call.take();
    assert!(matches!(answers[0], Err(Error::EmptyKey)));
    assert_eq!(answers[1].as_ref().unwrap(), &Some(10));
    assert!(matches!(answers[2], Err(Error::KeyTooLong { .. })));
    assert_eq!(origin.calls(), vec![vec![key(1)]]);
}

#[test]
fn a_cancelled_batch_hands_its_keys_over_to_their_waiters() {
    let mut sim = Sim::new();
    let cache = builder(&sim).build().unwrap();
    let origin = BatchOrigin::new();
    let call = batch(
        &sim,
        &cache,
        vec![key(1)],
        origin.values(&sim.clock, secs(10)),
    );
    sim.run();
    let waiter = single(&sim, &cache, &key(1), ms(10), 7);
    sim.run();
    call.cancel();
    sim.advance(ms(10));
    assert_eq!(
        waiter.take().unwrap(),
        Some(7),
        "the waiter took the load over"
    );
    assert_eq!(origin.running.running(), 0);
}

#[test]
fn xfetch_early_refreshes_of_a_batch_go_to_one_background_call() {
    let mut sim = Sim::new();
    // A huge beta: every read of a key whose load took 1 s refreshes it early.
    let cache = builder(&sim).ttl(secs(10)).beta(1e9).build().unwrap();
    let origin = BatchOrigin::new();
    let keys: Vec<_> = (0..5).map(key).collect();
    let first = batch(
        &sim,
        &cache,
        keys.clone(),
        origin.values(&sim.clock, secs(1)),
    );
    sim.advance(secs(1));
    assert_eq!(first.take().len(), 5);
    sim.advance(secs(2));
    let call = batch(
        &sim,
        &cache,
        keys.clone(),
        origin.values(&sim.clock, secs(1)),
    );
    sim.run();
    assert!(call.is_done(), "fresh hits are served without waiting");
    sim.advance(secs(1));
    assert_eq!(
        origin.calls(),
        vec![keys.clone(), keys],
        "one early refresh call"
    );
    assert_eq!(cache.metrics().total().early_refreshes, 5);
}

#[test]
fn chunks_of_allocates_each_run_to_its_own_length() {
    use herdless::driver::chunks_of;
    let runs = chunks_of((0..2_500).collect::<Vec<u32>>(), 1_000);
    let lens: Vec<_> = runs.iter().map(Vec::len).collect();
    assert_eq!(lens, [1_000, 1_000, 500]);
    assert!(runs.iter().all(|r| r.capacity() == r.len()));
    assert_eq!(runs.concat(), (0..2_500).collect::<Vec<u32>>());
    assert_eq!(chunks_of(Vec::<u32>::new(), 10).len(), 0);
    assert_eq!(chunks_of(vec![1, 2], 0).len(), 2, "max 0 counts as 1");
}
