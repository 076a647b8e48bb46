//! The `Cache` class: the engine's API in Node's idiom.

use std::rc::Rc;

use napi::bindgen_prelude::{Env, This, Unknown};
use napi::{JsValue, Result};
use napi_derive::napi;

use herdless::HitState;
use herdless_redis::two_tier::Get;

use crate::call::{Answer, CallOptions, Loader, Outcome};
use crate::driver::{EResult, Inner};
use crate::error::{self, code, type_error};
use crate::js::{self, ErrorKind, Js, StrBuf, StrRoom, Type, Value};
use crate::lifecycle::check_open;
use crate::metrics::{Metrics, snapshot};
use crate::options;
use crate::value::{Table, Val};

/// A stampede-proof cache of JS values under string keys.
///
/// Each caller gets its own copy of a stored object (`copyValues`, on by default; off, a
/// hit returns the very object that was stored). Concurrent `getOrLoad` calls of one key
/// share one loader call; the others wait without blocking the event loop.
#[napi(custom_finalize)]
pub struct Cache {
    pub(crate) inner: Rc<Inner>,
    /// The native memory reported to V8 for this cache (see `crate::lifecycle`).
    pub(crate) external: crate::lifecycle::External,
}

/// Reads a key argument into `room`, or throws a `TypeError`.
#[inline(always)]
fn key_arg<'b>(js: Js, key: Value, room: &'b mut StrRoom) -> Result<StrBuf<'b>> {
    match js.get_str(key, room) {
        // Node-API turns a lone surrogate into U+FFFD, which would fold different keys
        // ('k:\ud800', 'k:\udfff', 'k:\ufffd') onto one: such keys are refused. Only a key
        // that reads back with U+FFFD pays for the check.
        Ok(s) if !matches!(s, StrBuf::Ascii(_)) && s.as_str().contains('\u{FFFD}') => {
            well_formed(js, key, "key")?;
            Ok(s)
        }
        Ok(s) => Ok(s),
        Err(_) => Err(not_a_key(js, key)),
    }
}

/// Refuses a key, namespace or tag that is not valid Unicode (a lone surrogate).
#[cold]
pub(crate) fn well_formed(js: Js, s: Value, what: &str) -> Result<()> {
    let ok = js.call_method(s, "isWellFormed", &[])?;
    if js.get_bool(ok)? {
        Ok(())
    } else {
        Err(type_error(
            js,
            &format!(
                "the {what} has a lone surrogate (it is not valid Unicode, so it cannot be a {what})"
            ),
        ))
    }
}

#[cold]
fn not_a_key(js: Js, key: Value) -> napi::Error {
    let got = js.type_of(key).map_or("an unknown value", Type::name);
    type_error(js, &format!("the key must be a string, got {got}"))
}

/// Checks that `v` is an options object with only `known` fields (or undefined): `None`
/// for undefined.
fn options_arg(js: Js, v: Option<Value>, what: &str, known: &[&str]) -> Result<Option<Value>> {
    let Some(v) = v else {
        return Ok(None);
    };
    match js.type_of(v)? {
        Type::Undefined => Ok(None),
        Type::Object if !js.is_array(v)? => {
            options::known_fields(js, v, what, known)?;
            Ok(Some(v))
        }
        t => Err(error::throw_new(
            js,
            ErrorKind::Type,
            code::INVALID_OPTION,
            &format!("{what} options must be an object, got {}", t.name()),
        )),
    }
}

/// The `{ signal, ttl }` options of one call.
pub(crate) fn call_options(js: Js, opts: Option<Value>) -> Result<CallOptions> {
    let Some(obj) = opts else {
        return Ok(CallOptions::default());
    };
    let ttl = options::ttl(js, obj)?;
    let signal = js.get(obj, "signal")?;
    let signal = match js.type_of(signal)? {
        Type::Undefined => None,
        Type::Object if js.type_of(js.get(signal, "addEventListener")?)? == Type::Function => {
            Some(signal)
        }
        t => {
            return Err(error::throw_new(
                js,
                ErrorKind::Type,
                code::INVALID_OPTION,
                &format!("option `signal` must be an AbortSignal, got {}", t.name()),
            ));
        }
    };
    Ok(CallOptions {
        ttl,
        tags: None,
        signal,
    })
}

