//! The hot-key tracker: a bounded top-K of accessed keys (Space-Saving, Metwally,
//! Agrawal, El Abbadi 2005), so a restarting instance can warm the keys that matter.
//!
//! Fed cheaply: every miss and slow-path access of a tracked key is recorded, and of any key
//! while its stripe has room; once the stripe is full, an untracked key takes a slot on one
//! such access in 8 (drawn, weighted 8), so a flood of one-off misses does not pay for a
//! replacement each. Fresh hits only when the hit counter's stripe passes a multiple of the
//! sample rate (the counter is incremented anyway, so choosing costs nothing), and then with
//! `try_lock`, weighted by the rate. The summary is split in stripes by key hash, so stripes
//! hold disjoint keys and merge exactly.
//!
//! Export and import are a small JSON array (see `json.rs`).

mod json;
mod top_k;

pub use self::json::HotKeysJsonError;
pub(crate) use self::json::{from_json, to_json};
pub use self::top_k::HotKey;
pub(crate) use self::top_k::HotKeys;
