//! The caching strategies compared, each a way of configuring and calling the real engine.
//!
//! Every strategy but the two naive ones drives [`herdless::Cache::lookup`], so they all
//! coalesce concurrent misses of a key (the engine never lets a key herd); they differ in
//! the options they turn on. The naive ones use the engine as plain storage (`get`/`set`)
//! and call the origin themselves on a miss, as cache-aside code usually does.

use std::time::Duration;

use herdless::{Builder, Cache};
use serde::Serialize;

use crate::origin::SimValue;

/// A caching strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// Cache-aside: `get`, and on a miss call the origin and `set`. No coordination.
    Naive,
    /// The engine with single-flight only (no grace, no XFetch, no jitter).
    SingleFlight,
    /// Single-flight plus stale-while-revalidate (`grace`).
    Swr,
    /// Single-flight plus XFetch early refresh (`beta`).
    Xfetch,
    /// Single-flight plus stale-while-revalidate and XFetch (`grace` and `beta`), no jitter.
    #[value(name = "swr+xfetch", alias = "swr-xfetch")]
    #[serde(rename = "swr+xfetch")]
    SwrXfetch,
    /// Single-flight plus TTL jitter.
    Jitter,
    /// Everything: single-flight, grace, XFetch, jitter, and the origin budget if set.
    Combined,
    /// Cache-aside with XFetch decided by each client on its own (no lock, no coalescing):
    /// the Internet Archive's `xfetch`. Uses the engine's XFetch formula on plain storage.
    XfetchUncoordinated,
    /// Single-flight plus refresh-ahead (`refresh_ahead`): the first read after an entry
    /// lived the `ahead` share of its TTL refreshes it in the background. No XFetch.
    RefreshAhead,
    /// Single-flight plus stale-while-revalidate and refresh-ahead (`grace` and
    /// `refresh_ahead`).
    #[value(name = "swr+ahead", alias = "swr-ahead")]
    #[serde(rename = "swr+ahead")]
    SwrAhead,
}

impl Strategy {
    /// The six strategies of the issue, in table order.
    pub const MAIN: [Strategy; 6] = [
        Strategy::Naive,
        Strategy::SingleFlight,
        Strategy::Swr,
        Strategy::Xfetch,
        Strategy::Jitter,
        Strategy::Combined,
    ];

    /// Its name in tables, flags and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Naive => "naive",
            Strategy::SingleFlight => "single-flight",
            Strategy::Swr => "swr",
            Strategy::Xfetch => "xfetch",
            Strategy::SwrXfetch => "swr+xfetch",
            Strategy::Jitter => "jitter",
            Strategy::Combined => "combined",
            Strategy::XfetchUncoordinated => "xfetch-uncoordinated",
            Strategy::RefreshAhead => "refresh-ahead",
            Strategy::SwrAhead => "swr+ahead",
        }
    }

    /// Whether it calls the origin itself on a miss instead of driving `lookup`.
    pub fn is_naive(self) -> bool {
        matches!(self, Strategy::Naive | Strategy::XfetchUncoordinated)
    }

    /// Whether it uses XFetch's `beta` (in the engine or client-side).
    pub fn uses_beta(self) -> bool {
        matches!(
            self,
            Strategy::Xfetch
                | Strategy::SwrXfetch
                | Strategy::Combined
                | Strategy::XfetchUncoordinated
        )
    }

    /// Whether it uses refresh-ahead's `ahead` share.
    pub fn uses_ahead(self) -> bool {
        matches!(self, Strategy::RefreshAhead | Strategy::SwrAhead)
    }

    /// The engine options this strategy turns on, from a scenario's knobs.
    pub fn builder(self, knobs: &Knobs) -> Builder<SimValue> {
        // Everything off first: each strategy then turns on exactly what it names.
        let mut b = Cache::builder()
            .capacity(knobs.capacity)
            .ttl(knobs.ttl)
            .jitter(0.0)
            .beta(0.0)
            .grace(Duration::ZERO)
            .wait_timeout(knobs.wait_timeout)
            // Absences are cached only where the scenario says so. The engine always caches
            // an absence a loader answers; a 1 ns negative TTL is how "off" is modelled.
            .negative_ttl(knobs.negative_ttl.unwrap_or(Duration::from_nanos(1)));
        match self {
            Strategy::Naive | Strategy::SingleFlight => {}
            Strategy::XfetchUncoordinated => {}
            Strategy::Swr => b = b.grace(knobs.grace),
            Strategy::Xfetch => b = b.beta(knobs.beta),
            Strategy::SwrXfetch => b = b.grace(knobs.grace).beta(knobs.beta),
            Strategy::Jitter => b = b.jitter(knobs.jitter),
            Strategy::RefreshAhead => b = b.refresh_ahead(knobs.ahead),
            Strategy::SwrAhead => b = b.grace(knobs.grace).refresh_ahead(knobs.ahead),
            Strategy::Combined => {
                b = b.grace(knobs.grace).beta(knobs.beta).jitter(knobs.jitter);
                if let Some(n) = knobs.origin_budget {
                    b = b.origin_budget(n);
                }
            }
        }
        b
    }
}

/// The engine options a scenario hands to the strategies.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Knobs {
    /// Fresh time of a value.
    pub ttl: Duration,
    /// Stale-while-revalidate window (swr, combined).
    pub grace: Duration,
    /// XFetch beta (xfetch, combined, xfetch-uncoordinated).
    pub beta: f64,
    /// Refresh-ahead share of the TTL, in (0, 1) (refresh-ahead, swr+ahead).
    pub ahead: f64,
    /// TTL jitter fraction (jitter, combined).
    pub jitter: f64,
    /// Negative caching: how long an absence is cached (None: not cached).
    pub negative_ttl: Option<Duration>,
    /// Origin budget (combined only; None: unlimited).
    pub origin_budget: Option<usize>,
    /// How long a caller waits for another caller's load.
    pub wait_timeout: Duration,
    /// Engine capacity in entries.
    pub capacity: u64,
}

impl Knobs {
    /// Knobs for `ttl`: grace ttl/2, beta 1, refresh-ahead at 0.8 of the TTL, jitter 0.2,
    /// absences cached 10 s, no budget, wait timeout 5 s, room for 1,000,000 entries.
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            grace: ttl / 2,
            beta: 1.0,
            ahead: 0.8,
            jitter: 0.2,
            negative_ttl: Some(Duration::from_secs(10)),
            origin_budget: None,
            wait_timeout: Duration::from_secs(5),
            capacity: 1_000_000,
        }
    }
}