/// Turns a thrown exception into a rejected promise: promise-returning methods never throw.
pub(crate) fn rejecting(js: Js, r: Result<Value>) -> Result<Value> {
    match r {
        Ok(p) => Ok(p),
        Err(e) if e.status == napi::Status::PendingException => js.rejected(js.take_exception()?),
        Err(e) => js.rejected(js.error(ErrorKind::Error, code::ERROR, &e.reason)?),
    }
}

/// `cache.get(key)`: shared by the method and the fast path (`crate::fast`).
#[inline]
pub(crate) fn get_value(js: Js, inner: &Inner, key: Value) -> Result<Value> {
    check_open(js, inner)?;
    let mut room = StrRoom::new();
    let key = key_arg(js, key, &mut room)?;
    if let Some(f) = &inner.front {
        f.begin(js, &inner.l1)?;
    }
    // Read in place: no clone and drop of the value's handle (two atomic operations) per hit.
    match inner.l1.get_with(key.as_str(), |v| {
        (inner.table.read(js, &v.value), Table::copied(&v.value))
    }) {
        Some((Ok(v), copied)) => {
            // A copied value is each reader's own: the front must not hand one out twice.
            if let (Some(f), false) = (&inner.front, copied) {
                f.fill(js, &inner.l1, key.as_str(), None)?;
            }
            Ok(v)
        }
        Some((Err(status), _)) => Err(js::failed(status)),
        None => js.undefined(),
    }
}

/// `cache.getOrLoad(key, loader, options)`: shared by the method and the fast path. Never
/// throws: errors reject the returned promise.
pub(crate) fn get_or_load_value(
    js: Js,
    inner: &Rc<Inner>,
    key: Value,
    loader: Value,
    opts: Option<Value>,
) -> Result<Value> {
    let r = get_or_load_impl(js, inner, key, loader, opts);
    rejecting(js, r)
}

fn get_or_load_impl(
    js: Js,
    inner: &Rc<Inner>,
    key: Value,
    loader: Value,
    opts: Option<Value>,
) -> Result<Value> {
    check_open(js, inner)?;
    let mut room = StrRoom::new();
    let key = key_arg(js, key, &mut room)?;
    if js.type_of(loader)? != Type::Function {
        return Err(type_error(js, "the loader must be a function"));
    }
    let options = call_options(js, options_arg(js, opts, "getOrLoad", &["signal", "ttl"])?)?;
    if let Some(f) = &inner.front {
        f.begin(js, &inner.l1)?;
    }
    let first = inner.l1.lookup(key.as_str());
    if options.signal.is_none() {
        // The hit path: no call record, no loader reference.
        if let Some((v, copied)) = inner.hit_now(js, &first)? {
            if let (Some(f), false) = (&inner.front, copied) {
                f.fill(js, &inner.l1, key.as_str(), Some(v))?;
            }
            return js.resolved(v);
        }
    }
    let (deferred, promise) = js.promise()?;
    let loader = Loader::new(js, loader)?;
    let key = key.as_str().to_owned();
    inner.start(js, key, loader, options, Answer::Promise(deferred), first)?;
    Ok(promise)
}

/// Settles with the engine's answer: `ok` of the value, or the mapped error.
fn answer<T>(
    js: Js,
    inner: &Inner,
    r: EResult<T>,
    ok: impl FnOnce(T) -> Result<Value>,
) -> Result<Outcome> {
    match r {
        Ok(v) => Ok(Ok(ok(v)?)),
        Err(e) => Ok(Err(error::to_js(js, &inner.table, &e)?)),
    }
}

