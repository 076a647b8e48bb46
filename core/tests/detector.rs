//! The stampede detector on the virtual clock: it fires on the naive hot key, the
//! mass expiry and the miss storm within two TTL periods, names the namespace, the key when
//! one dominates, and the cure; and it stays silent on a protected steady state over hours.
//!
//! A small discrete-event driver plays the traffic through the engine's state machine
//! (`lookup` → hit / lead / wait) or through `get` + `set` (the naive cache-aside), with an
//! origin whose latency grows with its concurrency. Run with `--nocapture` for the figures.

use std::task::{Context, Waker};
use std::time::Duration;

use herdless::{
    Alert, AlertKind, Cache, Cause, Clock, Cure, DetectorOptions, LoadGuard, Lookup, ManualClock,
    Waiter,
};

const STEP: Duration = Duration::from_millis(10);
const TTL: Duration = Duration::from_secs(60);

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// xorshift64*: deterministic traffic without another dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One virtual-time world: a cache, its clock, the loads in progress and the waiters.
struct World {
    clock: ManualClock,
    cache: Cache<u64>,
    /// Loads led through the engine: when they end, and their guard.
    loads: Vec<(Duration, LoadGuard<u64>)>,
    /// Leaders waiting for the origin budget.
    queued: Vec<LoadGuard<u64>>,
    waiters: Vec<Waiter<u64>>,
    /// Naive cache-aside loads: when they end, and the key they `set`.
    naive: Vec<(Duration, String)>,
    /// Origin latency with nobody else loading.
    base: Duration,
    origin_calls: u64,
    /// Every alert seen, first sighting only per (kind, namespace, key).
    seen: Vec<Alert>,
    /// When each of `seen` was first read by the polling dashboard (virtual seconds).
    seen_at: Vec<Duration>,
    /// Every distinct non-zero `herdless_alerts_active` line a Prometheus scrape returned.
    gauges: Vec<String>,
}

impl World {
    fn new(builder: herdless::Builder<u64>, clock: ManualClock, base: Duration) -> Self {
        // Start away from zero, as a real monotonic clock would.
        clock.set(secs(1000));
        let cache = builder.clock(clock.clone()).build().unwrap();
        Self {
            clock,
            cache,
            loads: Vec::new(),
            queued: Vec::new(),
            waiters: Vec::new(),
            naive: Vec::new(),
            base,
            origin_calls: 0,
            seen: Vec::new(),
            seen_at: Vec::new(),
            gauges: Vec::new(),
        }
    }

    fn now(&self) -> Duration {
        self.clock.now()
    }

    /// The origin slows down with its concurrency: 10 loads at once double its latency.
    fn latency(&self) -> Duration {
        let busy = (self.loads.len() + self.naive.len()) as u32;
        self.base + self.base * busy / 10
    }

    fn start(&mut self, mut guard: LoadGuard<u64>) {
        if guard.try_begin() {
            self.origin_calls += 1;
            let at = self.now() + self.latency();
            self.loads.push((at, guard));
        } else {
            self.queued.push(guard);
        }
    }

    /// A caller of `key` through the engine (what `get_or_load` does).
    fn request(&mut self, key: &str) {
        match self.cache.lookup(key).unwrap() {
            Lookup::Hit(hit) => {
                if let Some(g) = hit.refresh {
                    self.start(g);
                }
            }
            Lookup::Lead(g) => self.start(g),
            Lookup::Wait(w) => self.waiters.push(w),
        }
    }

    /// A caller through the engine whose loads store with their own TTL (spread by hand).
    fn request_with_ttl(&mut self, key: &str, ttl: Duration) {
        match self.cache.lookup(key).unwrap() {
            Lookup::Hit(hit) => {
                if let Some(mut g) = hit.refresh {
                    g.set_ttl(ttl);
                    self.start(g);
                }
            }
            Lookup::Lead(mut g) => {
                g.set_ttl(ttl);
                self.start(g)
            }
            Lookup::Wait(w) => self.waiters.push(w),
        }
    }

    /// A naive cache-aside caller: `get`, and on a miss load and `set` it itself.
    fn naive_request(&mut self, key: &str, exists: bool) {
        if self.cache.get(key).is_none() {
            self.origin_calls += 1;
            let at = self.now() + self.latency();
            if exists {
                self.naive.push((at, key.to_string()));
            }
        }
    }

