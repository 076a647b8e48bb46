//! The Node driver of the engine's state machine (`herdless::Cache::lookup`).
//!
//! Everything here runs on the JS thread. A call of `getOrLoad` (or of a wrapped function,
//! or one key of `warm`) that is not answered at once by a hit becomes a [`Call`] in the
//! cache's table of calls, and moves through these states:
//!
//! - **lookup** ([`State::Start`]): `lookup` answers Hit (reply now; if the hit carries a
//!   refresh guard, the loader runs in the background as a call of its own with nobody to
//!   answer), Lead or Wait;
//! - **budget** ([`State::Budget`]): a leader waiting for the origin budget (a future);
//! - **loading** ([`State::Loading`]): the JS loader runs; its promise settling completes
//!   the guard ([`Inner::loaded`]), which stores the value and wakes every waiter; the
//!   loader's soft and hard deadlines are clock timers that wake the call;
//! - **waiting** ([`State::Waiting`]): a [`herdless::Waiter`] future, polled whenever its
//!   waker fires (see [`crate::wake`]); it ends with the leader's value, its error (the same
//!   JS object for every waiter), a fail-safe value, a timeout, or "retry" (back to lookup).
//!
//! An aborted call (AbortSignal) is answered with the signal's reason at once; a waiter or
//! a queued leader is dropped (the engine forgets it; a queued leader hands the load over),
//! and a running load goes on for the others, its result stored as usual.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use std::time::Instant;

use herdless::backend::WriteOutcome;
use herdless::{LoadError, LoadGuard, Lookup, Waited, Waiter};
use herdless_redis::{FleetLease, FleetOutcome};
use napi::{JsValue, Result, Status};

use crate::error;
use crate::js::{Deferred, Js, Ref, Type, Value};
use crate::tier::{FleetFuture, Tier};
use crate::value::{JsFailure, Table, Val};
use crate::wake::Wake;

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
    func: Ref,
    /// `[this, ...args]` in a JS array: Node-API (before version 10) can only reference
    /// objects, and `this` and the arguments may be primitives.
    bound: Option<Ref>,
}

impl Loader {
    /// A loader called with no arguments.
    pub(crate) fn new(js: Js, func: Value) -> Result<Self> {
        Ok(Self {
            func: js.reference(func)?,
            bound: None,
        })
    }

    /// A loader called with `this` and `args`.
    pub(crate) fn bound(js: Js, func: Value, this: Value, args: &[Value]) -> Result<Self> {
        let array = js.array(args.len() + 1)?;
        js.set_element(array, 0, this)?;
        for (i, a) in args.iter().enumerate() {
            js.set_element(array, i as u32 + 1, *a)?;
        }
        Ok(Self {
            func: js.reference(func)?,
            bound: Some(js.reference(array)?),
        })
    }

    /// Calls it: `Err(exception)` when it threw synchronously.
    fn call(&self, js: Js) -> Result<std::result::Result<Value, Value>> {
        let (this, args) = match &self.bound {
            None => (js.undefined()?, Vec::new()),
            Some(b) => {
                let array = b.get(js)?;
                let n = js.array_len(array)?;
                let this = js.get_element(array, 0)?;
                let args = (1..n)
                    .map(|i| js.get_element(array, i))
                    .collect::<Result<Vec<_>>>()?;
                (this, args)
            }
        };
        js.call(self.func.get(js)?, this, &args)
    }
}

/// What a call answers: its value, or the value it rejects with.
pub(crate) type Outcome = std::result::Result<Value, Value>;

/// An internal caller's continuation.
pub(crate) type Callback = Box<dyn FnOnce(Js, Outcome) -> Result<()>>;

/// What settles when a call is answered.
pub(crate) enum Answer {
    /// The caller's promise.
    Promise(Deferred),
    /// Internal callers (`warm`).
    Callback(Callback),
    /// Nobody (a background refresh, or a caller that already had its answer).
    Nobody,
}

/// An AbortSignal being listened to.
struct AbortWatch {
    signal: Ref,
    listener: Ref,
}

/// Per-call options of `getOrLoad`.
#[derive(Default)]
pub(crate) struct CallOptions {
    pub(crate) ttl: Option<Duration>,
    /// An AbortSignal (checked to be one by the caller of [`Inner::start`]).
    pub(crate) signal: Option<Value>,
}

