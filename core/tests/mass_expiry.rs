//! Mass expiry (1,000 keys written together expire together): a restart or a batch
//! import writes many keys at one instant; without jitter they all expire at one instant and
//! the origin takes 1,000 loads at once. With TTL 300 s and jitter 0.25 every key's TTL is
//! `300 s * (1 + 0.25 * (u - 0.5))`, i.e. within [262.5 s, 337.5 s], spread over that band.

mod common;

use std::time::Duration;

use common::{Origin, Sim, secs};
use herdless::Cache;

const KEYS: usize = 1_000;

/// Writes `KEYS` keys at t = 0 (half loaded, half `set`), then probes them with `get` as the
/// virtual clock moves, and answers each key's observed expiry (within `step`).
fn expiries(jitter: f64, step: Duration) -> Vec<Duration> {
    let sim = Sim::with_seed(7);
    let cache: Cache<u32> = sim
        .builder()
        .capacity(10_000)
        .ttl(secs(300))
        .jitter(jitter)
        .build()
        .unwrap();
    let origin = Origin::new();
    let keys: Vec<String> = (0..KEYS).map(|i| format!("catalog:item:{i}")).collect();
    for (i, k) in keys.iter().enumerate() {
        if i % 2 == 0 {
            let v = cache.get_or_load(k, origin.instant(Ok(Some(1)))).unwrap();
            assert_eq!(v, Some(1));
        } else {
            cache.set(k, 1).unwrap();
        }
    }
    assert_eq!(origin.calls(), KEYS / 2);
    let mut expired: Vec<Option<Duration>> = vec![None; KEYS];
    let mut t = Duration::ZERO;
    while expired.iter().any(Option::is_none) {
        assert!(t < secs(1_000), "some key never expired");
        for (k, e) in keys.iter().zip(expired.iter_mut()) {
            if e.is_none() && cache.get(k).is_none() {
                *e = Some(t);
            }
        }
        // Nothing may expire early, so jump from t = 0 to just below the band.
        t = if t.is_zero() { secs(250) } else { t + step };
        sim.clock.set(t);
    }
    expired.into_iter().map(Option::unwrap).collect()
}

#[test]
fn a_thousand_keys_written_together_expire_spread_over_the_jitter_band() {
    let step = Duration::from_millis(250);
    let e = expiries(0.25, step);
    let (lo, hi) = herdless::jitter::bounds(secs(300), 0.25);
    assert_eq!(
        (lo, hi),
        (
            Duration::from_millis(262_500),
            Duration::from_millis(337_500)
        )
    );
    let (first, last) = (*e.iter().min().unwrap(), *e.iter().max().unwrap());
    // A key seen expired at t expired in (t - step, t].
    assert!(first > lo, "a key expired at {first:?}, before {lo:?}");
    assert!(last <= hi + step, "a key lived until {last:?}, past {hi:?}");
    // Also within the wider reading of "±25 %" (a half-width): [225 s, 375 s].
    assert!(first >= secs(225) && last <= secs(375));
    // Spread: the band is covered end to end...
    assert!(first < lo + secs(5), "earliest expiry {first:?} too late");
    assert!(last > hi - secs(5), "latest expiry {last:?} too early");
    // ...and no 10 s window holds more than a fifth of the keys (uniform: 13 %).
    let mut sorted = e.clone();
    sorted.sort();
    let crowd = (0..sorted.len())
        .map(|i| {
            sorted[i..]
                .iter()
                .take_while(|&&x| x < sorted[i] + secs(10))
                .count()
        })
        .max()
        .unwrap();
    assert!(
        crowd <= KEYS / 5,
        "{crowd} keys expired within one 10 s window"
    );
}

#[test]
fn without_jitter_they_all_expire_at_the_same_instant() {
    // The failure jitter prevents, shown on the same probe: one instant takes every key.
    let e = expiries(0.0, Duration::from_millis(250));
    assert!(e.iter().all(|&x| x == secs(300)), "expected all at 300 s");
}
