//! The Node host of the fleet engine ([`TwoTier`], `herdless_redis::two_tier`) and of its
//! call machine (`herdless_redis::call`): every decision about a call (hit, refresh, wait,
//! lead, the deadlines of a running loader, batches, warm-ups, background work) is the
//! machine's; this drives it on the JS thread.
//!
//! Each call not answered at once by a hit is a [`Task`] of the cache's table of calls:
//!
//! - **one** ([`State::One`]): a `getOrLoad` call (or a wrapped function's), a [`Call`];
//! - **many** ([`State::Many`]): a `getOrLoadMany` call, a [`CallMany`] (see `batch`);
//! - **warm** ([`State::Warm`]): a `warm` call (see `warm`);
//! - **job** ([`State::Job`]): background work a call left (a refresh, a load past its soft
//!   timeout, a batch's refreshes), answered to nobody;
//! - **op** ([`State::Op`]): a `set`, `invalidate`, `bump`, `read` or lock waiting for the
//!   tier (a lock's wait may be aborted: its future is dropped, as a waiter's is).
//!
//! A task is polled with a [`NodeRt`] (Node as a language of the machine, see `lang`) when
//! its waker fires; wakers may fire on any thread, and [`crate::wake`] brings them to the
//! JS thread. An aborted call (AbortSignal) is answered with the signal's reason at once,
//! then leaves the machine's way ([`Call::leave`]: a waiter is dropped, a load goes on for
//! the other callers); an aborted batch goes on for the other callers of its keys.

mod batch;
mod emit;
mod group;
mod lang;
mod warm;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use herdless::Lookup;
use herdless_redis::TwoTier;
use herdless_redis::call::{Answer as Answered, Call, CallMany, Job};
use napi::{Result, Status};

use crate::call::{AbortWatch, Answer, CallOptions, Loader, Outcome, absent_symbol};
use crate::codec::{Codec, JsHost};
use crate::errors;
use crate::js::{Js, Ref, Value};
pub(crate) use crate::value::Entry;
use crate::value::{Table, Val};
use crate::wake::Wake;
pub(crate) use lang::{Node, NodeRt, Raise};

/// What the engine answers.
pub(crate) type EResult<T> = std::result::Result<T, herdless::Error>;