/// What the engine answers.
pub(crate) type EResult<T> = std::result::Result<T, herdless::Error>;

type BudgetFuture = Pin<Box<dyn Future<Output = (LoadGuard<Val>, EResult<()>)>>>;

enum State {
    Start,
    Budget(BudgetFuture),
    /// The local leader asks the fleet who loads (Redis tier).
    Fleet(FleetFuture<FleetOutcome>, LoadGuard<Val>),
    Loading(LoadGuard<Val>),
    /// The loaded value is being published to the fleet (Redis tier).
    Publishing(FleetFuture<WriteOutcome>, LoadGuard<Val>, Option<Val>),
    Waiting(Waiter<Val>),
    /// A fleet operation of `set`/`invalidate`/`bump` (Redis tier): polled with the
    /// context, it answers whether it finished.
    Op(OpPoll),
}

/// The poll function of a [`State::Op`].
type OpPoll = Box<dyn FnMut(Js, &mut Context<'_>) -> Result<bool>>;

impl State {
    /// Whether the call sleeps until a waker fires (then the process must stay alive).
    fn parked(&self) -> bool {
        matches!(
            self,
            State::Budget(_)
                | State::Waiting(_)
                | State::Fleet(..)
                | State::Publishing(..)
                | State::Op(_)
        )
    }
}

struct Call {
    key: String,
    loader: Option<Loader>,
    answer: Answer,
    abort: Option<AbortWatch>,
    ttl: Option<Duration>,
    waker: Waker,
    state: State,
    /// The fleet lock, when this process loads for the fleet.
    lease: Option<FleetLease>,
    /// When the loader was called (the shared entry keeps the load's duration).
    started: Option<Instant>,
    /// Set after a hand-over: the next lookup keeps the caller's first arrival.
    retry: Option<herdless::Retry>,
}

/// The JS-thread state of one `Cache` object.
///
/// Field order matters when it is dropped: the calls and the Redis listener's handle on the
/// engine go first (in `Drop`), then the engine (its entries release their values), then the
/// table (which lets those values go).
pub(crate) struct Inner {
    pub(crate) cache: herdless::Cache<Val>,
    pub(crate) table: Table,
    pub(crate) wake: Arc<Wake>,
    pub(crate) namespace: Option<String>,
    /// The Redis tier, if any.
    pub(crate) tier: Option<Tier>,
    absent: Ref,
    hard_timeout: Duration,
    calls: RefCell<HashMap<u64, Call>>,
    next_id: Cell<u64>,
    parked: Cell<usize>,
    alive: Cell<bool>,
    /// Itself, while calls are pending: a cache dropped by JS with a load, a wait or a
    /// fleet write in progress lives until they end (each is bounded by a timeout), so their
    /// promises settle rather than being rejected by the drop.
    pending: RefCell<Option<Rc<Inner>>>,
}

/// The message of a rejection, for Rust-side display only.
fn describe(js: Js, e: Value) -> String {
    let text = || -> Result<String> {
        if js.is_error(e)? {
            let m = js.get(e, "message")?;
            if js.type_of(m)? == Type::String {
                return js.get_string(m);
            }
        }
        Ok(match js.type_of(e)? {
            Type::String => js.get_string(e)?,
            t => format!("the loader rejected with {}", t.name()),
        })
    };
    text().unwrap_or_else(|_| "the loader rejected".into())
}

impl Inner {
    pub(crate) fn new(
        js: Js,
        cache: herdless::Cache<Val>,
        namespace: Option<String>,
        hard_timeout: Option<Duration>,
        tier: Option<Tier>,
    ) -> Result<Rc<Self>> {
        let inner = Rc::new(Self {
            cache,
            table: Table::new(js)?,
            wake: Wake::new(),
            namespace,
            tier,
            absent: js.reference(absent_symbol(js)?)?,
            hard_timeout: hard_timeout.unwrap_or_default(),
            calls: RefCell::new(HashMap::new()),
            next_id: Cell::new(1),
            parked: Cell::new(0),
            alive: Cell::new(false),
            pending: RefCell::new(None),
        });
        inner.wake.connect(js, Rc::downgrade(&inner))?;
        Ok(inner)
    }

    pub(crate) fn is_absent(&self, js: Js, v: Value) -> Result<bool> {
        js.strict_equals(v, self.absent.get(js)?)
    }

    /// The value to answer at once when `first` is a plain hit (no refresh to run).
    #[inline]
    pub(crate) fn hit_now(&self, js: Js, first: &EResult<Lookup<Val>>) -> Result<Option<Value>> {
        match first {
            Ok(Lookup::Hit(hit)) if hit.refresh.is_none() => Ok(Some(match &hit.value {
                Some(v) => self.table.load(js, v)?,
                None => js.undefined()?,
            })),
            _ => Ok(None),
        }
    }

    fn put(&self, id: u64, call: Call) {
        if call.state.parked() {
            self.parked.set(self.parked.get() + 1);
        }
        self.calls.borrow_mut().insert(id, call);
    }

    fn take(&self, id: u64) -> Option<Call> {
        let call = self.calls.borrow_mut().remove(&id)?;
        if call.state.parked() {
            self.parked.set(self.parked.get() - 1);
        }
        Some(call)
    }

    /// Calls not answered yet (for leak tests).
    pub(crate) fn calls(&self) -> usize {
        self.calls.borrow().len()
    }

    /// Starts a call whose first lookup already answered `first` (the method did the fast
    /// path itself).
    pub(crate) fn start(
        self: &Rc<Self>,
        js: Js,
        key: String,
        loader: Loader,
        options: CallOptions,
        answer: Answer,
        first: EResult<Lookup<Val>>,
    ) -> Result<()> {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let mut call = Call {
            key,
            loader: Some(loader),
            answer,
            abort: None,
            ttl: options.ttl,
            waker: self.wake.waker(id),
            state: State::Start,
            lease: None,
            started: None,
            retry: None,
        };
        if let Some(signal) = options.signal {
            if js.get_bool(js.get(signal, "aborted")?)? {
                let reason = js.get(signal, "reason")?;
                drop(first);
                return self.reply(js, &mut call, Err(reason));
            }
            call.abort = Some(self.watch(js, id, signal)?);
        }
        let r = self.step(js, id, call, first);
        self.settle(js)?;
        r
    }

    /// Runs a fleet operation on the JS thread: the returned promise resolves with
    /// `done(result)` when `fut` ends.
    pub(crate) fn op<T: 'static>(
        self: &Rc<Self>,
        js: Js,
        mut fut: FleetFuture<T>,
        done: impl FnOnce(Js, EResult<T>) -> Result<Value> + 'static,
    ) -> Result<Value> {
        let (deferred, promise) = js.promise()?;
        let mut finish = Some((deferred, done));
        let poll: OpPoll = Box::new(move |js, cx| match fut.as_mut().poll(cx) {
            Poll::Pending => Ok(false),
            Poll::Ready(r) => {
                if let Some((deferred, done)) = finish.take() {
                    let v = done(js, r)?;
                    deferred.settle(js, Ok(v))?;
                }
                Ok(true)
            }
        });
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let call = Call {
            key: String::new(),
            loader: None,
            answer: Answer::Nobody,
            abort: None,
            ttl: None,
            waker: self.wake.waker(id),
            state: State::Op(poll),
            lease: None,
            started: None,
            retry: None,
        };
        self.put(id, call);
        self.poll(js, id)?;
        self.settle(js)?;
        Ok(promise)
    }

    /// Listens for `signal`'s abort on behalf of call `id`.
    fn watch(self: &Rc<Self>, js: Js, id: u64, signal: Value) -> Result<AbortWatch> {
        let inner = Rc::clone(self);
        let env = napi::Env::from_raw(js.raw());
        let listener = env.create_function_from_closure::<Value, _, _>("onAbort", move |ctx| {
            let js = Js(ctx.env.raw());
            inner.abort(js, id)?;
            inner.settle(js)
        })?;
        let listener = listener.raw();
        let options = js.object()?;
        js.set(options, "once", js.bool(true)?)?;
        let event = js.string("abort")?;
        js.call_method(signal, "addEventListener", &[event, listener, options])?;
        Ok(AbortWatch {
            signal: js.reference(signal)?,
            listener: js.reference(listener)?,
        })
    }

    fn abort(self: &Rc<Self>, js: Js, id: u64) -> Result<()> {
        let Some(mut call) = self.take(id) else {
            return Ok(());
        };
        let reason = match call.abort.take() {
            Some(w) => js.get(w.signal.get(js)?, "reason")?,
            None => js.undefined()?,
        };
        self.reply(js, &mut call, Err(reason))?;
        if matches!(
            call.state,
            State::Loading(_) | State::Fleet(..) | State::Publishing(..)
        ) {
            // The shared load goes on for the other callers; its result is stored.
            self.put(id, call);
        }
        Ok(())
    }

    /// Answers the caller (once): the value, or the rejection.
    fn reply(&self, js: Js, call: &mut Call, outcome: Outcome) -> Result<()> {
        if let Some(w) = call.abort.take() {
            let event = js.string("abort")?;
            js.call_method(
                w.signal.get(js)?,
                "removeEventListener",
                &[event, w.listener.get(js)?],
            )?;
        }
        match std::mem::replace(&mut call.answer, Answer::Nobody) {
            Answer::Promise(d) => d.settle(js, outcome),
            Answer::Callback(f) => f(js, outcome),
            Answer::Nobody => Ok(()),
        }
    }

    /// Answers the caller with what the engine answered.
    fn reply_with(&self, js: Js, call: &mut Call, r: EResult<Option<Val>>) -> Result<()> {
        if matches!(call.answer, Answer::Nobody) {
            return Ok(());
        }
        let outcome = match r {
            Ok(Some(v)) => Ok(self.table.load(js, &v)?),
            Ok(None) => Ok(js.undefined()?),
            Err(e) => Err(error::to_js(js, &self.table, &e)?),
        };
        self.reply(js, call, outcome)
    }

    /// Looks the call's key up again (after a handed-over load).
    fn advance(self: &Rc<Self>, js: Js, id: u64, mut call: Call) -> Result<()> {
        let r = match call.retry.take() {
            Some(retry) => self.cache.lookup_again(&call.key, retry),
            None => self.cache.lookup(&call.key),
        };
        self.step(js, id, call, r)
    }

    /// Acts on one answer of `lookup`.
    fn step(
        self: &Rc<Self>,
        js: Js,
        id: u64,
        mut call: Call,
        r: EResult<Lookup<Val>>,
    ) -> Result<()> {
        match r {
            Err(e) => self.reply_with(js, &mut call, Err(e)),
            Ok(Lookup::Hit(hit)) => {
                let have = hit.value.as_ref().map_or(0, |v| v.version());
                let answered = self.reply_with(js, &mut call, Ok(hit.value));
                if let (Some(guard), Some(loader)) = (hit.refresh, call.loader.take()) {
                    self.refresh(js, guard, loader, have)?;
                }
                answered
            }
            Ok(Lookup::Wait(waiter)) => {
                call.state = State::Waiting(waiter);
                self.put(id, call);
                self.poll(js, id)
            }
            Ok(Lookup::Lead(guard)) => self.lead(js, id, call, guard, 0),
        }
    }

    /// A local leader: with the Redis tier, asks the fleet first; then loads.
    fn lead(
        self: &Rc<Self>,
        js: Js,
        id: u64,
        mut call: Call,
        guard: LoadGuard<Val>,
        have: u64,
    ) -> Result<()> {
        match &self.tier {
            Some(tier) => {
                call.state = State::Fleet(tier.ask(guard.key(), have), guard);
                self.put(id, call);
                self.poll(js, id)
            }
            None => self.begin(js, id, call, guard),
        }
    }

    /// Takes the origin budget (waiting for it if need be), then calls the loader.
    fn begin(
        self: &Rc<Self>,
        js: Js,
        id: u64,
        mut call: Call,
        mut guard: LoadGuard<Val>,
    ) -> Result<()> {
        if guard.try_begin() {
            return self.load(js, id, call, guard);
        }
        call.state = State::Budget(Box::pin(async move {
            let began = guard.begin().await;
            (guard, began)
        }));
        self.put(id, call);
        self.poll(js, id)
    }

    /// What the fleet answered a local leader.
    fn asked(
        self: &Rc<Self>,
        js: Js,
        id: u64,
        mut call: Call,
        guard: LoadGuard<Val>,
        answer: EResult<FleetOutcome>,
    ) -> Result<()> {
        let Some(tier) = &self.tier else {
            return self.begin(js, id, call, guard);
        };
        match answer {
            Ok(FleetOutcome::Fresh(e) | FleetOutcome::Stale(e)) => {
                match tier.decode(js, &self.table, &e)? {
                    Some(v) => {
                        let r = guard.adopt(v, Tier::fresh_for(&e), e.load_duration);
                        self.reply_with(js, &mut call, r)
                    }
                    // Bytes another codec wrote: load here, leave Redis alone.
                    None => self.begin(js, id, call, guard),
                }
            }
            Ok(FleetOutcome::Lead(lease)) => {
                call.lease = Some(lease);
                self.begin(js, id, call, guard)
            }
            Err(e @ herdless::Error::WaitTimeout { .. }) => {
                let r = guard.fail(e);
                self.reply_with(js, &mut call, r)
            }
            // Redis failing: load for this process only (counted by the backend).
            Err(_) => self.begin(js, id, call, guard),
        }
    }

    /// Runs a stale-while-revalidate or XFetch refresh in the background: nobody awaits it.
    fn refresh(
        self: &Rc<Self>,
        js: Js,
        mut guard: LoadGuard<Val>,
        loader: Loader,
        have: u64,
    ) -> Result<()> {
        // The origin is busy: skip the refresh (dropping the guard hands it over).
        if !guard.try_begin() {
            return Ok(());
        }
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let call = Call {
            key: guard.key().to_owned(),
            loader: Some(loader),
            answer: Answer::Nobody,
            abort: None,
            ttl: None,
            waker: self.wake.waker(id),
            state: State::Start,
            lease: None,
            started: None,
            retry: None,
        };
        self.lead(js, id, call, guard, have)
    }

    /// Calls the JS loader for a leading call.
    fn load(
        self: &Rc<Self>,
        js: Js,
        id: u64,
        mut call: Call,
        mut guard: LoadGuard<Val>,
    ) -> Result<()> {
        if let Some(ttl) = call.ttl {
            guard.set_ttl(ttl);
        }
        let clock = self.cache.clock();
        if let (Some(soft), Some(_)) = (guard.soft_deadline(), guard.fallback()) {
            clock.wake_at(soft, call.waker.clone());
        }
        if let Some(hard) = guard.hard_deadline() {
            clock.wake_at(hard, call.waker.clone());
        }
        let Some(loader) = call.loader.take() else {
            // A call leads at most once, and only with its loader.
            let r = guard.fail(herdless::Error::LoaderPanicked { message: None });
            return self.reply_with(js, &mut call, r);
        };
        call.state = State::Loading(guard);
        call.started = Some(Instant::now());
        self.put(id, call);
        // No borrow is held here: the loader may call this cache again.
        let result = loader.call(js)?;
        drop(loader);
        match result {
            Err(thrown) => self.loaded(js, id, Err(thrown)),
            Ok(v) => match self.thenable(js, v)? {
                Some(promise) => self.on_settled(js, id, promise),
                None => self.loaded(js, id, Ok(v)),
            },
        }
    }

    /// `v` as a promise if it is one or a thenable (`Promise.resolve` adopts thenables).
    fn thenable(&self, js: Js, v: Value) -> Result<Option<Value>> {
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

    /// Completes call `id` when `promise` settles.
    fn on_settled(self: &Rc<Self>, js: Js, id: u64, promise: Value) -> Result<()> {
        let env = napi::Env::from_raw(js.raw());
        let ok = Rc::clone(self);
        let on_ok = env.create_function_from_closure::<Value, _, _>("onLoaded", move |ctx| {
            let js = Js(ctx.env.raw());
            let v = first_arg(js, &ctx)?;
            ok.loaded(js, id, Ok(v))
        })?;
        let err = Rc::clone(self);
        let on_err = env.create_function_from_closure::<Value, _, _>("onFailed", move |ctx| {
            let js = Js(ctx.env.raw());
            let e = first_arg(js, &ctx)?;
            err.loaded(js, id, Err(e))
        })?;
        js.call_method(promise, "then", &[on_ok.raw(), on_err.raw()])?;
        Ok(())
    }

    /// The loader of call `id` settled: complete its guard (publishing the value to the
    /// fleet first when this process loads for it), answer, wake the waiters.
    fn loaded(self: &Rc<Self>, js: Js, id: u64, result: Outcome) -> Result<()> {
        // Gone: the load timed out and was answered already; the value is dropped.
        let Some(mut call) = self.take(id) else {
            return Ok(());
        };
        let State::Loading(mut guard) = std::mem::replace(&mut call.state, State::Start) else {
            return Ok(());
        };
        let lease = call.lease.take();
        let outcome = match result {
            Ok(v) if self.is_absent(js, v)? => Ok(None),
            Ok(v) => Ok(Some((v, self.table.store(js, v)?))),
            Err(e) => {
                // A failed load releases the fleet lock (dropping the lease does).
                drop(lease);
                let failure = JsFailure::new(self.table.store(js, e)?, describe(js, e));
                let r = guard.complete(Err(LoadError::new(failure)));
                return self.answered(js, call, r);
            }
        };
        if let (Some(lease), Some(tier), Ok(loaded)) = (lease, &self.tier, &outcome) {
            let bytes = match loaded {
                None => Some(None),
                Some((v, _)) => tier.codec.encode(js, *v)?.map(Some),
            };
            // A value the codec cannot share is served here only; the lease is dropped,
            // which releases the fleet lock for another process to try.
            if bytes.is_none() {
                crate::tier::warn_unshareable(js, &call.key)?;
            }
            if let Some(bytes) = bytes {
                let took = call.started.map_or(Duration::ZERO, |s| s.elapsed());
                let (entry, fresh) = tier.entry(bytes, took, lease.epoch(), call.ttl);
                guard.set_ttl(fresh);
                let value = loaded.as_ref().map(|(_, val)| val.clone());
                call.state = State::Publishing(Box::pin(lease.publish(entry)), guard, value);
                self.put(id, call);
                let polled = self.poll(js, id);
                let settled = self.settle(js);
                return polled.and(settled);
            }
        }
        let r = guard.complete(outcome.map(|o| o.map(|(_, val)| val)));
        self.answered(js, call, r)
    }

    /// Answers a call that ended, then wakes whoever it woke.
    fn answered(self: &Rc<Self>, js: Js, mut call: Call, r: EResult<Option<Val>>) -> Result<()> {
        let answered = self.reply_with(js, &mut call, r);
        drop(call);
        let settled = self.settle(js);
        answered.and(settled)
    }

    /// The version a publish gave the entry (0: not shared). A superseded publish (newer
    /// data in Redis, a bump, a lost lease) answers its callers but keeps the value out of
    /// the L1: invalidating supersedes the running flight, whose result is then not stored.
    fn published_version(&self, key: &str, published: EResult<WriteOutcome>) -> u64 {
        match published {
            Ok(WriteOutcome::Written { version, .. }) => version,
            Ok(WriteOutcome::Superseded) => {
                let _ = self.cache.invalidate(key);
                0
            }
            Err(_) => 0,
        }
    }

    /// A leading call's deadline timer fired.
    fn deadline(
        self: &Rc<Self>,
        js: Js,
        id: u64,
        mut call: Call,
        guard: LoadGuard<Val>,
    ) -> Result<()> {
        let now = self.cache.clock().now();
        if guard.hard_deadline().is_some_and(|h| now >= h) {
            // Give the fleet lock back: another process may load.
            drop(call.lease.take());
            let after = self.hard_timeout;
            let r = guard.fail(herdless::Error::LoadTimeout { after });
            return self.reply_with(js, &mut call, r);
        }
        let soft = guard.soft_deadline().is_some_and(|s| now >= s);
        if soft && !matches!(call.answer, Answer::Nobody) {
            if let Some(stale) = guard.fallback().cloned() {
                // Soft timeout: answer stale now; the load goes on and is stored.
                self.reply_with(js, &mut call, Ok(Some(stale)))?;
            }
        }
        call.state = State::Loading(guard);
        self.put(id, call);
        Ok(())
    }

    /// Polls call `id` after its waker fired.
    fn poll(self: &Rc<Self>, js: Js, id: u64) -> Result<()> {
        let Some(mut call) = self.take(id) else {
            return Ok(());
        };
        let waker = call.waker.clone();
        let mut cx = Context::from_waker(&waker);
        match std::mem::replace(&mut call.state, State::Start) {
            State::Waiting(mut w) => match Pin::new(&mut w).poll(&mut cx) {
                Poll::Pending => {
                    call.state = State::Waiting(w);
                    self.put(id, call);
                    Ok(())
                }
                Poll::Ready(Ok(Waited::Loaded(v))) => self.reply_with(js, &mut call, Ok(v)),
                Poll::Ready(Ok(Waited::Stale(v))) => self.reply_with(js, &mut call, Ok(Some(v))),
                Poll::Ready(Ok(Waited::Retry(retry))) => {
                    drop(w);
                    call.retry = Some(retry);
                    self.advance(js, id, call)
                }
                Poll::Ready(Err(e)) => self.reply_with(js, &mut call, Err(e)),
            },
            State::Budget(mut f) => match f.as_mut().poll(&mut cx) {
                Poll::Pending => {
                    call.state = State::Budget(f);
                    self.put(id, call);
                    Ok(())
                }
                Poll::Ready((guard, Ok(()))) => self.load(js, id, call, guard),
                Poll::Ready((guard, Err(e))) => {
                    let r = guard.fail(e);
                    self.reply_with(js, &mut call, r)
                }
            },
            State::Fleet(mut f, guard) => match f.as_mut().poll(&mut cx) {
                Poll::Pending => {
                    call.state = State::Fleet(f, guard);
                    self.put(id, call);
                    Ok(())
                }
                Poll::Ready(answer) => self.asked(js, id, call, guard, answer),
            },
            State::Publishing(mut f, guard, value) => match f.as_mut().poll(&mut cx) {
                Poll::Pending => {
                    call.state = State::Publishing(f, guard, value);
                    self.put(id, call);
                    Ok(())
                }
                Poll::Ready(published) => {
                    let version = self.published_version(&call.key, published);
                    if let Some(v) = &value {
                        v.set_version(version);
                    }
                    let r = guard.complete(Ok(value));
                    self.reply_with(js, &mut call, r)
                }
            },
            State::Op(mut f) => {
                if !f(js, &mut cx)? {
                    call.state = State::Op(f);
                    self.put(id, call);
                }
                Ok(())
            }
            State::Loading(guard) => self.deadline(js, id, call, guard),
            State::Start => self.advance(js, id, call),
        }
    }

    /// Polls every woken call, clears released values, and keeps the process alive only
    /// while some call sleeps. Called after every operation that may wake or release.
    pub(crate) fn settle(self: &Rc<Self>, js: Js) -> Result<()> {
        let mut first_error = Ok(());
        loop {
            let ready = self.wake.take_ready();
            if ready.is_empty() {
                break;
            }
            for id in ready {
                if let Err(e) = self.poll(js, id) {
                    if first_error.is_ok() {
                        first_error = Err(e);
                    }
                }
            }
        }
        self.table.collect(js)?;
        // The caller holds its own `Rc`, so letting go of this one cannot free `self` here.
        let busy = !self.calls.borrow().is_empty();
        if busy != self.pending.borrow().is_some() {
            let keep = busy.then(|| Rc::clone(self));
            drop(self.pending.replace(keep));
        }
        let want = self.parked.get() > 0;
        if want != self.alive.get() {
            self.wake.keep_alive(js, want);
            self.alive.set(want);
        }
        first_error
    }

    /// Surfaces an error met outside any JS call (a wake-up): as an uncaught exception.
    pub(crate) fn report(&self, js: Js, e: napi::Error) {
        if e.status != Status::PendingException {
            if let Ok(err) = js.error(crate::js::ErrorKind::Error, error::code::ERROR, &e.reason) {
                js.throw(err);
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.calls.borrow_mut().clear();
        if let Some(tier) = &self.tier {
            tier.detach();
        }
        self.wake.close();
    }
}

fn first_arg(js: Js, ctx: &napi::bindgen_prelude::FunctionCallContext) -> Result<Value> {
    match ctx.length() {
        0 => js.undefined(),
        _ => Ok(ctx.get::<napi::Unknown>(0)?.raw()),
    }
}
