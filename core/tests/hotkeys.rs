//! The hot-key tracker: the top-K follows real traffic (hits sampled, misses of tracked keys
//! always), and an export read back by a new instance gives the same keys, hottest first.

use std::time::Duration;

use herdless::{Cache, ManualClock};

fn cache() -> Cache<u64> {
    Cache::builder()
        .clock(ManualClock::new())
        .ttl(Duration::from_secs(600))
        .hot_keys(64)
        .hot_key_sample(8)
        .build()
        .unwrap()
}

#[test]
fn the_top_keys_follow_traffic_and_survive_export_and_import() {
    let c = cache();
    for i in 0..2000u64 {
        c.set(&format!("cold:{i}"), i).unwrap();
    }
    for i in 0..10u64 {
        c.set(&format!("hot:{i}"), i).unwrap();
    }
    // hot:i is read (1,000 - 90 i) times; 2,000 cold keys are read once each.
    for round in 0..1000u64 {
        for i in 0..10u64 {
            if round < 1000 - 90 * i {
                assert_eq!(c.get(&format!("hot:{i}")), Some(i));
            }
        }
        for j in 0..2 {
            let _ = c.get(&format!("cold:{}", round * 2 + j));
        }
    }
    let top = c.hot_keys(10);
    let names: Vec<&str> = top.iter().map(|k| k.key.as_str()).collect();
    assert_eq!(
        names,
        (0..10).map(|i| format!("hot:{i}")).collect::<Vec<_>>(),
        "{top:?}"
    );
    // Counts are estimates from 1-in-8 sampling (Space-Saving may add what a slot held).
    let hot0 = top[0].count as i64;
    assert!((hot0 - 1000).abs() <= 200, "{hot0}");

    let json = c.export_hot_keys(5);
    assert!(json.starts_with("[{\"key\":\"hot:0\",\"count\":"), "{json}");
    let next = cache();
    let imported = next.import_hot_keys(&json).unwrap();
    assert_eq!(imported.len(), 5);
    assert_eq!(imported[0].key, "hot:0");
    assert_eq!(
        next.hot_keys(5),
        imported,
        "the new instance tracks them too"
    );
    assert!(next.import_hot_keys("[{\"key\":1}]").is_err());
}

#[test]
fn misses_are_always_counted_and_the_tracker_can_be_off() {
    let c = cache();
    for _ in 0..5 {
        assert_eq!(c.get("users:404"), None);
    }
    let top = c.hot_keys(1);
    assert_eq!((top[0].key.as_str(), top[0].misses), ("users:404", 5));
    let off: Cache<u64> = Cache::builder()
        .clock(ManualClock::new())
        .hot_keys(0)
        .build()
        .unwrap();
    let _ = off.get("a:1");
    assert!(off.hot_keys(10).is_empty());
    assert_eq!(off.export_hot_keys(10), "[]");
}
