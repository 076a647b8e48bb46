//! # herdless-redis: the fleet tier of herdless
//!
//! Many processes of a service (Rust, Python, Node) share one Redis or Redis Cluster, and a
//! hot key still costs the origin one load per refresh for the whole fleet.
//!
//! - [`RedisBackend`]: the core's [`Backend`](herdless::Backend) on Redis: a one-round-trip
//!   read (value and namespace epoch in one `MGET`, one slot), an atomic read-or-lock script
//!   (SET NX PX semantics with a 128-bit random token), token-checked extend / release /
//!   commit scripts, INCR epochs, and per-namespace notifications published by the scripts.
//! - [`Fleet`]: the protocol with the loader run by the caller: [`Fleet::lead`] answers
//!   [`FleetOutcome::Fresh`] / [`FleetOutcome::Stale`] (serve it) or
//!   [`FleetOutcome::Lead`] with a [`FleetLease`] (load, then publish or release; the lease
//!   extends itself meanwhile). Waiting for another process is woken by its notification.
//!   This is what the Python and Node bindings drive.
//! - [`TieredCache`]: the in-memory engine as L1 in front of Redis for Rust callers, sync
//!   and async, with [`Codec`]s ([`Json`], [`RawBytes`]).
//!
//! ## Driving the fleet protocol from a binding
//!
//! ```no_run
//! use std::time::Duration;
//! use herdless_redis::{FleetOptions, FleetOutcome, RedisBackend, new_entry};
//!
//! let fleet = RedisBackend::builder("redis://127.0.0.1:6379").build()?.fleet(FleetOptions::default());
//! let bytes = match fleet.lead_blocking("users:42", 0)? {
//!     FleetOutcome::Fresh(e) | FleetOutcome::Stale(e) => e.value, // someone else's load
//!     FleetOutcome::Lead(lease) => {
//!         let loaded = Some(b"\"Ada\"".to_vec()); // run the caller's loader here
//!         let s = Duration::from_secs;
//!         lease.publish_blocking(new_entry(loaded.clone(), s(60), s(0), s(0), s(0)))?;
//!         loaded
//!     }
//! };
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The wire protocol (keys, entry bytes, scripts, channels) is specified in PROTOCOL.md at
//! the repository root; [`wire`], [`keys`], [`scripts`] and [`notify`] implement it.
//!
//! ## Failures
//! Every Redis call is bounded by `op_timeout`; connections reconnect by themselves. When
//! Redis fails, the tiered cache serves its L1, coalesces loads in the process and counts
//! the errors ([`RedisMetrics::backend_errors`]); bytes that are not an entry are a miss
//! ([`RedisMetrics::corrupt_entries`]), never a panic.

mod backend;
pub mod codec;
mod coherence;
mod conn;
mod error;
mod fleet;
pub mod keys;
mod lifetimes;
pub mod memory;
mod metrics;
pub mod notify;
mod runtime;
pub mod scripts;
mod tiered;
pub mod two_tier;
pub mod wire;

pub use backend::{
    DEFAULT_MAX_ENTRY_BYTES, MAX_LEASE, RedisBackend, RedisBuilder, lock_value, now_ms, parse_epoch,
};
pub use codec::{Codec, CodecError, Json, RawBytes};
pub use error::Error;
pub use fleet::{ErrorCounter, Fleet, FleetLease, FleetOptions, FleetOutcome, new_entry};
pub use lifetimes::{Lifetimes, MAX_TTL, fresh_for};
pub use metrics::RedisMetrics;
pub use runtime::{InRuntime, block_on};
pub use tiered::{TieredBuilder, TieredCache};
pub use two_tier::{Host, SharedTier, TierAddress, TwoTier, Versioned, Warning};
