//! A JS caller of the engine, apart from the engine: its loader (a JS function and its
//! arguments), how it is answered (a promise, or an internal continuation), and the
//! AbortSignal it may be given.

use std::rc::Rc;
use std::time::Duration;

use napi::{JsValue, Result};

use crate::js::{Deferred, ErrorKind, Js, Ref, Type, Value, code};

/// The marker a loader returns to say "absent" (negative caching): `Symbol.for(ABSENT_KEY)`.
pub(crate) const ABSENT_KEY: &str = "herdless.absent";

/// `Symbol.for('herdless.absent')`.
pub(crate) fn absent_symbol(js: Js) -> Result<Value> {
    let symbol = js.get(js.global()?, "Symbol")?;
    let key = js.string(ABSENT_KEY)?;
    js.call_method(symbol, "for", &[key])
}

/// A JS function to call with fixed `this` and arguments.
pub(crate) struct Loader {
    func: Rc<Ref>,
    args: Args,
}

/// What a loader is called with besides its load context.
enum Args {
    /// Nothing: an unbound loader, handed the load context if it declares a parameter.
    None,
    /// `[this, ...args]` in a JS array: Node-API (before version 10) can only reference
    /// objects, and `this` and the arguments may be primitives.
    Bound(Ref),
    /// The key alone (`warm`'s loader), made into a JS string only when it is called.
    Key(String),
}

impl Loader {
    /// A loader called with no arguments.
    pub(crate) fn new(js: Js, func: Value) -> Result<Self> {
        Ok(Self {
            func: Rc::new(js.reference(func)?),
            args: Args::None,
        })
    }

    /// [`new`](Self::new), sharing the reference of `held` when it is that very function
    /// (the callers of a herd pass one loader: one reference for all of them).
    pub(crate) fn new_as(js: Js, func: Value, held: &Rc<Ref>) -> Result<Self> {
        match js.strict_equals(func, held.get(js)?)? {
            true => Ok(Self {
                func: Rc::clone(held),
                args: Args::None,
            }),
            false => Self::new(js, func),
        }
    }

    /// The function it calls.
    pub(crate) fn func(&self) -> &Rc<Ref> {
        &self.func
    }

    /// A loader called with `this` and `args`.
    pub(crate) fn bound(js: Js, func: Value, this: Value, args: &[Value]) -> Result<Self> {
        let array = js.array(args.len() + 1)?;
        js.set_element(array, 0, this)?;
        for (i, a) in args.iter().enumerate() {
            js.set_element(array, i as u32 + 1, *a)?;
        }
        Ok(Self {
            func: Rc::new(js.reference(func)?),
            args: Args::Bound(js.reference(array)?),
        })
    }

    /// `func(key)`: one key's loader of a warm-up (made without a JS call: the engine
    /// makes one per key as it goes).
    pub(crate) fn keyed(func: &Rc<Ref>, key: &str) -> Self {
        Self {
            func: Rc::clone(func),
            args: Args::Key(key.to_owned()),
        }
    }

    /// Whether it is handed a load context: an unbound loader that declares a parameter.
    pub(crate) fn wants_context(&self, js: Js) -> Result<bool> {
        if !matches!(self.args, Args::None) {
            return Ok(false);
        }
        let length = js.get(self.func.get(js)?, "length")?;
        Ok(js.type_of(length)? == Type::Number && js.get_number(length)? >= 1.0)
    }

    /// `this` and the arguments it is called with (the load context `ctx`, if any).
    fn this_args(&self, js: Js, ctx: Option<Value>) -> Result<(Value, Vec<Value>)> {
        Ok(match (&self.args, ctx) {
            (Args::None, Some(ctx)) => (js.undefined()?, vec![ctx]),
            (Args::None, None) => (js.undefined()?, Vec::new()),
            (Args::Key(k), _) => (js.undefined()?, vec![js.string(k)?]),
            (Args::Bound(b), _) => {
                let array = b.get(js)?;
                let n = js.array_len(array)?;
                let this = js.get_element(array, 0)?;
                let args = (1..n)
                    .map(|i| js.get_element(array, i))
                    .collect::<Result<Vec<_>>>()?;
                (this, args)
            }
        })
    }

    /// Calls it (with the load context `ctx`, if any): `Err(exception)` when it threw
    /// synchronously.
    pub(crate) fn call(&self, js: Js, ctx: Option<Value>) -> Result<Outcome> {
        let (this, args) = self.this_args(js, ctx)?;
        js.call(self.func.get(js)?, this, &args)
    }

    /// Calls `observer(key, background, fn, bound)`, which calls the loader (see
    /// `Inner::set_observer`); `bound` is `[this, ...args]`, or undefined for a loader
    /// called with nothing.
    pub(crate) fn call_observed(
        &self,
        js: Js,
        observer: Value,
        key: &str,
        background: bool,
        ctx: Option<Value>,
    ) -> Result<Outcome> {
        let bound = match (&self.args, ctx) {
            (Args::Bound(b), _) => b.get(js)?,
            (Args::None, None) => js.undefined()?,
            (_, ctx) => {
                let (this, args) = self.this_args(js, ctx)?;
                let array = js.array(args.len() + 1)?;
                js.set_element(array, 0, this)?;
                for (i, a) in args.iter().enumerate() {
                    js.set_element(array, i as u32 + 1, *a)?;
                }
                array
            }
        };
        let args = [
            js.string(key)?,
            js.bool(background)?,
            self.func.get(js)?,
            bound,
        ];
        js.call(observer, js.undefined()?, &args)
    }
}

