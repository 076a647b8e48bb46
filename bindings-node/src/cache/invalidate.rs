//! Invalidating: one key (`invalidate`), a namespace (`bump`), tags (`invalidateTag`, `invalidateTags`).

use napi::bindgen_prelude::{Env, Unknown};
use napi::{JsValue, Result};
use napi_derive::napi;

use crate::errors::{self, code, type_error};
use crate::js::{ErrorKind, Js, StrRoom, Type, Value};

use super::{Cache, answer, key_arg, options_arg};
use crate::call::rejecting;
use crate::keys::well_formed;

impl Cache {
    fn invalidate_impl(&self, js: Js, key: Value) -> Result<Value> {
        self.inner.fold_front();
        let mut room = StrRoom::new();
        let key = key_arg(js, key, &mut room)?;
        let inner = &self.inner;
        let r = inner.tt.invalidate(key.as_str());
        inner.run_woken(js)?;
        let pending = r.map_err(|e| errors::throw(js, &inner.table, &e))?;
        inner.op(js, pending, None, |js, inner, r| {
            answer(js, inner, r, |b| js.bool(b))
        })
    }

    fn bump_impl(&self, js: Js, namespace: Option<Value>) -> Result<Value> {
        self.inner.fold_front();
        let given = match namespace {
            None => None,
            Some(v) => match js.type_of(v)? {
                Type::Undefined | Type::Null => None,
                Type::String => {
                    let ns = js.get_string(v)?;
                    // As for keys: a lone surrogate would read as U+FFFD, another namespace.
                    if ns.contains('\u{FFFD}') {
                        well_formed(js, v, "namespace")?;
                    }
                    Some(ns)
                }
                t => {
                    return Err(type_error(
                        js,
                        &format!("the namespace must be a string, got {}", t.name()),
                    ));
                }
            },
        };
        let Some(ns) = given.or_else(|| self.inner.namespace.clone()) else {
            return Err(type_error(
                js,
                "bump() needs a namespace (or the cache's `namespace` option)",
            ));
        };
        let pending = self.inner.tt.bump(&ns);
        self.inner.op(js, pending, None, |js, inner, r| {
            answer(js, inner, r, |epoch| js.number(epoch as f64))
        })
    }

    /// `invalidateTag` (one tag) and `invalidateTags` (an array): hard, or soft with
    /// `{ soft: true }`.
    fn stamp_impl(&self, js: Js, tags: Vec<String>, options: Option<Value>) -> Result<Value> {
        self.inner.fold_front();
        let soft = match options_arg(js, options, "invalidateTag", &["soft"])? {
            Some(o) => match js.get(o, "soft")? {
                v if js.type_of(v)? == Type::Undefined => false,
                v if js.type_of(v)? == Type::Boolean => js.get_bool(v)?,
                _ => {
                    return Err(errors::throw_new(
                        js,
                        ErrorKind::Type,
                        code::INVALID_OPTION,
                        "option `soft` must be a boolean",
                    ));
                }
            },
            None => false,
        };
        let inner = &self.inner;
        let r = match soft {
            true => inner.tt.expire_tags(&tags),
            false => inner.tt.invalidate_tags(&tags),
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
    /// Removes `key`'s entry (in the whole fleet with a shared tier); a load of `key`
    /// already running will not write back its (older) result. Resolves to whether an
    /// entry was removed (the shared tier's, with one). This process drops its copy at
    /// once; a shared tier that fails rejects (code `HERDLESS_BACKEND`).
    #[napi(ts_args_type = "key: string", ts_return_type = "Promise<boolean>")]
    pub fn invalidate<'env>(&self, env: &'env Env, key: Unknown<'env>) -> Result<Unknown<'env>> {
        let js = Js(env.raw());
        let r = self.invalidate_impl(js, key.raw());
        let p = rejecting(js, r)?;
        // SAFETY: a value of this env, returned to it at once.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), p) })
    }

    /// Invalidates every key of `namespace` (default: the cache's `namespace` option) in
    /// O(1) by moving it to a new epoch (in the whole fleet with a shared tier: INCR),
    /// which the promise resolves to. Loads that began before are not stored. This process
    /// moves on at once; a shared tier that fails rejects (code `HERDLESS_BACKEND`).
    #[napi(
        ts_args_type = "namespace?: string",
        ts_return_type = "Promise<number>"
    )]
    pub fn bump<'env>(
        &self,
        env: &'env Env,
        namespace: Option<Unknown<'env>>,
    ) -> Result<Unknown<'env>> {
        let js = Js(env.raw());
        let r = self.bump_impl(js, namespace.map(|n| n.raw()));
        let p = rejecting(js, r)?;
        // SAFETY: a value of this env, returned to it at once.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), p) })
    }

    /// Drops every entry carrying `tag`, in O(1) (in the whole fleet with a shared tier).
    /// Hard by default: those entries become misses, never served again (not even when a
    /// load fails), and a load that began before this call does not store its older value.
    /// `{ soft: true }` expires them instead: served stale within their grace while one
    /// refresh runs, kept as fail-safe values. This process applies it at once; the promise
    /// resolves when the fleet has it (a shared tier that fails rejects, code
    /// `HERDLESS_BACKEND`). A bad tag rejects with `HERDLESS_INVALID_TAG`.
    #[napi(
        ts_args_type = "tag: string, options?: { soft?: boolean }",
        ts_return_type = "Promise<void>"
    )]
    pub fn invalidate_tag<'env>(
        &self,
        env: &'env Env,
        tag: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<Unknown<'env>> {
        let js = Js(env.raw());
        let r = crate::tags::tag_arg(js, tag.raw())
            .and_then(|t| self.stamp_impl(js, vec![t], options.map(|o| o.raw())));
        let p = rejecting(js, r)?;
        // SAFETY: a value of this env, returned to it at once.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), p) })
    }

    /// `invalidateTag` of each of `tags` at once (one round trip with a shared tier per 256
    /// tags). Every tag is checked before any is invalidated; more than 10,000 distinct tags
    /// reject with `HERDLESS_TOO_MANY_TAGS`, nothing invalidated.
    #[napi(
        ts_args_type = "tags: readonly string[], options?: { soft?: boolean }",
        ts_return_type = "Promise<void>"
    )]
    pub fn invalidate_tags<'env>(
        &self,
        env: &'env Env,
        tags: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<Unknown<'env>> {
        let js = Js(env.raw());
        let r = crate::tags::tag_list(js, tags.raw(), "`tags`")
            .and_then(|t| self.stamp_impl(js, t, options.map(|o| o.raw())));
        let p = rejecting(js, r)?;
        // SAFETY: a value of this env, returned to it at once.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), p) })
    }
}