    /// Moves time one step: ends due loads, wakes waiters, starts queued loads.
    fn step(&mut self) {
        self.clock.advance(STEP);
        let now = self.now();
        let mut i = 0;
        while i < self.loads.len() {
            if self.loads[i].0 <= now {
                let (_, g) = self.loads.swap_remove(i);
                g.complete(Ok(Some(1))).unwrap();
            } else {
                i += 1;
            }
        }
        let mut i = 0;
        while i < self.naive.len() {
            if self.naive[i].0 <= now {
                let (_, key) = self.naive.swap_remove(i);
                self.cache.set(&key, 1).unwrap();
            } else {
                i += 1;
            }
        }
        let queued = std::mem::take(&mut self.queued);
        for g in queued {
            self.start(g);
        }
        let mut cx = Context::from_waker(Waker::noop());
        self.waiters
            .retain_mut(|w| std::pin::Pin::new(w).poll(&mut cx).is_pending());
    }

    /// Reads the alerts (as a dashboard polling each second would) and keeps first sightings;
    /// scrapes the Prometheus text as well.
    fn poll_alerts(&mut self) {
        for line in self.cache.prometheus().lines() {
            let gauge = line.starts_with("herdless_alerts_active{") && !line.ends_with(" 0");
            if gauge && !self.gauges.iter().any(|g| g == line) {
                self.gauges.push(line.to_owned());
            }
        }
        for a in self.cache.alerts() {
            let known = self
                .seen
                .iter()
                .any(|s| s.kind == a.kind && s.namespace == a.namespace && s.key == a.key);
            if !known {
                let at = self.now() - secs(1000);
                eprintln!("  read at t={:>7.1}s: {a}", at.as_secs_f64());
                self.seen.push(a);
                self.seen_at.push(at);
            }
        }
    }

    /// Runs `seconds` of virtual time, `traffic` issuing each step's requests.
    fn run(&mut self, seconds: u64, mut traffic: impl FnMut(&mut World, Duration)) {
        let end = self.now() + secs(seconds);
        let mut next_poll = self.now();
        while self.now() < end {
            let t = self.now() - secs(1000);
            traffic(self, t);
            self.step();
            if self.now() >= next_poll {
                self.poll_alerts();
                next_poll += secs(1);
            }
        }
    }

    fn first(&self, kind: AlertKind, ns: &str) -> Option<&Alert> {
        self.seen
            .iter()
            .find(|a| a.kind == kind && a.namespace == ns)
    }

    /// Virtual seconds since the world began at which `a` first fired (its `since`).
    fn at(a: &Alert) -> Duration {
        a.since - secs(1000)
    }

    /// Virtual seconds at which the dashboard (polling `alerts()` each second) first read `a`.
    fn read_at(&self, a: &Alert) -> Duration {
        let i = self
            .seen
            .iter()
            .position(|s| std::ptr::eq(s, a))
            .expect("an alert of `seen`");
        self.seen_at[i]
    }
}

/// A background namespace with steady traffic whose TTLs are spread (40 to 80 s): it must
/// never be named.
fn background(w: &mut World, rng: &mut Rng) {
    let key = format!("users:{}", rng.below(50));
    let ttl = secs(40) + Duration::from_millis(rng.below(40_000));
    w.request_with_ttl(&key, ttl);
}

