//! # herdless-sim: the stampede simulator
//!
//! A discrete-event simulator that drives the REAL engine (crate `herdless`), not a model of
//! it: simulated clients call [`herdless::Cache::lookup`] (or `get`/`set` for the naive
//! strategies) on a virtual clock, leaders call a simulated origin with a connection pool,
//! waiters await the engine's own [`herdless::Waiter`]s. The engine's timers (wait timeout,
//! soft and hard load timeouts, budget waits) reach the simulator through
//! [`herdless::Clock::wake_at`] and become events of one queue, ordered by (virtual time,
//! sequence); the engine's randomness (jitter, XFetch) is seeded. A run is therefore
//! deterministic for a seed, and a minute of traffic takes milliseconds.
//!
//! ```
//! use herdless_sim::{HotKey, Run, Strategy};
//! use std::time::Duration;
//!
//! let hot = HotKey { rate: 500.0, duration: Duration::from_secs(25), ..HotKey::default() };
//! let naive = Run::new(hot.clone(), Strategy::Naive).run()?;
//! let single = Run::new(hot, Strategy::SingleFlight).run()?;
//! // A herd of ~ rate x load time = 100 calls per expiry, against one.
//! assert!(naive.row.origin_calls > 20 * single.row.origin_calls);
//! # Ok::<(), herdless::ConfigError>(())
//! ```
//!
//! What is modelled: clients (open-loop Poisson arrivals, or closed-loop workers), one
//! engine per simulated process, an origin with a FIFO connection pool and a load time that
//! may grow with load, and (for fleets) a shared tier with one lock per key, which is a
//! model of the Redis tier (see [`fleet`](crate#fleet-wide-coalescing)). What is not: CPU
//! time of the engine (a hit takes zero virtual time), network latency.
//!
//! ## Fleet-wide coalescing
//!
//! The fleet scenario's "fleet-wide" mode puts a shared entry and a per-key lock between
//! the processes' engines: a process's local leader adopts a fresh shared value, or takes
//! the lock and loads, or waits for the holder's notice, which also drops the key's copy in
//! the processes not waiting for it. It models what `herdless-redis` does over Redis (SET NX
//! PX lock, pub/sub notice, L2 entry); leases, crashed holders, lost notices and Redis
//! latency are not modelled. Their real behaviour is tested in `redis/`, and
//! `cargo bench -p herdless-redis --bench sim_fleet` compares the model with a real fleet.

#![warn(missing_docs)]

pub mod cli;
mod client;
mod clock;
mod executor;
mod fleet;
mod origin;
pub mod plot;
mod report;
mod scenario;
mod strategy;
mod tier;
mod world;

pub use clock::SimClock;
pub use origin::{OriginConfig, OriginError, OriginStats, SimValue};
pub use report::{Outcome, Row, markdown, table, total};
pub use scenario::{
    ColdRestart, FLEET_KEY, Fleet, HotKey, IA_ANCHORS, IaAnchor, IaStrategy, InternetArchive,
    MassExpiry, MissStorm, RefreshAheadStudy, Run, Scenario, XfetchStudy, ahead_summary,
    comparison,
};
pub use strategy::{Knobs, Strategy};

/// The README's Rust example, compiled and run as a doctest so it never lies.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
