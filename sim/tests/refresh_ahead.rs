//! Refresh-ahead in the simulator: a fixed schedule, one refresh per `ttl * share` (plus the
//! load, since the next TTL counts from the end of the refresh) for every key read that
//! often; and against XFetch on a long tail. Virtual time and a seed: exact counts.

use std::time::Duration;

use herdless_sim::{Knobs, OriginConfig, Outcome, RefreshAheadStudy, Run, Strategy};

const TTL: Duration = Duration::from_secs(10);
const LOAD: Duration = Duration::from_millis(200);
const DURATION: Duration = Duration::from_secs(35);

/// `keys` keys (Zipf `alpha`) at `rate` requests/s for 35 s, 200 ms loads, 10 s TTL,
/// refresh-ahead at `share`.
fn study(keys: usize, alpha: f64, rate: f64, share: f64) -> RefreshAheadStudy {
    let mut knobs = Knobs::new(TTL);
    knobs.ahead = share;
    RefreshAheadStudy {
        keys,
        alpha,
        rate,
        duration: DURATION,
        origin: OriginConfig::new(LOAD),
        knobs,
    }
}

fn run(s: RefreshAheadStudy, strategy: Strategy) -> Outcome {
    Run::new(s, strategy).seed(42).run().expect("valid options")
}

/// Refreshes a key read continuously gets before `DURATION`: the k-th starts at the first
/// read after `k * ttl * share + (k - 1) * load` (the value written at time zero, each
/// refresh's value written when its load ends).
fn expected_refreshes(share: f64) -> u64 {
    let (cycle, load, end) = (TTL.mul_f64(share), LOAD, DURATION);
    (1u32..)
        .take_while(|&k| cycle * k + load * (k - 1) < end)
        .count() as u64
}

#[test]
fn a_hot_key_is_refreshed_exactly_once_per_ttl_share() {
    for share in [0.5, 0.8, 0.95] {
        let expected = expected_refreshes(share);
        for strategy in [Strategy::RefreshAhead, Strategy::SwrAhead] {
            let out = run(study(1, 1.0, 200.0, share), strategy);
            let what = format!("{} at {share}: {:?}", strategy.name(), out.origin.starts);
            assert_eq!(out.origin.calls, expected, "{what}");
            assert_eq!(out.row.ahead_refreshes, expected, "{what}");
            assert_eq!(out.row.early_refreshes, 0, "no XFetch: {what}");
            assert_eq!(out.row.misses, 0, "the key never expired: {what}");
            assert_eq!(out.row.stale_served, 0, "{what}");
            // Each refresh starts at the first read past the threshold of the value the
            // previous one wrote (reads come every 5 ms on average).
            let cycle = TTL.mul_f64(share);
            assert!(out.origin.starts[0] >= cycle, "{what}");
            for pair in out.origin.starts.windows(2) {
                let gap = pair[1] - pair[0];
                assert!(
                    gap >= cycle + LOAD && gap < cycle + LOAD + Duration::from_millis(100),
                    "{what}"
                );
            }
        }
    }
    // The schedule, spelled out for 0.8: 8 s, ~16.2 s, ~24.4 s, ~32.6 s.
    assert_eq!(expected_refreshes(0.8), 4);
}

#[test]
fn every_key_read_past_the_share_is_refreshed_on_the_same_schedule() {
    // Ten keys read uniformly, 200 requests/s each: each gets the hot key's schedule.
    let out = run(study(10, 0.0, 2000.0, 0.8), Strategy::RefreshAhead);
    assert_eq!(
        out.origin.calls_by_key.len(),
        10,
        "{:?}",
        out.origin.calls_by_key
    );
    for (key, &calls) in &out.origin.calls_by_key {
        assert_eq!(calls, expected_refreshes(0.8), "{key}");
    }
    assert_eq!(out.row.ahead_refreshes, 10 * expected_refreshes(0.8));
    assert_eq!(out.origin.peak_per_key, 1);
    assert_eq!(out.row.misses, 0);
    // Written together, they refresh together: all ten at once.
    assert_eq!(out.origin.peak, 10);
}

#[test]
fn on_a_long_tail_refresh_ahead_trades_origin_calls_for_misses_against_xfetch() {
    // 200 keys, Zipf 1, 1,000 requests/s: the hottest key is read 170 times a second, the
    // coolest about once a second (two reads in the last fifth of a TTL, on average).
    let xfetch = run(study(200, 1.0, 1000.0, 0.8), Strategy::Xfetch);
    let ahead = run(study(200, 1.0, 1000.0, 0.8), Strategy::RefreshAhead);
    let (x, a) = (&xfetch.row, &ahead.row);
    assert_eq!(x.requests, a.requests, "the same traffic");
    // XFetch refreshes only keys hot enough to be read within a few load times of their
    // expiry; refresh-ahead refreshes every key read in the last fifth of its TTL.
    assert!(a.misses < x.misses, "misses: ahead {a:?} xfetch {x:?}");
    assert!(
        a.origin_calls > x.origin_calls,
        "calls: ahead {a:?} xfetch {x:?}"
    );
    assert!(a.ahead_refreshes > x.early_refreshes);
    assert_eq!((x.ahead_refreshes, a.early_refreshes), (0, 0));
    // Keys written together stay in step under refresh-ahead: a higher origin peak.
    assert!(
        a.peak_origin > x.peak_origin,
        "peak: ahead {a:?} xfetch {x:?}"
    );
}

#[test]
fn a_share_outside_the_ttl_is_refused_by_the_engine() {
    for share in [0.0, 1.0, 1.5, f64::NAN] {
        let r = Run::new(study(1, 1.0, 200.0, share), Strategy::RefreshAhead).run();
        assert!(r.is_err(), "share {share} accepted");
    }
    // XFetch does not use the share: it runs whatever the share says.
    assert!(
        Run::new(study(1, 1.0, 200.0, 1.5), Strategy::Xfetch)
            .run()
            .is_ok()
    );
}