#[test]
fn naive_hot_key_expiring_is_named_with_its_key_and_the_sawtooth() {
    eprintln!("naive hot key: get + set, 1,000 req/s on feed:top, TTL 60 s, no jitter");
    let builder = Cache::builder().ttl(TTL).jitter(0.0).capacity(10_000);
    let mut w = World::new(builder, ManualClock::new(), Duration::from_millis(100));
    let mut rng = Rng(7);
    w.run(200, |w, _| {
        for _ in 0..10 {
            w.naive_request("feed:top", true);
        }
        if rng.below(2) == 0 {
            background(w, &mut rng);
        }
    });
    let spike = w.first(AlertKind::MissSpike, "feed").expect("a miss spike");
    assert_eq!(spike.cause, Cause::HotKey);
    assert_eq!(spike.key.as_deref(), Some("feed:top"));
    assert!(spike.cures.contains(&Cure::XFetch) && spike.cures.contains(&Cure::SingleFlight));
    // The key first expired at 60.1 s (set at 0.1 s): fired within two TTL periods.
    let delay = w.read_at(spike).saturating_sub(secs(60));
    eprintln!(
        "  detection delay (miss spike, expiry at 60.1 s, dated {:.1}s): {:.1}s",
        World::at(spike).as_secs_f64(),
        delay.as_secs_f64()
    );
    assert!(w.read_at(spike) < 2 * TTL);
    // A Prometheus scrape showed it too, by namespace, kind and cause (no key label).
    let line = r#"herdless_alerts_active{namespace="feed",kind="miss_spike",cause="hot_key"} 1"#;
    assert!(w.gauges.iter().any(|g| g == line), "{:#?}", w.gauges);
    let saw = w.first(AlertKind::Sawtooth, "feed").expect("a sawtooth");
    assert_eq!(saw.key.as_deref(), Some("feed:top"));
    match &saw.evidence {
        herdless::Evidence::Periodic { period, ttl, .. } => {
            assert_eq!(*ttl, Some(TTL));
            assert!(period.abs_diff(TTL) < secs(2), "{period:?}");
        }
        e => panic!("{e:?}"),
    }
    eprintln!(
        "  detection delay (sawtooth, second expiry at ~120 s): {:.1}s",
        w.read_at(saw).saturating_sub(secs(120)).as_secs_f64()
    );
    // The shared origin was slow for everyone during the stampede, so "users" may show an
    // origin-latency skew, but no miss spike or sawtooth of its own.
    let others: Vec<_> = w
        .seen
        .iter()
        .filter(|a| a.namespace != "feed" && a.kind != AlertKind::OriginLatency)
        .collect();
    assert!(others.is_empty(), "users is quiet: {others:#?}");
}

#[test]
fn mass_expiry_of_keys_written_together_asks_for_jitter() {
    eprintln!("mass expiry: 1,000 keys loaded together, TTL 60 s, no jitter, no grace");
    let builder = Cache::builder()
        .ttl(TTL)
        .jitter(0.0)
        .beta(0.0)
        .capacity(10_000);
    let mut w = World::new(builder, ManualClock::new(), Duration::from_millis(20));
    for i in 0..1000 {
        w.request(&format!("catalog:item:{i}"));
    }
    let mut rng = Rng(11);
    w.run(150, |w, _| {
        // 1,000 req/s spread over the 1,000 keys.
        for _ in 0..10 {
            let key = format!("catalog:item:{}", rng.below(1000));
            w.request(&key);
        }
        background(w, &mut rng);
    });
    let spike = w
        .first(AlertKind::MissSpike, "catalog")
        .expect("a miss spike");
    assert_eq!(spike.cause, Cause::MassExpiry);
    assert_eq!(spike.key, None);
    assert_eq!(spike.cures[0], Cure::Jitter);
    assert!(w.read_at(spike) < 2 * TTL);
    eprintln!(
        "  detection delay (miss spike): {:.1}s after the expiry at 60 s",
        w.read_at(spike).saturating_sub(secs(60)).as_secs_f64()
    );
    assert!(
        w.seen
            .iter()
            .all(|a| a.namespace == "catalog" || a.kind == AlertKind::OriginLatency)
    );
}

#[test]
fn miss_storm_on_absent_ids_asks_for_negative_caching() {
    eprintln!("miss storm: from t=90 s, 500 req/s on 300 absent accounts ids, nothing cached");
    let builder = Cache::builder().ttl(TTL).capacity(10_000);
    let mut w = World::new(builder, ManualClock::new(), Duration::from_millis(10));
    let mut rng = Rng(13);
    w.run(150, |w, t| {
        // Steady traffic on existing accounts.
        let key = format!("accounts:{}", rng.below(100));
        w.naive_request(&key, true);
        if t >= secs(90) {
            for _ in 0..5 {
                let key = format!("accounts:absent-{}", rng.below(300));
                w.naive_request(&key, false);
            }
        }
        background(w, &mut rng);
    });
    let spike = w
        .first(AlertKind::MissSpike, "accounts")
        .expect("a miss spike");
    assert_eq!(spike.cause, Cause::MissStorm);
    assert!(spike.cures.contains(&Cure::NegativeCaching));
    let delay = w.read_at(spike).saturating_sub(secs(90));
    eprintln!(
        "  detection delay (miss spike): {:.1}s after the storm began",
        delay.as_secs_f64()
    );
    assert!(World::at(spike) >= secs(90) && delay < 2 * TTL);
    assert!(
        w.seen
            .iter()
            .all(|a| a.namespace == "accounts" || a.kind == AlertKind::OriginLatency)
    );
}

