//! The Node driver of the fleet engine ([`TwoTier`], `herdless_redis::two_tier`): it calls
//! JS loaders and polls the engine's futures on the JS thread; every decision about loads,
//! the shared tier and its failures is the engine's.
//!
//! A call of `getOrLoad` (or of a wrapped function, or one key of `warm`) that is not
//! answered at once by a hit becomes a [`Call`] in the cache's table of calls:
//!
//! - **start** ([`State::Start`]): `lookup` answers Hit (reply now; a refresh guard starts a
//!   background call of its own with nobody to answer), Wait, or Lead, whose first
//!   [`Step`] (`TwoTier::lead`) the call then follows;
//! - **waiting** ([`State::Waiting`]): a [`herdless::Waiter`] future; "retry" goes back to
//!   start, keeping the caller's first arrival;
//! - **tier** ([`State::Tier`]): an engine step in progress (asking the fleet who loads,
//!   waiting for the origin budget, publishing), woken by the backend's runtime;
//! - **loading** ([`State::Loading`]): the JS loader runs; its promise settling hands the
//!   result to [`Load::loaded`]; meanwhile [`Load::poll_deadline`] wakes the call at the
//!   soft and hard timeouts;
//! - **op** ([`State::Op`]): a `set`, `invalidate`, `bump` or `read` waiting for the tier.
//!
//! Wakers may fire on any thread; [`crate::wake`] brings them to the JS thread. An aborted
//! call (AbortSignal) is answered with the signal's reason at once; a waiter is dropped (the
//! engine forgets it), while a load or an engine step goes on for the other callers, its
//! result stored as usual.

mod batch;
mod emit;
mod load;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use herdless::{LoadError, Lookup, Retry, Waited, Waiter};
use herdless_redis::TwoTier;
use herdless_redis::two_tier::{Load, Pending, Reply, Step};
use napi::{Result, Status};

use crate::call::{AbortWatch, Answer, CallOptions, Loader, Outcome, absent_symbol};
use crate::context::Ctx;
use crate::errors;
use crate::js::{Js, Ref, Value};
use crate::tier::{Codec, JsHost};
pub(crate) use crate::value::Entry;
use crate::value::{Table, Val};
use crate::wake::Wake;

/// What the engine answers.
pub(crate) type EResult<T> = std::result::Result<T, herdless::Error>;

