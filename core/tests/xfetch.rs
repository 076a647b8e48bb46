//! XFetch (probabilistic early expiration, Vattani et al., VLDB 2015): a hot key is
//! refreshed by one lucky reader shortly before it expires, so under steady load it never
//! expires at all: no reader ever misses or waits, and the origin sees about one call per
//! TTL.

mod common;

use std::time::Duration;

use common::{Origin, Sim, ms, secs};
use futures_util::FutureExt;
use herdless::Cache;

const KEY: &str = "feed:v1:home";

/// Reads `KEY` once per virtual millisecond (1,000 reads per second) for `run`, each read
/// answered at once; returns the cache and the origin.
fn hot_key(beta: f64, ttl: Duration, run: Duration) -> (Cache<u64>, std::sync::Arc<Origin>) {
    let mut sim = Sim::with_seed(2015);
    let cache: Cache<u64> = sim.builder().ttl(ttl).beta(beta).build().unwrap();
    let origin = Origin::new();
    let first = {
        let cache = cache.clone();
        let loader = origin.loader(&sim.clock, ms(200), Ok(Some(0)));
        sim.spawn(async move { cache.get_or_load_async(KEY, loader).await })
    };
    sim.advance(ms(200));
    assert_eq!(first.take().unwrap(), Some(0));
    let end = sim.now() + run;
    let mut version = 0;
    while sim.now() < end {
        version += 1;
        let loader = origin.loader(&sim.clock, ms(200), Ok(Some(version)));
        let read = cache.get_or_load_async(KEY, loader).now_or_never();
        if beta > 0.0 {
            let served = read.unwrap_or_else(|| panic!("a reader waited at {:?}", sim.now()));
            assert!(served.unwrap().is_some());
        } else if read.is_none() {
            // Without XFetch the key expires and a reader must wait: let that load finish.
            sim.advance(ms(200));
            continue;
        }
        // Nothing to run (no refresh, no timer): just move the clock, which keeps this
        // 3.6-million-read hour fast in debug builds.
        if herdless::driver::flights_in_progress(&cache) == 0 && sim.clock.pending_timers() == 0 {
            sim.clock.advance(ms(1));
        } else {
            sim.advance(ms(1));
        }
    }
    (cache, origin)
}

#[test]
fn a_hot_key_is_refreshed_early_and_never_misses_for_an_hour() {
    let (ttl, run) = (secs(60), secs(3_600));
    let (cache, origin) = hot_key(1.0, ttl, run);
    let m = cache.metrics().total();
    assert_eq!(m.misses, 1, "only the very first read missed");
    assert_eq!(m.lock_acquired, 1, "no reader led a load after the first");
    assert_eq!(m.coalesced_waiters, 0, "no reader waited");
    assert_eq!(m.stale_served, 0, "the key never even went stale");
    // About one early refresh per TTL (jitter 0.2 keeps the mean TTL at 60 s; XFetch fires
    // about a second before expiry): 60 per hour.
    assert!(
        (50..=75).contains(&m.early_refreshes),
        "{} early refreshes in an hour",
        m.early_refreshes
    );
    assert_eq!(m.refreshes, m.early_refreshes);
    assert_eq!(origin.calls() as u64, 1 + m.early_refreshes);
    assert_eq!(origin.peak(), 1, "refreshes never overlap");
    assert_eq!(herdless::driver::flights_in_progress(&cache), 0);
}

#[test]
fn without_xfetch_the_same_key_expires_and_readers_wait() {
    // The control: beta 0 turns XFetch off, and the key expires about once per TTL.
    let (cache, _) = hot_key(0.0, secs(60), secs(600));
    let m = cache.metrics().total();
    assert_eq!(m.early_refreshes, 0);
    assert!(m.misses >= 9, "only {} misses in 10 TTLs", m.misses);
}
