//! Loading: `getOrLoad`, `getOrLoadMany`, `wrap` and `warm`.

use napi::bindgen_prelude::{Env, Unknown};
use napi::{JsValue, Result};
use napi_derive::napi;

use crate::call::{Answer, aborted};
use crate::driver::check_open;
use crate::errors::type_error;
use crate::js::{Js, Type, Value};

use super::{Cache, call_options, get_or_load_value, options_arg};
use crate::call::rejecting;

impl Cache {
    fn get_or_load_many_impl(
        &self,
        js: Js,
        keys: Value,
        loader: Value,
        opts: Option<Value>,
    ) -> Result<Value> {
        check_open(js, &self.inner)?;
        self.inner.fold_front();
        if !js.is_array(keys)? {
            return Err(type_error(js, "`keys` must be an array of keys"));
        }
        let n = js.array_len(keys)?;
        let mut list = Vec::with_capacity(n as usize);
        for i in 0..n {
            let k = js.get_element(keys, i)?;
            if js.type_of(k)? != Type::String {
                return Err(type_error(js, "every key must be a string"));
            }
            list.push(js.get_string(k)?);
        }
        if js.type_of(loader)? != Type::Function {
            return Err(type_error(js, "the loader must be a function"));
        }
        let options = call_options(js, options_arg(js, opts, "getOrLoadMany", &["signal"])?)?;
        if let Some(reason) = aborted(js, options.signal)? {
            return js.rejected(reason);
        }
        let (deferred, promise) = js.promise()?;
        self.inner
            .start_many(js, list, loader, options, Answer::Promise(deferred))?;
        Ok(promise)
    }
}

