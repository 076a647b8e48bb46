//! Outcomes that must hold for each scenario, on small simulated traffic (debug builds run
//! these in seconds).

use std::time::Duration;

use herdless_sim::{
    ColdRestart, Fleet, HotKey, IaStrategy, InternetArchive, Knobs, MassExpiry, MissStorm,
    OriginConfig, Outcome, Run, Strategy,
};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn ms(m: u64) -> Duration {
    Duration::from_millis(m)
}

/// 200 requests/s on one key, 200 ms loads, 10 s TTL, 35 s: the key (cached at time zero)
/// expires three times.
fn hot() -> HotKey {
    HotKey {
        rate: 200.0,
        duration: secs(35),
        origin: OriginConfig::new(ms(200)),
        knobs: Knobs::new(secs(10)),
    }
}

fn run(scenario: impl Into<herdless_sim::Scenario>, strategy: Strategy) -> Outcome {
    Run::new(scenario, strategy)
        .seed(42)
        .run()
        .expect("valid options")
}

/// Origin calls grouped into bursts: calls closer than `gap` to the previous one belong to
/// its burst. Returns the size of each burst.
fn bursts(starts: &[Duration], gap: Duration) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::new();
    let mut last: Option<Duration> = None;
    for &s in starts {
        match last {
            Some(l) if s - l < gap => *out.last_mut().expect("a burst") += 1,
            _ => out.push(1),
        }
        last = Some(s);
    }
    out
}

#[test]
fn hot_key_single_flight_makes_exactly_one_origin_call_per_expiry() {
    let out = run(hot(), Strategy::SingleFlight);
    // Expiries at 10 s, ~20.2 s and ~30.4 s (each load takes 200 ms, the next TTL counts
    // from its end): one call each, never two at once.
    assert_eq!(out.origin.calls, 3, "{:?}", out.origin.starts);
    assert_eq!(out.origin.peak_per_key, 1);
    for pair in out.origin.starts.windows(2) {
        assert!(pair[1] - pair[0] >= secs(10), "{:?}", out.origin.starts);
    }
    // Everyone else who came during a load waited for it instead of calling the origin.
    assert!(out.row.coalesced > 0);
    assert_eq!(out.row.errors + out.row.timeouts, 0);
}

#[test]
fn hot_key_naive_sends_a_herd_of_rate_times_load_time_per_expiry() {
    let out = run(hot(), Strategy::Naive);
    let herds = bursts(&out.origin.starts, secs(1));
    assert_eq!(herds.len(), 3, "one herd per expiry: {herds:?}");
    // rate x load time = 200/s x 0.2 s = 40 calls per expiry (Poisson: give it +-40 %).
    for h in &herds {
        assert!(
            (24..=56).contains(h),
            "herd of {h}, expected ~40: {herds:?}"
        );
    }
    assert!(out.origin.peak_per_key >= 24);
}

#[test]
fn stale_while_revalidate_answers_at_once_and_never_past_ttl_plus_grace() {
    let h = hot();
    let (ttl, grace) = (h.knobs.ttl, h.knobs.grace);
    let out = run(h, Strategy::Swr);
    assert!(out.row.stale_served > 0);
    assert_eq!(out.row.max_ms, 0.0, "nobody waits for a refresh");
    assert!(out.row.oldest_served_s <= (ttl + grace).as_secs_f64());
    assert_eq!(out.origin.peak_per_key, 1);
}

#[test]
fn xfetch_with_beta_one_never_lets_a_hot_key_miss() {
    let out = run(hot(), Strategy::Xfetch);
    assert_eq!(out.row.misses, 0);
    assert!(out.row.early_refreshes >= 3, "{:?}", out.row);
    assert_eq!(out.row.max_ms, 0.0, "every request was a hit");
    assert!(out.row.oldest_served_s < 10.0, "refreshed before expiry");
    // And with beta 0 the same key misses at every expiry.
    let mut off = hot();
    off.knobs.beta = 0.0;
    let out = run(off, Strategy::Xfetch);
    assert!(out.row.misses > 0);
    assert_eq!(out.row.early_refreshes, 0);
}

fn mass(jitter: f64) -> MassExpiry {
    let mut knobs = Knobs::new(secs(20));
    knobs.jitter = jitter;
    MassExpiry {
        keys: 300,
        rate: 1500.0,
        duration: secs(26),
        origin: OriginConfig::new(ms(200)),
        knobs,
    }
}

#[test]
fn mass_expiry_jitter_spreads_the_origin_peak() {
    let together = run(mass(0.2), Strategy::SingleFlight);
    let spread = run(mass(0.2), Strategy::Jitter);
    assert!(
        spread.origin.peak * 2 < together.origin.peak,
        "jitter peak {} vs no-jitter peak {}",
        spread.origin.peak,
        together.origin.peak
    );
    // Single-flight holds for each key either way.
    assert_eq!(together.origin.peak_per_key, 1);
    assert_eq!(spread.origin.peak_per_key, 1);
}

