//! Property tests of the expiry arithmetic: TTL jitter, XFetch, and the
//! hard upper bound on staleness, the last one by driving the engine's state machine
//! ([`Cache::lookup`]) on a [`ManualClock`] through random sequences of reads, loads that
//! succeed, fail, are abandoned or time out, sets, invalidations, bumps and time steps.
//!
//! Case counts: proptest's default (256 per property) unless `PROPTEST_CASES` says otherwise.

use std::collections::HashMap;
use std::time::Duration;

use futures_util::FutureExt;
use herdless::{
    Cache, Clock, DefaultRng, Error, HitState, LoadError, LoadGuard, Lookup, ManualClock, Waited,
    Waiter, jitter, xfetch,
};
use proptest::prelude::*;
use rand_core::SeedableRng;

/// Any TTL from a nanosecond to ~30 years, plus the extremes a caller may pass for "forever".
fn ttl() -> impl Strategy<Value = Duration> {
    prop_oneof![
        8 => (1u64..=1_000_000_000_000_000_000).prop_map(Duration::from_nanos),
        1 => Just(Duration::MAX),
        1 => (0u64..=u64::MAX, 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
    ]
}

/// The engine's own draws: 53-bit multiples in [0, 1).
fn unit() -> impl Strategy<Value = f64> {
    (0u64..(1 << 53)).prop_map(|b| b as f64 / (1u64 << 53) as f64)
}

fn jitter_fraction() -> impl Strategy<Value = f64> {
    prop_oneof![Just(0.0), unit()]
}

/// `x` within `rel` of `[lo, hi]` (f64 seconds lose nanoseconds beyond ~104 days).
fn within(x: f64, lo: f64, hi: f64) -> bool {
    let slack = hi.abs() * 1e-12 + 2e-9;
    x >= lo - slack && x <= hi + slack
}

proptest! {
    /// Jitter is `ttl * (1 + j * (u - 0.5))`, so within `[ttl (1 - j/2), ttl (1 + j/2)]`; never
    /// zero for a positive TTL, never a panic or a wrap-around near `Duration::MAX`.
    #[test]
    fn jittered_ttl_follows_the_formula_and_its_bounds(ttl in ttl(), j in jitter_fraction(), u in unit()) {
        let t = jittered_checked(ttl, j, u);
        let (ttl_s, t_s) = (ttl.as_secs_f64(), t.as_secs_f64());
        let saturated = t == Duration::MAX;
        if !saturated {
            let expected = ttl_s * (1.0 + j * (u - 0.5));
            prop_assert!(within(t_s, expected, expected), "{t:?} != {ttl:?} * (1 + {j} * ({u} - 0.5))");
        }
        prop_assert!(within(t_s, ttl_s * (1.0 - j / 2.0), ttl_s * (1.0 + j / 2.0)) || saturated);
        // Never zero: 1 - j/2 > 1/2, so only a TTL of one nanosecond may round down to zero.
        if ttl >= Duration::from_nanos(2) {
            prop_assert!(t > Duration::ZERO, "{ttl:?} jittered to zero");
        }
        let (lo, hi) = std::panic::catch_unwind(|| jitter::bounds(ttl, j))
            .map_err(|_| TestCaseError::fail(format!("bounds({ttl:?}, {j}) panicked")))?;
        prop_assert!(lo <= hi);
        if j == 0.0 {
            prop_assert_eq!(t, ttl);
        }
    }

    /// A larger draw never gives a shorter TTL, and a wider band never narrows it.
    #[test]
    fn jitter_is_monotonic_in_u(ttl in ttl(), j in jitter_fraction(), u1 in unit(), u2 in unit()) {
        let (lo, hi) = if u1 <= u2 { (u1, u2) } else { (u2, u1) };
        prop_assert!(jittered_checked(ttl, j, lo) <= jittered_checked(ttl, j, hi));
    }

    /// XFetch fires with a probability that never decreases as expiry nears, nor as beta or
    /// delta grow: for the same draw `u`, a reader closer to expiry, or with a larger beta or
    /// delta, never refreshes later. At the expiry itself it always fires (beta, delta > 0).
    #[test]
    fn xfetch_never_refreshes_later_when_closer_or_costlier(
        gap1 in 0u64..100_000_000_000, gap2 in 0u64..100_000_000_000,
        delta1 in 0u64..10_000_000_000, delta2 in 0u64..10_000_000_000,
        beta1 in 0.0f64..10.0, beta2 in 0.0f64..10.0,
        u in unit(),
    ) {
        let u = 1.0 - u; // the engine draws in (0, 1]
        let d = Duration::from_nanos;
        let (near, far) = (gap1.min(gap2), gap1.max(gap2));
        let (small_d, big_d) = (delta1.min(delta2), delta1.max(delta2));
        let (small_b, big_b) = (beta1.min(beta2), beta1.max(beta2));
        let fires = |gap, delta, beta| xfetch::should_refresh(d(gap), d(delta), beta, u);
        prop_assert!(!fires(far, delta1, beta1) || fires(near, delta1, beta1));
        prop_assert!(!fires(gap1, small_d, beta1) || fires(gap1, big_d, beta1));
        prop_assert!(!fires(gap1, delta1, small_b) || fires(gap1, delta1, big_b));
        let p = |gap, delta, beta| xfetch::probability(d(gap), d(delta), beta);
        prop_assert!(p(near, delta1, beta1) >= p(far, delta1, beta1));
        prop_assert!(p(gap1, big_d, beta1) >= p(gap1, small_d, beta1));
        prop_assert!(p(gap1, delta1, big_b) >= p(gap1, delta1, small_b));
        let p1 = p(gap1, delta1, beta1);
        prop_assert!((0.0..=1.0).contains(&p1));
        if delta1 > 0 && beta1 > 0.0 {
            prop_assert!(fires(0, delta1, beta1), "at expiry every read refreshes");
            prop_assert_eq!(p(0, delta1, beta1), 1.0);
        } else {
            prop_assert!(!fires(0, delta1, beta1), "beta 0 or an unmeasured load never fires");
        }
    }

    /// The hit path skips the draw when `out_of_reach`: then no draw the engine can make
    /// (53-bit, so u >= 2^-53) may fire.
    #[test]
    fn out_of_reach_means_no_draw_can_fire(
        gap in 0u64..u64::MAX, delta in 0u64..100_000_000_000, beta in 0.0f64..100.0,
        u in unit(),
    ) {
        let d = Duration::from_nanos;
        if xfetch::out_of_reach(d(gap), d(delta), beta) {
            let smallest = 2f64.powi(-53);
            prop_assert!(!xfetch::should_refresh(d(gap), d(delta), beta, smallest));
            prop_assert!(!xfetch::should_refresh(d(gap), d(delta), beta, 1.0 - u));
        }
    }

    /// The hard upper bound on staleness, on the engine itself. See [`Model`].
    #[test]
    fn nothing_is_served_older_than_promised(
        cfg in config(),
        ops in proptest::collection::vec(op(), 1..120),
        seed in any::<u64>(),
    ) {
        let mut m = Model::new(cfg, seed);
        for op in ops {
            m.apply(op).map_err(TestCaseError::fail)?;
        }
        m.finish().map_err(TestCaseError::fail)?;
    }
}

fn jittered_checked(ttl: Duration, j: f64, u: f64) -> Duration {
    std::panic::catch_unwind(|| jitter::jittered(ttl, j, u))
        .unwrap_or_else(|_| panic!("jittered({ttl:?}, {j}, {u}) panicked"))
}

// ---- the staleness model ------------------------------------------------------------------

const KEYS: [&str; 3] = ["ns:a", "ns:b", "other:c"];
const MS: u64 = 1_000_000;

#[derive(Clone, Debug)]
struct Cfg {
    ttl_ms: u64,
    grace_ms: u64,
    /// Fail-safe retention past ttl (at least grace), if on.
    max_stale_ms: Option<u64>,
    negative_ttl_ms: u64,
    jitter: f64,
    beta: f64,
    hard_timeout_ms: Option<u64>,
    wait_timeout_ms: u64,
    backoff_ms: u64,
}

fn config() -> impl Strategy<Value = Cfg> {
    (
        1u64..5_000,
        prop_oneof![Just(0u64), 1u64..3_000],
        prop_oneof![Just(None), (0u64..20_000).prop_map(Some)],
        1u64..3_000,
        prop_oneof![Just(0.0), 0.0f64..0.99],
        prop_oneof![Just(0.0), 0.0f64..4.0],
        prop_oneof![Just(None), (2u64..4_000).prop_map(Some)],
        1u64..4_000,
        0u64..3_000,
    )
        .prop_map(
            |(ttl, grace, extra, neg, jitter, beta, hard, wait, backoff)| Cfg {
                ttl_ms: ttl,
                grace_ms: grace,
                max_stale_ms: extra.map(|e| grace + e),
                negative_ttl_ms: neg,
                jitter,
                beta,
                hard_timeout_ms: hard,
                wait_timeout_ms: wait,
                backoff_ms: backoff,
            },
        )
}

#[derive(Clone, Debug)]
enum Op {
    /// Time moves on by this many milliseconds.
    Advance(u64),
    /// A caller looks the key up (and keeps whatever guard or waiter it is given).
    Lookup(usize),
    /// A pending load (picked by index) ends: `Some(true)` a value, `Some(false)` absent,
    /// `None` an error.
    Complete(usize, Option<bool>),
    /// A pending load is abandoned (its caller went away).
    Abandon(usize),
    /// The application writes a new value through the cache.
    Set(usize, Option<u64>),
    Invalidate(usize),
    /// Bumps the key's namespace.
    Bump(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0..KEYS.len();
    prop_oneof![
        4 => prop_oneof![1u64..50, 50u64..2_000, 2_000u64..30_000].prop_map(Op::Advance),
        6 => k.clone().prop_map(Op::Lookup),
        3 => (0usize..8, prop_oneof![Just(Some(true)), Just(Some(false)), Just(None)])
            .prop_map(|(i, o)| Op::Complete(i, o)),
        1 => (0usize..8).prop_map(Op::Abandon),
        2 => (k.clone(), prop_oneof![Just(None), (1u64..5_000).prop_map(Some)])
            .prop_map(|(k, t)| Op::Set(k, t)),
        1 => k.clone().prop_map(Op::Invalidate),
        1 => k.prop_map(Op::Bump),
    ]
}

/// What the test knows of one value it produced: values are unique ids.
#[derive(Clone, Copy, Debug)]
struct Written {
    key: usize,
    /// The time it was written to the cache (a set, or the end of its load), in ns.
    at: u64,
    /// The longest it may be fresh: its TTL (per-call or the cache's) times `1 + j/2`.
    fresh_max: u64,
    /// The sequence number of the origin state it reflects: a set's own, a load's start.
    seq: u64,
}

/// A value in the cache: `(id, key)`; `None` is an absence (ids of absences are tracked by
/// the test on the side, as `Option` cannot carry them).
type V = u64;

struct Pending {
    guard: LoadGuard<V>,
    key: usize,
    seq: u64,
}

struct Waiting {
    waiter: Waiter<V>,
    key: usize,
    /// The invalidation barrier when it joined: what it is handed must not predate it.
    barrier: u64,
}

/// The oracle. Every value is a unique id; the test records when and how each was written.
/// It checks, for every value any caller receives:
///
/// - **staleness**: a fresh or stale hit (and a `get`) is at most `ttl * (1 + j/2) + grace`
///   old, measured from when it was written to the cache (a `set`, or the end of the load
///   that produced it), with the per-call TTL where one was given; a fail-safe value
///   (a hit in the fail-safe phase, a failed load's or a timed-out waiter's fallback) at
///   most `ttl * (1 + j/2) + max_stale`, and only when fail-safe is on; an absence at
///   most `negative_ttl * (1 + j/2)`;
/// - **freshness** of the state: a hit reports `Fresh` only within `ttl * (1 + j/2)`;
/// - **ordering**: a hit never serves a value whose data predates the key's last `set`,
///   `invalidate` or namespace `bump` (a load reflects the origin as of its start; a load
///   that started before the barrier must not be stored). A waiter receives its flight's
///   result, which may predate barriers raised after it joined, but not one before.
struct Model {
    cfg: Cfg,
    clock: ManualClock,
    cache: Cache<V>,
    next_id: u64,
    seq: u64,
    written: HashMap<u64, Written>,
    /// Per key: the sequence number of its last set/invalidate/bump.
    barrier: [u64; KEYS.len()],
    pending: Vec<Pending>,
    waiting: Vec<Waiting>,
    /// How many values were received and checked.
    checked: u64,
}

fn ns(n: u64) -> Duration {
    Duration::from_nanos(n)
}

impl Model {
    fn new(cfg: Cfg, seed: u64) -> Self {
        let clock = ManualClock::new();
        // Start away from zero so "written at 0" cannot hide an off-by-one.
        clock.advance(Duration::from_secs(1));
        let mut b = Cache::<V>::builder()
            .clock(clock.clone())
            .rng(DefaultRng::seed_from_u64(seed))
            .ttl(ns(cfg.ttl_ms * MS))
            .grace(ns(cfg.grace_ms * MS))
            .negative_ttl(ns(cfg.negative_ttl_ms * MS))
            .jitter(cfg.jitter)
            .beta(cfg.beta)
            .wait_timeout(ns(cfg.wait_timeout_ms * MS))
            .failsafe_backoff(ns(cfg.backoff_ms * MS))
            .capacity(2);
        if let Some(m) = cfg.max_stale_ms {
            b = b.max_stale(ns(m * MS));
        }
        if let Some(h) = cfg.hard_timeout_ms {
            b = b.hard_timeout(ns(h * MS));
        }
        let cache = b.build().expect("valid options");
        Self {
            cfg,
            clock,
            cache,
            next_id: 1,
            seq: 0,
            written: HashMap::new(),
            barrier: [0; KEYS.len()],
            pending: Vec::new(),
            waiting: Vec::new(),
            checked: 0,
        }
    }

    fn now(&self) -> u64 {
        self.clock.now().as_nanos() as u64
    }

    /// The longest a value written with `ttl_ms` may be fresh: `ttl * (1 + j/2)`, plus a
    /// nanosecond of float rounding.
    fn fresh_max(&self, ttl_ms: u64) -> u64 {
        (ttl_ms as f64 * MS as f64 * (1.0 + self.cfg.jitter / 2.0)).ceil() as u64 + 1
    }

    fn new_id(&mut self, key: usize, fresh_max: u64, seq: u64) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let at = self.now();
        self.written.insert(
            id,
            Written {
                key,
                at,
                fresh_max,
                seq,
            },
        );
        id
    }

    fn raise_barrier(&mut self, keys: impl Iterator<Item = usize>) {
        self.seq += 1;
        for k in keys {
            self.barrier[k] = self.seq;
        }
    }

    fn apply(&mut self, op: Op) -> Result<(), String> {
        match op {
            Op::Advance(ms) => self.clock.advance(ns(ms * MS)),
            Op::Lookup(k) => self.lookup(k)?,
            Op::Complete(i, outcome) => {
                if !self.pending.is_empty() {
                    let p = self.pending.swap_remove(i % self.pending.len());
                    self.complete(p, outcome)?;
                }
            }
            Op::Abandon(i) => {
                if !self.pending.is_empty() {
                    let p = self.pending.swap_remove(i % self.pending.len());
                    p.guard.abandon();
                }
            }
            Op::Set(k, ttl) => {
                self.raise_barrier(std::iter::once(k));
                let fresh_max = self.fresh_max(ttl.unwrap_or(self.cfg.ttl_ms));
                let id = self.new_id(k, fresh_max, self.seq);
                match ttl {
                    Some(t) => self.cache.set_with_ttl(KEYS[k], id, ns(t * MS)),
                    None => self.cache.set(KEYS[k], id),
                }
                .map_err(|e| format!("set failed: {e}"))?;
            }
            Op::Invalidate(k) => {
                self.raise_barrier(std::iter::once(k));
                self.cache.invalidate(KEYS[k]).map_err(|e| e.to_string())?;
            }
            Op::Bump(k) => {
                let namespace = KEYS[k].split(':').next().unwrap_or_default();
                let same: Vec<usize> = (0..KEYS.len())
                    .filter(|&j| KEYS[j].starts_with(&format!("{namespace}:")))
                    .collect();
                self.raise_barrier(same.into_iter());
                self.cache.bump(namespace);
            }
        }
        self.poll_waiters()?;
        // `get` is a read too: it must obey the same bounds.
        for (k, key) in KEYS.iter().enumerate() {
            if let Some(id) = self.cache.get(key) {
                self.check_served(k, id, Served::Hit, "get")?;
            }
        }
        Ok(())
    }

    fn lookup(&mut self, k: usize) -> Result<(), String> {
        match self.cache.lookup(KEYS[k]) {
            Ok(Lookup::Hit(hit)) => {
                let kind = match hit.state {
                    HitState::Fresh => Served::Fresh,
                    HitState::Stale => Served::Hit,
                    HitState::FailSafe => Served::FailSafe,
                };
                if let Some(id) = hit.value {
                    self.check_served(k, id, kind, "hit")?;
                } else if hit.state != HitState::Fresh {
                    return Err("an absence was served past its negative TTL".into());
                }
                if let Some(guard) = hit.refresh {
                    let seq = self.seq;
                    self.pending.push(Pending { guard, key: k, seq });
                }
            }
            Ok(Lookup::Lead(guard)) => {
                if let Some(&fb) = guard.fallback() {
                    self.check_served(k, fb, Served::FailSafe, "leader's fallback")?;
                }
                let seq = self.seq;
                self.pending.push(Pending { guard, key: k, seq });
            }
            Ok(Lookup::Wait(waiter)) => {
                let barrier = self.barrier[k];
                self.waiting.push(Waiting {
                    waiter,
                    key: k,
                    barrier,
                });
            }
            Err(Error::TooManyFlights { .. }) => {}
            Err(e) => return Err(format!("lookup failed: {e}")),
        }
        Ok(())
    }

    fn complete(&mut self, p: Pending, outcome: Option<bool>) -> Result<(), String> {
        let k = p.key;
        let answer = match outcome {
            Some(true) => {
                let fresh_max = self.fresh_max(self.cfg.ttl_ms);
                Ok(Some(self.new_id(k, fresh_max, p.seq)))
            }
            Some(false) => Ok(None),
            None => Err(LoadError::new(std::io::Error::other("origin down"))),
        };
        let own = answer.as_ref().ok().copied().flatten();
        match p.guard.complete(answer) {
            Ok(Some(id)) if Some(id) != own => {
                self.check_served(k, id, Served::FailSafe, "failed load's fallback")?
            }
            Ok(_) | Err(_) => {}
        }
        Ok(())
    }

    fn poll_waiters(&mut self) -> Result<(), String> {
        let mut still = Vec::new();
        for mut w in std::mem::take(&mut self.waiting) {
            match (&mut w.waiter).now_or_never() {
                None => still.push(w),
                Some(Ok(Waited::Loaded(Some(id)))) => {
                    let wr = self.written[&id];
                    if wr.seq < w.barrier {
                        return Err(format!("a waiter got {id} ({wr:?}) older than its barrier"));
                    }
                    self.check_served(w.key, id, Served::Waited, "waiter")?;
                }
                Some(Ok(Waited::Stale(id))) => {
                    self.check_served(w.key, id, Served::FailSafe, "waiter's fallback")?
                }
                Some(Ok(Waited::Loaded(None) | Waited::Retry(_))) | Some(Err(_)) => {}
            }
        }
        self.waiting = still;
        Ok(())
    }

    fn check_served(&mut self, k: usize, id: u64, kind: Served, what: &str) -> Result<(), String> {
        self.checked += 1;
        let w = *self
            .written
            .get(&id)
            .ok_or_else(|| format!("{what}: unknown value {id}"))?;
        if w.key != k {
            return Err(format!(
                "{what}: value {id} of {} served for {}",
                KEYS[w.key], KEYS[k]
            ));
        }
        let age = self.now() - w.at;
        let grace = self.cfg.grace_ms * MS;
        let limit = match kind {
            Served::Fresh => w.fresh_max,
            Served::Hit | Served::Waited => w.fresh_max + grace,
            Served::FailSafe => match self.cfg.max_stale_ms {
                Some(m) => w.fresh_max + m * MS,
                // Without fail-safe a stale-state value may still be a fallback.
                None => w.fresh_max + grace,
            },
        };
        if age > limit {
            return Err(format!(
                "{what}: value {id} served {kind:?} at age {age} ns > bound {limit} ns ({:?})",
                self.cfg
            ));
        }
        if matches!(kind, Served::Fresh | Served::Hit) && w.seq < self.barrier[k] {
            return Err(format!(
                "{what}: value {id} (seq {}) predates the last set/invalidate/bump (seq {}) of {}",
                w.seq, self.barrier[k], KEYS[k]
            ));
        }
        Ok(())
    }

    fn finish(mut self) -> Result<(), String> {
        // End every load and let every waiter settle: nothing may hang or leak a flight.
        while let Some(p) = self.pending.pop() {
            self.complete(p, Some(true))?;
            self.poll_waiters()?;
        }
        self.clock.advance(ns(self.cfg.wait_timeout_ms * MS + 1));
        self.poll_waiters()?;
        if !self.waiting.is_empty() {
            return Err(format!("{} waiters never ended", self.waiting.len()));
        }
        // A lookup past every deadline settles flights a hard timeout left behind.
        for k in 0..KEYS.len() {
            self.lookup(k)?;
        }
        while let Some(p) = self.pending.pop() {
            p.guard.abandon();
        }
        self.waiting.clear();
        if herdless::driver::flights_in_progress(&self.cache) != 0 {
            return Err(format!(
                "{} flight records left after every load ended",
                herdless::driver::flights_in_progress(&self.cache)
            ));
        }
        let _ = self.checked;
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Served {
    /// A hit reported fresh.
    Fresh,
    /// A hit, fresh or within grace (also `get`).
    Hit,
    /// A load's result handed to a waiter.
    Waited,
    /// A fail-safe value.
    FailSafe,
}
