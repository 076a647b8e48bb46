//! `warm`: the engine's warm-up ([`Warm`]: which keys load, how many at once, what each
//! counts as) as a task of the cache's table, and its report in JS.

use std::rc::Rc;
use std::task::{Context, Poll};

use herdless::WarmReport as EngineReport;
use herdless_redis::call::{Warm, WarmPlan};
use napi::Result;

use super::{Inner, Node, NodeRt, State};
use crate::call::{Answer, Loader, Outcome};
use crate::js::{Js, Ref, Value};
use crate::value::Val;

impl Inner {
    /// Starts a warm-up of `plan` with `loader(key)`, answered through `answer` with its
    /// report; `on_progress` is told the report after each key.
    pub(crate) fn start_warm(
        self: &Rc<Self>,
        js: Js,
        plan: WarmPlan,
        loader: Value,
        on_progress: Option<Ref>,
        answer: Answer,
    ) -> Result<()> {
        let func = Rc::new(js.reference(loader)?);
        let make: MakeLoader = Box::new(move |key: &str| Loader::keyed(&func, key));
        let run = Run {
            warm: Warm::new(&self.tt, plan, make),
            on_progress,
            errors: js.reference(js.array(0)?)?,
            listed: 0,
        };
        self.begin(js, answer, None, || Ok(State::Warm(Box::new(run))))
    }
}

/// Makes the loader of one key of a warm-up.
type MakeLoader = Box<dyn FnMut(&str) -> Loader>;

/// One run of `warm`: the engine's warm-up ([`Warm`]: which keys load, how many at once,
/// what each counts as), a task of the cache's table, and its report in JS.
pub(super) struct Run {
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
    pub(super) fn is_parked(&self) -> bool {
        self.warm.is_parked()
    }

    /// Drives the warm-up on: the report once it ended (or the rejection of what a loader
    /// raised that was not its answer).
    pub(super) fn poll(
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
