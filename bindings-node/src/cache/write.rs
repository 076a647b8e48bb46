//! Writing: `set`.

use napi::bindgen_prelude::{Env, Unknown};
use napi::{JsValue, Result};
use napi_derive::napi;

use crate::errors;
use crate::js::{Js, StrRoom, Type, Value};
use crate::options;

use super::{Cache, answer, key_arg, options_arg};
use crate::call::rejecting;

impl Cache {
    fn set_impl(&self, js: Js, key: Value, value: Value, options: Option<Value>) -> Result<Value> {
        self.inner.fold_front();
        let mut room = StrRoom::new();
        let key = key_arg(js, key, &mut room)?;
        let (mut ttl, mut tti, mut tags) = (None, None, None);
        if let Some(o) = options_arg(js, options, "set", &["ttl", "tti", "tags"])? {
            ttl = options::ttl(js, o)?;
            tti = options::tti(js, o)?;
            let t = js.get(o, "tags")?;
            if js.type_of(t)? != Type::Undefined {
                tags = Some(crate::tags::tag_list(js, t, "option `tags`")?);
            }
        }
        let inner = &self.inner;
        let value = match inner.is_absent(js, value)? {
            true => None,
            false => Some(inner.table.store(js, value)?),
        };
        // Tags or a tti ride on a `Loaded`, which only `set_with` takes.
        let r = if tags.is_some() || tti.is_some() {
            let mut loaded = herdless::Loaded::from(value);
            if let Some(tags) = tags {
                loaded = loaded.tags(tags);
            }
            if let Some(t) = ttl {
                loaded = loaded.ttl(t);
            }
            if let Some(t) = tti {
                loaded = loaded.tti(t);
            }
            inner.tt.set_with(key.as_str(), loaded, &inner.host(js))
        } else {
            match value {
                Some(v) => inner.tt.set(key.as_str(), v, ttl, &inner.host(js)),
                None => inner.tt.set_absent(key.as_str()),
            }
        };
        inner.run_woken(js)?;
        let pending = r.map_err(|e| errors::throw(js, &inner.table, &e))?;
        inner.op(js, pending, None, |js, inner, r| {
            answer(js, inner, r, |()| js.undefined())
        })
    }
}

#[napi]
impl Cache {
    /// Stores `value` under `key` (`ABSENT` caches an absence for `negativeTtl`).
    /// `options.ttl` (ms) replaces the cache's TTL for this entry; `options.tags` (an array
    /// of strings) tags it: `invalidateTag` of one of them drops it; `options.tti` (ms)
    /// replaces the cache's time-to-idle for this entry. A load of `key` already
    /// running anywhere will not overwrite it. Without a shared tier this process has it at
    /// once. With one, the promise resolves when the fleet has it (and this process with
    /// it); when the tier fails it rejects (code `HERDLESS_BACKEND`) after dropping this
    /// process's copy, and a value the codec cannot encode is refused (a `TypeError`, or
    /// what your codec's `encode` threw).
    #[napi(
        ts_args_type = "key: string, value: unknown, options?: { ttl?: number; tti?: number; tags?: readonly string[] }",
        ts_return_type = "Promise<void>"
    )]
    pub fn set<'env>(
        &self,
        env: &'env Env,
        key: Unknown<'env>,
        value: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<Unknown<'env>> {
        let js = Js(env.raw());
        let r = self.set_impl(js, key.raw(), value.raw(), options.map(|o| o.raw()));
        let p = rejecting(js, r)?;
        // SAFETY: a value of this env, returned to it at once.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), p) })
    }
}