/// What a call answers: its value, or the value it rejects with.
pub(crate) type Outcome = std::result::Result<Value, Value>;

/// What settles when a call is answered.
pub(crate) enum Answer {
    /// The caller's promise.
    Promise(Deferred),
    /// Nobody (a caller that already had its answer, an engine operation).
    Nobody,
}

impl Answer {
    /// Whether somebody is still to be answered.
    pub(crate) fn waiting(&self) -> bool {
        !matches!(self, Answer::Nobody)
    }

    /// Answers (once: the answer is `Nobody` afterwards).
    pub(crate) fn settle(&mut self, js: Js, outcome: Outcome) -> Result<()> {
        match std::mem::replace(self, Answer::Nobody) {
            Answer::Promise(d) => d.settle(js, outcome),
            Answer::Nobody => Ok(()),
        }
    }
}

/// The reason of `signal` if it has aborted already (`None` without a signal): each method
/// that takes a signal rejects such a caller with it first, before its call reaches the
/// engine (so nothing is counted or looked up for it).
pub(crate) fn aborted(js: Js, signal: Option<Value>) -> Result<Option<Value>> {
    match signal {
        Some(s) if js.get_bool(js.get(s, "aborted")?)? => Ok(Some(js.get(s, "reason")?)),
        _ => Ok(None),
    }
}

/// Per-call options of `getOrLoad`.
#[derive(Default)]
pub(crate) struct CallOptions {
    pub(crate) ttl: Option<Duration>,
    /// The time-to-idle of the value this call loads, unless the loader's context sets its
    /// own.
    pub(crate) tti: Option<Duration>,
    /// The tags of the value this call loads (`wrap`'s `tags`), unless the loader's
    /// context sets its own.
    pub(crate) tags: Option<std::rc::Rc<[String]>>,
    /// An AbortSignal (checked to be one by the caller of `Inner::start`).
    pub(crate) signal: Option<Value>,
}

/// An AbortSignal being listened to.
pub(crate) struct AbortWatch {
    signal: Ref,
    listener: Ref,
}

impl AbortWatch {
    /// Calls `on_abort` once when `signal` aborts.
    pub(crate) fn new(
        js: Js,
        signal: Value,
        on_abort: impl Fn(Js) -> Result<()> + 'static,
    ) -> Result<Self> {
        let env = napi::Env::from_raw(js.raw());
        let listener = env.create_function_from_closure::<Value, _, _>("onAbort", move |ctx| {
            on_abort(Js(ctx.env.raw()))
        })?;
        let listener = listener.raw();
        let options = js.object()?;
        js.set(options, "once", js.bool(true)?)?;
        let event = js.string("abort")?;
        js.call_method(signal, "addEventListener", &[event, listener, options])?;
        Ok(Self {
            signal: js.reference(signal)?,
            listener: js.reference(listener)?,
        })
    }

    /// The signal's reason.
    pub(crate) fn reason(&self, js: Js) -> Result<Value> {
        js.get(self.signal.get(js)?, "reason")
    }

    /// Stops listening (the call was answered).
    pub(crate) fn remove(self, js: Js) -> Result<()> {
        let event = js.string("abort")?;
        let listener = self.listener.get(js)?;
        js.call_method(
            self.signal.get(js)?,
            "removeEventListener",
            &[event, listener],
        )?;
        Ok(())
    }
}

/// `v` as a promise if it is one or a thenable (`Promise.resolve` adopts thenables).
pub(crate) fn thenable(js: Js, v: Value) -> Result<Option<Value>> {
    if js.is_promise(v)? {
        return Ok(Some(v));
    }
    if !matches!(js.type_of(v)?, Type::Object | Type::Function) {
        return Ok(None);
    }
    if js.type_of(js.get(v, "then")?)? != Type::Function {
        return Ok(None);
    }
    let promise = js.get(js.global()?, "Promise")?;
    js.call_method(promise, "resolve", &[v]).map(Some)
}

/// Calls `settled` with how `promise` ends.
pub(crate) fn on_settled(
    js: Js,
    promise: Value,
    settled: impl Fn(Js, Outcome) -> Result<()> + 'static,
) -> Result<()> {
    let env = napi::Env::from_raw(js.raw());
    let settled = std::rc::Rc::new(settled);
    let on_err = settled.clone();
    let ok = env.create_function_from_closure::<Value, _, _>("onLoaded", move |ctx| {
        let js = Js(ctx.env.raw());
        settled(js, Ok(first_arg(js, &ctx)?))
    })?;
    let err = env.create_function_from_closure::<Value, _, _>("onFailed", move |ctx| {
        let js = Js(ctx.env.raw());
        on_err(js, Err(first_arg(js, &ctx)?))
    })?;
    js.call_method(promise, "then", &[ok.raw(), err.raw()])?;
    Ok(())
}

fn first_arg(js: Js, ctx: &napi::bindgen_prelude::FunctionCallContext) -> Result<Value> {
    match ctx.length() {
        0 => js.undefined(),
        _ => Ok(ctx.get::<napi::Unknown>(0)?.raw()),
    }
}

/// Turns a thrown exception into a rejected promise: promise-returning methods never throw.
pub(crate) fn rejecting(js: Js, r: Result<Value>) -> Result<Value> {
    match r {
        Ok(p) => Ok(p),
        Err(e) if e.status == napi::Status::PendingException => js.rejected(js.take_exception()?),
        Err(e) => js.rejected(js.error(ErrorKind::Error, code::ERROR, &e.reason)?),
    }
}
