//! `cache.warm(keys, loader, { concurrency })`: pre-warming with bounded concurrency, the
//! engine's warm-up driven on the JS thread.

use std::rc::Rc;

use herdless_redis::call::{CallOptions, WarmPlan};
use napi::Result;
use napi_derive::napi;

use crate::call::Answer;
use crate::driver::Inner;
use crate::errors::{self, code, type_error};
use crate::js::{ErrorKind, Js, Type, Value};
use crate::options;

/// Options of `cache.warm(keys, loader, options)`.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct WarmOptions {
    /// Most loads at once (default 4, never more than `originBudget`): the engine decides,
    /// as for every language.
    pub concurrency: Option<f64>,
    /// TTL in milliseconds of the warmed values (default: the cache's).
    pub ttl: Option<f64>,
    /// Called with the report so far after each key (what it throws is ignored).
    #[napi(ts_type = "(progress: WarmReport) => void")]
    pub on_progress: Option<()>,
}

/// What `warm` did (or has done so far, when handed to `onProgress`).
#[napi(object, object_from_js = false)]
pub struct WarmReport {
    /// Keys asked for.
    pub total: u32,
    /// Keys this warm-up loaded with a value (a stale key is refreshed, not skipped).
    pub loaded: u32,
    /// Keys this warm-up loaded whose loader answered `ABSENT`: cached as an absence.
    pub absent: u32,
    /// Keys already fresh, or loaded by another caller meanwhile.
    pub skipped: u32,
    /// Keys that did not fail (`loaded + absent + skipped`).
    pub ok: u32,
    /// How many keys failed (a count; the failures themselves are in `errors`).
    pub failed: u32,
    /// The failures as `{ key, error }`, in completion order (`errors.length === failed`).
    #[napi(ts_type = "Array<{ key: string; error: unknown }>")]
    pub errors: Vec<()>,
}

/// The most keys one `warm` call takes (2^24): far more than a warm-up list, far less than
/// the length a sparse array can claim.
pub(crate) const MAX_WARM_KEYS: u32 = 1 << 24;

/// `cache.warm(keys, loader, options)`: returns the report's promise.
pub(crate) fn warm(
    js: Js,
    inner: &Rc<Inner>,
    keys: Value,
    loader: Value,
    opts: Option<Value>,
) -> Result<Value> {
    if !js.is_array(keys)? {
        return Err(type_error(js, "warm expects an array of keys"));
    }
    let n = js.array_len(keys)?;
    // A sparse array's length is not memory: bounded before anything is sized by it.
    if n > MAX_WARM_KEYS {
        return Err(errors::throw_new(
            js,
            ErrorKind::Range,
            code::INVALID_ARGUMENT,
            &format!(
                "warm takes at most {MAX_WARM_KEYS} keys per call, got an array of length {n}"
            ),
        ));
    }
    let mut list = Vec::with_capacity((n as usize).min(4096));
    for i in 0..n {
        let k = js.get_element(keys, i)?;
        if js.type_of(k)? != Type::String {
            return Err(type_error(js, &format!("warm: key {i} is not a string")));
        }
        list.push(js.get_string(k)?);
    }
    if js.type_of(loader)? != Type::Function {
        return Err(type_error(js, "the loader must be a function"));
    }
    let (mut concurrency, mut ttl, mut on_progress) = (None, None, None);
    if let Some(o) = opts {
        ttl = options::ttl(js, o)?;
        let p = js.get(o, "onProgress")?;
        match js.type_of(p)? {
            Type::Undefined => {}
            Type::Function => on_progress = Some(js.reference(p)?),
            t => {
                return Err(errors::throw_new(
                    js,
                    ErrorKind::Type,
                    code::INVALID_OPTION,
                    &format!("option `onProgress` must be a function, got {}", t.name()),
                ));
            }
        }
        let c = js.get(o, "concurrency")?;
        match js.type_of(c)? {
            Type::Undefined => {}
            Type::Number => {
                let c = js.get_number(c)?;
                if !(c >= 1.0 && c.fract() == 0.0 && c <= 1e9) {
                    return Err(errors::throw_new(
                        js,
                        ErrorKind::Range,
                        code::INVALID_OPTION,
                        &format!("option `concurrency` must be an integer >= 1, got {c}"),
                    ));
                }
                concurrency = Some(c as usize);
            }
            t => {
                return Err(errors::throw_new(
                    js,
                    ErrorKind::Type,
                    code::INVALID_OPTION,
                    &format!("option `concurrency` must be a number, got {}", t.name()),
                ));
            }
        }
    }
    // The engine decides how many at once (its default, within the origin budget).
    let options = CallOptions::default().ttl(ttl);
    let plan = WarmPlan::new(&inner.tt, list, concurrency, options);
    let (deferred, promise) = js.promise()?;
    inner.start_warm(js, plan, loader, on_progress, Answer::Promise(deferred))?;
    Ok(promise)
}