#[napi]
impl Cache {
    /// The value of `key`, loading it with `loader` if needed. Concurrent callers of one key
    /// share one loader call; the others wait (at most `waitTimeout`) without blocking the
    /// event loop.
    ///
    /// The loader's value is cached (`undefined` and `null` included); returning `ABSENT`
    /// caches an absence for `negativeTtl`, which resolves to `undefined`. A rejection is
    /// never cached: every caller waiting for that load is rejected with the loader's very
    /// error object. `options.signal` stops this caller waiting (rejecting with the
    /// signal's reason) without cancelling the shared load (once every caller left, the
    /// load's `ctx.signal` aborts and its result is not stored); `options.ttl` (ms) replaces
    /// the cache's TTL for the loaded value, `options.tti` (ms) its time-to-idle (a
    /// loader's own `ctx.setTti` wins). When a stale value is served (grace, XFetch),
    /// the loader runs once in the background and nobody waits for it. A loader that
    /// declares a parameter is handed a `LoadContext` (key, reason, previous value, an
    /// `AbortSignal`; per-entry TTL, grace, metadata, "not modified", "no cache"). The
    /// result's type is the loader's, with `undefined` instead of `ABSENT` when the loader
    /// may return it.
    #[napi(
        ts_generic_types = "T",
        ts_args_type = "key: string, loader: (ctx: LoadContext) => T | NotModified | PromiseLike<T | NotModified>, options?: LoadOptions",
        ts_return_type = "Promise<typeof ABSENT extends T ? Exclude<T, typeof ABSENT> | undefined : T>"
    )]
    pub fn get_or_load<'env>(
        &self,
        env: &'env Env,
        key: Unknown<'env>,
        loader: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<Unknown<'env>> {
        let js = Js(env.raw());
        let opts = options.map(|o| o.raw());
        let p = get_or_load_value(js, &self.inner, key.raw(), loader.raw(), opts)?;
        // SAFETY: a value of this env, returned to it at once.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), p) })
    }

    /// The values of `keys`, in their order (duplicates allowed), loading the keys nobody
    /// has with ONE call of `loader(missingKeys)`; each key stays single-flight with every
    /// other caller (`getOrLoad`, other batches, other processes over the shared tier): a
    /// key someone else is loading is waited for, not loaded twice.
    ///
    /// The loader answers (or resolves to) a `Map` or a plain object of key to value;
    /// `ABSENT`, or a key left out, is an absence (cached for `negativeTtl`, answered as
    /// `undefined`). More than `maxBatch` misses make several calls. A rejection fails
    /// every key of that call (nothing is cached). Stale keys are answered at once and
    /// refreshed together in the background. Resolves to the array of values; when some
    /// keys failed, rejects with a `BatchError` (code `HERDLESS_BATCH`) whose `errors`
    /// maps each failed key to its error and whose `values` holds every answer (the error
    /// in place of a failed key's value). `options.signal` stops this caller waiting; the
    /// batch's loads go on for the other callers.
    #[napi(
        ts_generic_types = "T",
        ts_args_type = "keys: readonly string[], loader: (keys: string[]) => Map<string, T | typeof ABSENT> | Record<string, T | typeof ABSENT> | PromiseLike<Map<string, T | typeof ABSENT> | Record<string, T | typeof ABSENT>>, options?: BatchOptions",
        ts_return_type = "Promise<Array<T | undefined>>"
    )]
    pub fn get_or_load_many<'env>(
        &self,
        env: &'env Env,
        keys: Unknown<'env>,
        loader: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<Unknown<'env>> {
        let js = Js(env.raw());
        let r = self.get_or_load_many_impl(js, keys.raw(), loader.raw(), options.map(|o| o.raw()));
        let p = rejecting(js, r)?;
        // SAFETY: a value of this env, returned to it at once.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), p) })
    }

    /// Memoises the async function `fn`: each call becomes a `getOrLoad` under a canonical
    /// key built from `options.namespace` (default: the cache's), `options.entity` (default:
    /// `fn.name`), `options.version` and the arguments: no argument -> no id; one plain
    /// object -> its properties as parameters; one other value -> the id; several -> the
    /// count as id and each argument as a positional parameter. `options.key(...args)`
    /// replaces that mapping: it returns an id, or `{ id, params }`. Arrays in keys are sets.
    #[napi(
        ts_generic_types = "A extends unknown[], R",
        ts_args_type = "fn: (...args: A) => R | PromiseLike<R>, options?: WrapOptions",
        ts_return_type = "(...args: A) => Promise<typeof ABSENT extends Awaited<R> ? Exclude<Awaited<R>, typeof ABSENT> | undefined : Awaited<R>>"
    )]
    pub fn wrap<'env>(
        &self,
        env: &'env Env,
        func: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<Unknown<'env>> {
        self.inner.fold_front();
        let js = Js(env.raw());
        check_open(js, &self.inner)?;
        let known = [
            "namespace",
            "entity",
            "version",
            "ttl",
            "tti",
            "key",
            "tags",
        ];
        let opts = options_arg(js, options.map(|o| o.raw()), "wrap", &known)?;
        let f = crate::wrap::wrap(js, &self.inner, func.raw(), opts)?;
        // SAFETY: a value of this env, returned to it at once.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), f) })
    }

    /// Pre-warms `keys` (e.g. a hot-key list saved before a restart) with `loader(key)`, at
    /// most `options.concurrency` (default 4, never more than `originBudget`) loads at once:
    /// a fresh key, or one another caller loads meanwhile, is skipped; a stale one is
    /// refreshed. Resolves with how many keys loaded a value and which failed; never rejects
    /// for a loader's error.
    #[napi(
        ts_args_type = "keys: readonly string[], loader: (key: string) => unknown, options?: WarmOptions",
        ts_return_type = "Promise<WarmReport>"
    )]
    pub fn warm<'env>(
        &self,
        env: &'env Env,
        keys: Unknown<'env>,
        loader: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<Unknown<'env>> {
        self.inner.fold_front();
        let js = Js(env.raw());
        let known = ["concurrency", "ttl", "onProgress"];
        let r = check_open(js, &self.inner)
            .and_then(|()| options_arg(js, options.map(|o| o.raw()), "warm", &known))
            .and_then(|o| crate::warm::warm(js, &self.inner, keys.raw(), loader.raw(), o));
        let p = rejecting(js, r)?;
        // SAFETY: a value of this env, returned to it at once.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), p) })
    }
}

/// Per-call options of `getOrLoad`.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct LoadOptions {
    /// Stops this caller waiting (the promise rejects with the signal's reason); the shared
    /// load goes on for the others.
    #[napi(ts_type = "AbortSignal")]
    pub signal: Option<()>,
    /// TTL in milliseconds for the value this call loads (default: the cache's).
    pub ttl: Option<f64>,
    /// Time-to-idle in milliseconds for the value this call loads (default: the cache's;
    /// the loader's `ctx.setTti` wins).
    pub tti: Option<f64>,
}

/// Per-call options of `getOrLoadMany`.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct BatchOptions {
    /// Stops this caller waiting (the promise rejects with the signal's reason); the
    /// batch's loads go on for the other callers of its keys.
    #[napi(ts_type = "AbortSignal")]
    pub signal: Option<()>,
}
