//! Sequences of engine operations on a `Cache<u32>` with a virtual clock and a seeded rng,
//! driven single-threaded through `Lookup` / `LoadGuard` / `Waiter`, checked against a model.
//!
//! The model knows, per key, the last write the cache must hold (a `set`, or a load that
//! completed while nothing superseded it), and which loads are running. Invariants:
//! - a value served (`Hit`, `get`) is the model's current write for the key, served no later
//!   than `ttl * (1 + jitter/2) + grace` after it was written (no fail-safe configured), and
//!   `Fresh` only within `ttl * (1 + jitter/2)`; nothing written before an `invalidate`,
//!   `bump` or `clear` of the key is served after it;
//! - single flight: while a load of the key runs (and nothing superseded it), a lookup waits
//!   or gets a hit without a refresh; otherwise it never waits;
//! - with capacity for every key, an entry that is surely live is never lost;
//! - waiters end with their leader's outcome (value, absence, error, timeout, panic,
//!   hand-over) or the engine's hard timeout (ended by a lookup or a waiter), or
//!   with `WaitTimeout` only once `wait_timeout` has passed;
//! - `flights_in_progress()` never exceeds the guards held (0 when none), and
//!   `metrics().entries <= capacity`; nothing panics;
//! - a batch (`get_or_load_many_async`, run when none of its keys is loading or in doubt
//!   between fresh and stale) answers every key in the request's order: the hits as held,
//!   the rest from its one loader call, which is asked for exactly the missing keys (once
//!   each); what it loads is then held like a single load's result;
//! - tags: an entry carrying a tag invalidated since its birth is never served, one carrying
//!   a tag expired since is served only stale; a load that began before an invalidation of
//!   a tag it answers with is not stored (the model keeps the engine's tag clock, its
//!   records and its rule for tags without a record: see core/src/tags.rs).
#![no_main]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use arbitrary::Arbitrary;
use herdless::{
    Cache, DefaultRng, Error, HitState, LoadError, LoadGuard, Loaded, Lookup, ManualClock, Waited,
    Waiter,
};
use libfuzzer_sys::fuzz_target;
use rand_core::SeedableRng;

const KEYS: [&str; 4] = ["a:1", "a:2", "b:1", "b:2"];
const TAGS: [&str; 3] = ["t:0", "t:1", "t:2"];
/// Float rounding of jittered TTLs (seconds as f64, then nanoseconds).
const SLACK: Duration = Duration::from_millis(1);

#[derive(Arbitrary, Debug)]
struct Config {
    ttl_s: u8,
    grace_s: u8,
    negative_s: u8,
    jitter: u8,
    beta: bool,
    capacity: u8,
    wait_s: u8,
    /// The engine's hard timeout, in seconds (XFetch is then off, see `Sim::lookup`).
    hard_s: Option<u8>,
    seed: u64,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum How {
    /// A value, with `set_ttl(seconds)` when given, carrying the tags of the mask.
    Value(Option<u8>, u8),
    Absent,
    Error,
    /// The driver's timeout (`fail(LoadTimeout)`), as the bindings enforce it.
    TimedOut,
    Panicked,
    Abandon,
    /// Dropped unfinished outside a panic: handed over.
    Drop,
}

/// How a batch's loader call answers.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum BatchHow {
    Values,
    /// Only every other key it is asked for (the rest are absent), plus a key never asked.
    Omit,
    Error,
}

#[derive(Arbitrary, Debug)]
enum Op {
    /// A batch of the keys whose bit is set in the mask (the first repeated at the end
    /// when the flag is set).
    Batch(u8, bool, BatchHow),
    Lookup(u8),
    Finish(u8, How),
    Set(u8, Option<u8>),
    /// A set carrying the tags of the mask.
    SetTagged(u8, u8),
    /// `invalidate_tag` (true) or `expire_tag`.
    StampTag(u8, bool),
    SetAbsent(u8),
    Invalidate(u8),
    Bump(bool),
    Clear,
    Advance(u16),
    Get(u8),
}

