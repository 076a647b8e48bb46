//! The stampede detector (core's `Cache::alerts`) read by a polling dashboard while the
//! simulator plays its stampede scenarios through the real engine: it fires on the naive hot
//! key, the mass expiry and the miss storm within two TTL periods of the first stampede,
//! names the scenario's namespace and the right cure, and stays silent on the protected
//! strategies. Run with `--nocapture` for the detection delays.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use herdless::{Alert, AlertKind, Cause, Cure};
use herdless_sim::{HotKey, Knobs, MassExpiry, MissStorm, Run, Scenario, Strategy};

/// A dashboard polling `alerts()` once a virtual second.
const POLL: Duration = Duration::from_secs(1);

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// First sighting of each alert (by kind, namespace and key), with the poll that saw it.
#[derive(Default)]
struct Seen(Vec<(Duration, Alert)>);

impl Seen {
    fn first(&self, kind: AlertKind) -> Option<&(Duration, Alert)> {
        self.0.iter().find(|(_, a)| a.kind == kind)
    }
    fn print(&self, what: &str) {
        println!("{what}: {} alert(s)", self.0.len());
        for (at, a) in &self.0 {
            println!("  read at {:>6.1} s: {a}", at.as_secs_f64());
        }
    }
}

/// Runs `scenario` under `strategy`, polling every process's engine for alerts.
fn watch(scenario: impl Into<Scenario>, strategy: Strategy) -> Seen {
    let seen = Rc::new(RefCell::new(Seen::default()));
    let sink = seen.clone();
    Run::new(scenario, strategy)
        .seed(3)
        .observe(POLL, move |now, engines| {
            let mut seen = sink.borrow_mut();
            for engine in engines {
                for alert in engine.alerts() {
                    let known = seen.0.iter().any(|(_, a)| {
                        a.kind == alert.kind && a.namespace == alert.namespace && a.key == alert.key
                    });
                    if !known {
                        seen.0.push((now, alert));
                    }
                }
            }
        })
        .run()
        .expect("valid options");
    Rc::try_unwrap(seen).ok().expect("run ended").into_inner()
}

#[test]
fn naive_hot_key_is_named_with_its_key_and_single_flight_as_cure() {
    // 2,000 requests/s, 200 ms loads, TTL 10 s: the cached key first expires at 10 s and
    // every miss in the next 200 ms goes to the origin (~400 of them).
    let hot = HotKey {
        duration: secs(40),
        ..HotKey::default()
    };
    let ttl = hot.knobs.ttl;
    let seen = watch(hot, Strategy::Naive);
    seen.print("naive hot key");
    let (at, alert) = seen
        .first(AlertKind::MissSpike)
        .expect("a miss spike alert");
    let first_expiry = ttl;
    assert!(
        *at <= first_expiry + 2 * ttl,
        "read at {at:?}, first expiry at {first_expiry:?}"
    );
    assert_eq!(alert.namespace, "hot");
    assert_eq!(alert.cause, Cause::HotKey);
    assert!(alert.key.is_some(), "one key dominates: {alert}");
    assert!(
        alert.cures.contains(&Cure::SingleFlight),
        "get + set is the naive pattern: {alert}"
    );
}

#[test]
fn mass_expiry_without_jitter_is_named_with_jitter_as_cure() {
    // 1,000 keys written together at time zero, TTL 60 s, jitter off (single-flight only).
    let mass = MassExpiry {
        duration: secs(100),
        rate: 2000.0,
        ..MassExpiry::default()
    };
    let ttl = mass.knobs.ttl;
    let seen = watch(mass, Strategy::SingleFlight);
    seen.print("mass expiry");
    let (at, alert) = seen
        .first(AlertKind::MissSpike)
        .expect("a miss spike alert");
    assert!(*at <= ttl + 2 * ttl, "read at {at:?}");
    assert!(*at >= ttl, "nothing expired before {ttl:?}, read at {at:?}");
    assert_eq!(alert.namespace, "mass");
    assert_eq!(alert.cause, Cause::MassExpiry);
    assert_eq!(alert.key, None, "no one key dominates: {alert}");
    assert_eq!(alert.cures.first(), Some(&Cure::Jitter), "{alert}");
}

#[test]
fn miss_storm_without_negative_caching_is_named_with_negative_caching_as_cure() {
    // The namespace serves its regular traffic (100 cached ids, 200 requests/s, a TTL
    // longer than the run so they do not expire together) for a minute; then random absent
    // ids arrive at 1,000/s and absences are not cached.
    let storm = MissStorm {
        rate: 1000.0,
        storm_from: secs(60),
        regular_rate: 200.0,
        duration: secs(100),
        knobs: Knobs {
            negative_ttl: None,
            ..Knobs::new(secs(300))
        },
        ..MissStorm::default()
    };
    let seen = watch(storm.clone(), Strategy::SingleFlight);
    seen.print("miss storm");
    let (at, alert) = seen
        .first(AlertKind::MissSpike)
        .expect("a miss spike alert");
    // The storm has no TTL of its own: it is read within two negative TTLs (10 s each,
    // the cure's period), and never before it began.
    assert!(*at >= storm.storm_from, "read at {at:?}");
    assert!(*at <= storm.storm_from + secs(20), "read at {at:?}");
    assert_eq!(alert.namespace, "storm");
    assert_eq!(alert.cause, Cause::MissStorm);
    assert_eq!(alert.key, None, "random ids: no key dominates: {alert}");
    assert_eq!(alert.cures.first(), Some(&Cure::NegativeCaching), "{alert}");

    // The regular traffic alone raises nothing.
    let calm = MissStorm { rate: 0.0, ..storm };
    let seen = watch(calm, Strategy::SingleFlight);
    seen.print("regular traffic only");
    assert!(seen.0.is_empty(), "false alarm on regular traffic");
}

#[test]
fn protected_strategies_raise_no_alert() {
    // The same traffic, protected: a hot key for ten TTL periods under XFetch + grace +
    // jitter, the mass expiry under jitter, the miss storm with negative caching.
    let hot = HotKey {
        rate: 500.0,
        duration: secs(600),
        knobs: Knobs::new(secs(30)),
        ..HotKey::default()
    };
    let seen = watch(hot, Strategy::Combined);
    seen.print("hot key, combined");
    assert!(seen.0.is_empty(), "false alarm on a protected hot key");

    let mass = MassExpiry {
        duration: secs(150),
        rate: 2000.0,
        ..MassExpiry::default()
    };
    let seen = watch(mass, Strategy::Combined);
    seen.print("mass expiry, combined");
    assert!(seen.0.is_empty(), "false alarm on a jittered mass expiry");
}
