//! Batch loads (`get_or_load_many`): many keys, one loader call for the true misses, each
//! key still single-flight with every other caller of it.
//!
//! The batch is not a second state machine: each distinct key is looked up with the same
//! [`lookup`](crate::lookup) a single `get_or_load` uses, so a key is either served (a hit,
//! perhaps handing this caller a refresh), led by this batch (it takes the key's flight), or
//! waited for (someone else holds the flight). Then, in waves:
//!
//! 1. the refreshes of stale or XFetch hits go to the spawner, batched (one loader call per
//!    `max_batch` keys);
//! 2. the led keys go to the loader, `max_batch` keys per call, and each guard is completed
//!    with the loader's answer for its key (absent when the loader omitted it), so waiters of
//!    those keys anywhere in the process are woken by that one call;
//! 3. only then does the batch wait for the keys others load: a batch never waits while it
//!    holds a flight, so two batches that share keys cannot wait on each other;
//! 4. a wait that ends in a hand-over (the other leader went away) puts its key in the next
//!    wave, looked up again with its first arrival kept.
//!
//! - `plan`: the distinct keys, their answers in the callers' order, the waves;
//! - `chunk`: one loader call's keys and guards (budget, completion, failure);
//! - `blocking`, `asynchronous`: the two drivers.

mod asynchronous;
#[cfg(feature = "std")]
mod blocking;
mod chunk;
mod plan;

pub(crate) use self::asynchronous::get_or_load_many as get_or_load_many_async;
#[cfg(feature = "std")]
pub(crate) use self::blocking::get_or_load_many;
pub use self::chunk::chunks_of;
pub use self::plan::{Batch, BatchWave};