fn storm(negative: Option<Duration>) -> MissStorm {
    let mut knobs = Knobs::new(secs(60));
    knobs.negative_ttl = negative;
    MissStorm {
        ids: 200,
        rate: 500.0,
        duration: secs(20),
        origin: OriginConfig::new(ms(50)),
        knobs,
        ..MissStorm::default()
    }
}

#[test]
fn negative_caching_bounds_origin_calls_in_a_miss_storm() {
    let cached = run(storm(Some(secs(10))), Strategy::SingleFlight);
    let uncached = run(storm(None), Strategy::SingleFlight);
    // Each id costs at most one call per 10 s of the 20 s storm (no jitter: <= 2, and a
    // third only if an id's first read came in the storm's first instants... allow 3).
    assert!(cached.origin.calls <= 200 * 3, "{}", cached.origin.calls);
    assert!(cached.row.misses <= 200 * 3);
    // Without it, nearly every request reaches the origin (single-flight still merges the
    // few requests for one id that arrive during its 50 ms lookup).
    assert!(
        uncached.origin.calls as f64 >= 0.8 * uncached.row.requests as f64,
        "{} calls for {} requests",
        uncached.origin.calls,
        uncached.row.requests
    );
    assert!(uncached.origin.calls > 10 * cached.origin.calls);
}

fn fleet(fleet_wide: bool) -> Fleet {
    Fleet {
        processes: 4,
        fleet_wide,
        rate: 400.0,
        duration: secs(25),
        origin: OriginConfig::new(ms(200)),
        knobs: Knobs::new(secs(10)),
    }
}

#[test]
fn fleet_wide_coalescing_makes_one_call_per_expiry_local_makes_one_per_process() {
    let local = run(fleet(false), Strategy::SingleFlight);
    let wide = run(fleet(true), Strategy::SingleFlight);
    // Two expiries in 25 s.
    assert_eq!(wide.origin.calls, 2, "{:?}", wide.origin.starts);
    assert_eq!(wide.origin.peak_per_key, 1);
    assert!(
        wide.fleet_lock_waits > 0,
        "other processes waited for the holder"
    );
    assert_eq!(local.origin.calls, 4 * 2, "{:?}", local.origin.starts);
    assert_eq!(local.origin.peak_per_key, 4);
    // Each process coalesced its own callers either way.
    assert_eq!(local.metrics.len(), 4);
}

#[test]
fn a_fleet_refresh_drops_the_copies_of_processes_not_waiting_for_it() {
    // XFetch never lets the key expire, so a process misses only when the holder's notice
    // dropped its copy (as the real tier's notice does): it then reads the new entry at
    // once instead of serving the old copy until its own XFetch fires. Each refresh drops
    // at most the three other processes' copies.
    let mut knobs = Knobs::new(secs(1));
    knobs.grace = Duration::ZERO;
    let f = Fleet {
        processes: 4,
        fleet_wide: true,
        rate: 400.0,
        duration: secs(20),
        origin: OriginConfig::new(ms(200)),
        knobs,
    };
    let out = run(f, Strategy::Xfetch);
    let (misses, calls) = (out.row.misses, out.origin.calls);
    assert!(calls > 20, "{calls} refreshes in 20 s");
    assert!(
        misses > calls && misses <= 3 * calls,
        "{misses} misses for {calls} refreshes"
    );
    // Those reads adopt the shared entry: nobody waits for the origin.
    assert_eq!(out.row.p99_ms, 0.0);
    assert_eq!(out.origin.peak_per_key, 1);
}

#[test]
fn warm_up_before_traffic_takes_the_misses_off_the_restart() {
    let restart = |warm: Option<usize>| {
        let mut origin = OriginConfig::new(ms(100));
        origin.pool = Some(20);
        ColdRestart {
            keys: 2000,
            alpha: 1.0,
            rate: 1000.0,
            duration: secs(5),
            warm_top: warm,
            warm_concurrency: 10,
            origin,
            knobs: Knobs::new(secs(300)),
        }
    };
    let cold = run(restart(None), Strategy::SingleFlight);
    let warm = run(restart(Some(1000)), Strategy::SingleFlight);
    assert!(
        warm.row.misses * 2 < cold.row.misses,
        "misses after warm-up {} vs cold {}",
        warm.row.misses,
        cold.row.misses
    );
    assert!(warm.row.p99_ms <= cold.row.p99_ms);
    // The warm-up itself stayed within its concurrency bound before traffic.
    assert!(warm.origin.timeline.iter().take(50).all(|&(_, n)| n <= 10));
}