/// A write the cache must hold for a key, with the bounds of its lifetime.
#[derive(Clone, Copy, Debug)]
struct Written {
    value: Option<u32>,
    at: Duration,
    fresh_min: Duration,
    fresh_max: Duration,
    grace: Duration,
    /// Its tags (a mask of `TAGS`).
    tags: u8,
    /// One of its tags was expired since its birth: past its fresh time.
    expired: bool,
}

impl Written {
    fn stale_max(&self) -> Duration {
        self.at + self.fresh_max + self.grace + SLACK
    }
    /// Fresh or stale for sure at `now`.
    fn surely_live(&self, now: Duration) -> bool {
        if self.expired && (self.grace.is_zero() || self.value.is_none()) {
            return false; // expired by a tag without grace: dead
        }
        now + SLACK < self.at + self.fresh_min + self.grace
    }
}

/// What the waiters of a finished load must end with.
#[derive(Clone, Debug)]
enum Outcome {
    Loaded(Option<u32>),
    LoadError,
    TimedOut,
    /// Ended by the engine at its hard timeout, before the leader finished.
    HardTimeout,
    Panicked,
    Retry,
}

struct Load {
    key: usize,
    guard: Option<LoadGuard<u32>>,
    superseded: bool,
    /// The tag clock when it began.
    born: u64,
    /// In the engine's flight table (at most one per key).
    in_table: bool,
    /// When the engine gives it up, if a hard timeout is configured.
    deadline: Option<Duration>,
    outcome: Option<Outcome>,
}

struct Waiting {
    load: usize,
    until: Duration,
    waiter: Waiter<u32>,
}

struct Sim {
    cache: Cache<u32>,
    clock: ManualClock,
    ttl: Duration,
    grace: Duration,
    negative: Duration,
    jitter: f64,
    capacity: u64,
    hard: Option<Duration>,
    entries: [Option<Written>; KEYS.len()],
    loads: Vec<Load>,
    waiters: Vec<Waiting>,
    next_value: u32,
    /// The engine's tag clock, its records (`(removed_at, expired_at)`, made on first use)
    /// and its stamps of tags without a record.
    tag_clock: u64,
    records: [Option<(u64, u64)>; TAGS.len()],
    unknown: (u64, u64),
}

impl Sim {
    fn new(c: &Config) -> Self {
        let s = |n: u8, lo: u8, hi: u8| Duration::from_secs(u64::from(n % (hi - lo + 1) + lo));
        let clock = ManualClock::new();
        let (ttl, grace, negative) = (
            s(c.ttl_s, 1, 30),
            s(c.grace_s, 0, 10),
            s(c.negative_s, 1, 10),
        );
        let jitter = [0.0, 0.1, 0.2, 0.5][usize::from(c.jitter % 4)];
        let capacity = u64::from(c.capacity % 6 + 1);
        let hard = c.hard_s.map(|h| s(h, 1, 10));
        let mut builder = Cache::builder();
        if let Some(h) = hard {
            builder = builder.hard_timeout(h);
        }
        let cache = builder
            .ttl(ttl)
            .grace(grace)
            .negative_ttl(negative)
            .jitter(jitter)
            .beta(if c.beta && hard.is_none() { 1.0 } else { 0.0 })
            .capacity(capacity)
            .shards(1)
            .wait_timeout(s(c.wait_s, 1, 10))
            .clock(clock.clone())
            .rng(DefaultRng::seed_from_u64(c.seed))
            .build()
            .expect("valid config");
        Sim {
            cache,
            clock,
            ttl,
            grace,
            negative,
            jitter,
            capacity,
            hard,
            entries: [None; KEYS.len()],
            loads: Vec::new(),
            waiters: Vec::new(),
            next_value: 0,
            tag_clock: 0,
            records: [None; TAGS.len()],
            unknown: (0, 0),
        }
    }

    fn now(&self) -> Duration {
        use herdless::Clock;
        self.clock.now()
    }

    fn value(&mut self) -> u32 {
        self.next_value += 1;
        self.next_value
    }