impl Cache {
    fn listen<'env>(
        &self,
        env: &'env Env,
        this: This<'env>,
        event: Unknown<'env>,
        listener: Unknown<'env>,
        once: bool,
    ) -> Result<Unknown<'env>> {
        let js = Js(env.raw());
        let name = crate::events::Name::parse(js, event.raw())?;
        self.inner
            .listeners
            .add(js, Some(name), listener.raw(), once)?;
        self.inner.listening_changed();
        // SAFETY: a value of this env, returned to it at once.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), this.object.raw()) })
    }

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
        let (deferred, promise) = js.promise()?;
        self.inner
            .start_many(js, list, loader, options, Answer::Promise(deferred))?;
        Ok(promise)
    }

    fn set_impl(&self, js: Js, key: Value, value: Value, options: Option<Value>) -> Result<Value> {
        self.inner.fold_front();
        let mut room = StrRoom::new();
        let key = key_arg(js, key, &mut room)?;
        let (mut ttl, mut tags) = (None, None);
        if let Some(o) = options_arg(js, options, "set", &["ttl", "tags"])? {
            ttl = options::ttl(js, o)?;
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
        let r = match (value, tags) {
            (value, Some(tags)) => {
                let mut loaded = herdless::Loaded::from(value).tags(tags);
                if let Some(t) = ttl {
                    loaded = loaded.ttl(t);
                }
                inner.tt.set_with(key.as_str(), loaded, &inner.host(js))
            }
            (Some(v), None) => inner.tt.set(key.as_str(), v, ttl, &inner.host(js)),
            (None, None) => inner.tt.set_absent(key.as_str()),
        };
        inner.run_woken(js)?;
        let pending = r.map_err(|e| error::throw(js, &inner.table, &e))?;
        inner.op(js, pending, |js, inner, r| {
            answer(js, inner, r, |()| js.undefined())
        })
    }

    fn invalidate_impl(&self, js: Js, key: Value) -> Result<Value> {
        self.inner.fold_front();
        let mut room = StrRoom::new();
        let key = key_arg(js, key, &mut room)?;
        let inner = &self.inner;
        let r = inner.tt.invalidate(key.as_str());
        inner.run_woken(js)?;
        let pending = r.map_err(|e| error::throw(js, &inner.table, &e))?;
        inner.op(js, pending, |js, inner, r| {
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
        self.inner.op(js, pending, |js, inner, r| {
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
                    return Err(error::throw_new(
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
        let pending = r.map_err(|e| error::throw(js, &inner.table, &e))?;
        inner.op(js, pending, |js, inner, r| {
            answer(js, inner, r, |()| js.undefined())
        })
    }

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
            .map_err(|e| error::throw(js, &inner.table, &e))?
        {
            Get::Ready(v) => js.resolved(value(js, inner, v)?),
            Get::Tier(pending) => inner.op(js, pending, move |js, inner, read| {
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

    /// Stores `value` under `key` (`ABSENT` caches an absence for `negativeTtl`).
    /// `options.ttl` (ms) replaces the cache's TTL for this entry; `options.tags` (an array
    /// of strings) tags it: `invalidateTag` of one of them drops it. A load of `key` already
    /// running anywhere will not overwrite it. Without a shared tier this process has it at
    /// once. With one, the promise resolves when the fleet has it (and this process with
    /// it); when the tier fails it rejects (code `HERDLESS_BACKEND`) after dropping this
    /// process's copy, and a value the codec cannot encode is refused (a `TypeError`, or
    /// what your codec's `encode` threw).
    #[napi(
        ts_args_type = "key: string, value: unknown, options?: { ttl?: number; tags?: readonly string[] }",
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
    /// the cache's TTL for the loaded value. When a stale value is served (grace, XFetch),
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
        let known = ["namespace", "entity", "version", "ttl", "key", "tags"];
        let opts = options_arg(js, options.map(|o| o.raw()), "wrap", &known)?;
        let f = crate::wrap::wrap(js, &self.inner, func.raw(), opts)?;
        // SAFETY: a value of this env, returned to it at once.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), f) })
    }

    /// Pre-warms `keys` (e.g. a hot-key list saved before a restart) with `loader(key)`, at
    /// most `options.concurrency` (default 8) loads at once. Resolves with how many keys
    /// ended with a value and which failed; never rejects for a loader's error.
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

    /// Counters, histograms and sizes at this moment, per namespace and in total.
    #[napi]
    pub fn metrics(&self) -> Metrics {
        self.inner.fold_front();
        let mut m = snapshot(&self.inner.l1.metrics());
        m.total.events_dropped += self.inner.wake.events_dropped() as f64;
        m.redis = self
            .inner
            .tt
            .shared_metrics()
            .map(|r| crate::metrics::redis(&r));
        m
    }

    /// Calls `listener` with a `CacheEvent` each time `event` happens: `'evict'`,
    /// `'expire'` (expired with no refresh), `'loadError'` or `'failSafe'`. Never on the
    /// hit path, and never making the cache wait: a listener runs on the event loop after
    /// the fact, and events that pile up faster than the event loop takes them are dropped
    /// (counted in `metrics().total.eventsDropped`). A listener that throws is reported
    /// with `process.emitWarning`. Returns the cache, like `EventEmitter.on`; an unknown
    /// event name throws a `TypeError` (code `HERDLESS_INVALID_ARGUMENT`).
    #[napi(
        ts_args_type = "event: CacheEventName, listener: (event: CacheEvent) => void",
        ts_return_type = "this"
    )]
    pub fn on<'env>(
        &self,
        env: &'env Env,
        this: This<'env>,
        event: Unknown<'env>,
        listener: Unknown<'env>,
    ) -> Result<Unknown<'env>> {
        self.listen(env, this, event, listener, false)
    }

    /// `on`, for the next such event only.
    #[napi(
        ts_args_type = "event: CacheEventName, listener: (event: CacheEvent) => void",
        ts_return_type = "this"
    )]
    pub fn once<'env>(
        &self,
        env: &'env Env,
        this: This<'env>,
        event: Unknown<'env>,
        listener: Unknown<'env>,
    ) -> Result<Unknown<'env>> {
        self.listen(env, this, event, listener, true)
    }

    /// Removes the listener added last with `on(event, listener)` (or `once`); nothing when
    /// there is none. Returns the cache. With no listener left, the cache makes no events.
    #[napi(
        ts_args_type = "event: CacheEventName, listener: (event: CacheEvent) => void",
        ts_return_type = "this"
    )]
    pub fn off<'env>(
        &self,
        env: &'env Env,
        this: This<'env>,
        event: Unknown<'env>,
        listener: Unknown<'env>,
    ) -> Result<Unknown<'env>> {
        let js = Js(env.raw());
        let name = crate::events::Name::parse(js, event.raw())?;
        self.inner.listeners.remove(js, name, listener.raw())?;
        self.inner.listening_changed();
        // SAFETY: a value of this env, returned to it at once.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), this.object.raw()) })
    }

    /// The metrics in Prometheus text exposition format.
    #[napi]
    pub fn prometheus(&self) -> String {
        self.inner.fold_front();
        self.inner.tt.prometheus()
    }

    /// The stampede detector's findings, oldest first: what (`kind`, `cause`), where
    /// (`namespace`, `key`), since when, the evidence and the likely `cures`. Alerts stay
    /// listed for 10 minutes after their condition last held (`active`: it holds now).
    #[napi]
    pub fn alerts(&self) -> Vec<crate::detector::Alert> {
        self.inner.fold_front();
        crate::detector::alerts(&self.inner.l1.alerts())
    }

    /// The `n` (default 100) most accessed keys, most first (counts are sampled estimates).
    #[napi]
    pub fn hot_keys(&self, n: Option<u32>) -> Vec<crate::detector::HotKey> {
        self.inner.fold_front();
        crate::detector::hot_keys(self.inner.l1.hot_keys(n.unwrap_or(100) as usize))
    }

    /// The `n` (default 1000) hottest keys as JSON, for `importHotKeys` in the next
    /// instance.
    #[napi]
    pub fn export_hot_keys(&self, n: Option<u32>) -> String {
        self.inner.fold_front();
        self.inner.l1.export_hot_keys(n.unwrap_or(1000) as usize)
    }

    /// Reads what `exportHotKeys` wrote into this cache's tracker and returns the keys,
    /// hottest first, ready for `warm`. Throws a `TypeError` (code
    /// `HERDLESS_INVALID_ARGUMENT`) on anything else.
    #[napi]
    pub fn import_hot_keys(&self, env: &Env, json: String) -> Result<Vec<String>> {
        self.inner.fold_front();
        match self.inner.l1.import_hot_keys(&json) {
            Ok(keys) => Ok(keys.into_iter().map(|k| k.key).collect()),
            Err(e) => Err(type_error(Js(env.raw()), &e.to_string())),
        }
    }

    /// Sets (or, with null, removes) the observer of loader calls (`herdless/opentelemetry`):
    /// each load calls `observer(key, background, fn, bound)`, which runs the loader `fn`
    /// (with `bound`, `[this, ...args]`, when given) and returns its result. Not a stable API.
    #[napi(
        js_name = "_setLoadObserver",
        ts_args_type = "observer: ((key: string, background: boolean, fn: (...args: unknown[]) => unknown, bound?: unknown[]) => unknown) | null"
    )]
    pub fn set_load_observer(&self, env: &Env, observer: Option<Unknown<'_>>) -> Result<()> {
        let js = Js(env.raw());
        let observer = match observer.map(|o| o.raw()) {
            None => None,
            Some(o) => match js.type_of(o)? {
                Type::Function => Some(o),
                Type::Null | Type::Undefined => None,
                _ => {
                    let message = "_setLoadObserver: the observer must be a function or null";
                    return Err(type_error(js, message));
                }
            },
        };
        self.inner.set_observer(js, observer)
    }

    /// The JS front's handles (`lib/front.js`): `{ info, stash, hit }`, or null when the
    /// `front` option is off. Not a stable API.
    #[napi(
        js_name = "_front",
        ts_return_type = "{ info: Int32Array; stash: unknown[]; map: Map<string, { value: unknown; slot: number }>; hit: (slot: number) => boolean } | null"
    )]
    pub fn front<'env>(&self, env: &'env Env) -> Result<Unknown<'env>> {
        let js = Js(env.raw());
        let v = match &self.inner.front {
            None => js.null()?,
            Some(f) => {
                let (info, stash, map) = f.handles(js)?;
                let o = js.object()?;
                js.set(o, "info", info)?;
                js.set(o, "stash", stash)?;
                js.set(o, "map", map)?;
                js.set(o, "hit", crate::fast::front_hit(js, &self.inner)?)?;
                o
            }
        };
        // SAFETY: a value of this env, returned to it at once.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), v) })
    }

    /// Internal counts for leak tests (values held, calls pending, loads in flight). Not a
    /// stable API.
    #[napi(js_name = "_internals")]
    pub fn internals(&self, env: &Env) -> Result<Internals> {
        let js = Js(env.raw());
        self.inner.run_woken(js)?;
        Ok(Internals {
            live_values: self.inner.table.live() as f64,
            pending_calls: self.inner.calls() as f64,
            flights: herdless::driver::flights_in_progress(&self.inner.l1) as f64,
        })
    }
}

