//! # herdless: a stampede-proof cache engine
//!
//! When a hot key expires under load, a naive cache-aside sends every in-flight request to
//! the origin at once (the dogpile, the thundering herd). herdless makes that impossible:
//! single-flight loads, stale-while-revalidate, XFetch early refresh, TTL jitter, negative
//! caching, epoch invalidation, fail-safe, loader timeouts, an origin budget and metrics.
//!
//! ```
//! use std::time::Duration;
//! use herdless::{Cache, KeyBuilder};
//!
//! let cache: Cache<String> = Cache::builder()
//!     .ttl(Duration::from_secs(60))
//!     .grace(Duration::from_secs(30)) // serve stale for 30 s while one refresh runs
//!     .build()?;
//! let key = KeyBuilder::new("users").entity("profile").id(42).build()?;
//! // Concurrent callers of one key share one loader call.
//! let name = cache.get_or_load(&key, || Ok::<_, std::io::Error>(Some("Ada".to_string())))?;
//! assert_eq!(name.as_deref(), Some("Ada"));
//! cache.bump("users"); // every "users" key is now a miss, in O(1)
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## One state machine, four drivers
//!
//! The engine never runs a loader itself. [`Cache::lookup`] decides, atomically for the key,
//! what its caller does, and hands it what it needs to do it:
//!
//! - [`Lookup::Hit`]: serve this value now (fresh, stale within grace, or fail-safe). If the
//!   hit carries a [`LoadGuard`] in `refresh`, this caller alone was chosen to refresh the
//!   key in the background (stale-while-revalidate or XFetch).
//! - [`Lookup::Lead`]: this caller loads. [`LoadGuard::begin`] waits for the origin budget,
//!   the caller runs its loader, and [`LoadGuard::complete`] stores the result (unless a
//!   `set`, `invalidate` or `bump` happened meanwhile) and wakes every waiter with it. A
//!   leader whose own wait runs out first hands the load over ([`LoadGuard::give_up`]).
//! - [`Lookup::Wait`]: another caller loads. The [`Waiter`] is a runtime-agnostic `Future`
//!   (or [`Waiter::wait`] blocks); it ends with the leader's result, its error, a fail-safe
//!   value, or [`Waited::Retry`] when the leader went away and the load is handed over.
//!
//! Each way of calling the engine is a small driver of that machine (the hooks a driver
//! outside this crate needs are in [`driver`]):
//!
//! 1. **Rust, in memory** — [`Cache::get_or_load`] drives it on the caller's thread
//!    (waiters park; a refresh goes to the cache's [`Spawn`]er), and
//!    [`Cache::get_or_load_async`] drives it as a future on any executor (timers come from
//!    the [`Clock`], background work goes to the [`Spawn`]er, e.g. `tokio::spawn`).
//! 2. **A shared tier (Redis)** — a [`Backend`](backend::Backend) sits behind the in-memory
//!    table: the local leader, one per process, does the fleet-wide part (read L2, take the
//!    distributed lock with a token and lease, re-read, load, conditional write, notify),
//!    so the in-process single-flight bounds Redis traffic to one lock attempt per key per
//!    process.
//! 3. **Python** — the binding calls `lookup` with the GIL held (it is fast), runs a Python
//!    loader on the leading thread or awaits it as a coroutine, and completes the guard;
//!    sync waiters call [`Waiter::wait`] with the GIL released, asyncio waiters await the
//!    waiter from a future bridged to the event loop.
//! 4. **Node** — the binding calls `lookup` on the event loop, calls the JS async loader for
//!    a `Lead`, and completes the guard when its Promise settles; a `Wait` becomes a Promise
//!    resolved when the waiter's future ends, so the event loop never blocks.
//!
//! Time and randomness are injected ([`Clock`], [`Builder::seed`]), so every policy is
//! testable on a [`ManualClock`], deterministically; [`testing::Runner`] runs your own code
//! that way.
//!
//! ## Guarantees
//!
//! - One loader call per key at a time in a process, whatever the interleaving; a leader
//!   that panics wakes its waiters with [`Error::LoaderPanicked`]; one that is cancelled
//!   hands the load to a waiter; one that hangs is abandoned at the hard timeout.
//! - A load nobody wants any more (every caller left, the key written, invalidated or
//!   bumped meanwhile, or past its hard timeout) is never stored, and its loader's
//!   [`LoadContext`] says so (a flag, a future, a blocking wait).
//! - Refresh-ahead ([`Builder::refresh_ahead`]): beside XFetch's random early refresh, a
//!   fixed one, once an entry has lived a share of its ttl; one refresh per entry.
//! - Time-to-idle ([`Builder::tti`], [`Loaded::tti`]): an entry nobody reads for its tti is
//!   dropped within its ttl, `tti` to `tti * 17/16` after its last read.
//! - Nothing older than `ttl * (1 + jitter / 2) + grace` is served (the jitter spreads a
//!   TTL up to half its width above it), except fail-safe values (opt-in, up to
//!   `max_stale`) when a load fails or times out.
//! - A caller is answered at most `wait_timeout` after it first arrived (with the value, a
//!   fail-safe value or [`Error::WaitTimeout`]), whichever leaders come and go meanwhile.
//! - Errors are never cached; every waiter of a failed load gets the same error.
//! - Memory is bounded: entries (values and absences) by capacity with SIEVE eviction,
//!   flight records by `max_flights`, namespaces by `max_namespaces`, tags by `max_tags`.
//! - Every loaded value is stored unless one of the above says not to, or, with
//!   [`Builder::admission`]`(`[`Admission::TinyLfu`]`)` (opt-in, for loops and scans), the
//!   full shard's admission filter refuses a new key: the value still answers its caller
//!   and waiters, and a `set` still returns `Ok(())`, but neither is kept (as moka's
//!   inserts may be rejected by its admission policy); `admission_rejections` counts them.
//!
//! ## Tags
//!
//! An entry may carry tags ([`Loaded::tags`], [`Cache::set_with`], [`Cache::set_tagged`]):
//! a product page carries `product:42`, `seller:7`, `category:3`, and
//! [`invalidate_tag`](Cache::invalidate_tag)`("seller:7")` drops every page of that seller,
//! whatever its key, in O(1): no scan.
//!
//! - **How.** One logical clock per cache counts tag invalidations. An entry keeps its tags'
//!   records and its birth: the clock when its load began (for a write, when it happened).
//!   Invalidating a tag stamps its record with the next tick; a read compares. A load that
//!   began before an invalidation of a tag it answers with is not stored (it answers its
//!   callers), as after a [`bump`](Cache::bump).
//! - **Hard, the default** ([`invalidate_tag`](Cache::invalidate_tag),
//!   [`invalidate_tags`](Cache::invalidate_tags)): every entry carrying the tag is a miss for
//!   `get`, `peek`, `lookup` and the metrics at once, never served again, not even as a
//!   fail-safe value. After a write, a caller expects no older value anywhere (a cache that
//!   only expires them answers `has()` true after a delete by tag).
//! - **Soft, opt-in** ([`expire_tag`](Cache::expire_tag), [`expire_tags`](Cache::expire_tags)):
//!   every entry carrying the tag is past its fresh time, as if its ttl ran out: served
//!   stale within its grace while one refresh runs, kept as the fail-safe value without
//!   grace (with `max_stale`), a miss otherwise.
//! - **Bounds.** At most [`Builder::max_tags_per_entry`] tags per entry (default 16), each
//!   1 to [`MAX_TAG_BYTES`] bytes; duplicates count once. At most [`Builder::max_tags`]
//!   tag records (default 100,000): past it the record least recently used is retired,
//!   and every entry carrying it becomes a miss (a forgotten tag never resurrects old
//!   entries; `retired_tags` counts it); the name's next use starts a new record.
//! - **A tag nobody carries.** Its invalidation makes no record (input must not grow
//!   memory), but a load already running might attach it later: the latest such stamp is
//!   kept, and a record made afterwards starts with it, so that load is not stored. This
//!   is conservative: a load racing the first use of an unrelated new tag is dropped too;
//!   an older value is never stored. A retired record's stamps are kept the same way.
//! - **Cost.** An untagged entry pays one branch per read; a tagged one two atomic loads
//!   per tag. Invalidation: one atomic add and one registry lookup per tag.
//! - Metrics: `tags`, `tag_invalidations`, `tag_expirations`, `retired_tags` in
//!   [`MetricsSnapshot`] and [`prometheus`](Cache::prometheus). Batch loads
//!   ([`get_or_load_many`](Cache::get_or_load_many)) and [`warm`](Cache::warm) take loaders
//!   that answer plain values: their entries carry no tags.
//!
//! ## The public API
//!
//! Everything public, each reachable by one path.
//!
//! **The cache.** [`Cache`], made by [`Cache::builder`] ([`Builder`], read back as
//! [`Options`]; [`Weigher`] and [`ENTRY_OVERHEAD_BYTES`] for a bound in bytes) or
//! [`Cache::new`]; [`Admission`] picks which new keys a full cache keeps. Its methods:
//! - read and load: [`get_or_load`](Cache::get_or_load),
//!   [`get_or_load_scoped`](Cache::get_or_load_scoped) (a loader that borrows),
//!   [`get_or_load_async`](Cache::get_or_load_async), batches of keys with one loader call
//!   ([`get_or_load_many`](Cache::get_or_load_many),
//!   [`get_or_load_many_async`](Cache::get_or_load_many_async)), and with a context-aware
//!   loader [`get_or_load_with`](Cache::get_or_load_with) and
//!   [`get_or_load_with_async`](Cache::get_or_load_with_async) (it is told a
//!   [`LoadContext`]: the key, a [`LoadReason`], the [`Previous`] value with its age and
//!   metadata, a [`Cancelled`] signal; it answers a [`Loaded`]: per-entry ttl, grace,
//!   negative ttl, metadata up to [`MAX_META_BYTES`], not-modified, no-cache); [`get`](Cache::get),
//!   [`get_with`](Cache::get_with), [`peek`](Cache::peek) (no side effect; a [`Peek`]);
//! - write: [`set`](Cache::set), [`set_with_ttl`](Cache::set_with_ttl),
//!   [`set_absent`](Cache::set_absent), [`set_with`](Cache::set_with) (a [`Loaded`]: ttl,
//!   grace, metadata, tags), [`set_tagged`](Cache::set_tagged),
//!   [`invalidate`](Cache::invalidate), [`bump`](Cache::bump), [`clear`](Cache::clear),
//!   tags: [`invalidate_tag`](Cache::invalidate_tag),
//!   [`invalidate_tags`](Cache::invalidate_tags), [`expire_tag`](Cache::expire_tag),
//!   [`expire_tags`](Cache::expire_tags) (see [Tags](#tags));
//! - pre-warm: [`warm`](Cache::warm), [`warm_with_progress`](Cache::warm_with_progress),
//!   [`warm_async`](Cache::warm_async),
//!   [`warm_async_with_progress`](Cache::warm_async_with_progress) (a [`WarmReport`]), from
//!   [`hot_keys`](Cache::hot_keys), [`export_hot_keys`](Cache::export_hot_keys) and
//!   [`import_hot_keys`](Cache::import_hot_keys) ([`HotKey`], [`HotKeysJsonError`]);
//! - listen: [`Builder::listener`] ([`Event`], [`EventKind`]): evictions, expiries,
//!   failed loads, fail-safe activations, through a bounded queue the engine never waits on;
//! - observe: [`metrics`](Cache::metrics) ([`MetricsSnapshot`], [`NamespaceMetrics`],
//!   [`CounterSnapshot`], [`HistogramSnapshot`]), [`prometheus`](Cache::prometheus) (at
//!   most [`MAX_LABELLED_NAMESPACES`] namespace labels, the rest as [`OTHER_NAMESPACE`]),
//!   [`alerts`](Cache::alerts) ([`Alert`], [`AlertKind`], [`Cause`], [`Cure`], [`Evidence`];
//!   set up with [`DetectorOptions`]), [`budget_in_use`](Cache::budget_in_use);
//! - the state machine: [`lookup`](Cache::lookup) and [`lookup_again`](Cache::lookup_again),
//!   answering a [`Lookup`]: a [`Hit`] ([`HitState`]), a [`LoadGuard`] (its [`Begin`]
//!   future waits for the origin budget) or a [`Waiter`] (ending in [`Waited`], perhaps a
//!   [`Retry`]);
//! - [`options`](Cache::options), [`clock`](Cache::clock).
//!
//! **Errors.** [`Error`] (a call), [`LoadError`] (a loader's own, shared by its waiters),
//! [`ConfigError`] (a bad option).
//!
//! **Keys.** [`KeyBuilder`], [`Param`], [`KeyError`]; the key format itself, and reading a
//! key back, in [`key`].
//!
//! **Time, randomness, background work.** [`Clock`], [`SystemClock`], [`ManualClock`];
//! [`DefaultRng`], [`default_rng`] (or [`Builder::seed`]); [`Spawn`], [`ThreadSpawn`],
//! [`BoxFuture`].
//!
//! **Modules.** [`key`] (the key format), [`testing`] (your code on virtual time),
//! [`driver`] (hooks for drivers beyond this crate: a shared tier, a language binding; a
//! batch's waves, [`driver::Batch`]),
//! [`backend`] (what a shared tier such as Redis implements), [`jitter`] and [`xfetch`]
//! (the two policies' maths, for a tier that computes lifetimes itself).
//!
//! ## Features
//!
//! `std` (default): the system clock, the blocking API, parking_lot locks, [`testing`].
//! Without it the crate is `no_std` + `alloc`: bring a [`Clock`] and drive
//! [`Cache::lookup`] or the async API.
//! `opentelemetry` (off): the cache's metrics as OpenTelemetry observable instruments and a
//! span per loader call, in `otel` (the `opentelemetry` crate; implies `std`).

