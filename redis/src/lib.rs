//! # herdless-redis: the fleet tier of herdless
//!
//! Many processes of a service (Rust, Python, Node) share one Redis or Redis Cluster, and a
//! hot key still costs the origin one load per refresh for the whole fleet.
//!
//! - [`call`]: **the call machine**, one caller's call from its key to its answer, decided
//!   once for every language: the loop before a load (hit, refresh, wait, retry), the
//!   race of a running loader against its soft and hard timeouts, what a panic or an
//!   interruption becomes, the caller leaving, background jobs and how their failures are
//!   reported, batches and warm-ups. A language is a runtime of it
//!   ([`call::Lang`], [`call::Runtime`]): Rust's [`TieredCache`], the Python binding's
//!   threads and asyncio, the Node binding's event loop. I/O is never done by the machine
//!   itself: the shared tier's operations run on the backend's own tokio runtime, which
//!   wakes the call; loaders run where their language runs them.
//! - [`TwoTier`] ([`two_tier`]): **the fleet engine**, the two-tier protocol decided once.
//!   The in-memory engine (`herdless::Cache`) is the first tier and picks one local leader
//!   per key; [`TwoTier::lead`] tells that leader, step by step, what to do with the shared
//!   tier (adopt another process's entry, serve a stale one while refreshing it for the
//!   fleet, load under the fleet lock and publish, or load for this process alone because
//!   the tier is down), and its reads and writes carry the one failure policy
//!   (PROTOCOL.md, "Failure policy"). Rust's [`TieredCache`], the Python binding and the
//!   Node binding are its drivers: each only runs loaders, waits and encodes in its own
//!   language. A batch load's keys go to the fleet together ([`TwoTier::lead_many`]: their
//!   locks and entries in one round trip, one per namespace on a Cluster), then each key
//!   steps on as a single load's ([`TieredCache::get_or_load_many`]).
//!   A context-aware loader ([`TieredCache::get_or_load_with`],
//!   [`Load::context`](two_tier::Load::context), [`Load::loaded_with`](two_tier::Load::loaded_with))
//!   chooses lifetimes and metadata that hold for the whole fleet (entry format 2).
//! - Tags ([`TieredCache::set_with`], [`TieredCache::invalidate_tag`],
//!   [`TieredCache::expire_tag`]; [`TwoTier::set_with`], [`TwoTier::invalidate_tags`],
//!   [`TwoTier::expire_tags`] for the bindings; a loader's
//!   [`Loaded::tags`](herdless::Loaded::tags)): an invalidation of a tag drops every entry
//!   carrying it in every process, in O(1). Each tag's record (an incarnation and its
//!   invalidation stamps, on its Redis server's clock) lives in a key of its own; the
//!   shared entry carries its tags and, per tag, the mark of the record it was written
//!   under (entry format 4), compared with that record only. Each process caches the
//!   records for `tag_check` (default 1 s) and keeps them current by notification, so a
//!   hit on a tagged key stays one round trip; a load that began before an invalidation
//!   of one of its tags never stores, and a lost record resurrects nothing
//!   (PROTOCOL.md, "Tags").
//! - [`RedisBackend`]: the core's [`Backend`](herdless::backend::Backend) on Redis: a one-round-trip
//!   read (value and namespace epoch in one `MGET`, one slot), an atomic read-or-lock script
//!   (SET NX PX semantics with a 128-bit random token), token-checked extend / release /
//!   commit scripts, INCR epochs, per-namespace notifications published by the scripts, and
//!   repairs of corrupt shared state. On a single server its subscription connection also
//!   asks for the server's key tracking, so a write, delete or flush by a program that is
//!   not herdless drops the copies too ([`RedisBuilder::outside_writes`], PROTOCOL.md
//!   "Writes from outside herdless"). [`memory::MemoryBackend`] is the same tier in memory,
//!   with faults on demand, for tests (`memory://` in every language).
//! - [`memcached::MemcachedBackend`]: the shared tier on memcached (`memcached://` in every
//!   language), with the meta protocol's own anti-stampede tools: a lease added where nothing
//!   is, the stale mark whose win flag goes to one reader, compare-and-swap commits. No
//!   process hears of another's changes there, so a two-tier cache over it keeps no L1
//!   copies ([`TwoTier::holds_copies`]); no tags (PROTOCOL.md section 9).
//! - [`Fleet`]: the lock protocol itself ([`Fleet::lead`] answers who loads a key for the
//!   fleet, with a [`FleetLease`] that extends itself; [`Fleet::lead_many`] for the
//!   keys of a batch), which the engine drives; and the same lock held by a caller's own
//!   code ([`Fleet::lock_until`], [`FleetLock`]; [`TwoTier::lock`] for the bindings: a
//!   dogpile.cache mutex, a critical section), leased and extended while held.
//!
//! ```no_run
//! use std::time::Duration;
//! use herdless_redis::{Json, RedisBackend, TieredCache};
//!
//! let backend = RedisBackend::builder("redis://127.0.0.1:6379").build()?;
//! let cache: TieredCache<String, Json> = TieredCache::builder(backend, Json)
//!     .ttl(Duration::from_secs(60))
//!     .grace(Duration::from_secs(30))
//!     .build()?;
//! // One loader call per key for every process sharing this Redis.
//! let name = cache.get_or_load("users:42", || Ok::<_, std::io::Error>(Some("Ada".into())))?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The wire protocol (keys, entry bytes, scripts, channels) and the failure policy are
//! specified in PROTOCOL.md at the repository root; [`wire`], [`keys`], [`scripts`] and
//! [`notify`] implement the wire, [`two_tier`] the policy, and the scenarios of the
//! repository's `conformance/` folder check it in all three languages.
//!
//! ## Failures
//! Every Redis call is bounded by `op_timeout`; connections reconnect by themselves. When
//! Redis fails, loads are served in their process and coalesced there, `get` reads the L1,
//! writes fail with the tier's error after dropping their L1 copy, and every failure is
//! counted ([`RedisMetrics::backend_errors`], and per namespace in the L1's metrics); bytes
//! that are not an entry are a miss ([`RedisMetrics::corrupt_entries`]), never a panic.

mod backend;
pub mod call;
pub mod codec;
mod coherence;
mod conn;
mod error;
mod fleet;
pub mod http;
mod join;
pub mod keys;
mod lifetimes;
mod local;
pub mod memcached;
pub mod memory;
mod metrics;
pub mod notify;
mod runtime;
pub mod scripts;
pub mod tags;
mod tier;
mod tiered;
mod tracking;
pub mod two_tier;
mod versioned;
mod wall;
pub mod wire;

pub use backend::{
    DEFAULT_MAX_ENTRY_BYTES, MAX_LEASE, RedisBackend, RedisBuilder, lock_value, parse_epoch,
};
pub use codec::{Codec, CodecError, Json, RawBytes};
pub use error::Error;
pub use fleet::{
    ErrorCounter, Fleet, FleetLease, FleetLock, FleetOptions, FleetOutcome, LOCK_ONLY,
};
pub use lifetimes::{Lifetimes, MAX_TTL, Own, fresh_for, new_entry};
pub use metrics::RedisMetrics;
pub use runtime::{InRuntime, block_on};
pub use tiered::{TieredBuilder, TieredCache};
pub use two_tier::{
    BuildError, Host, SharedTier, TierAddress, TierOptions, TwoTier, Versioned, Warning,
};
pub use wall::now_ms;