#[test]
fn single_flight_mass_expiry_under_a_budget_shows_the_lock_queue() {
    eprintln!("mass expiry through get_or_load with an origin budget of 5");
    let builder = Cache::builder()
        .ttl(TTL)
        .jitter(0.0)
        .beta(0.0)
        .origin_budget(5)
        .wait_timeout(secs(600))
        .capacity(10_000);
    let mut w = World::new(builder, ManualClock::new(), Duration::from_millis(20));
    let mut rng = Rng(17);
    w.run(100, |w, _| {
        for _ in 0..20 {
            let key = format!("catalog:item:{}", rng.below(300));
            w.request(&key);
        }
    });
    // The cold start already queues 300 loads behind 5 permits.
    let lock = w
        .first(AlertKind::LockWait, "catalog")
        .expect("waits above the rebuild time");
    assert!(lock.cures.contains(&Cure::Grace));
    eprintln!(
        "  lock-wait alert at {:.1}s: {lock}",
        w.read_at(lock).as_secs_f64()
    );
}

#[test]
fn protected_steady_state_stays_silent_for_hours() {
    const HOURS: u64 = 3;
    eprintln!("protected: XFetch + grace 30 s + jitter 0.2 + budget 20, {HOURS} virtual hours");
    let builder = Cache::builder()
        .ttl(TTL)
        .grace(secs(30))
        .origin_budget(20)
        .capacity(10_000);
    let mut w = World::new(builder, ManualClock::new(), Duration::from_millis(20));
    let mut rng = Rng(19);
    // Pre-warm the 1,000 keys: a cold start whose warm-up is done before traffic arrives.
    let mut keys: Vec<String> = (0..1000).map(|i| format!("catalog:item:{i}")).collect();
    keys.push("feed:top".into());
    for k in &keys {
        w.request(k);
        while !w.queued.is_empty() || w.loads.len() >= 20 {
            w.step();
        }
    }
    while !w.loads.is_empty() {
        w.step();
    }
    let start = w.now();
    w.run(HOURS * 3600, |w, _| {
        // A hot key at 500 req/s, the catalog at 300 req/s with a skew, users at 100 req/s.
        for _ in 0..5 {
            w.request("feed:top");
        }
        for _ in 0..3 {
            let r = rng.below(1000);
            let key = format!("catalog:item:{}", r * r / 1000);
            w.request(&key);
        }
        background(w, &mut rng);
    });
    let false_alarms: Vec<_> = w.seen.iter().filter(|a| a.since >= start).collect();
    eprintln!(
        "  false alarms over {HOURS} h: {} ({} origin calls)",
        false_alarms.len(),
        w.origin_calls
    );
    assert!(false_alarms.is_empty(), "{false_alarms:#?}");
    assert!(w.gauges.is_empty(), "scraped: {:#?}", w.gauges);
}

#[test]
fn detector_off_reports_nothing_and_options_are_checked() {
    let clock = ManualClock::new();
    let cache: Cache<u64> = Cache::builder()
        .clock(clock.clone())
        .detector(DetectorOptions::off())
        .build()
        .unwrap();
    for i in 0..1000 {
        assert_eq!(cache.get(&format!("a:{i}")), None);
    }
    clock.advance(secs(100));
    assert!(cache.alerts().is_empty());
    let bad = DetectorOptions {
        spike_factor: 0.5,
        ..DetectorOptions::default()
    };
    assert!(Cache::<u64>::builder().detector(bad).build().is_err());
    let bad = DetectorOptions {
        tick: Duration::ZERO,
        ..DetectorOptions::default()
    };
    assert!(Cache::<u64>::builder().detector(bad).build().is_err());
}