    fn written(&self, value: Option<u32>, ttl: Option<Duration>) -> Written {
        let (ttl, grace) = match value {
            Some(_) => (ttl.unwrap_or(self.ttl), self.grace),
            None => (self.negative, Duration::ZERO),
        };
        let j = self.jitter / 2.0;
        Written {
            value,
            at: self.now(),
            fresh_min: ttl.mul_f64(1.0 - j).saturating_sub(SLACK),
            fresh_max: ttl.mul_f64(1.0 + j) + SLACK,
            grace,
            tags: 0,
            expired: false,
        }
    }

    /// The records of the tags of `mask`, made on first use; whether an entry of them born
    /// at `born` is (removed, expired).
    fn resolve(&mut self, mask: u8, born: u64) -> (bool, bool) {
        let (mut removed, mut expired) = (false, false);
        for t in 0..TAGS.len() {
            if mask & (1 << t) != 0 {
                let (r, e) = *self.records[t].get_or_insert(self.unknown);
                removed |= r > born;
                expired |= e > born;
            }
        }
        (removed, expired)
    }

    /// `invalidate_tag` (`hard`) or `expire_tag` of tag `t`.
    fn stamp(&mut self, t: usize, hard: bool) {
        let r = if hard {
            self.cache.invalidate_tag(TAGS[t])
        } else {
            self.cache.expire_tag(TAGS[t])
        };
        r.expect("valid tag");
        self.tag_clock += 1;
        let stamp = self.tag_clock;
        match (&mut self.records[t], hard) {
            (Some((r, _)), true) => *r = stamp,
            (Some((_, e)), false) => *e = stamp,
            (None, true) => self.unknown.0 = stamp,
            (None, false) => self.unknown.1 = stamp,
        }
        for e in self.entries.iter_mut() {
            if e.is_some_and(|w| w.tags & (1 << t) != 0) {
                if hard {
                    *e = None;
                } else if let Some(w) = e {
                    w.expired = true;
                }
            }
        }
    }

    /// The running, not superseded load of `key`, if any (there is at most one).
    fn current(&self, key: usize) -> Option<usize> {
        let mut it = self
            .loads
            .iter()
            .enumerate()
            .filter(|(_, l)| l.key == key && l.in_table && !l.superseded && l.outcome.is_none())
            .map(|(i, _)| i);
        let first = it.next();
        assert!(it.next().is_none(), "two current loads of {}", KEYS[key]);
        first
    }

    fn supersede(&mut self, keys: impl Fn(usize) -> bool) {
        for l in &mut self.loads {
            if keys(l.key) {
                l.superseded = true;
            }
        }
        for (k, e) in self.entries.iter_mut().enumerate() {
            if keys(k) {
                *e = None;
            }
        }
    }

    /// A value served for `key` now must be its current write, within its lifetime.
    fn check_served(&self, key: usize, value: Option<u32>, state: HitState) {
        let now = self.now();
        let w = self.entries[key]
            .unwrap_or_else(|| panic!("served {value:?} for {} which holds nothing", KEYS[key]));
        assert_eq!(w.value, value, "served another write of {}", KEYS[key]);
        assert!(
            now < w.stale_max(),
            "served {value:?} past ttl + grace: {w:?} at {now:?}"
        );
        match state {
            HitState::Fresh => {
                assert!(!w.expired, "fresh after its tag was expired: {w:?}");
                assert!(now < w.at + w.fresh_max, "fresh past ttl: {w:?}");
            }
            HitState::Stale => {
                assert!(value.is_some(), "a stale absence");
                let expired = w.expired || now + SLACK >= w.at + w.fresh_min;
                assert!(expired, "stale before ttl: {w:?}");
            }
            HitState::FailSafe => panic!("fail-safe served without max_stale"),
        }
    }

    fn start(&mut self, key: usize, guard: LoadGuard<u32>) {
        assert!(
            self.loads.iter().all(|l| l.key != key || !l.in_table),
            "two flights of {} in the table",
            KEYS[key]
        );
        let deadline = self.hard.map(|h| self.now() + h);
        assert_eq!(guard.hard_deadline(), deadline);
        self.loads.push(Load {
            key,
            guard: Some(guard),
            superseded: false,
            born: self.tag_clock,
            in_table: true,
            deadline,
            outcome: None,
        });
    }

