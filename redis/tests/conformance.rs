//! The Rust runner of the conformance scenarios (`conformance/*.json` at the repository
//! root; the format is in its README): each scenario is played on the in-memory tier and,
//! when it lists `redis` (or `memcached`), on a private redis-server (memcached). Python and
//! Node run the same files.

mod common;
#[path = "conformance/mode.rs"]
mod mode;
#[path = "conformance/tier.rs"]
mod tier;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use herdless::{Error, Loaded};
use herdless_redis::memory::MemoryStore;
use mode::{Caller, Mode, Seen};
use serde_json::Value;
use tier::{Cache, Tier};

pub(crate) fn ms(step: &Value, field: &str) -> Duration {
    Duration::from_millis(step[field].as_u64().unwrap_or(0))
}

/// The kind of an error, as the scenarios name them.
fn kind(e: &Error) -> &'static str {
    match e {
        Error::Backend(_) => "backend",
        Error::WaitTimeout { .. } => "wait_timeout",
        Error::Load(_) => "load",
        Error::LoadTimeout { .. } => "load_timeout",
        Error::NoPrevious => "no_previous",
        Error::MetaTooLong { .. } => "meta_too_long",
        Error::EmptyTag | Error::TagTooLong { .. } => "invalid_tag",
        Error::TooManyTags { .. } => "too_many_tags",
        _ => "other",
    }
}

type Answer = Result<Option<Value>, Error>;

/// The loader's answer of a step: its `value` (null: absent), shaped by `answer`
/// (`ttl_ms`, `grace_ms`, `negative_ttl_ms`, `tti_ms`, `meta`, `not_modified`, `no_cache`,
/// `tags`).
fn loaded(value: Value, answer: &Value) -> Loaded<Value> {
    // Without `answer`, null is a JSON value like any other (as before this field).
    let mut l = match (answer["not_modified"].as_bool(), value) {
        (Some(true), _) => Loaded::not_modified(),
        (_, Value::Null) if answer.is_object() => Loaded::absent(),
        (_, v) => Loaded::value(v),
    };
    let ms = |f: &str| answer[f].as_u64().map(Duration::from_millis);
    if let Some(d) = ms("ttl_ms") {
        l = l.ttl(d);
    }
    if let Some(d) = ms("grace_ms") {
        l = l.grace(d);
    }
    if let Some(d) = ms("negative_ttl_ms") {
        l = l.negative_ttl(d);
    }
    if let Some(d) = ms("tti_ms") {
        l = l.tti(d);
    }
    if let Some(m) = answer["meta"].as_str() {
        l = l.meta(m);
    }
    if answer["no_cache"].as_bool() == Some(true) {
        l = l.no_cache();
    }
    if let Some(tags) = strings(&answer["tags"]) {
        l = l.tags(tags);
    }
    l
}

/// A JSON array of strings.
fn strings(v: &Value) -> Option<Vec<String>> {
    let a = v.as_array()?;
    Some(
        a.iter()
            .map(|t| t.as_str().expect("a string").to_owned())
            .collect(),
    )
}

/// Checks `got` against the step's `expect` / `expect_error` / `within_ms` / `after_ms`.
fn check(name: &str, step: &Value, got: &Answer, took: Duration) {
    let at = format!("{name}: {step}");
    if let Some(e) = step.get("expect_error") {
        match got {
            Err(err) => assert_eq!(kind(err), e.as_str().unwrap(), "{at}: {err}"),
            Ok(v) => panic!("{at}: expected an error, got {v:?}"),
        }
    } else if let Some(want) = step.get("expect") {
        match got {
            Ok(v) => assert_eq!(v.as_ref().unwrap_or(&Value::Null), want, "{at}"),
            Err(e) => panic!("{at}: {e}"),
        }
    } else if let Err(e) = got {
        panic!("{at}: {e}");
    }
    if let Some(max) = step.get("within_ms").and_then(Value::as_u64) {
        assert!(took <= Duration::from_millis(max), "{at}: took {took:?}");
    }
    if let Some(min) = step.get("after_ms").and_then(Value::as_u64) {
        assert!(
            took >= Duration::from_millis(min),
            "{at}: answered after {took:?}"
        );
    }
}

fn expect_counter(name: &str, what: &str, want: &Value, got: u64) {
    match want {
        Value::Number(n) => assert_eq!(got, n.as_u64().unwrap(), "{name}: {what}"),
        Value::String(s) => {
            let min: u64 = s.strip_prefix(">=").expect(">=n").parse().unwrap();
            assert!(got >= min, "{name}: {what} = {got}, expected {s}");
        }
        _ => panic!("{name}: bad expectation for {what}"),
    }
}

