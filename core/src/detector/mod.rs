//! The stampede detector: the fingerprint of a stampede (misses above 5x their steady state,
//! origin p99 above 10x its p50, lock waits above the rebuild time, spikes repeating with the
//! TTL) on rolling windows, per namespace and per hot key.
//!
//! - Alert 1: misses per tick above `spike_factor` (5) times their steady state (the median
//!   of the last ticks) → a stampede is forming. Which keys missed names the cause: one hot
//!   key, many expired entries (mass expiry), or keys with no entry (a miss storm).
//! - Alert 2: load duration p99 above `latency_factor` (10) times p50.
//! - Alert 3: waiters' wait p99 above the rebuild time (load duration p99).
//! - The sawtooth: miss spikes that repeat with a period, named with the TTL it matches.
//!
//! Cost: nothing on the hit path. The engine's per-namespace counters (striped atomics that
//! exist anyway) are sampled once per tick, lazily, by whichever slow path (a miss, a load's
//! end, a write) or [`Cache::alerts`](crate::Cache::alerts) call first sees the tick is due: one atomic load and
//! compare per slow path, and a `try_lock` once per tick. Time is the cache's
//! [`Clock`](crate::Clock), so a [`ManualClock`](crate::ManualClock) drives it
//! deterministically, from any driver.

mod alerts;
mod options;
mod prometheus;
mod sawtooth;
mod window;

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use core::time::Duration;

use hashbrown::HashMap;

pub use self::alerts::{Alert, AlertKind, Cause, Cure, Evidence};
pub use self::options::DetectorOptions;
pub(crate) use self::prometheus::alerts_gauge;
use self::sawtooth::Series;
use self::window::{Bucket, Window};
use crate::expiry::nanos;
use crate::hotkeys::HotKeys;
use crate::metrics::{HistogramSnapshot, NamespaceMetrics};
use crate::sync::{AtomicU64, Mutex, Ordering};

/// What the detector knows of the cache's configuration, to pick cures.
pub(crate) struct Setup {
    pub(crate) ttl: Duration,
    pub(crate) negative_ttl: Duration,
    pub(crate) grace: bool,
    pub(crate) xfetch: bool,
    pub(crate) budget: bool,
}

struct Tracked {
    alert: Alert,
    /// Clock time (ns) until which the alert counts as active without firing again.
    active_until: u64,
}

#[derive(Default)]
struct NsState {
    window: Window,
    series: Series,
    in_spike: bool,
    /// The cause of the latest spike and when it was, for alerts 2 and 3.
    last_cause: Option<(Cause, u64)>,
}

#[derive(Default)]
struct State {
    /// Clock time (ns) of the last tick; `None` before the first.
    last_tick: Option<u64>,
    namespaces: HashMap<Box<str>, NsState>,
    alerts: Vec<Tracked>,
}

/// The detector of one cache.
pub(crate) struct Detector {
    opts: DetectorOptions,
    setup: Setup,
    tick: u64,
    /// Clock time (ns) at which the next tick is due: the one atomic the slow paths read.
    next_tick: AtomicU64,
    state: Mutex<State>,
}

impl Detector {
    pub(crate) fn new(opts: DetectorOptions, setup: Setup) -> Self {
        Self {
            tick: nanos(opts.tick).max(1),
            opts,
            setup,
            next_tick: AtomicU64::new(0),
            state: Mutex::new(State::default()),
        }
    }

    /// Whether a tick is due at `now` (ns): the slow paths' whole cost when it is not.
    #[inline]
    pub(crate) fn due(&self, now: u64) -> bool {
        now >= self.next_tick.load(Ordering::Relaxed)
    }