/// The poll function of a [`State::Op`]: it answers whether it finished.
type OpPoll = Box<dyn FnMut(Js, &Inner, &mut Context<'_>) -> Result<bool>>;

enum State {
    Start,
    Waiting(Waiter<Entry>),
    Tier(Pending<Reply<Val>>),
    /// Boxed: a load is several times the size of the other states.
    Loading(Box<Load<Val>>),
    Op(OpPoll),
    /// A `getOrLoadMany` call (see `batch`).
    Batch(Box<batch::Batch>),
}

impl State {
    /// Whether the call sleeps until a waker fires (then the process must stay alive). A
    /// running loader keeps the process alive by itself.
    fn parked(&self) -> bool {
        match self {
            State::Batch(b) => b.parked(),
            s => matches!(s, State::Waiting(_) | State::Tier(_) | State::Op(_)),
        }
    }
}

struct Call {
    key: String,
    loader: Option<Loader>,
    answer: Answer,
    abort: Option<AbortWatch>,
    ttl: Option<Duration>,
    /// The tags of the value it loads (see `CallOptions::tags`).
    tags: Option<Rc<[String]>>,
    /// The load context handed to the loader, while it runs.
    ctx: Option<Box<Ctx>>,
    waker: Waker,
    state: State,
    /// Set after a hand-over: the next lookup keeps the caller's first arrival.
    retry: Option<Retry>,
}

/// The JS-thread state of one `Cache` object.
///
/// Field order matters when it is dropped: the calls go first (in `Drop`), then the engine
/// (its entries release their values), then the table (which lets those values go).
pub(crate) struct Inner {
    pub(crate) tt: TwoTier<Val>,
    /// The engine's L1 (the same as `tt.l1()`, one indirection nearer for the hit path).
    pub(crate) l1: herdless::Cache<Entry>,
    pub(crate) table: Table,
    pub(crate) codec: Codec,
    pub(crate) wake: Arc<Wake>,
    pub(crate) namespace: Option<String>,
    /// The JS front's engine side, unless the `front` option is off.
    pub(crate) front: Option<crate::front::Front>,
    /// The JS listeners of the engine's events.
    pub(crate) listeners: crate::events::Listeners,
    absent: Ref,
    /// Sees each loader call (spans), when set: see [`Inner::set_observer`].
    observer: RefCell<Option<Ref>>,
    calls: RefCell<HashMap<u64, Call>>,
    next_id: Cell<u64>,
    parked: Cell<usize>,
    alive: Cell<bool>,
    /// Itself, while calls are pending: a cache dropped by JS with a load, a wait or a
    /// fleet write in progress lives until they end (each is bounded by a timeout), so their
    /// promises settle rather than being rejected by the drop.
    pending: RefCell<Option<Rc<Inner>>>,
}

impl Inner {
    /// The state of the cache object `this`, whose engine `tt` was built with `wake`'s
    /// listener (`crate::events::engine_listener`); `on_event` is the `onEvent` option, `front`
    /// the front's capacity (`None`: no front), `copy` the `copyValues` option.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        js: Js,
        this: Value,
        tt: TwoTier<Val>,
        codec: Codec,
        namespace: Option<String>,
        wake: Arc<Wake>,
        on_event: Option<Value>,
        front: Option<usize>,
        copy: bool,
    ) -> Result<Rc<Self>> {
        let listeners = crate::events::Listeners::new(js, this)?;
        let inner = Rc::new(Self {
            l1: tt.l1().clone(),
            tt,
            table: Table::new(js, copy)?,
            codec,
            wake,
            namespace,
            front: front.map(|n| crate::front::Front::new(js, n)).transpose()?,
            listeners,
            absent: js.reference(absent_symbol(js)?)?,
            observer: RefCell::new(None),
            calls: RefCell::new(HashMap::new()),
            next_id: Cell::new(1),
            parked: Cell::new(0),
            alive: Cell::new(false),
            pending: RefCell::new(None),
        });
        if let Some(f) = on_event {
            inner.listeners.add(js, None, f, false)?;
        }
        inner.listening_changed();
        let weak: std::rc::Weak<Inner> = Rc::downgrade(&inner);
        inner.wake.connect(js, weak)?;
        Ok(inner)
    }

    /// Folds the front's hits into the engine: called first by every call into the engine
    /// but the front's own hits, so nothing reads or changes the engine's state without
    /// them.
    #[inline]
    pub(crate) fn fold_front(&self) {
        if let Some(f) = &self.front {
            f.fold(&self.l1);
        }
    }

    /// The engine's host for this call of the JS thread (the codec, warnings).
    pub(crate) fn host(&self, js: Js) -> JsHost<'_> {
        JsHost {
            js,
            table: &self.table,
            codec: &self.codec,
        }
    }

    pub(crate) fn is_absent(&self, js: Js, v: Value) -> Result<bool> {
        js.strict_equals(v, self.absent.get(js)?)
    }

    /// The value to answer at once when `first` is a plain hit (no refresh to run).
    #[inline]
    pub(crate) fn hit_now(
        &self,
        js: Js,
        first: &EResult<Lookup<Entry>>,
    ) -> Result<Option<(Value, bool)>> {
        match first {
            Ok(Lookup::Hit(hit)) if hit.refresh.is_none() => Ok(Some(match &hit.value {
                Some(v) => (self.table.load(js, &v.value)?, Table::copied(&v.value)),
                None => (js.undefined()?, false),
            })),
            _ => Ok(None),
        }
    }

    fn new_call(
        &self,
        key: String,
        loader: Option<Loader>,
        answer: Answer,
        ttl: Option<Duration>,
        tags: Option<Rc<[String]>>,
    ) -> (u64, Call) {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let waker = self.wake.waker(id);
        let call = Call {
            key,
            loader,
            answer,
            abort: None,
            ttl,
            tags,
            ctx: None,
            waker,
            state: State::Start,
            retry: None,
        };
        (id, call)
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
        first: EResult<Lookup<Entry>>,
    ) -> Result<()> {
        let (id, mut call) = self.new_call(key, Some(loader), answer, options.ttl, options.tags);
        if let Some(signal) = options.signal {
            if js.get_bool(js.get(signal, "aborted")?)? {
                let reason = js.get(signal, "reason")?;
                drop(first);
                return self.reply(js, &mut call, Err(reason));
            }
            let inner = Rc::clone(self);
            let watch = AbortWatch::new(js, signal, move |js| {
                inner.abort(js, id)?;
                inner.run_woken(js)
            })?;
            call.abort = Some(watch);
        }
        let r = self.step(js, id, call, first);
        self.run_woken(js)?;
        r
    }

    /// Runs an operation of the engine on the JS thread: the returned promise settles with
    /// `done(result)` when `fut` ends.
    pub(crate) fn op<T: 'static>(
        self: &Rc<Self>,
        js: Js,
        mut fut: Pending<T>,
        done: impl FnOnce(Js, &Inner, T) -> Result<Outcome> + 'static,
    ) -> Result<Value> {
        let (deferred, promise) = js.promise()?;
        let mut finish = Some((deferred, done));
        let poll: OpPoll = Box::new(move |js, inner, cx| match Pin::new(&mut fut).poll(cx) {
            Poll::Pending => Ok(false),
            Poll::Ready(r) => {
                if let Some((deferred, done)) = finish.take() {
                    let outcome = done(js, inner, r)?;
                    deferred.settle(js, outcome)?;
                }
                Ok(true)
            }
        });
        let (id, mut call) = self.new_call(String::new(), None, Answer::Nobody, None, None);
        call.state = State::Op(poll);
        self.put(id, call);
        self.poll(js, id)?;
        self.run_woken(js)?;
        Ok(promise)
    }

    fn abort(self: &Rc<Self>, js: Js, id: u64) -> Result<()> {
        let Some(mut call) = self.take(id) else {
            return Ok(());
        };
        let reason = match &call.abort {
            Some(w) => w.reason(js)?,
            None => js.undefined()?,
        };
        self.reply(js, &mut call, Err(reason))?;
        // The engine learns the leader's caller left: with no waiter left either, the load's
        // context is cancelled (its signal aborts) and its result is not stored.
        if let State::Loading(load) = &mut call.state {
            load.release();
        }
        // A load (or an engine step of one) goes on for the other callers; its result is
        // stored unless the engine says nobody wants it. A waiter is dropped.
        if matches!(
            call.state,
            State::Loading(_) | State::Tier(_) | State::Batch(_)
        ) {
            self.put(id, call);
        }
        Ok(())
    }

    /// Answers the caller (once): the value, or the rejection.
    fn reply(&self, js: Js, call: &mut Call, outcome: Outcome) -> Result<()> {
        self.reply_as(js, call, outcome, false)
    }

    /// [`reply`](Self::reply), saying whether the value is an absence (for `warm`'s count).
    fn reply_as(&self, js: Js, call: &mut Call, outcome: Outcome, absent: bool) -> Result<()> {
        if let Some(w) = call.abort.take() {
            w.remove(js)?;
        }
        call.answer.settle_as(js, outcome, absent)
    }

    /// Answers the caller with what the engine answered.
    fn reply_with(&self, js: Js, call: &mut Call, r: EResult<Option<Val>>) -> Result<()> {
        if !call.answer.waiting() {
            return Ok(());
        }
        let absent = matches!(r, Ok(None));
        let outcome = match r {
            Ok(Some(v)) => Ok(self.table.load(js, &v)?),
            Ok(None) => Ok(js.undefined()?),
            Err(e) => Err(errors::to_js(js, &self.table, &e)?),
        };
        self.reply_as(js, call, outcome, absent)
    }

    /// Looks the call's key up again (after a handed-over load).
    fn advance(self: &Rc<Self>, js: Js, id: u64, mut call: Call) -> Result<()> {
        self.fold_front();
        let r = match call.retry.take() {
            Some(retry) => self.l1.lookup_again(&call.key, retry),
            None => self.l1.lookup(&call.key),
        };
        self.step(js, id, call, r)
    }

    /// Acts on one answer of `lookup`.
    fn step(
        self: &Rc<Self>,
        js: Js,
        id: u64,
        mut call: Call,
        r: EResult<Lookup<Entry>>,
    ) -> Result<()> {
        match r {
            Err(e) => self.reply_with(js, &mut call, Err(e)),
            Ok(Lookup::Hit(hit)) => {
                let have = hit.value.as_ref().map_or(0, |v| v.version);
                let answered = self.reply_with(js, &mut call, Ok(hit.value.map(|v| v.value)));
                if let (Some(guard), Some(loader)) = (hit.refresh, call.loader.take()) {
                    if let Some(first) = self.tt.refresh(guard, have, call.ttl) {
                        let (id, refresh) = self.new_call(
                            call.key,
                            Some(loader),
                            Answer::Nobody,
                            call.ttl,
                            call.tags.take(),
                        );
                        self.drive(js, id, refresh, first)?;
                    }
                }
                answered
            }
            Ok(Lookup::Wait(waiter)) => {
                call.state = State::Waiting(waiter);
                self.put(id, call);
                self.poll(js, id)
            }
            Ok(Lookup::Lead(guard)) => {
                let first = self.tt.lead(guard, call.ttl);
                self.drive(js, id, call, first)
            }
        }
    }

    /// Does what the engine's `step` says, until the call answers or has to wait.
    fn drive(self: &Rc<Self>, js: Js, id: u64, mut call: Call, mut step: Step<Val>) -> Result<()> {
        loop {
            step = match step {
                Step::Done(r) => return self.reply_with(js, &mut call, r),
                Step::Stale(value, refresh) => {
                    // Answered now; the refresh (if any) goes on with nobody to answer.
                    self.reply_with(js, &mut call, Ok(Some(value)))?;
                    match refresh {
                        Some(load) => Step::Load(load),
                        None => return Ok(()),
                    }
                }
                Step::Tier(pending) => {
                    call.state = State::Tier(pending);
                    self.put(id, call);
                    return self.poll(js, id);
                }
                Step::Load(load) => return self.load(js, id, call, load),
                // Node's codecs are not interrupted by the language; a Node-API call that
                // could not run JS is: the engine handed the load over, the caller is told.
                Step::Interrupted(e) => Step::Done(Err(herdless::Error::Load(LoadError::new(e)))),
            }
        }
    }

    /// Sets (or removes) the observer of loader calls: each load then calls
    /// `observer(key, background, fn, bound)` instead of the loader, where `fn` is the
    /// loader and `bound` its `[this, ...args]` (or undefined); the observer calls it and
    /// returns what it returned. Asked only when a loader is about to run, never on a hit.
    pub(crate) fn set_observer(&self, js: Js, observer: Option<Value>) -> Result<()> {
        let r = observer.map(|o| js.reference(o)).transpose()?;
        *self.observer.borrow_mut() = r;
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
                Poll::Ready(Ok(Waited::Loaded(v))) => {
                    self.reply_with(js, &mut call, Ok(v.map(|v| v.value)))
                }
                Poll::Ready(Ok(Waited::Stale(v))) => {
                    self.reply_with(js, &mut call, Ok(Some(v.value)))
                }
                Poll::Ready(Ok(Waited::Retry(retry))) => {
                    drop(w);
                    call.retry = Some(retry);
                    self.advance(js, id, call)
                }
                Poll::Ready(Err(e)) => self.reply_with(js, &mut call, Err(e)),
            },
            State::Tier(mut pending) => match Pin::new(&mut pending).poll(&mut cx) {
                Poll::Pending => {
                    call.state = State::Tier(pending);
                    self.put(id, call);
                    Ok(())
                }
                Poll::Ready(reply) => {
                    let step = reply.next(&self.host(js));
                    self.drive(js, id, call, step)
                }
            },
            State::Loading(load) => self.deadline(js, id, call, load, &mut cx),
            State::Op(mut f) => {
                if !f(js, self, &mut cx)? {
                    call.state = State::Op(f);
                    self.put(id, call);
                }
                Ok(())
            }
            State::Batch(b) => self.drive_many(js, id, call, b, &mut cx),
            State::Start => self.advance(js, id, call),
        }
    }

    /// Polls every woken call, clears released values, and keeps the process alive only
    /// while some call sleeps. Called after every operation that may wake or release.
    pub(crate) fn run_woken(self: &Rc<Self>, js: Js) -> Result<()> {
        if let Some(f) = &self.front {
            f.sync(js, &self.l1)?;
        }
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
            if let Ok(err) = js.error(crate::js::ErrorKind::Error, errors::code::ERROR, &e.reason) {
                js.throw(err);
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.calls.borrow_mut().clear();
        self.wake.close();
    }
}

/// Refuses a call on a closed cache: throws the engine's `Closed` error (code
/// `HERDLESS_CLOSED`). Every method that reads or writes entries calls it first.
#[inline]
pub(crate) fn check_open(js: Js, inner: &Inner) -> Result<()> {
    match inner.tt.check_open() {
        Ok(()) => Ok(()),
        Err(e) => Err(closed(js, inner, &e)),
    }
}

#[cold]
fn closed(js: Js, inner: &Inner, e: &herdless::Error) -> napi::Error {
    errors::throw(js, &inner.table, e)
}

impl crate::wake::OnJsThread for Inner {
    fn woken(self: Rc<Self>, js: Js) {
        if let Err(e) = self.run_woken(js) {
            self.report(js, e);
        }
    }

    fn event(self: Rc<Self>, js: Js, event: herdless::Event) {
        if let Err(e) = self.emit(js, event) {
            self.report(js, e);
        }
    }
}