    fn lookup(&mut self, key: usize) {
        let live = self.entries[key].is_some_and(|w| w.surely_live(self.now()));
        let roomy = self.capacity >= KEYS.len() as u64;
        let answer = self.cache.lookup(KEYS[key]).expect("valid key");
        // Every answer but a fresh hit comes from the slow path (XFetch is off whenever a
        // hard timeout is set, so a fresh hit is surely the fast path then), which first
        // drops the key's flight if it is outdated, and ends it if it is past its deadline.
        if !matches!(&answer, Lookup::Hit(h) if h.state == HitState::Fresh) {
            let now = self.now();
            for l in self.loads.iter_mut().filter(|l| l.key == key && l.in_table) {
                let hung = l.deadline.is_some_and(|d| now >= d);
                if hung && l.outcome.is_none() {
                    l.outcome = Some(Outcome::HardTimeout);
                }
                if hung || l.superseded {
                    l.in_table = false;
                }
            }
        }
        let current = self.current(key);
        match answer {
            Lookup::Hit(hit) => {
                self.check_served(key, hit.value, hit.state);
                if let Some(guard) = hit.refresh {
                    assert!(current.is_none(), "a refresh while {} loads", KEYS[key]);
                    self.start(key, guard);
                }
            }
            Lookup::Lead(guard) => {
                assert!(current.is_none(), "a second leader for {}", KEYS[key]);
                assert!(!(live && roomy), "lost the live entry of {}", KEYS[key]);
                self.entries[key] = None;
                self.start(key, guard);
            }
            Lookup::Wait(waiter) => {
                let load = current.unwrap_or_else(|| panic!("waiting on no load of {}", KEYS[key]));
                assert!(
                    !(live && roomy),
                    "waiting beside the live entry of {}",
                    KEYS[key]
                );
                let until = self.now() + self.cache.options().wait_timeout;
                self.waiters.push(Waiting {
                    load,
                    until,
                    waiter,
                });
            }
        }
    }

    /// The slow path of a lookup drops the key's outdated flight and ends a hung one (see
    /// [`lookup`](Self::lookup)).
    fn slow_path(&mut self, key: usize) {
        let now = self.now();
        for l in self.loads.iter_mut().filter(|l| l.key == key && l.in_table) {
            let hung = l.deadline.is_some_and(|d| now >= d);
            if hung && l.outcome.is_none() {
                l.outcome = Some(Outcome::HardTimeout);
            }
            if hung || l.superseded {
                l.in_table = false;
            }
        }
    }