    /// Closes the ticks that ended by `now` and evaluates the alerts. `snapshot` is called
    /// only when a tick is closed.
    fn run(
        &self,
        st: &mut State,
        now: u64,
        hot: Option<&HotKeys>,
        snapshot: impl FnOnce() -> Vec<NamespaceMetrics>,
    ) {
        let Some(last) = st.last_tick else {
            // The first look: every counter so far is the baseline, not a tick.
            for ns in snapshot() {
                let state = st
                    .namespaces
                    .entry(ns.namespace.as_str().into())
                    .or_default();
                state.window.prev = ns.counters;
            }
            st.last_tick = Some(now);
            if let Some(hot) = hot {
                hot.roll();
            }
            self.next_tick
                .store(now.saturating_add(self.tick), Ordering::Relaxed);
            return;
        };
        let ticks = now.saturating_sub(last) / self.tick;
        if ticks == 0 {
            return;
        }
        let closed = last + ticks * self.tick;
        st.last_tick = Some(closed);
        self.next_tick
            .store(closed.saturating_add(self.tick), Ordering::Relaxed);
        if let Some(hot) = hot {
            hot.roll();
        }
        for t in st.alerts.iter_mut() {
            if now >= t.active_until {
                t.alert.active = false;
            }
        }
        for ns in snapshot() {
            let state = st
                .namespaces
                .entry(ns.namespace.as_str().into())
                .or_default();
            let bucket = Bucket::between(&ns.counters, &state.window.prev);
            state.window.prev = ns.counters.clone();
            // The misses since the last tick belong to the first tick that ended since: a
            // miss is a slow path, and a slow path after that tick's end would have closed
            // it. The ticks after it, nobody looked at: they had no miss.
            let found = self.evaluate(&ns, state, bucket, last, now, hot);
            state.window.push(bucket.misses);
            for _ in 1..ticks.min(window::RING as u64) {
                state.window.push(0);
            }
            if ticks > 1 {
                state.in_spike = false; // the quiet ticks after it ended the spike
            }
            for (alert, active_until) in found {
                raise(&mut st.alerts, alert, active_until);
            }
        }
        let hold = nanos(self.opts.hold);
        st.alerts
            .retain(|t| t.alert.active || nanos(t.alert.last_seen).saturating_add(hold) > now);
    }

    fn evaluate(
        &self,
        ns: &NamespaceMetrics,
        state: &mut NsState,
        b: Bucket,
        tick_start: u64,
        now: u64,
        hot: Option<&HotKeys>,
    ) -> Vec<(Alert, u64)> {
        let o = &self.opts;
        let mut out = Vec::new();
        let per_tick = o.tick.as_secs_f64();
        let name = &ns.namespace;
        // Spikes are dated by their tick; latency by when it was read.
        let alert = |kind, cause, key, evidence, cures| Alert {
            kind,
            cause,
            namespace: name.clone(),
            key,
            since: Duration::from_nanos(
                if kind == AlertKind::OriginLatency || kind == AlertKind::LockWait {
                    now
                } else {
                    tick_start
                },
            ),
            last_seen: Duration::from_nanos(now),
            active: true,
            evidence,
            cures,
        };
        // Alert 1 and the sawtooth.
        let spike = state.window.steady().filter(|&steady| {
            b.misses >= o.min_spike_misses
                && b.misses as f64 > o.spike_factor * steady.max(1) as f64
        });
        if let Some(steady) = spike {
            let top = hot.and_then(|h| h.top_misser(name));
            let top_share = top
                .as_ref()
                .map_or(0.0, |(_, m)| *m as f64 / b.misses as f64);
            let known = b.expired + b.cold;
            let expired_share = if known == 0 {
                0.0
            } else {
                b.expired as f64 / known as f64
            };
            let key = top.filter(|_| top_share >= o.key_share).map(|(k, _)| k);
            let cause = if key.is_some() {
                Cause::HotKey
            } else if known > 0 && expired_share >= 0.5 {
                Cause::MassExpiry
            } else if known > 0 {
                Cause::MissStorm
            } else {
                Cause::Unknown
            };
            let cures = self.cures(cause, b.loads == 0);
            out.push((
                alert(
                    AlertKind::MissSpike,
                    cause,
                    key.clone(),
                    Evidence::MissRate {
                        per_second: b.misses as f64 / per_tick,
                        steady_per_second: steady as f64 / per_tick,
                        expired_share,
                        top_key_share: top_share,
                    },
                    cures.clone(),
                ),
                now,
            ));
            state.last_cause = Some((cause, now));
            if !state.in_spike {
                state.series.push(tick_start, key);
                let ttls = [self.setup.ttl, self.setup.negative_ttl];
                if let Some(p) = state.series.periodic(self.tick, &ttls) {
                    let until = now.saturating_add(nanos(p.period).saturating_mul(3) / 2);
                    out.push((
                        alert(
                            AlertKind::Sawtooth,
                            cause,
                            p.key,
                            Evidence::Periodic {
                                period: p.period,
                                spikes: p.spikes,
                                ttl: p.ttl,
                            },
                            cures,
                        ),
                        until,
                    ));
                }
            }
        }
        state.in_spike = spike.is_some();
        // Alerts 2 and 3 on the latency window.
        let w = &mut state.window;
        w.mark(
            now,
            nanos(o.latency_window) / 4,
            &ns.load_duration,
            &ns.lock_wait,
        );
        let (load, wait) = w.latency(&ns.load_duration, &ns.lock_wait);
        let cause = state
            .last_cause
            .filter(|(_, at)| now.saturating_sub(*at) <= nanos(o.latency_window))
            .map_or(Cause::Unknown, |(c, _)| c);
        let q =
            |h: &HistogramSnapshot, q| h.quantile(q).map(|s| Duration::from_secs_f64(s.min(1e9)));
        if load.count() >= o.min_samples {
            if let (Some(p50), Some(p99)) = (q(&load, 0.5), q(&load, 0.99)) {
                if p99.as_secs_f64() > o.latency_factor * p50.as_secs_f64() {
                    let mut cures = self.cures(cause, false);
                    push_once(&mut cures, Cure::OriginBudget);
                    out.push((
                        alert(
                            AlertKind::OriginLatency,
                            cause,
                            None,
                            Evidence::Latency {
                                p50,
                                p99,
                                loads: load.count(),
                            },
                            cures,
                        ),
                        now,
                    ));
                }
            }
        }
        if wait.count() >= o.min_samples {
            if let (Some(wait_p99), Some(rebuild_p99)) = (q(&wait, 0.99), q(&load, 0.99)) {
                if wait_p99 > rebuild_p99 {
                    let mut cures = vec![Cure::Grace, Cure::XFetch];
                    for c in self.cures(cause, false) {
                        push_once(&mut cures, c);
                    }
                    out.push((
                        alert(
                            AlertKind::LockWait,
                            cause,
                            None,
                            Evidence::LockWait {
                                wait_p99,
                                rebuild_p99,
                                waits: wait.count(),
                            },
                            cures,
                        ),
                        now,
                    ));
                }
            }
        }
        out
    }