/// The calls of a `load` step: when it started, and its callers.
type Running = (Instant, Vec<Caller>);

fn play(name: &str, scenario: &Value, mut tier: Tier, mode: &Arc<Mode>) {
    let n = scenario["processes"].as_u64().unwrap_or(1) as usize;
    let procs: Vec<Cache> = (0..n).map(|_| tier.process(&scenario["cache"])).collect();
    let loads = Arc::new(AtomicUsize::new(0));
    let mut running: HashMap<String, Running> = HashMap::new();
    // While the bus is down: each process's `notices_lost` when it went down.
    let mut bus: Option<Vec<u64>> = None;
    for step in scenario["steps"].as_array().expect("steps") {
        let p = &procs[step["p"].as_u64().unwrap_or(0) as usize];
        let text = |f: &str| step[f].as_str().unwrap_or_default().to_owned();
        let started = Instant::now();
        match step["op"].as_str().expect("op") {
            "get_or_load" => {
                let seen = Seen::default();
                let got = mode.call(p, step, &loads, &seen);
                check(name, step, &got, started.elapsed());
                if let Some(want) = step.get("expect_context") {
                    let seen = seen.lock().unwrap().clone();
                    let seen = seen.unwrap_or_else(|| panic!("{name}: {step}: no load ran"));
                    for (field, w) in want.as_object().expect("expect_context") {
                        assert_eq!(&seen[field], w, "{name}: {step}: context {field}");
                    }
                }
            }
            "get_or_load_many" => {
                check(
                    name,
                    step,
                    &mode.call_many(p, step, &loads),
                    started.elapsed(),
                );
            }
            "load" | "load_many" => {
                let before = progress(p, &loads);
                running.insert(text("id"), (started, mode.start(p, step, &loads)));
                // Let the calls reach the fleet before the next step: one of them loads, or
                // asked the fleet for a lock (a loaded machine can take longer than any fixed
                // pause); then a moment for the step's other callers.
                let until = Instant::now() + Duration::from_secs(2);
                while progress(p, &loads) == before && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(2));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            "await" => {
                let (since, callers) = running.remove(&text("id")).expect("a started load");
                for c in callers {
                    let (got, at) = mode.join(c);
                    check(name, step, &got, at - since);
                }
            }
            "get" => check(name, step, &mode.get(p, &text("key")), started.elapsed()),
            "set" => {
                let r = mode.set(
                    p,
                    &text("key"),
                    step["value"].clone(),
                    strings(&step["tags"]),
                );
                check(name, step, &r, started.elapsed());
            }
            "invalidate_tag" => {
                let tags = strings(&step["tags"]).unwrap_or_else(|| vec![text("tag")]);
                let tags: Vec<&str> = tags.iter().map(String::as_str).collect();
                for _ in 0..step["repeat"].as_u64().unwrap_or(1) {
                    let r = mode.tags(p, &tags, step["soft"].as_bool() == Some(true));
                    check(name, step, &r, started.elapsed());
                }
            }
            "invalidate" => check(
                name,
                step,
                &mode.invalidate(p, &text("key")),
                started.elapsed(),
            ),
            "bump" => check(name, step, &mode.bump(p, &text("ns")), started.elapsed()),
            "sleep" => std::thread::sleep(ms(step, "ms")),
            "fault" => {
                let fault = text("fault");
                let lost = |p: &Cache| p.metrics().1.notices_lost;
                let drops = |p: &Cache| p.metrics().1.subscription_drops;
                let before: Vec<u64> = procs.iter().map(drops).collect();
                tier.fault(&fault, step["ns"].as_str(), bus.is_some());
                if fault == "bus_down" {
                    // Every process saw its subscription drop before the scenario goes on.
                    wait_for(&procs, &before, drops, "the bus drop was not seen");
                    bus = Some(procs.iter().map(lost).collect());
                }
                if fault == "up" {
                    wait_until_reachable(&procs);
                    if let Some(lost_before) = bus.take() {
                        // Every subscription was confirmed again (and the gap counted lost).
                        wait_for(&procs, &lost_before, lost, "the bus was not repaired");
                    }
                }
            }
            "resubscribe" => tier.resubscribe(),
            "plant" | "plant_epoch" | "plant_lock" => tier.plant(step),
            "outside_delete" | "outside_flush" => tier.outside(step),
            "plant_tag" | "evict_tag" => tier.plant_tag(step),
            "expect_loads" => {
                let want = step["n"].as_u64().unwrap() as usize;
                assert_eq!(loads.load(Ordering::SeqCst), want, "{name}: loads");
            }
            "expect_metrics" => {
                let (l1, tier_m) = p.metrics();
                if let Some(want) = step.get("l1").and_then(Value::as_object) {
                    let ns = l1
                        .namespace(&text("ns"))
                        .map(|m| m.counters.clone())
                        .unwrap_or_default();
                    for (field, w) in want {
                        let got = ns.fields().iter().find(|f| f.0 == field).expect(field).2;
                        expect_counter(name, field, w, got);
                    }
                }
                if let Some(want) = step.get("tier").and_then(Value::as_object) {
                    for (field, w) in want {
                        let got = tier_m
                            .fields()
                            .into_iter()
                            .find(|f| f.0 == field)
                            .expect(field)
                            .2;
                        expect_counter(name, field, w, got);
                    }
                }
            }
            other => panic!("{name}: unknown op {other}"),
        }
    }
    for (_, callers) in running.into_values() {
        for c in callers {
            let _ = mode.join(c);
        }
    }
}

