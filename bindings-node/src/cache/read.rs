//! Reading: `get` (this process's memory), `peek` (an entry without touching it) and `read` (memory, then the shared tier).

use napi::bindgen_prelude::{Env, Unknown};
use napi::{JsValue, Result};
use napi_derive::napi;

use herdless::HitState;
use herdless_redis::two_tier::Get;

use crate::driver::Inner;
use crate::driver::check_open;
use crate::errors;
use crate::js::{self, Js, StrRoom, Value};
use crate::value::Val;

use super::{Cache, answer, get_value, key_arg};
use crate::call::rejecting;

impl Cache {
    fn read_impl(&self, js: Js, key: Value) -> Result<Value> {
        self.inner.fold_front();
        let mut room = StrRoom::new();
        let key = key_arg(js, key, &mut room)?;
        let inner = &self.inner;
        let value = |js: Js, inner: &Inner, v: Option<Val>| match v {
            Some(v) => inner.table.load(js, &v),
            None => js.undefined(),
        };
        match inner
            .tt
            .get(key.as_str())
            .map_err(|e| errors::throw(js, &inner.table, &e))?
        {
            Get::Ready(v) => js.resolved(value(js, inner, v)?),
            Get::Tier(pending) => inner.op(js, pending, None, move |js, inner, read| {
                let r = read.finish(&inner.host(js));
                let r = r.map_err(|e| herdless::Error::Load(herdless::LoadError::new(e)));
                answer(js, inner, r, |v| value(js, inner, v))
            }),
        }
    }
}

#[napi]
impl Cache {
    /// The value of `key` in this process's memory if it is fresh (or stale within grace),
    /// else `undefined`; synchronous, never loads, never asks the shared tier (`read` does).
    /// A cached absence reads as `undefined` too.
    #[napi(ts_args_type = "key: string", ts_return_type = "unknown")]
    pub fn get<'env>(&self, env: &'env Env, key: Unknown<'env>) -> Result<Unknown<'env>> {
        let js = Js(env.raw());
        let v = get_value(js, &self.inner, key.raw())?;
        // SAFETY: a value of this env, returned to it at once.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), v) })
    }

    /// `key`'s entry in this process's memory as it is, without side effects: nothing is
    /// counted, sampled, refreshed or loaded, and the shared tier is not asked. `undefined`
    /// when there is none (a miss, an expired entry, a bumped namespace); a cached absence
    /// is a `Peek` whose `value` is `ABSENT`.
    #[napi(ts_args_type = "key: string", ts_return_type = "Peek | undefined")]
    pub fn peek<'env>(&self, env: &'env Env, key: Unknown<'env>) -> Result<Unknown<'env>> {
        let js = Js(env.raw());
        check_open(js, &self.inner)?;
        let mut room = StrRoom::new();
        let key = key_arg(js, key.raw(), &mut room)?;
        let v = match self.inner.l1.peek(key.as_str()) {
            None => js.undefined()?,
            Some(p) => {
                let value = match &p.value {
                    Some(v) => self.inner.table.read(js, &v.value).map_err(js::failed)?,
                    None => crate::call::absent_symbol(js)?,
                };
                let state = match p.state {
                    HitState::Fresh => "fresh",
                    HitState::Stale => "stale",
                    HitState::FailSafe => "failSafe",
                };
                let obj = js.object()?;
                js.set(obj, "value", value)?;
                js.set(obj, "state", js.string(state)?)?;
                js.set(obj, "tags", crate::tags::to_array(js, &p.tags)?)?;
                for (name, d) in [
                    ("ageMs", p.age),
                    ("freshUntilMs", p.fresh_until),
                    ("staleUntilMs", p.stale_until),
                    ("loadDurationMs", p.load_duration),
                ] {
                    js.set(obj, name, js.number(d.as_secs_f64() * 1000.0)?)?;
                }
                obj
            }
        };
        // SAFETY: a value of this env, returned to it at once.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), v) })
    }

    /// `get`, then the shared tier: the value of `key` in this process's memory, else the
    /// shared entry (one round trip, kept in memory for the rest of its life), else
    /// `undefined`. Never loads. A tier that fails is a miss (counted in `backendErrors`);
    /// without a shared tier it answers as `get`.
    #[napi(ts_args_type = "key: string", ts_return_type = "Promise<unknown>")]
    pub fn read<'env>(&self, env: &'env Env, key: Unknown<'env>) -> Result<Unknown<'env>> {
        let js = Js(env.raw());
        let r = self.read_impl(js, key.raw());
        let p = rejecting(js, r)?;
        // SAFETY: a value of this env, returned to it at once.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), p) })
    }
}

/// An entry as `Cache.peek` saw it, without touching it.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct Peek {
    /// The value; `ABSENT` for a cached absence (the loader answered `ABSENT`).
    #[napi(ts_type = "unknown")]
    pub value: (),
    /// `fresh` (within its TTL), `stale` (past it, within grace: served while one refresh
    /// runs) or `failSafe` (past grace, kept only to answer when a load fails).
    #[napi(ts_type = "'fresh' | 'stale' | 'failSafe'")]
    pub state: String,
    /// Milliseconds since the entry was stored (loaded, set, or read from the shared tier).
    pub age_ms: f64,
    /// When it stops being fresh, milliseconds on the cache's (monotonic) clock, like an
    /// alert's `sinceMs`: its jittered TTL after it was stored.
    pub fresh_until_ms: f64,
    /// When it stops being served stale (`freshUntilMs` + grace; equal to `freshUntilMs`
    /// without grace, and for an absence), on the cache's clock.
    pub stale_until_ms: f64,
    /// Milliseconds the key's last load took (what XFetch refreshes early by); kept when a
    /// `set` replaces the value, 0 if the key was never loaded.
    pub load_duration_ms: f64,
    /// The entry's tags (`set(key, value, { tags })`, `ctx.setTags`, `wrap`'s `tags`).
    pub tags: Vec<String>,
}
