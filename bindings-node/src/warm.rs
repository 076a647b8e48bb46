//! `cache.warm(keys, loader, { concurrency })`: pre-warming with bounded concurrency.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use herdless_redis::call::warm_workers;
use napi::Result;
use napi_derive::napi;

use crate::call::{Answer, CallOptions, Loader};
use crate::driver::Inner;
use crate::errors::{self, code, type_error};
use crate::js::{Deferred, ErrorKind, Js, Ref, Type, Value};
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

/// One run of `warm`.
struct Warm {
    inner: Rc<Inner>,
    keys: Vec<String>,
    loader: Ref,
    ttl: Option<Duration>,
    concurrency: usize,
    next: Cell<usize>,
    running: Cell<usize>,
    /// Set while `pump` runs, so completions met inside it do not recurse into it.
    pumping: Cell<bool>,
    loaded: Cell<u32>,
    absent: Cell<u32>,
    skipped: Cell<u32>,
    failed: Cell<u32>,
    on_progress: Option<Ref>,
    /// `{ key, error }` objects, in a JS array (errors may be primitives, which Node-API
    /// cannot reference one by one).
    errors: Ref,
    done: RefCell<Option<Deferred>>,
}

impl Warm {
    /// Starts loads up to the concurrency bound; resolves the report when all ended.
    fn pump(self: &Rc<Self>, js: Js) -> Result<()> {
        self.pumping.set(true);
        let r = self.pump_inner(js);
        self.pumping.set(false);
        r?;
        if self.running.get() == 0 && self.next.get() == self.keys.len() {
            if let Some(d) = self.done.borrow_mut().take() {
                d.settle(js, Ok(self.report(js)?))?;
            }
        }
        Ok(())
    }

    fn pump_inner(self: &Rc<Self>, js: Js) -> Result<()> {
        while self.running.get() < self.concurrency && self.next.get() < self.keys.len() {
            let key = self.keys[self.next.get()].clone();
            self.next.set(self.next.get() + 1);
            let inner = &self.inner;
            inner.fold_front();
            let first = inner.l1.lookup(&key);
            if inner.hit_now(js, &first)?.is_some() {
                self.skipped.set(self.skipped.get() + 1);
                self.progress(js)?;
                continue;
            }
            self.running.set(self.running.get() + 1);
            let undefined = js.undefined()?;
            let loader = Loader::bound(js, self.loader.get(js)?, undefined, &[js.string(&key)?])?;
            let me = Rc::clone(self);
            let k = key.clone();
            let answer = Answer::Callback(Box::new(move |js, outcome, absent| {
                me.finished(js, k, outcome, absent)
            }));
            let options = CallOptions {
                ttl: self.ttl,
                tags: None,
                signal: None,
            };
            inner.start(js, key, loader, options, answer, first)?;
        }
        Ok(())
    }

    fn finished(
        self: Rc<Self>,
        js: Js,
        key: String,
        outcome: std::result::Result<Value, Value>,
        absent: bool,
    ) -> Result<()> {
        self.running.set(self.running.get() - 1);
        match outcome {
            Ok(_) if absent => self.absent.set(self.absent.get() + 1),
            Ok(_) => self.loaded.set(self.loaded.get() + 1),
            Err(e) => {
                let item = js.object()?;
                js.set(item, "key", js.string(&key)?)?;
                js.set(item, "error", e)?;
                js.set_element(self.errors.get(js)?, self.failed.get(), item)?;
                self.failed.set(self.failed.get() + 1);
            }
        }
        self.progress(js)?;
        if self.pumping.get() {
            return Ok(());
        }
        self.pump(js)
    }

    /// Hands the report so far to `onProgress`, if given.
    fn progress(&self, js: Js) -> Result<()> {
        if let Some(f) = &self.on_progress {
            let report = self.report(js)?;
            // A throwing callback must not stop the warm-up: its exception is dropped.
            let _ = js.call(f.get(js)?, js.undefined()?, &[report])?;
        }
        Ok(())
    }

    fn report(&self, js: Js) -> Result<Value> {
        let report = js.object()?;
        let n = |v: u32| js.number(f64::from(v));
        js.set(report, "total", n(self.keys.len() as u32)?)?;
        js.set(report, "loaded", n(self.loaded.get())?)?;
        js.set(report, "absent", n(self.absent.get())?)?;
        js.set(report, "skipped", n(self.skipped.get())?)?;
        let ok = self.loaded.get() + self.absent.get() + self.skipped.get();
        js.set(report, "ok", n(ok)?)?;
        js.set(report, "failed", js.number(f64::from(self.failed.get()))?)?;
        js.set(report, "errors", self.errors.get(js)?)?;
        Ok(report)
    }
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
    let concurrency = warm_workers(concurrency, inner.l1.options().origin_budget, list.len());
    let (deferred, promise) = js.promise()?;
    let run = Rc::new(Warm {
        inner: Rc::clone(inner),
        keys: list,
        loader: js.reference(loader)?,
        ttl,
        concurrency,
        next: Cell::new(0),
        running: Cell::new(0),
        pumping: Cell::new(false),
        loaded: Cell::new(0),
        absent: Cell::new(0),
        skipped: Cell::new(0),
        failed: Cell::new(0),
        on_progress,
        errors: js.reference(js.array(0)?)?,
        done: RefCell::new(Some(deferred)),
    });
    run.pump(js)?;
    Ok(promise)
}
