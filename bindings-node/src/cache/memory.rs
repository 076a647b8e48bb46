//! The native memory a cache reports to V8 (napi external memory), so that V8 collects
//! dropped caches under memory pressure.

use std::cell::Cell;

use napi::Result;
use napi::bindgen_prelude::Env;

/// What one cache is reported to hold outside V8's heap, so that V8 collects dropped caches
/// under memory pressure: V8 sees only a small JS object, and without this a program
/// creating caches grew by ~46 KB each (4,000 caches: 43 -> 228 MB) until a GC happened to
/// run. An estimate of the engine's tables, not a measurement of each cache.
pub(super) const EXTERNAL_BYTES: i64 = 64 * 1024;
/// What a cache with a shared tier adds (its connections, their buffers, a subscription):
/// given back to V8's accounting by `close()`, which releases them.
pub(super) const EXTERNAL_TIER_BYTES: i64 = 1024 * 1024;

/// The native memory reported to V8 for one cache, given back as it is released.
#[derive(Default)]
pub(crate) struct External(Cell<i64>);

impl External {
    pub(super) fn report(env: &Env, bytes: i64) -> Result<Self> {
        env.adjust_external_memory(bytes)?;
        Ok(Self(Cell::new(bytes)))
    }

    /// Lowers the report to `bytes` (never raises it).
    pub(super) fn lower_to(&self, env: &Env, bytes: i64) -> Result<()> {
        let given_back = self.0.get() - bytes;
        if given_back > 0 {
            env.adjust_external_memory(-given_back)?;
            self.0.set(bytes);
        }
        Ok(())
    }
}
