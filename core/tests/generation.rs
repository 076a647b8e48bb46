//! The write generation: every kind of write moves it, reads do not, and `steady_until`
//! and `credit_hits` agree with what the engine itself would answer and count.

use std::time::Duration;

use herdless::{Cache, ManualClock};

fn cache(clock: &ManualClock) -> Cache<u32> {
    Cache::builder()
        .count_writes(true)
        .ttl(Duration::from_secs(10))
        .capacity(4)
        .shards(1)
        .clock(clock.clone())
        .build()
        .expect("valid options")
}

#[test]
fn off_unless_asked_for() {
    let c = Cache::<u32>::new();
    assert_eq!(c.generation(), None);
}

#[test]
fn every_write_moves_it_and_reads_do_not() {
    let clock = ManualClock::new();
    let c = cache(&clock);
    let mut last = c.generation().expect("counting");
    let mut moved = |c: &Cache<u32>, what: &str| {
        let now = c.generation().expect("counting");
        assert!(now > last, "{what} did not move the generation");
        last = now;
    };
    c.set("a:1", 1).unwrap();
    moved(&c, "set");
    c.set_with_ttl("a:2", 2, Duration::from_secs(1)).unwrap();
    moved(&c, "set_with_ttl");
    let before = c.generation();
    assert_eq!(c.get("a:1"), Some(1));
    assert!(c.peek("a:1").is_some());
    assert!(c.steady_until("a:1").is_some());
    assert_eq!(c.generation(), before, "reads moved it");
    c.invalidate("a:1").unwrap();
    moved(&c, "invalidate");
    c.bump("a");
    moved(&c, "bump");
    c.invalidate_tag("t").unwrap();
    moved(&c, "invalidate_tag");
    c.expire_tag("t").unwrap();
    moved(&c, "expire_tag");
    c.clear();
    moved(&c, "clear");
    // A finished load stores.
    let v = c.get_or_load("a:3", || Ok::<_, std::io::Error>(Some(3)));
    assert_eq!(v.unwrap(), Some(3));
    moved(&c, "a finished load");
}

#[test]
fn steady_until_is_the_fresh_deadline_at_most_and_credits_count_as_hits() {
    let clock = ManualClock::new();
    let c = cache(&clock);
    c.set("a:1", 1).unwrap();
    let until = c.steady_until("a:1").expect("fresh");
    let peek = c.peek("a:1").unwrap();
    assert!(until <= peek.fresh_until.as_nanos() as u64);
    assert!(c.now_fast_nanos() < until);
    assert_eq!(c.steady_until("a:2"), None);
    c.set_absent("a:3").unwrap();
    assert_eq!(
        c.steady_until("a:3"),
        None,
        "an absence is not kept outside"
    );
    clock.advance(Duration::from_secs(11));
    assert_eq!(c.steady_until("a:1"), None, "expired");
    let hits = |c: &Cache<u32>| {
        c.metrics()
            .namespaces
            .iter()
            .map(|n| n.counters.hits)
            .sum::<u64>()
    };
    let before = hits(&c);
    c.credit_hits("a:1", 5);
    assert_eq!(hits(&c), before + 5);
}

#[test]
fn an_eviction_moves_it() {
    let clock = ManualClock::new();
    let c = cache(&clock);
    for i in 0..4 {
        c.set(&format!("a:{i}"), i).unwrap();
    }
    let g = c.generation();
    c.set("a:9", 9).unwrap();
    assert!(c.generation() > g);
}
