//! The loader's context for JS loaders (core's `LoadContext` and `Loaded`, in Node's
//! idiom): a `getOrLoad` loader that declares a parameter (`loader.length >= 1`) is handed
//! a context object: `ctx.key`, `ctx.reason`, `ctx.previous` (`{ value, age, meta }`, age
//! in ms), `ctx.signal` (an `AbortSignal` aborted when the engine's cancellation signal
//! fires), and the answers `ctx.setTtl(ms)`, `ctx.setGrace(ms)`, `ctx.setNegativeTtl(ms)`,
//! `ctx.setTti(ms)`, `ctx.setTags([...])`, `ctx.meta = '...'`, `ctx.noCache()`,
//! `return ctx.notModified()`. What the answer means
//! is decided by the engine; this module only translates.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use herdless::{Cancelled, LoadContext, LoadReason, Loaded};
use napi::{JsValue, Result};

use crate::errors::type_error;
use crate::js::{ErrorKind, Js, Ref, Type, Value};
use crate::value::{Table, Val};

/// The marker `ctx.notModified()` returns: `Symbol.for(NOT_MODIFIED_KEY)`.
const NOT_MODIFIED_KEY: &str = "herdless.notModified";

/// The reason's name in Node's spelling (camelCase).
fn reason_name(r: LoadReason) -> &'static str {
    match r {
        LoadReason::First => "first",
        LoadReason::Refresh => "refresh",
        LoadReason::EarlyRefresh => "earlyRefresh",
        LoadReason::RefreshAhead => "refreshAhead",
        LoadReason::Warm => "warm",
        _ => "first",
    }
}

/// Records one setter's duration.
type Setter = fn(&mut Choices, Duration);

/// What the loader chose through the context's setters.
#[derive(Default)]
struct Choices {
    ttl: Option<Duration>,
    grace: Option<Duration>,
    negative_ttl: Option<Duration>,
    tti: Option<Duration>,
    tags: Option<Vec<String>>,
    no_cache: bool,
}

/// The context of one running JS load: the JS object handed to the loader, its
/// `AbortController`, and the engine's cancellation signal it follows.
pub(crate) struct Ctx {
    object: Ref,
    /// Shared with the queue of signals to abort once no borrow is held (listeners run JS).
    controller: Rc<Ref>,
    choices: Rc<RefCell<Choices>>,
    /// `None` once the signal was aborted.
    cancelled: Option<Cancelled<Val>>,
}

impl Ctx {
    /// Builds the context object for a load whose engine context is `core`.
    pub(crate) fn new(js: Js, table: &Table, core: LoadContext<Val>) -> Result<Self> {
        let object = js.object()?;
        js.set(object, "key", js.string(core.key())?)?;
        js.set(object, "reason", js.string(reason_name(core.reason()))?)?;
        let previous = match core.previous() {
            None => js.undefined()?,
            Some(p) => {
                let o = js.object()?;
                js.set(o, "value", table.load(js, &p.value)?)?;
                js.set(o, "age", js.number(p.age.as_secs_f64() * 1000.0)?)?;
                let meta = match &p.meta {
                    Some(m) => js.string(m)?,
                    None => js.undefined()?,
                };
                js.set(o, "meta", meta)?;
                js.set(o, "tags", crate::tags::to_array(js, p.tags())?)?;
                o
            }
        };
        js.set(object, "previous", previous)?;
        js.set(object, "meta", js.undefined()?)?;
        let ctor = js.get(js.global()?, "AbortController")?;
        let controller = js.construct(ctor, &[])?;
        js.set(object, "signal", js.get(controller, "signal")?)?;

        let choices = Rc::new(RefCell::new(Choices::default()));
        let env = napi::Env::from_raw(js.raw());
        let setters: [(&str, Setter, bool); 4] = [
            ("setTtl", |c, d| c.ttl = Some(d), false),
            ("setGrace", |c, d| c.grace = Some(d), true),
            ("setNegativeTtl", |c, d| c.negative_ttl = Some(d), false),
            ("setTti", |c, d| c.tti = Some(d), false),
        ];
        for (name, set, zero_ok) in setters {
            let c = Rc::clone(&choices);
            let f = env.create_function_from_closure::<Value, _, _>(name, move |cx| {
                let js = Js(cx.env.raw());
                let arg = match cx.length() {
                    0 => js.undefined()?,
                    _ => cx.get::<napi::Unknown>(0)?.raw(),
                };
                let d = millis(js, name, arg, zero_ok)?;
                set(&mut c.borrow_mut(), d);
                js.undefined()
            })?;
            js.set(object, name, f.raw())?;
        }
        let c = Rc::clone(&choices);
        let set_tags = env.create_function_from_closure::<Value, _, _>("setTags", move |cx| {
            let js = Js(cx.env.raw());
            let arg = match cx.length() {
                0 => js.undefined()?,
                _ => cx.get::<napi::Unknown>(0)?.raw(),
            };
            c.borrow_mut().tags = Some(crate::tags::tag_list(js, arg, "ctx.setTags")?);
            js.undefined()
        })?;
        js.set(object, "setTags", set_tags.raw())?;
        let c = Rc::clone(&choices);
        let no_cache = env.create_function_from_closure::<Value, _, _>("noCache", move |cx| {
            c.borrow_mut().no_cache = true;
            Js(cx.env.raw()).undefined()
        })?;
        js.set(object, "noCache", no_cache.raw())?;
        let not_modified = env
            .create_function_from_closure::<Value, _, _>("notModified", move |cx| {
                not_modified_symbol(Js(cx.env.raw()))
            })?;
        js.set(object, "notModified", not_modified.raw())?;
        Ok(Self {
            object: js.reference(object)?,
            controller: Rc::new(js.reference(controller)?),
            choices,
            cancelled: Some(core.cancelled()),
        })
    }

