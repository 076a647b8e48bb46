//! `cache.warm(keys, loader, { concurrency })`: pre-warming with bounded concurrency, the
//! engine's warm-up driven on the JS thread.

use std::rc::Rc;
use std::task::{Context, Poll};

use herdless::WarmReport as EngineReport;
use herdless_redis::call::{CallOptions, Warm, WarmPlan};
use napi::Result;
use napi_derive::napi;

use crate::call::{Answer, Loader, Outcome};
use crate::driver::{Inner, Node, NodeRt};
use crate::errors::{self, code, type_error};
use crate::js::{ErrorKind, Js, Ref, Type, Value};
use crate::options;
use crate::value::Val;

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
    /// Keys that ended through a load (this warm-up's, or one it waited for) with a value.
    pub loaded: u32,
    /// Keys that ended through a load whose loader answered `ABSENT`: cached as an absence.
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

/// Makes the loader of one key of a warm-up.
type MakeLoader = Box<dyn FnMut(&str) -> Loader>;

/// One run of `warm`: the engine's warm-up ([`Warm`]: which keys load, how many at once,
/// what each counts as), a task of the cache's table, and its report in JS.
pub(crate) struct Run {
    warm: Warm<Val, Node, MakeLoader>,
    on_progress: Option<Ref>,
    /// `{ key, error }` objects, in a JS array (errors may be primitives, which Node-API
    /// cannot reference one by one), appended as the engine's report grows.
    errors: Ref,
    /// How many of the report's failures are in `errors`.
    listed: usize,
}

impl Run {
    /// Whether one of its calls sleeps until a waker fires.
    pub(crate) fn is_parked(&self) -> bool {
        self.warm.is_parked()
    }

    /// Drives the warm-up on: the report once it ended (or the rejection of what a loader
    /// raised that was not its answer).
    pub(crate) fn poll(
        &mut self,
        cx: &mut Context<'_>,
        rt: &NodeRt<'_>,
    ) -> Result<Option<Outcome>> {
        let (js, inner) = (rt.js, rt.inner);
        let Run {
            warm,
            on_progress,
            errors,
            listed,
        } = self;
        let mut failed = Ok(());
        let mut progress = |r: &EngineReport| {
            if failed.is_ok() {
                failed = report(js, inner, r, errors, listed).and_then(|report| {
                    // A throwing callback must not stop the warm-up: its exception is
                    // dropped.
                    match on_progress {
                        Some(f) => js.call(f.get(js)?, js.undefined()?, &[report]).map(drop),
                        None => Ok(()),
                    }
                });
            }
        };
        let polled = warm.poll_warm(cx, rt, &mut progress);
        failed?;
        match polled {
            Poll::Pending => Ok(None),
            Poll::Ready(Ok(r)) => Ok(Some(Ok(report(js, inner, &r, errors, listed)?))),
            Poll::Ready(Err(x)) => Ok(Some(Err(inner.raised(js, x)?))),
        }
    }
}

/// The JS report of `r`, its new failures appended to `errors`.
fn report(
    js: Js,
    inner: &Inner,
    r: &EngineReport,
    errors: &Ref,
    listed: &mut usize,
) -> Result<Value> {
    let list = errors.get(js)?;
    for (key, e) in r.failed.iter().skip(*listed) {
        let item = js.object()?;
        js.set(item, "key", js.string(key)?)?;
        js.set(item, "error", crate::errors::to_js(js, &inner.table, e)?)?;
        js.set_element(list, *listed as u32, item)?;
        *listed += 1;
    }
    let report = js.object()?;
    let n = |v: usize| js.number(v as f64);
    js.set(report, "total", n(r.total)?)?;
    js.set(report, "loaded", n(r.loaded)?)?;
    js.set(report, "absent", n(r.absent)?)?;
    js.set(report, "skipped", n(r.skipped)?)?;
    js.set(report, "ok", n(r.loaded + r.absent + r.skipped)?)?;
    js.set(report, "failed", n(r.failed.len())?)?;
    js.set(report, "errors", list)?;
    Ok(report)
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
    let func = Rc::new(js.reference(loader)?);
    let make: MakeLoader = Box::new(move |key: &str| Loader::keyed(&func, key));
    let run = Run {
        warm: Warm::new(&inner.tt, plan, make),
        on_progress,
        errors: js.reference(js.array(0)?)?,
        listed: 0,
    };
    let (deferred, promise) = js.promise()?;
    inner.start_warm(js, run, Answer::Promise(deferred))?;
    Ok(promise)
}