/// See `Cache._internals()`.
#[napi(object)]
pub struct Internals {
    /// JS values the engine holds (entries, in-flight results).
    pub live_values: f64,
    /// `getOrLoad` calls not answered or still loading.
    pub pending_calls: f64,
    /// Keys loading now.
    pub flights: f64,
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

/// Per-call options of `getOrLoad`.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct LoadOptions {
    /// Stops this caller waiting (the promise rejects with the signal's reason); the shared
    /// load goes on for the others.
    #[napi(ts_type = "AbortSignal")]
    pub signal: Option<()>,
    /// TTL in milliseconds for the value this call loads (default: the cache's).
    pub ttl: Option<f64>,
}

/// Per-call options of `getOrLoadMany`.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct BatchOptions {
    /// Stops this caller waiting (the promise rejects with the signal's reason); the
    /// batch's loads go on for the other callers of its keys.
    #[napi(ts_type = "AbortSignal")]
    pub signal: Option<()>,
}

/// `buildKey({ namespace, entity, version?, id?, params? })`: the canonical key (the
/// format shared with Rust and Python). Throws a `TypeError` with code
/// `HERDLESS_INVALID_KEY` for an invalid part.
#[napi(ts_args_type = "parts: KeyParts")]
pub fn build_key(env: &Env, parts: Unknown) -> Result<String> {
    crate::key::build_from_parts(Js(env.raw()), parts.raw())
}