    /// Cures for a cause, most likely first. `unloaded`: the misses led to no load through
    /// the engine (the application loads and sets itself).
    fn cures(&self, cause: Cause, unloaded: bool) -> Vec<Cure> {
        let s = &self.setup;
        let mut cures = Vec::new();
        if unloaded {
            cures.push(Cure::SingleFlight);
        }
        match cause {
            Cause::HotKey => {
                cures.extend([Cure::XFetch, Cure::Grace]);
                if s.xfetch && s.grace {
                    // Both on and still a spike: the refresh itself is the bottleneck.
                    cures.push(Cure::OriginBudget);
                }
            }
            Cause::MassExpiry => {
                cures.push(Cure::Jitter);
                if !s.budget {
                    cures.push(Cure::OriginBudget);
                }
            }
            Cause::MissStorm => {
                cures.push(Cure::NegativeCaching);
                if !s.budget {
                    cures.push(Cure::OriginBudget);
                }
            }
            Cause::Unknown => cures.push(Cure::OriginBudget),
        }
        cures
    }
}

fn push_once(cures: &mut Vec<Cure>, c: Cure) {
    if !cures.contains(&c) {
        cures.push(c);
    }
}

/// Adds a finding, or refreshes the same one (kind, namespace, key) keeping its `since`.
fn raise(alerts: &mut Vec<Tracked>, alert: Alert, active_until: u64) {
    let same = alerts.iter_mut().find(|t| {
        t.alert.kind == alert.kind
            && t.alert.namespace == alert.namespace
            && t.alert.key == alert.key
    });
    match same {
        Some(t) => {
            let since = if t.alert.active || t.active_until > nanos(alert.since) {
                t.alert.since
            } else {
                t.alert.since.min(alert.since)
            };
            t.alert = Alert { since, ..alert };
            t.active_until = active_until;
        }
        None => alerts.push(Tracked {
            alert,
            active_until,
        }),
    }
}

impl Detector {
    /// Called by the slow paths: closes the tick when one is due. `snapshot` reads the
    /// namespaces' metrics, only when a tick is closed.
    #[inline]
    pub(crate) fn tick(
        &self,
        now: u64,
        hot: Option<&HotKeys>,
        snapshot: impl FnOnce() -> Vec<NamespaceMetrics>,
    ) {
        if self.due(now) {
            self.tick_slow(now, hot, snapshot);
        }
    }

    #[cold]
    fn tick_slow(
        &self,
        now: u64,
        hot: Option<&HotKeys>,
        snapshot: impl FnOnce() -> Vec<NamespaceMetrics>,
    ) {
        // Whoever holds the lock is closing the tick already.
        if let Some(mut st) = self.state.try_lock() {
            self.run(&mut st, now, hot, snapshot);
        }
    }

    /// The findings at `now`, oldest first: active alerts and those that held within the
    /// `hold` time. Closes any tick that ended by `now`.
    pub(crate) fn alerts(
        &self,
        now: u64,
        hot: Option<&HotKeys>,
        snapshot: impl FnOnce() -> Vec<NamespaceMetrics>,
    ) -> Vec<Alert> {
        let mut st = self.state.lock();
        self.run(&mut st, now, hot, snapshot);
        let mut out: Vec<Alert> = st.alerts.iter().map(|t| t.alert.clone()).collect();
        out.sort_by_key(|a| a.since);
        out
    }
}
