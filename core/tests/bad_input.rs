//! Bad input gives typed errors, never a panic and never a silently broken cache: keys that
//! are empty or too long, options out of range or contradicting each other, values too large
//! to store.

mod common;

use std::time::Duration;

use common::{Origin, Sim, secs};
use herdless::{Builder, Cache, ConfigError, Error, Lookup};

/// An option setter, as a test case.
type Set<T> = fn(Builder<u32>, T) -> Builder<u32>;

fn build(f: impl FnOnce(Builder<u32>) -> Builder<u32>) -> Result<Cache<u32>, ConfigError> {
    f(Sim::new().builder()).build()
}

#[test]
fn empty_and_oversized_keys_are_refused_by_every_call() {
    let sim = Sim::new();
    let cache: Cache<u32> = sim.builder().max_key_len(8).build().unwrap();
    let origin = Origin::new();
    let too_long = "ns:abcdef"; // 9 bytes
    for (key, want) in [
        ("", "EmptyKey"),
        (too_long, "KeyTooLong"),
        ("ns:é1234", "KeyTooLong"), // 9 bytes in UTF-8, 8 chars
    ] {
        let check = |r: Result<(), Error>, call: &str| match (r, want) {
            (Err(Error::EmptyKey), "EmptyKey") => {}
            (Err(Error::KeyTooLong { len: 9, max: 8 }), "KeyTooLong") => {}
            (other, _) => panic!("{call}({key:?}) answered {other:?}, expected {want}"),
        };
        check(cache.lookup(key).map(drop), "lookup");
        check(
            cache
                .get_or_load(key, origin.instant(Ok(Some(1))))
                .map(drop),
            "get_or_load",
        );
        check(cache.set(key, 1), "set");
        check(cache.set_with_ttl(key, 1, secs(1)), "set_with_ttl");
        check(cache.set_absent(key), "set_absent");
        check(cache.invalidate(key).map(drop), "invalidate");
        assert_eq!(cache.get(key), None);
    }
    assert_eq!(origin.calls(), 0, "a refused key never reaches the origin");
    assert_eq!(cache.metrics().entries, 0);
    // The limit itself is fine.
    cache.set("ns:abcde", 1).unwrap();
    assert_eq!(cache.get("ns:abcde"), Some(1));
    // The default limit is 1,024 bytes.
    let default: Cache<u32> = Sim::new().builder().build().unwrap();
    let long = "x".repeat(1_025);
    assert!(matches!(
        default.set(&long, 1),
        Err(Error::KeyTooLong {
            len: 1_025,
            max: 1_024
        })
    ));
    default.set(&long[..1_024], 1).unwrap();
}

#[test]
fn zero_durations_are_refused() {
    let zero = Duration::ZERO;
    let cases: [(&str, Set<Duration>); 6] = [
        ("ttl", Builder::ttl),
        ("negative_ttl", Builder::negative_ttl),
        ("wait_timeout", Builder::wait_timeout),
        ("max_stale", Builder::max_stale),
        ("soft_timeout", Builder::soft_timeout),
        ("hard_timeout", Builder::hard_timeout),
    ];
    for (option, set) in cases {
        assert_eq!(
            build(|b| set(b, zero)).unwrap_err(),
            ConfigError::ZeroDuration { option },
        );
    }
    // A zero grace or backoff is a valid choice: "off".
    build(|b| b.grace(zero).failsafe_backoff(zero)).unwrap();
    let cache = build(|b| b).unwrap();
    assert!(matches!(
        cache.set_with_ttl("k", 1, zero),
        Err(Error::ZeroTtl)
    ));
}

#[test]
fn jitter_must_be_in_zero_to_one() {
    for j in [1.0, 1.5, -0.1, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        match build(|b| b.jitter(j)) {
            Err(ConfigError::JitterOutOfRange(got)) => {
                assert!(got.to_bits() == j.to_bits(), "{got} for {j}")
            }
            other => panic!("jitter {j} gave {other:?}"),
        }
    }
    for j in [0.0, 0.25, 0.999] {
        build(|b| b.jitter(j)).unwrap();
    }
}

#[test]
fn beta_must_be_finite_and_not_negative() {
    for beta in [-0.1, -1.0, f64::NAN, f64::INFINITY] {
        assert!(
            matches!(build(|b| b.beta(beta)), Err(ConfigError::InvalidBeta(_))),
            "beta {beta}"
        );
    }
    for beta in [0.0, 1.0, 4.0] {
        build(|b| b.beta(beta)).unwrap();
    }
}

