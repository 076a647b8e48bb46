//! Locks on keys: `lock`, `tryLock`, `isLocked`, and the `FleetLock` they resolve to.
//!
//! The lock is the engine's (`TwoTier::lock`; PROTOCOL.md, "Locks held outside a load"):
//! its lease, extension, release by token, waits and failure policy are decided there for
//! every language. This drives its wait and its release on the JS thread like any other
//! operation of the tier (an op of the driver: never blocking the event loop, keeping the
//! process alive while it waits, cancelled by an aborted signal) and keeps the held lock in
//! a JS object, whose collection unreleased drops it (the engine then releases it in the
//! background).

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use herdless_redis::FleetLock as Held;
use napi::bindgen_prelude::{Env, JavaScriptClassExt, Unknown};
use napi::{JsValue, Result};
use napi_derive::napi;

use crate::call::{aborted, rejecting};
use crate::driver::Inner;
use crate::errors::{self, code};
use crate::js::{ErrorKind, Js, StrRoom, Value};
use crate::options;

use super::{Cache, answer, call_options, key_arg, options_arg};

/// How long a lock call may wait for the lock's holder.
enum Wait {
    /// One try, no wait (`tryLock`).
    Try,
    /// Until the holder releases it, or for at most this long.
    For(Option<Duration>),
}

impl Cache {
    fn lock_impl(
        &self,
        js: Js,
        key: Value,
        options: Option<Value>,
        try_only: bool,
    ) -> Result<Value> {
        self.inner.fold_front();
        let mut room = StrRoom::new();
        let key = key_arg(js, key, &mut room)?;
        let (mut timeout, mut signal) = (None, None);
        if let Some(o) = options_arg(js, options, "lock", &["timeout", "signal"])? {
            timeout = options::timeout(js, o)?;
            signal = call_options(js, Some(o))?.signal;
        }
        if let Some(reason) = aborted(js, signal)? {
            return js.rejected(reason);
        }
        let wait = match try_only {
            true => Wait::Try,
            false => Wait::For(timeout),
        };
        let now = Instant::now();
        let until = match wait {
            Wait::Try => Some(now),
            // A timeout past what an `Instant` can hold is no limit.
            Wait::For(t) => t.and_then(|t| now.checked_add(t)),
        };
        let inner = &self.inner;
        let pending = inner.tt.lock(key.as_str(), until);
        let key = key.as_str().to_owned();
        // The lock object keeps the cache's driver, which runs its release.
        let holder = Rc::clone(inner);
        inner.op(js, pending, signal, move |js, inner, r| match r {
            Ok(Some(held)) => Ok(Ok(FleetLock::to_js(js, &holder, held)?)),
            Ok(None) => match wait {
                Wait::Try => Ok(Ok(js.null()?)),
                Wait::For(t) => Ok(Err(lock_timeout(js, &key, t.unwrap_or_default())?)),
            },
            Err(e) => Ok(Err(errors::to_js(js, &inner.table, &e)?)),
        })
    }

    fn is_locked_impl(&self, js: Js, key: Value) -> Result<Value> {
        self.inner.fold_front();
        let mut room = StrRoom::new();
        let key = key_arg(js, key, &mut room)?;
        let pending = self.inner.tt.is_locked(key.as_str());
        self.inner.op(js, pending, None, |js, inner, r| {
            answer(js, inner, r, |b| js.bool(b))
        })
    }
}

/// The rejection of a `lock` whose `timeout` passed with the lock still held.
fn lock_timeout(js: Js, key: &str, waited: Duration) -> Result<Value> {
    let ms = waited.as_secs_f64() * 1000.0;
    let message = format!("the lock on {key:?} was still held after {ms} ms");
    let err = js.error(ErrorKind::Error, code::LOCK_TIMEOUT, &message)?;
    js.set(err, "waitedMs", js.number(ms)?)?;
    Ok(err)
}