#[test]
fn the_internet_archive_experiment_lands_near_their_published_tallies() {
    let ia = InternetArchive {
        duration: secs(100),
        ..InternetArchive::default()
    };
    let get = |s: IaStrategy| run(ia.clone(), s.strategy());
    let fetch = get(IaStrategy::Fetch);
    let locked = get(IaStrategy::Locked);
    let xlocked = get(IaStrategy::Xlocked);
    // Expiries at 20 s, then every 20 s + the 500 ms recompute: 4 in 100 s.
    let herds = bursts(&fetch.origin.starts, secs(2));
    assert_eq!(herds.len(), 4, "{herds:?}");
    // Theirs: fetch 484 recomputes in 290 s, ~35 per expiry.
    for h in &herds {
        assert!((25..=50).contains(h), "{herds:?}");
    }
    // Theirs: locked, one recompute per expiry; xlocked, no miss at all.
    assert_eq!(locked.origin.calls, 4);
    assert_eq!(xlocked.row.misses, 0);
    assert!(xlocked.origin.calls >= 4);
}

#[test]
fn same_seed_same_run_and_another_seed_another() {
    let a = Run::new(hot(), Strategy::Combined)
        .seed(9)
        .run()
        .expect("valid");
    let b = Run::new(hot(), Strategy::Combined)
        .seed(9)
        .run()
        .expect("valid");
    assert_eq!(a.row, b.row);
    assert_eq!(a.origin, b.origin);
    assert_eq!(a.latency_ms, b.latency_ms);
    let c = Run::new(hot(), Strategy::Combined)
        .seed(10)
        .run()
        .expect("valid");
    assert_ne!(a.row.requests, c.row.requests);
}

#[test]
fn a_test_can_configure_the_engine_and_read_its_metrics() {
    // The hook runs after the strategy: here it turns XFetch off again.
    let out = Run::new(hot(), Strategy::Xfetch)
        .configure(|b| b.beta(0.0))
        .run()
        .expect("valid");
    assert!(out.row.misses > 0);
    let m = herdless_sim::total(&out.metrics);
    assert_eq!(
        m.loads, out.origin.calls,
        "every origin call was an engine load"
    );
    assert_eq!(m.early_refreshes, 0);
    // An invalid option is reported, not a panic.
    let bad = Run::new(hot(), Strategy::SingleFlight)
        .configure(|b| b.jitter(2.0))
        .run();
    assert!(bad.is_err());
}

#[test]
fn a_loaded_origin_slows_down_and_a_full_pool_times_calls_out() {
    let base = run(hot(), Strategy::Naive);
    // Each running call makes a new one 5 % slower: the herd's late calls take far longer
    // (the first call of a herd starts on an idle origin, so the herd's window does not move).
    let mut slow = hot();
    slow.origin.slowdown = 0.05;
    let slow = run(slow, Strategy::Naive);
    assert!(slow.row.max_ms > 2.0 * base.row.max_ms);
    // Two connections and a 100 ms queue timeout: most of a naive herd fails, and says so.
    let mut tight = hot();
    tight.origin.pool = Some(2);
    tight.origin.queue_timeout = Some(ms(100));
    let tight = run(tight, Strategy::Naive);
    assert!(tight.origin.errors > 0);
    assert_eq!(tight.row.errors, tight.origin.errors);
    assert!(tight.origin.peak <= tight.origin.calls as u32);
    // Single-flight never needs more than one connection for one key.
    let mut tight_sf = hot();
    tight_sf.origin.pool = Some(2);
    tight_sf.origin.queue_timeout = Some(ms(100));
    let tight_sf = run(tight_sf, Strategy::SingleFlight);
    assert_eq!(tight_sf.origin.errors, 0);
}

#[test]
fn an_observer_sees_the_engines_on_virtual_time() {
    use std::cell::RefCell;
    use std::rc::Rc;
    let seen: Rc<RefCell<Vec<(Duration, u64)>>> = Rc::default();
    let log = seen.clone();
    let out = Run::new(hot(), Strategy::SingleFlight)
        .observe(secs(1), move |now, engines| {
            let misses = herdless_sim::total(&[engines[0].metrics()]).misses;
            log.borrow_mut().push((now, misses));
        })
        .run()
        .expect("valid");
    let seen = seen.borrow();
    // Every second of the 35 s run, in order, with the misses growing at each expiry.
    assert_eq!(seen.len(), 35);
    assert_eq!(seen[0].0, secs(1));
    assert_eq!(seen[34].0, secs(35));
    assert_eq!(
        seen[8].1, 1,
        "the prefill's miss only, before the first expiry at 10 s"
    );
    assert!(seen[12].1 > seen[8].1);
    assert_eq!(
        out.row.coalesced + 3 + 1,
        seen[34].1,
        "misses = waiters + leaders + prefill"
    );
}