#[test]
fn zero_counts_are_refused() {
    let cases: [(&str, Set<usize>); 5] = [
        ("capacity", |b, n| b.capacity(n as u64)),
        ("max_flights", Builder::max_flights),
        ("max_key_len", Builder::max_key_len),
        ("max_namespaces", Builder::max_namespaces),
        ("origin_budget", Builder::origin_budget),
    ];
    for (option, set) in cases {
        assert_eq!(
            build(|b| set(b, 0)).unwrap_err(),
            ConfigError::Zero { option }
        );
        build(|b| set(b, 1)).unwrap();
    }
}

#[test]
fn contradicting_options_are_refused() {
    let soft_not_below_hard = [(secs(5), secs(5)), (secs(6), secs(5))];
    for (soft, hard) in soft_not_below_hard {
        assert!(matches!(
            build(|b| b.soft_timeout(soft).hard_timeout(hard)),
            Err(ConfigError::Inconsistent { .. })
        ));
    }
    build(|b| b.soft_timeout(secs(1)).hard_timeout(secs(5))).unwrap();
    assert!(matches!(
        build(|b| b.grace(secs(60)).max_stale(secs(30))),
        Err(ConfigError::Inconsistent { .. })
    ));
    build(|b| b.grace(secs(60)).max_stale(secs(60))).unwrap();
}

#[test]
fn a_value_heavier_than_a_shard_is_refused_and_the_old_entry_kept() {
    let sim = Sim::new();
    let cache: Cache<Vec<u8>> = sim
        .builder()
        .capacity(1_000)
        .shards(1)
        .weigher(|_, v: &Vec<u8>| v.len() as u64)
        .build()
        .unwrap();
    cache.set("blob:1", vec![0; 10]).unwrap();
    match cache.set("blob:1", vec![0; 1_001]) {
        Err(Error::ValueTooLarge {
            weight: 1_001,
            max: 1_000,
        }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(cache.get("blob:1").map(|v| v.len()), Some(10));
    // A loaded value that is too large is answered but not stored.
    let Lookup::Lead(guard) = cache.lookup("blob:2").unwrap() else {
        panic!("leads")
    };
    let v = guard.complete(Ok(Some(vec![0; 5_000]))).unwrap();
    assert_eq!(v.map(|v| v.len()), Some(5_000));
    assert_eq!(cache.get("blob:2"), None);
    assert_eq!(cache.metrics().weight, 10);
}

#[test]
fn huge_values_mean_forever_and_never_panic() {
    let sim = Sim::new();
    let cache: Cache<u32> = sim
        .builder()
        .capacity(u64::MAX)
        .ttl(Duration::MAX)
        .grace(Duration::MAX)
        .max_stale(Duration::MAX)
        .wait_timeout(Duration::MAX)
        .soft_timeout(Duration::MAX - secs(1))
        .hard_timeout(Duration::MAX)
        .negative_ttl(Duration::MAX)
        .failsafe_backoff(Duration::MAX)
        .build()
        .unwrap();
    let origin = Origin::new();
    cache.set("a:1", 1).unwrap();
    cache.set_with_ttl("a:2", 2, Duration::MAX).unwrap();
    cache.set_absent("a:3").unwrap();
    sim.clock.set(secs(10 * 365 * 24 * 3_600));
    assert_eq!((cache.get("a:1"), cache.get("a:2")), (Some(1), Some(2)));
    assert_eq!(
        cache
            .get_or_load("a:3", origin.instant(Ok(Some(3))))
            .unwrap(),
        None
    );
    let Lookup::Lead(guard) = cache.lookup("a:4").unwrap() else {
        panic!("leads")
    };
    let Lookup::Wait(waiter) = cache.lookup("a:4").unwrap() else {
        panic!("waits")
    };
    assert_eq!(guard.complete(Ok(Some(4))).unwrap(), Some(4));
    assert_eq!(waiter.wait().unwrap(), herdless::Waited::Loaded(Some(4)));
    assert_eq!(cache.get("a:4"), Some(4));
    assert_eq!(origin.calls(), 0);
    let v = cache
        .get_or_load("a:5", origin.instant(Ok(Some(5))))
        .unwrap();
    assert_eq!((v, origin.calls()), (Some(5), 1));
}
