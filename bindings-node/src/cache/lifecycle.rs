//! A `Cache`'s life: what it holds, how it is made, closed and finalized.
//!
//! A cache holds its L1 (entries, whose JS values the binding's table keeps) and, with a
//! shared tier, the tier's runtime thread, its command and subscription connections and a
//! lease or two. `close()` gives the tier's resources back at once (the fleet engine's
//! `TwoTier::close`, which decides what a closed cache answers for every language) and
//! empties the L1; a cache that is never closed gives everything back when V8 collects it,
//! which the native memory it reports (napi external memory) makes V8 do under pressure
//! instead of waiting on a small-looking object.

use napi::bindgen_prelude::{Env, This, Unknown};
use napi::{JsValue, Result};
use napi_derive::napi;

use herdless_redis::{BuildError, TierOptions, TwoTier};

use crate::cache::Cache;
use crate::codec::Codec;
use crate::driver::Inner;
use crate::errors::{self, code};
use crate::js::{ErrorKind, Js};
use crate::options;
use crate::value::Val;
use crate::wake::Wake;

use super::memory::{EXTERNAL_BYTES, EXTERNAL_TIER_BYTES, External};

impl napi::bindgen_prelude::ObjectFinalize for Cache {
    fn finalize(self, env: Env) -> Result<()> {
        self.external.lower_to(&env, 0)
    }
}

/// The engine of a new cache: its L1 alone, or in front of the shared tier at `redis`
/// (whose entries carry the jitter: the L1 then has none, as in `herdless_redis`'s
/// `TieredBuilder`).
fn engine(js: Js, parsed: options::Parsed) -> Result<(TwoTier<Val>, Codec)> {
    let (tier, codec) = match parsed.redis {
        None => (None, Codec::Json),
        Some(r) => {
            let tier = TierOptions {
                address: r.address,
                prefix: r.prefix,
                lease: r.lease,
            };
            (Some(tier), r.codec)
        }
    };
    let tt = TwoTier::build(parsed.builder, tier).map_err(|e| match e {
        BuildError::Tier(e) => errors::throw_new(
            js,
            ErrorKind::Type,
            code::INVALID_OPTION,
            &format!("option `redis`: {e}"),
        ),
        e => errors::throw_new(js, ErrorKind::Range, code::INVALID_OPTION, &e.to_string()),
    })?;
    Ok((tt, codec))
}

#[napi]
impl Cache {
    /// A cache with these options (all optional; durations in milliseconds). Throws a
    /// `TypeError` or `RangeError` (code `HERDLESS_INVALID_OPTION`) naming a bad option.
    #[napi(constructor, ts_args_type = "options?: CacheOptions")]
    pub fn new(env: &Env, this: This, options: Option<Unknown>) -> Result<Self> {
        let js = Js(env.raw());
        let mut parsed = options::parse(js, options.map(|o| o.raw()))?;
        let namespace = parsed.namespace.clone();
        let on_event = parsed.on_event;
        let front = parsed.front.0;
        let copy = parsed.copy_values;
        if front.is_some() {
            parsed.builder = std::mem::take(&mut parsed.builder).count_writes(true);
        }
        // Muted by `Inner::new` until a JS listener is registered.
        let wake = Wake::new();
        let listener = crate::events::engine_listener(wake.clone());
        parsed.builder = std::mem::take(&mut parsed.builder).listener(listener);
        let (tt, codec) = engine(js, parsed)?;
        let bytes = match tt.tier() {
            Some(_) => EXTERNAL_BYTES + EXTERNAL_TIER_BYTES,
            None => EXTERNAL_BYTES,
        };
        let this_obj = this.object.raw();
        let inner = Inner::new(
            js, this_obj, tt, codec, namespace, wake, on_event, front, copy,
        )?;
        crate::cache::fast::install(js, this.object.raw(), &inner)?;
        let external = External::report(env, bytes)?;
        Ok(Self { inner, external })
    }

    /// Closes the cache now: the shared tier's connections (commands, subscription) and
    /// its thread are released at once, and the entries of this process are dropped.
    /// Idempotent. Afterwards every call that reads or writes entries (`get`, `peek`,
    /// `read`, `getOrLoad`, `getOrLoadMany`, `set`, `invalidate`, `bump`,
    /// `invalidateTag(s)`, `wrap` and the functions it made, `warm`, `lock`, `tryLock`,
    /// `isLocked`) throws or rejects with an `Error` of code `HERDLESS_CLOSED`;
    /// `metrics()`, `prometheus()`, `alerts()`, `hotKeys()`, `exportHotKeys()` and the
    /// listeners keep working. Calls in flight are
    /// not cut: a loader already running finishes and its callers get its value (stored
    /// nowhere); a load or a write still waiting for the shared tier (or for
    /// `originBudget`) is rejected with `HERDLESS_CLOSED`, and a `read` answers
    /// `undefined`. Also `cache[Symbol.dispose]()` (`using`) and
    /// `cache[Symbol.asyncDispose]()` (`await using`).
    #[napi]
    pub fn close(&self, env: &Env) -> Result<()> {
        let inner = &self.inner;
        inner.fold_front();
        inner.tt.close();
        self.external.lower_to(env, EXTERNAL_BYTES)?;
        // Lets go of the values the L1 held, and settles what the close already answered.
        inner.run_woken(Js(env.raw()))
    }

    /// Whether `close()` was called.
    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.inner.tt.is_closed()
    }
}
