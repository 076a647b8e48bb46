//! `peek`: an entry as it is, without side effects. It tells a cached absence from a miss,
//! gives the entry's state, age, expiry and measured load duration, and touches nothing: no
//! counter, no hot-key sample, no eviction mark, no refresh.

mod common;

use common::{Origin, Sim, ms, secs};
use herdless::{Cache, HitState, ManualClock};

const KEY: &str = "users:1";

fn cache(clock: &ManualClock) -> Cache<u32> {
    Cache::builder()
        .clock(clock.clone())
        .ttl(secs(60))
        .grace(secs(30))
        .max_stale(secs(600))
        .jitter(0.0)
        .build()
        .unwrap()
}

#[test]
fn a_miss_and_a_cached_absence_are_told_apart() {
    let clock = ManualClock::new();
    let cache = cache(&clock);
    assert!(cache.peek(KEY).is_none(), "never stored: a miss");
    cache.set_absent(KEY).unwrap();
    let seen = cache.peek(KEY).expect("a cached absence is an entry");
    assert_eq!(seen.value, None);
    assert_eq!(seen.state, HitState::Fresh);
    // An absence lives its negative_ttl (10 s by default), with no grace.
    assert_eq!(seen.fresh_until, secs(10));
    assert_eq!(seen.stale_until, secs(10));
    clock.set(secs(10));
    assert!(cache.peek(KEY).is_none(), "an expired absence is a miss");
    assert!(cache.peek("").is_none(), "a bad key is a miss, not a panic");
}

#[test]
fn state_age_and_expiry_follow_the_entry_through_its_life() {
    let clock = ManualClock::new();
    let cache = cache(&clock);
    clock.set(secs(5));
    cache.set(KEY, 7).unwrap();
    clock.set(secs(20));
    let seen = cache.peek(KEY).unwrap();
    assert_eq!(seen.value, Some(7));
    assert_eq!(seen.state, HitState::Fresh);
    assert_eq!(seen.age, secs(15));
    assert_eq!(seen.fresh_until, secs(65));
    assert_eq!(seen.stale_until, secs(95));
    assert_eq!(seen.load_duration, secs(0), "written, never loaded");
    clock.set(secs(65));
    assert_eq!(cache.peek(KEY).unwrap().state, HitState::Stale);
    clock.set(secs(95));
    assert_eq!(cache.peek(KEY).unwrap().state, HitState::FailSafe);
    clock.set(secs(665));
    assert!(cache.peek(KEY).is_none(), "past max_stale nothing is kept");
}

#[test]
fn the_measured_load_duration_is_reported_and_kept_across_a_set() {
    let mut sim = Sim::new();
    let cache: Cache<u32> = sim.builder().jitter(0.0).build().unwrap();
    let origin = Origin::new();
    let load = origin.loader(&sim.clock, ms(250), Ok(Some(1)));
    let c = cache.clone();
    let task = sim.spawn(async move { c.get_or_load_async(KEY, load).await });
    sim.advance(ms(250));
    assert_eq!(task.take().unwrap(), Some(1));
    let seen = cache.peek(KEY).unwrap();
    assert_eq!(seen.load_duration, ms(250));
    assert_eq!(seen.age, secs(0));
    cache.set(KEY, 2).unwrap();
    assert_eq!(cache.peek(KEY).unwrap().load_duration, ms(250));
}

#[test]
fn a_bumped_namespace_peeks_as_a_miss() {
    let clock = ManualClock::new();
    let cache = cache(&clock);
    cache.set(KEY, 1).unwrap();
    cache.bump("users");
    assert!(cache.peek(KEY).is_none());
}

#[test]
fn peeking_counts_nothing_samples_nothing_and_refreshes_nothing() {
    let clock = ManualClock::new();
    let cache: Cache<u32> = Cache::builder()
        .clock(clock.clone())
        .ttl(secs(60))
        .grace(secs(30))
        .jitter(0.0)
        .hot_key_sample(1)
        .build()
        .unwrap();
    cache.set(KEY, 1).unwrap();
    let before = cache.metrics();
    clock.set(secs(70)); // stale: a lookup would start a refresh
    for _ in 0..100 {
        assert_eq!(cache.peek(KEY).unwrap().state, HitState::Stale);
        assert!(cache.peek("users:2").is_none());
    }
    assert_eq!(
        cache.metrics().namespaces,
        before.namespaces,
        "a counter moved"
    );
    assert!(
        cache.hot_keys(10).is_empty(),
        "peeks were sampled as accesses"
    );
    assert_eq!(
        herdless::driver::flights_in_progress(&cache),
        0,
        "a refresh started"
    );
    // A read does all three.
    assert_eq!(cache.get(KEY), Some(1));
    assert_ne!(cache.metrics().namespaces, before.namespaces);
    assert!(!cache.hot_keys(10).is_empty());
}

#[test]
fn peeking_does_not_save_an_entry_from_eviction() {
    // One shard holding two entries: SIEVE evicts the oldest entry not used since it was
    // stored. A read marks it used; a peek must not.
    let build = || -> Cache<u32> { Cache::builder().capacity(2).shards(1).build().unwrap() };
    let peeked = build();
    peeked.set("n:a", 1).unwrap();
    peeked.set("n:b", 2).unwrap();
    assert!(peeked.peek("n:a").is_some());
    peeked.set("n:c", 3).unwrap();
    assert!(peeked.peek("n:a").is_none(), "the peeked entry was kept");
    assert!(peeked.peek("n:b").is_some());

    let read = build();
    read.set("n:a", 1).unwrap();
    read.set("n:b", 2).unwrap();
    assert_eq!(read.get("n:a"), Some(1));
    read.set("n:c", 3).unwrap();
    assert!(read.peek("n:a").is_some(), "a read entry is spared once");
    assert!(read.peek("n:b").is_none());
}

#[test]
fn the_same_seed_jitters_the_same_way() {
    let expiry = |seed: u64| {
        let clock = ManualClock::new();
        let cache: Cache<u32> = Cache::builder()
            .clock(clock)
            .ttl(secs(100))
            .jitter(0.5)
            .seed(seed)
            .build()
            .unwrap();
        (0..8)
            .map(|i| {
                let key = format!("n:{i}");
                cache.set(&key, i).unwrap();
                cache.peek(&key).unwrap().fresh_until
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(expiry(7), expiry(7));
    assert_ne!(expiry(7), expiry(8));
    let spread = expiry(7);
    assert!(spread.iter().all(|&t| t >= secs(75) && t <= secs(125)));
    assert!(spread.windows(2).any(|w| w[0] != w[1]), "no jitter at all");
}