#[napi]
impl Cache {
    /// Takes the lock on `key` and resolves to it once held (`release()` it, or
    /// `await using lock = await cache.lock(key)`). With a shared tier it is the fleet's,
    /// the very lock a load of `key` takes: processes sharing the tier exclude each other,
    /// and a load of `key` anywhere waits for it. Without one it excludes this cache's
    /// callers (and does not stop loads). Waits for its holder without blocking the event
    /// loop: for at most `options.timeout` ms (0: one try; default: no limit), then rejects
    /// with code `HERDLESS_LOCK_TIMEOUT` (`err.waitedMs`); `options.signal` rejects with the
    /// signal's reason and stops asking. A shared tier that cannot be reached rejects with
    /// `HERDLESS_BACKEND` (never a lock that looks held), a closed cache with
    /// `HERDLESS_CLOSED`.
    #[napi(
        ts_args_type = "key: string, options?: LockOptions",
        ts_return_type = "Promise<FleetLock>"
    )]
    pub fn lock<'env>(
        &self,
        env: &'env Env,
        key: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<Unknown<'env>> {
        let js = Js(env.raw());
        let r = self.lock_impl(js, key.raw(), options.map(|o| o.raw()), false);
        let p = rejecting(js, r)?;
        // SAFETY: a value of this env, returned to it at once.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), p) })
    }

    /// Takes the lock on `key` if it is free (one round trip, no wait): the lock, or `null`
    /// when another caller holds it (or, with a shared tier, a load of `key` runs). As
    /// `lock` otherwise.
    #[napi(
        ts_args_type = "key: string",
        ts_return_type = "Promise<FleetLock | null>"
    )]
    pub fn try_lock<'env>(&self, env: &'env Env, key: Unknown<'env>) -> Result<Unknown<'env>> {
        let js = Js(env.raw());
        let r = self.lock_impl(js, key.raw(), None, true);
        let p = rejecting(js, r)?;
        // SAFETY: a value of this env, returned to it at once.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), p) })
    }

    /// Whether another caller holds the lock on `key` (with a shared tier, also a running
    /// load of it), asked of the tier without keeping it: a free lock is taken and given
    /// back at once. The answer may be stale by the time it is read. Fails as `lock` does.
    #[napi(ts_args_type = "key: string", ts_return_type = "Promise<boolean>")]
    pub fn is_locked<'env>(&self, env: &'env Env, key: Unknown<'env>) -> Result<Unknown<'env>> {
        let js = Js(env.raw());
        let r = self.is_locked_impl(js, key.raw());
        let p = rejecting(js, r)?;
        // SAFETY: a value of this env, returned to it at once.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), p) })
    }
}

/// A lock on one key of a cache (`cache.lock`, `cache.tryLock`), held until `release()`.
/// With a shared tier it is the fleet's: it excludes every process sharing the tier, and a
/// load of the key anywhere waits for it. Taken for one `lease` and extended in the
/// background while held: a holder that dies frees it within one lease, and a lock the
/// garbage collector takes unreleased is released in the background. A `set`, `invalidate`
/// or namespace `bump` of the key breaks it (`lost`). Not reentrant. Also
/// `lock[Symbol.asyncDispose]()` (`await using`), which releases it if still held.
#[napi]
pub struct FleetLock {
    key: String,
    /// The cache whose driver runs the release.
    inner: Rc<Inner>,
    /// Until `release()`.
    held: RefCell<Option<Held>>,
}

impl FleetLock {
    /// The JS object of a lock the engine of `inner` took.
    fn to_js(js: Js, inner: &Rc<Inner>, held: Held) -> Result<Value> {
        let lock = FleetLock {
            key: held.key().to_owned(),
            inner: Rc::clone(inner),
            held: RefCell::new(Some(held)),
        };
        Ok(lock.into_instance(&Env::from_raw(js.raw()))?.value)
    }

    fn release_impl(&self, js: Js) -> Result<Value> {
        let Some(held) = self.held.borrow_mut().take() else {
            let message = format!("the lock on {:?} is not held (already released)", self.key);
            return Err(errors::throw_new(
                js,
                ErrorKind::Error,
                code::NOT_HELD,
                &message,
            ));
        };
        self.inner.op(js, held.release(), None, |js, inner, r| {
            answer(js, inner, r, |b| js.bool(b))
        })
    }

    fn is_lost(&self) -> Option<bool> {
        self.held.borrow().as_ref().map(Held::is_lost)
    }
}

#[napi]
impl FleetLock {
    /// The key.
    #[napi(getter)]
    pub fn key(&self) -> String {
        self.key.clone()
    }

    /// Whether this object holds the lock: not released, and not found lost.
    #[napi(getter)]
    pub fn owned(&self) -> bool {
        self.is_lost() == Some(false)
    }

    /// Whether the lock this object holds was found lost: it ran out (this process was
    /// frozen or cut off from the tier for a whole lease), or a `set`, `invalidate` or
    /// `bump` of its key broke it. Another caller may hold it now.
    #[napi(getter)]
    pub fn lost(&self) -> bool {
        self.is_lost() == Some(true)
    }

    /// Gives the lock back, waking its waiters (in every process, with a shared tier).
    /// Resolves to `true` if it was still this lock's, `false` if it had been lost. Rejects
    /// with `HERDLESS_NOT_HELD` once released, `HERDLESS_BACKEND` when the tier cannot be
    /// reached (the lock then runs out by itself within one lease).
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn release<'env>(&self, env: &'env Env) -> Result<Unknown<'env>> {
        let js = Js(env.raw());
        let r = self.release_impl(js);
        let p = rejecting(js, r)?;
        // SAFETY: a value of this env, returned to it at once.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), p) })
    }
}