/// How far `p` got: loader calls in the fleet, and `p`'s answers from the fleet lock.
fn progress(p: &Cache, loads: &AtomicUsize) -> (usize, u64) {
    let tier = p.metrics().1;
    let asked = tier.fleet_locks_acquired + tier.fleet_locks_contended + tier.backend_errors;
    (loads.load(Ordering::SeqCst), asked)
}

/// After the tier comes back, every process's connections have reconnected (a probe of a
/// namespace of its own reaches the tier) before the scenario goes on.
fn wait_until_reachable(procs: &[Cache]) {
    let until = Instant::now() + Duration::from_secs(10);
    for p in procs {
        while p.set("conformance-probe:k", Value::Null).is_err() {
            assert!(Instant::now() < until, "the tier did not come back");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Waits until `counter` of every process passed its value in `before`.
fn wait_for(procs: &[Cache], before: &[u64], counter: impl Fn(&Cache) -> u64, what: &str) {
    let until = Instant::now() + Duration::from_secs(10);
    for (p, b) in procs.iter().zip(before) {
        while counter(p) <= *b {
            assert!(Instant::now() < until, "{what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

fn scenarios() -> Vec<(String, Value)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../conformance");
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .expect("conformance/")
        .filter_map(|e| {
            let path = e.ok()?.path();
            (path.extension()? == "json").then_some(path)
        })
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("scenario");
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            (name, serde_json::from_str(&text).expect("scenario JSON"))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(out.len() >= 10, "the scenarios are there");
    out
}

fn tiers_of(s: &Value) -> Vec<String> {
    s["tiers"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The optional features of the format (conformance/README.md, `requires`) this runner
/// plays.
const SUPPORTED: &[&str] = &["load_context", "tags", "tti", "outside_writes"];

/// Why this runner does not play `s`, if it does not.
fn unsupported(s: &Value) -> Option<String> {
    let missing: Vec<&str> = s["requires"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|f| !SUPPORTED.contains(f))
        .collect();
    (!missing.is_empty()).then(|| format!("needs {missing:?}"))
}

/// Plays every scenario that lists `tier` ("memory" plays them all) in `mode`.
fn play_all(tier: &str, mode: Mode) {
    if tier == "redis" && !common::redis_available() {
        return;
    }
    if tier == "memcached" && !common::memcached::available() {
        return;
    }
    let mode = Arc::new(mode);
    let only = std::env::var("CONFORMANCE").ok();
    for (name, s) in scenarios() {
        let listed = tier == "memory" || tiers_of(&s).iter().any(|t| t == tier);
        if !listed || only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let at = format!("conformance ({tier}, {})", mode.name());
        if let Some(why) = unsupported(&s) {
            eprintln!("{at}: {name} SKIPPED: {why}");
            continue;
        }
        eprintln!("{at}: {name}");
        let place = match tier {
            "memory" => Tier::Memory(MemoryStore::new()),
            "memcached" => Tier::Memcached(
                common::memcached::Memcached::start().expect("memcached"),
                common::unique("c"),
            ),
            _ => Tier::Redis(common::Server::start(), common::unique("c")),
        };
        play(&name, &s, place, &mode);
    }
}

#[test]
fn every_scenario_on_the_memory_tier() {
    play_all("memory", Mode::Blocking);
}

#[test]
fn every_scenario_on_the_memory_tier_async() {
    play_all("memory", Mode::tokio());
}

#[test]
fn every_scenario_on_redis() {
    play_all("redis", Mode::Blocking);
}

#[test]
fn every_scenario_on_redis_async() {
    play_all("redis", Mode::tokio());
}

#[test]
fn every_scenario_on_memcached() {
    play_all("memcached", Mode::Blocking);
}

#[test]
fn every_scenario_on_memcached_async() {
    play_all("memcached", Mode::tokio());
}