/// The poll function of a [`State::Op`]: its caller's answer, once it finished.
type OpPoll = Box<dyn FnMut(Js, &Inner, &mut Context<'_>) -> Result<Option<Outcome>>>;

enum State {
    One(Box<Call<Val, Node>>),
    /// The batch, and its keys (to name the failed ones).
    Many(Box<CallMany<Val, Node>>, Vec<String>),
    Warm(Box<warm::Run>),
    Job(Job<Val, Node>),
    Op(OpPoll),
}

impl State {
    /// Whether the task sleeps until a waker fires (then the process must stay alive). A
    /// running loader keeps the process alive by itself.
    fn parked(&self) -> bool {
        match self {
            State::One(c) => c.is_parked(),
            State::Many(m, _) => m.is_parked(),
            State::Warm(w) => w.is_parked(),
            State::Job(j) => j.is_parked(),
            State::Op(_) => true,
        }
    }
}

/// What a polled task ended with.
enum Ended {
    One(Answered<Val, Raise>),
    Many(std::result::Result<Vec<herdless_redis::two_tier::ManyAnswer<Val>>, Raise>),
    /// A warm-up's or an op's answer.
    Settle(Outcome),
    /// Nobody to answer (a job).
    Quiet,
}

/// One call of the cache's table.
struct Task {
    answer: Answer,
    abort: Option<AbortWatch>,
    waker: Waker,
    state: State,
}

/// A task being polled (out of the table): what happened to it meanwhile.
struct Polling {
    id: u64,
    /// Its waker fired and the wake was met while it was out: it is polled again.
    woken: bool,
    /// Its caller's signal aborted while it was out.
    aborted: bool,
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
    calls: RefCell<HashMap<u64, Task>>,
    /// The herds waiting for a key's load, polled together (see `group`).
    groups: RefCell<group::Groups>,
    /// The tasks being polled, innermost last (see [`Polling`]).
    polling: RefCell<Vec<Polling>>,
    /// The loaders' signals to abort once no borrow is held (their listeners run JS).
    aborts: Rc<RefCell<Vec<Rc<Ref>>>>,
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
            groups: RefCell::default(),
            polling: RefCell::new(Vec::new()),
            aborts: Rc::new(RefCell::new(Vec::new())),
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

    fn new_task(&self, answer: Answer, state: State) -> (u64, Task) {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let waker = self.wake.waker(id);
        let task = Task {
            answer,
            abort: None,
            waker,
            state,
        };
        (id, task)
    }

    fn put(&self, id: u64, task: Task) {
        if task.state.parked() {
            self.parked.set(self.parked.get() + 1);
        }
        self.calls.borrow_mut().insert(id, task);
    }

    fn take(&self, id: u64) -> Option<Task> {
        let task = self.calls.borrow_mut().remove(&id)?;
        if task.state.parked() {
            self.parked.set(self.parked.get() - 1);
        }
        Some(task)
    }

    /// Calls not answered yet (for leak tests), the members of herds included.
    pub(crate) fn calls(&self) -> usize {
        self.calls.borrow().len() + self.groups.borrow().members()
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
        let call = Call::new(&self.tt, &key, first, loader, group::engine(&options));
        self.begin(js, answer, options.signal, || {
            Ok(State::One(Box::new(call)))
        })
    }

    /// Starts a task made by `make`, answered through `answer`. A `signal` that had
    /// aborted already was answered by the method, before the engine saw the call
    /// ([`call::aborted`](crate::call::aborted)).
    fn begin(
        self: &Rc<Self>,
        js: Js,
        answer: Answer,
        signal: Option<Value>,
        make: impl FnOnce() -> Result<State>,
    ) -> Result<()> {
        let (id, mut task) = self.new_task(answer, make()?);
        if let Some(signal) = signal {
            let inner = Rc::clone(self);
            task.abort = Some(AbortWatch::new(js, signal, move |js| {
                inner.abort(js, id)?;
                inner.run_woken(js)
            })?);
        }
        self.put(id, task);
        let r = self.poll(js, id);
        self.run_woken(js)?;
        r
    }

    /// Runs background work of a call: a task of its own, answered to nobody, polled at once.
    fn spawn(&self, job: Job<Val, Node>) {
        let (id, task) = self.new_task(Answer::Nobody, State::Job(job));
        task.waker.wake_by_ref();
        self.put(id, task);
    }

    /// Runs an operation of the engine on the JS thread: the returned promise settles with
    /// `done(result)` when `fut` ends, or with `signal`'s reason if it aborts first (`fut`
    /// is then dropped, which cancels the operation).
    pub(crate) fn op<T: 'static>(
        self: &Rc<Self>,
        js: Js,
        fut: impl Future<Output = T> + 'static,
        signal: Option<Value>,
        done: impl FnOnce(Js, &Inner, T) -> Result<Outcome> + 'static,
    ) -> Result<Value> {
        let (deferred, promise) = js.promise()?;
        let (mut fut, mut done) = (Box::pin(fut), Some(done));
        // `done` is taken once: the task leaves the table when it ends.
        let poll: OpPoll = Box::new(move |js, inner, cx| match fut.as_mut().poll(cx) {
            Poll::Pending => Ok(None),
            Poll::Ready(r) => done.take().map(|done| done(js, inner, r)).transpose(),
        });
        self.begin(js, Answer::Promise(deferred), signal, || {
            Ok(State::Op(poll))
        })?;
        Ok(promise)
    }

    /// The caller of task `id` left (its signal aborted).
    fn abort(self: &Rc<Self>, js: Js, id: u64) -> Result<()> {
        match self.take(id) {
            Some(task) => self.abort_task(js, id, task),
            None => {
                // Being polled: it leaves once the poll is over.
                if let Some(p) = self.polling.borrow_mut().iter_mut().find(|p| p.id == id) {
                    p.aborted = true;
                }
                Ok(())
            }
        }
    }

    fn abort_task(self: &Rc<Self>, js: Js, id: u64, mut task: Task) -> Result<()> {
        self.reject_aborted(js, &mut task)?;
        match task.state {
            // A wait is dropped; a load (or an engine step of one) goes on for the other
            // callers, its result stored unless nobody wants it any more.
            State::One(call) => call.leave(&NodeRt { js, inner: self }),
            // The batch's loads go on for the other callers of its keys.
            State::Many(..) => self.put(id, task),
            _ => {}
        }
        Ok(())
    }

    /// Rejects the caller of `task` with its signal's reason.
    fn reject_aborted(&self, js: Js, task: &mut Task) -> Result<()> {
        let reason = match &task.abort {
            Some(w) => w.reason(js)?,
            None => js.undefined()?,
        };
        self.settle(js, task, Err(reason))
    }

    /// Answers the caller of a task that ended.
    fn ended(&self, js: Js, task: &mut Task, end: Ended) -> Result<()> {
        match end {
            Ended::One(a) => self.reply_one(js, task, a),
            Ended::Many(r) => self.reply_many(js, task, r),
            Ended::Settle(outcome) => self.settle(js, task, outcome),
            Ended::Quiet => Ok(()),
        }
    }

    /// Answers the caller (once): the value, or the rejection.
    fn settle(&self, js: Js, task: &mut Task, outcome: Outcome) -> Result<()> {
        if let Some(w) = task.abort.take() {
            w.remove(js)?;
        }
        task.answer.settle(js, outcome)
    }

    /// What a caller is rejected with for `raise`.
    pub(crate) fn raised(&self, js: Js, raise: Raise) -> Result<Value> {
        match raise {
            Raise::Error(e) => errors::to_js(js, &self.table, &e),
            Raise::Js(e) if e.status == Status::PendingException => js.take_exception(),
            Raise::Js(e) => js.error(crate::js::ErrorKind::Error, errors::code::ERROR, &e.reason),
        }
    }

    /// Answers the caller of a one-key call with what the machine answered.
    fn reply_one(&self, js: Js, task: &mut Task, r: Answered<Val, Raise>) -> Result<()> {
        if !task.answer.waiting() {
            return Ok(());
        }
        let outcome = self.one_outcome(js, r)?;
        self.settle(js, task, outcome)
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

    /// Polls task `id` after its waker fired.
    fn poll(self: &Rc<Self>, js: Js, id: u64) -> Result<()> {
        let Some(mut task) = self.take(id) else {
            // Being polled (a wake met by a loader calling this cache): polled again once
            // that poll is over, so the wake is not lost.
            if let Some(p) = self.polling.borrow_mut().iter_mut().find(|p| p.id == id) {
                p.woken = true;
            }
            return Ok(());
        };
        self.polling.borrow_mut().push(Polling {
            id,
            woken: false,
            aborted: false,
        });
        let ended = self.poll_task(js, &mut task);
        let over = !matches!(ended, Ok(None));
        let p = self.polling.borrow_mut().pop();
        let (woken, aborted) = p.map_or((false, false), |p| (p.woken, p.aborted));
        let r = match ended {
            Ok(None) if aborted => self.abort_task(js, id, task),
            Ok(None) => {
                if woken {
                    task.waker.wake_by_ref();
                }
                self.put(id, task);
                Ok(())
            }
            // Aborted during the poll that answered: the caller still gets the reason.
            Ok(Some(end)) => match aborted {
                true => self.reject_aborted(js, &mut task),
                false => Ok(()),
            }
            .and_then(|()| self.ended(js, &mut task, end)),
            // Not left unanswered: rejected with what failed.
            Err(e) if task.answer.waiting() => {
                let err = self.raised(js, Raise::Js(e))?;
                self.settle(js, &mut task, Err(err))
            }
            Err(e) => Err(e),
        };
        let aborted = self.abort_cancelled(js);
        let herd = match over {
            true => self.anchor_ended(js, id),
            false => Ok(()),
        };
        r.and(aborted).and(herd)
    }

    /// Polls `task` once with the JS thread as its runtime: what it ended with, if it did.
    fn poll_task(self: &Rc<Self>, js: Js, task: &mut Task) -> Result<Option<Ended>> {
        let mut cx = Context::from_waker(&task.waker);
        let rt = NodeRt { js, inner: self };
        Ok(match &mut task.state {
            State::One(call) => {
                self.fold_front();
                match call.poll_call(&mut cx, &rt) {
                    Poll::Pending => None,
                    Poll::Ready(a) => Some(Ended::One(a)),
                }
            }
            State::Many(many, _) => {
                self.fold_front();
                match many.poll_many(&mut cx, &rt) {
                    Poll::Pending => None,
                    Poll::Ready(r) => Some(Ended::Many(r)),
                }
            }
            State::Warm(w) => {
                self.fold_front();
                w.poll(&mut cx, &rt)?.map(Ended::Settle)
            }
            State::Job(job) => job
                .poll_job(&mut cx, &rt)
                .is_ready()
                .then_some(Ended::Quiet),
            State::Op(f) => f(js, self, &mut cx)?.map(Ended::Settle),
        })
    }

    /// Aborts the signals of the loads cancelled meanwhile (with no borrow held: their
    /// listeners run JS, which may call this cache).
    fn abort_cancelled(&self, js: Js) -> Result<()> {
        loop {
            let list = std::mem::take(&mut *self.aborts.borrow_mut());
            if list.is_empty() {
                return Ok(());
            }
            for c in list {
                crate::context::abort(js, c.get(js)?)?;
            }
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
        self.groups.borrow_mut().clear();
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