    /// The object handed to the loader.
    pub(crate) fn object(&self, js: Js) -> Result<Value> {
        self.object.get(js)
    }

    /// Polls the engine's cancellation signal: the `AbortController` to abort (once) when it
    /// fired. The caller aborts it with no borrow held (listeners run JS).
    pub(crate) fn poll_cancelled(&mut self, cx: &mut Context<'_>) -> Option<Rc<Ref>> {
        let c = self.cancelled.as_mut()?;
        match Pin::new(c).poll(cx) {
            Poll::Pending => None,
            Poll::Ready(()) => self.cancel(),
        }
    }

    /// The `AbortController` to abort now (the load is no longer wanted), unless it was.
    pub(crate) fn cancel(&mut self) -> Option<Rc<Ref>> {
        self.cancelled.take().map(|_| Rc::clone(&self.controller))
    }

    /// The loader settled with `v`: the engine's answer, with what the loader set on the
    /// context. `Err(message)`: an answer the binding cannot read (a `meta` not a string).
    pub(crate) fn answer(
        &mut self,
        js: Js,
        v: Value,
        absent: bool,
        store: impl FnOnce(Value) -> Result<Val>,
    ) -> Result<std::result::Result<Loaded<Val>, String>> {
        // Settled: a late cancellation no longer aborts the signal.
        self.cancelled = None;
        let mut loaded = if js.strict_equals(v, not_modified_symbol(js)?)? {
            Loaded::not_modified()
        } else if absent {
            Loaded::absent()
        } else {
            Loaded::value(store(v)?)
        };
        let c = self.choices.borrow();
        if let Some(t) = c.ttl {
            loaded = loaded.ttl(t);
        }
        if let Some(g) = c.grace {
            loaded = loaded.grace(g);
        }
        if let Some(n) = c.negative_ttl {
            loaded = loaded.negative_ttl(n);
        }
        if let Some(t) = c.tti {
            loaded = loaded.tti(t);
        }
        let meta = js.get(self.object.get(js)?, "meta")?;
        match js.type_of(meta)? {
            Type::Undefined | Type::Null => {}
            Type::String => loaded = loaded.meta(js.get_string(meta)?),
            t => {
                return Ok(Err(format!(
                    "ctx.meta must be a string (or undefined), got {}",
                    t.name()
                )));
            }
        }
        if let Some(t) = &c.tags {
            loaded = loaded.tags(t.iter().cloned());
        }
        if c.no_cache {
            loaded = loaded.no_cache();
        }
        Ok(Ok(loaded))
    }

    /// The loader settled (or failed): a late cancellation no longer aborts the signal.
    pub(crate) fn finish(&mut self) {
        self.cancelled = None;
    }
}

/// Aborts `controller` (its signal's listeners run: `fetch` rejects).
pub(crate) fn abort(js: Js, controller: Value) -> Result<()> {
    js.call_method(controller, "abort", &[]).map(drop)
}

/// `Symbol.for('herdless.notModified')`.
fn not_modified_symbol(js: Js) -> Result<Value> {
    let symbol = js.get(js.global()?, "Symbol")?;
    let key = js.string(NOT_MODIFIED_KEY)?;
    js.call_method(symbol, "for", &[key])
}

/// A setter's argument: a duration in milliseconds (> 0, or >= 0 when `zero_ok`).
fn millis(js: Js, name: &str, v: Value, zero_ok: bool) -> Result<Duration> {
    if js.type_of(v)? != Type::Number {
        return Err(type_error(
            js,
            &format!("ctx.{name} takes a duration in milliseconds (a number)"),
        ));
    }
    let ms = js.get_number(v)?;
    let ok = ms.is_finite() && (ms > 0.0 || (zero_ok && ms == 0.0));
    // A positive duration under a nanosecond would be zero, which means "the cache's own":
    // refused, as Python refuses it, rather than silently becoming the default.
    let d = ok
        .then(|| Duration::try_from_secs_f64(ms / 1000.0).ok())
        .flatten()
        .filter(|d| zero_ok || !d.is_zero());
    match d {
        Some(d) => Ok(d),
        None => {
            let need = if zero_ok {
                ">= 0"
            } else {
                "of at least one nanosecond"
            };
            let message = format!("ctx.{name} takes milliseconds {need}, got {ms}");
            Err(crate::errors::throw_new(
                js,
                ErrorKind::Range,
                crate::errors::code::INVALID_ARGUMENT,
                &message,
            ))
        }
    }
}