    fn batch(&mut self, mask: u8, dup: bool, how: BatchHow) {
        let mut keys: Vec<usize> = (0..KEYS.len()).filter(|k| mask & (1 << k) != 0).collect();
        if keys.is_empty() || self.cache.options().beta > 0.0 {
            return; // XFetch could hand out a refresh of a fresh key: not modelled here
        }
        let now = self.now();
        // Per key: expected to hit (surely fresh) or to miss (nothing held, or surely dead);
        // a key between (perhaps stale: a background refresh) or loading skips the batch.
        let mut hit = [false; KEYS.len()];
        for &k in &keys {
            match self.entries[k] {
                // Expired by a tag without grace: dead. With grace it is stale until its own
                // `ttl + grace` (crate docs, Tags: "served stale within its grace"), which a
                // batch serves like any stale hit: the arms below judge it by that bound.
                Some(w) if w.expired && (w.grace.is_zero() || w.value.is_none()) => {}
                Some(w) if now + SLACK < w.at + w.fresh_min && !w.expired => hit[k] = true,
                Some(w) if now < w.stale_max() => return,
                _ => {}
            }
            let hung = |l: &Load| l.deadline.is_some_and(|d| now >= d);
            let loading = self.loads.iter().any(|l| {
                l.key == k && l.in_table && !l.superseded && l.outcome.is_none() && !hung(l)
            });
            if loading {
                return;
            }
        }
        if dup {
            keys.push(keys[0]);
        }
        let roomy = self.capacity >= KEYS.len() as u64;
        let base = self.next_value;
        self.next_value += KEYS.len() as u32;
        let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Vec<String>>::new()));
        let loader = {
            let asked = asked.clone();
            move |misses: Vec<String>| {
                asked.lock().unwrap().push(misses.clone());
                let value = |k: &str| base + 1 + KEYS.iter().position(|x| *x == k).unwrap() as u32;
                let found: Vec<(String, Option<u32>)> = match how {
                    BatchHow::Values => {
                        misses.iter().map(|k| (k.clone(), Some(value(k)))).collect()
                    }
                    BatchHow::Omit => misses
                        .iter()
                        .step_by(2)
                        .map(|k| (k.clone(), Some(value(k))))
                        .chain([("c:9".to_string(), Some(0))])
                        .collect(),
                    BatchHow::Error => {
                        return std::future::ready(Err(std::io::Error::other("origin down")));
                    }
                };
                std::future::ready(Ok(found))
            }
        };
        let names: Vec<&str> = keys.iter().map(|&k| KEYS[k]).collect();
        let answers = {
            let cache = self.cache.clone();
            let mut call = std::pin::pin!(cache.get_or_load_many_async(names, loader));
            match call.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
                Poll::Ready(a) => a,
                Poll::Pending => panic!("a batch of keys nobody loads waited"),
            }
        };
        let asked = asked.lock().unwrap().clone();
        assert!(
            asked.len() <= 1,
            "one loader call for the misses: {asked:?}"
        );
        let asked: Vec<String> = asked.into_iter().flatten().collect();
        let mut distinct: Vec<usize> = Vec::new();
        for &k in &keys {
            if !distinct.contains(&k) {
                distinct.push(k);
            }
        }
        let missed: Vec<usize> = distinct
            .iter()
            .copied()
            .filter(|&k| asked.iter().any(|a| a == KEYS[k]))
            .collect();
        assert_eq!(
            asked.len(),
            missed.len(),
            "asked for a key twice or one not requested"
        );
        for &k in &distinct {
            let loaded = missed.contains(&k);
            if hit[k] && roomy {
                assert!(!loaded, "a batch loaded the fresh {}", KEYS[k]);
            }
            if !hit[k] {
                assert!(loaded, "a batch did not load the missing {}", KEYS[k]);
            }
            if loaded {
                self.slow_path(k);
                self.entries[k] = None;
            }
        }
        for (&k, answer) in keys.iter().zip(answers) {
            if !missed.contains(&k) {
                let v = answer.expect("a hit");
                self.check_served(k, v, HitState::Fresh);
                continue;
            }
            let nth = missed.iter().position(|&m| m == k).unwrap();
            let want = match how {
                BatchHow::Values => Some(base + 1 + k as u32),
                BatchHow::Omit if nth % 2 == 0 => Some(base + 1 + k as u32),
                BatchHow::Omit => None,
                BatchHow::Error => {
                    assert!(matches!(answer, Err(Error::Load(_))), "{answer:?}");
                    continue;
                }
            };
            assert_eq!(answer.expect("loaded"), want, "{}", KEYS[k]);
            self.entries[k] = Some(self.written(want, None));
        }
    }

    fn finish(&mut self, pick: u8, how: How) {
        let running: Vec<usize> = (0..self.loads.len())
            .filter(|&i| self.loads[i].guard.is_some())
            .collect();
        if running.is_empty() {
            return;
        }
        let i = running[usize::from(pick) % running.len()];
        let mut guard = self.loads[i].guard.take().expect("running");
        // Already ended by the engine: the leader's answer is neither stored nor sent.
        let ended = self.loads[i].outcome.is_some();
        let key = self.loads[i].key;
        // Past its hard deadline a late answer reaches its callers but is not kept.
        let late = self.loads[i].deadline.is_some_and(|d| self.now() >= d);
        let storable = !self.loads[i].superseded && !ended && !late;
        self.loads[i].in_table = false;
        let outcome = match how {
            How::Value(ttl, tags) => {
                let v = self.value();
                let ttl = ttl.map(|s| Duration::from_secs(u64::from(s % 30 + 1)));
                if let Some(t) = ttl {
                    guard.set_ttl(t);
                }
                let tags = tags % (1 << TAGS.len());
                let r = if tags == 0 {
                    guard.complete(Ok(Some(v)))
                } else {
                    let names = (0..TAGS.len()).filter(|t| tags & (1 << t) != 0);
                    guard.complete_loaded(Ok(Loaded::value(v).tags(names.map(|t| TAGS[t]))))
                };
                assert!(matches!(r, Ok(Some(x)) if x == v), "{r:?}");
                // The engine resolves the tags whether it stores the value or not.
                let (removed, expired) = self.resolve(tags, self.loads[i].born);
                if storable && !removed {
                    let mut w = self.written(Some(v), ttl);
                    (w.tags, w.expired) = (tags, expired);
                    self.entries[key] = Some(w);
                }
                Outcome::Loaded(Some(v))
            }
            How::Absent => {
                let r = guard.complete(Ok(None));
                assert!(matches!(r, Ok(None)), "{r:?}");
                if storable {
                    self.entries[key] = Some(self.written(None, None));
                }
                Outcome::Loaded(None)
            }
            How::Error => {
                let r = guard.complete(Err(LoadError::new(std::io::Error::other("origin down"))));
                assert!(matches!(r, Err(Error::Load(_))), "{r:?}");
                Outcome::LoadError
            }
            How::TimedOut => {
                let after = Duration::from_secs(1);
                let r = guard.fail(Error::LoadTimeout { after });
                assert!(matches!(r, Err(Error::LoadTimeout { .. })), "{r:?}");
                Outcome::TimedOut
            }
            How::Panicked => {
                herdless::driver::panicked(guard, Some("boom".into()));
                Outcome::Panicked
            }
            How::Abandon => {
                guard.abandon();
                Outcome::Retry
            }
            How::Drop => {
                drop(guard);
                Outcome::Retry
            }
        };
        if !ended {
            self.loads[i].outcome = Some(outcome);
        }
    }

    /// Polls every waiter once: each ends with its load's outcome, or times out on time.
    fn poll_waiters(&mut self) {
        let now = self.now();
        let mut cx = Context::from_waker(Waker::noop());
        let mut i = 0;
        while i < self.waiters.len() {
            let w = &mut self.waiters[i];
            let load = &mut self.loads[w.load];
            // A waiter ends a load past its hard deadline itself.
            if load.outcome.is_none() && load.deadline.is_some_and(|d| now >= d) {
                load.outcome = Some(Outcome::HardTimeout);
                load.in_table = false;
            }
            match Pin::new(&mut w.waiter).poll(&mut cx) {
                Poll::Pending => {
                    assert!(load.outcome.is_none(), "a waiter missed its load's end");
                    assert!(now < w.until, "a waiter outlived wait_timeout");
                    i += 1;
                    continue;
                }
                Poll::Ready(r) => match (&load.outcome, r) {
                    (Some(Outcome::Loaded(v)), Ok(Waited::Loaded(got))) => assert_eq!(*v, got),
                    (Some(Outcome::LoadError), Err(Error::Load(_))) => {}
                    (
                        Some(Outcome::TimedOut | Outcome::HardTimeout),
                        Err(Error::LoadTimeout { .. }),
                    ) => {}
                    (Some(Outcome::Panicked), Err(Error::LoaderPanicked { .. })) => {}
                    (Some(Outcome::Retry), Ok(Waited::Retry(_))) => {}
                    (None, Err(Error::WaitTimeout { .. })) => {
                        assert!(now >= w.until, "timed out early")
                    }
                    (want, got) => panic!("waiter got {got:?}, its load ended {want:?}"),
                },
            }
            self.waiters.swap_remove(i);
        }
    }

    fn step(&mut self, op: &Op) {
        let k = |i: &u8| usize::from(*i) % KEYS.len();
        match op {
            Op::Lookup(key) => self.lookup(k(key)),
            Op::Batch(mask, dup, how) => self.batch(*mask, *dup, *how),
            Op::Finish(pick, how) => self.finish(*pick, *how),
            Op::Set(key, ttl) => {
                let (key, v) = (k(key), self.value());
                let ttl = ttl.map(|s| Duration::from_secs(u64::from(s % 30 + 1)));
                match ttl {
                    Some(t) => self.cache.set_with_ttl(KEYS[key], v, t),
                    None => self.cache.set(KEYS[key], v),
                }
                .expect("valid set");
                self.supersede(|x| x == key);
                self.entries[key] = Some(self.written(Some(v), ttl));
            }
            Op::SetTagged(key, tags) => {
                let (key, v) = (k(key), self.value());
                let tags = tags % (1 << TAGS.len());
                let names: Vec<&str> = (0..TAGS.len())
                    .filter(|t| tags & (1 << t) != 0)
                    .map(|t| TAGS[t])
                    .collect();
                self.cache
                    .set_tagged(KEYS[key], v, &names)
                    .expect("valid set");
                self.supersede(|x| x == key);
                let (removed, expired) = self.resolve(tags, self.tag_clock);
                assert!(!(removed || expired), "a write is never older than a stamp");
                let mut w = self.written(Some(v), None);
                w.tags = tags;
                self.entries[key] = Some(w);
            }
            Op::StampTag(t, hard) => self.stamp(usize::from(*t) % TAGS.len(), *hard),
            Op::SetAbsent(key) => {
                let key = k(key);
                self.cache.set_absent(KEYS[key]).expect("valid set");
                self.supersede(|x| x == key);
                self.entries[key] = Some(self.written(None, None));
            }
            Op::Invalidate(key) => {
                let key = k(key);
                let live = self.entries[key].is_some_and(|w| w.surely_live(self.now()));
                let removed = self.cache.invalidate(KEYS[key]).expect("valid key");
                if live && self.capacity >= KEYS.len() as u64 {
                    assert!(removed, "invalidate found no live entry");
                }
                self.supersede(|x| x == key);
            }
            Op::Bump(b) => {
                let ns = if *b { "b" } else { "a" };
                self.cache.bump(ns);
                self.supersede(|x| KEYS[x].starts_with(ns));
            }
            Op::Clear => {
                self.cache.clear();
                self.supersede(|_| true);
            }
            Op::Advance(ms) => self.clock.advance(Duration::from_millis(u64::from(*ms))),
            Op::Get(key) => {
                let key = k(key);
                if let Some(v) = self.cache.get(KEYS[key]) {
                    let now = self.now();
                    let w = self.entries[key].expect("get served a value it does not hold");
                    let state = if now < w.at + w.fresh_min && !w.expired {
                        HitState::Fresh
                    } else {
                        HitState::Stale
                    };
                    self.check_served(key, Some(v), state);
                }
            }
        }
        self.poll_waiters();
        let held = self.loads.iter().filter(|l| l.guard.is_some()).count();
        assert!(
            herdless::driver::flights_in_progress(&self.cache) <= held,
            "a flight leaked"
        );
        assert!(
            self.cache.metrics().entries <= self.capacity,
            "over capacity"
        );
    }
}

fuzz_target!(|input: (Config, Vec<Op>)| {
    let (config, ops) = input;
    let mut sim = Sim::new(&config);
    for op in ops.iter().take(256) {
        sim.step(op);
    }
    // Hand every load still running over: nothing may stay in flight.
    while sim.loads.iter().any(|l| l.guard.is_some()) {
        sim.finish(0, How::Drop);
    }
    sim.poll_waiters();
    assert!(sim.waiters.is_empty(), "a waiter outlived every load");
    assert_eq!(
        herdless::driver::flights_in_progress(&sim.cache),
        0,
        "a flight outlived its guard"
    );
});