#![cfg_attr(not(feature = "std"), no_std)]
#![warn(missing_docs)]

extern crate alloc;

// Layers, from the top: the façade (`cache`); its subsystems (`lookup` and its drivers
// `blocking`, `asynchronous`, `warm`; `detector`, `hotkeys`, `metrics`); the table
// (`table`: shards, flights, entries); the leaves. `scripts/check-layers` checks that
// no module leans on one above it.
mod admission;
mod alarm;
mod asynchronous;
pub mod backend;
mod batch;
#[cfg(feature = "std")]
mod blocking;
mod budget;
mod cache;
mod cancel;
mod clock;
mod config;
mod context;
mod detector;
pub mod driver;
mod entry;
mod epoch;
mod error;
mod events;
mod expiry;
mod flight;
mod generation;
mod hotkeys;
mod idle;
mod invalidation;
pub mod jitter;
pub mod key;
mod loaded;
mod lookup;
mod metrics;
#[cfg(feature = "opentelemetry")]
pub mod otel;
mod registry;
mod rng;
mod spawn;
mod steady;
mod store;
mod sync;
mod table;
mod tags;
#[cfg(feature = "std")]
pub mod testing;
mod warm;
pub mod xfetch;

pub use admission::Admission;
pub use cache::Cache;
#[cfg(feature = "std")]
pub use clock::SystemClock;
pub use clock::{Clock, ManualClock};
pub use config::{Builder, DEFAULT_COPY_VALUES, ENTRY_OVERHEAD_BYTES, Options, Weigher};
pub use context::{Cancelled, LoadContext, LoadReason, Previous};
pub use detector::{Alert, AlertKind, Cause, Cure, DetectorOptions, Evidence};
pub use entry::{HitState, Peek};
pub use error::{ConfigError, Error, LoadError};
pub use events::{Event, EventKind};
pub use hotkeys::{HotKey, HotKeysJsonError};
pub use idle::IdleReads;
pub use key::builder::KeyBuilder;
pub use key::error::KeyError;
pub use key::param::Param;
pub use loaded::{Loaded, MAX_META_BYTES};
pub use lookup::{Begin, Hit, LoadGuard, Lookup, Retry, Waited, Waiter};
pub use metrics::{
    CounterSnapshot, HistogramSnapshot, MAX_LABELLED_NAMESPACES, MetricsSnapshot, NamespaceMetrics,
    OTHER_NAMESPACE,
};
pub use rng::{DefaultRng, default_rng};
#[cfg(feature = "std")]
pub use spawn::ThreadSpawn;
pub use spawn::{BoxFuture, Spawn};
pub use tags::MAX_TAG_BYTES;
pub use warm::WarmReport;

/// The README's Rust examples, compiled and run as doctests so the front page never lies.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
