//! The Node binding of herdless: the same engine, driven from the event loop.
//!
//! - [`cache`]: the `Cache` class, its methods grouped as `read` (`get`, `peek`, `read`),
//!   `write` (`set`), `invalidate` (`invalidate`, `bump`, `invalidateTag(s)`), `load`
//!   (`getOrLoad`, `getOrLoadMany`, `wrap`, `warm`), `observe` (`metrics`, events,
//!   alerts, hot keys) and `lifecycle` (the constructor, `close()` and the finalizer: what
//!   a cache holds and when it gives it back); `cache::fast`: its hit paths as plain
//!   Node-API functions. `front`: the engine side of the JS front of recent answers.
//! - [`driver`]: drives the fleet engine (`herdless_redis::two_tier`) for JS callers:
//!   loaders are JS functions whose promises finish the engine's loads; waiters and the
//!   engine's steps are futures polled on the JS thread.
//! - `context`: the load context handed to a loader that declares a parameter.
//! - `events`: `on`/`off`/`once` and `onEvent`: the engine's events told to JS listeners.
//! - [`call`]: a JS caller apart from the engine: its loader, its answer, its AbortSignal.
//! - [`wake`]: how waiters' wakers, firing on any thread, reach the JS thread (one
//!   thread-safe function, one drain for many waiters).
//! - [`value`]: how the engine holds JS values without ever touching them off the JS thread
//!   (a table of values and `Send + Sync` handles to its cells).
//! - `codec`: what the fleet engine needs from Node: the codec and warnings.
//! - [`testing`]: the in-memory shared tier with faults (`require('herdless').testing`).
//! - [`errors`]: the one mapping from engine errors to JS errors with stable codes (the
//!   codes themselves, and the binding's own errors, are [`js`]'s: below the values).
//! - [`http`]: the engine's HTTP rules (request keys' canonical query, which replies are
//!   kept) for the web integrations of `lib/`.
//! - [`defaults`]: the engine's defaults of the options it decides, read from it.
//! - [`options`], [`keys`] (and `buildKey`), [`wrap`], [`warm`], [`metrics`]: the rest of
//!   the API.
//! - [`js`]: the raw Node-API calls, in one place: values, calls, errors, references.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod cache;
mod call;
mod codec;
mod context;
mod copy;
pub mod defaults;
pub mod detector;
mod driver;
mod errors;
mod events;
mod front;
pub mod http;
mod js;
pub mod keys;
pub mod metrics;
pub mod options;
mod tags;
pub mod testing;
mod value;
mod wake;
pub mod warm;
pub mod wrap;
