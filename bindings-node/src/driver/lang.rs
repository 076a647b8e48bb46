//! Node as a language of the engine's call machine (`herdless_redis::call`): [`Node`] names
//! its types, [`NodeRt`] is the JS thread at work during one poll of a call.
//!
//! A loader is called on the JS thread, with the load context the binding builds
//! ([`Ctx`]); a sync answer (or a throw) answers at once, a promise's settlement lands in
//! the call's slot and wakes it. A loader call dropped unfinished (the hard timeout, or
//! every caller gone) aborts its `ctx.signal`. Background jobs are calls of the cache's
//! table like any other, polled when their wakers fire ([`crate::wake`]).

use std::cell::RefCell;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use herdless::{LoadError, Loaded};
use herdless_redis::call::{Called, Failure, Job, KeyAnswers, Lang, Runtime};
use herdless_redis::two_tier::Load;
use herdless_redis::{CodecError, Host, Warning};
use napi::Result;

use super::Inner;
use crate::call::{Loader, Outcome, on_settled, thenable};
use crate::context::Ctx;
use crate::js::{Js, Ref, Type, Value};
use crate::value::{JsFailure, Val};

/// Node, as the call machine sees it (a marker type).
pub(crate) struct Node;

impl Lang<Val> for Node {
    type Loader = Loader;
    type ManyLoader = Rc<Ref>;
    type Raise = Raise;
    type Running = Running;
    type RunningMany = RunningMany;
}

/// What a caller is rejected with that is not the load's answer.
#[derive(Debug)]
pub(crate) enum Raise {
    /// A Node-API call failed (its exception may be pending).
    Js(napi::Error),
    /// The codec was interrupted: answered as the engine's error, as before the machine.
    Error(herdless::Error),
}

/// A one-key loader call in progress: answered at once (a sync loader, a throw), or a
/// promise whose settlement lands in the slot. Dropped unfinished, its `ctx.signal` aborts.
pub(crate) enum Running {
    /// The answer, taken once.
    Ready(Option<Called<Loaded<Val>, Raise>>),
    /// A pending promise.
    Promise(Rc<Slot<Loaded<Val>>>),
}

/// A batch loader call in progress (as [`Running`]; a batch loader has no signal).
pub(crate) enum RunningMany {
    /// The answer, taken once.
    Ready(Option<Called<KeyAnswers<Val>, Raise>>),
    /// A pending promise.
    Promise(Rc<Slot<KeyAnswers<Val>>>),
}

/// Where a loader's promise settles.
pub(crate) struct Slot<T> {
    state: RefCell<SlotState<T>>,
    /// The cache's queue of signals to abort (see [`Inner::abort_cancelled`]).
    aborts: Rc<RefCell<Vec<Rc<Ref>>>>,
}

struct SlotState<T> {
    result: Option<Called<T, Raise>>,
    waker: Option<Waker>,
    /// The load context of a one-key loader (read when it settles).
    ctx: Option<Box<Ctx>>,
    /// The keys of a batch loader call (read when it settles).
    keys: Vec<String>,
    settled: bool,
    /// The call was dropped: a late settlement is ignored.
    dropped: bool,
}

impl<T> Slot<T> {
    fn new(
        aborts: &Rc<RefCell<Vec<Rc<Ref>>>>,
        ctx: Option<Box<Ctx>>,
        keys: Vec<String>,
    ) -> Rc<Self> {
        Rc::new(Self {
            state: RefCell::new(SlotState {
                result: None,
                waker: None,
                ctx,
                keys,
                settled: false,
                dropped: false,
            }),
            aborts: Rc::clone(aborts),
        })
    }

    /// Polls for the settlement; `cx` is woken by it.
    fn poll(&self, cx: &mut Context<'_>) -> Poll<Called<T, Raise>> {
        let mut s = self.state.borrow_mut();
        if let Some(r) = s.result.take() {
            return Poll::Ready(r);
        }
        s.waker = Some(cx.waker().clone());
        // Everyone left: the engine's cancellation aborts the loader's signal.
        if let Some(c) = s.ctx.as_mut().and_then(|ctx| ctx.poll_cancelled(cx)) {
            self.aborts.borrow_mut().push(c);
        }
        Poll::Pending
    }

    /// What settling needs (the context, the keys), unless the call was dropped. The slot
    /// is not borrowed while they are read: reading runs JS, which may poll the call.
    fn settling(&self) -> Option<(Option<Box<Ctx>>, Vec<String>)> {
        let mut s = self.state.borrow_mut();
        if s.dropped {
            return None;
        }
        s.settled = true;
        Some((s.ctx.take(), std::mem::take(&mut s.keys)))
    }

    /// The loader settled with `called`: the call is woken.
    fn settle(&self, called: Called<T, Raise>) {
        let waker = {
            let mut s = self.state.borrow_mut();
            if s.dropped {
                return;
            }
            s.result = Some(called);
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// The call was dropped: an unsettled load is cancelled (its signal aborts).
    fn dropped(&self) {
        let mut s = self.state.borrow_mut();
        s.dropped = true;
        if !s.settled {
            if let Some(c) = s.ctx.take().and_then(|mut ctx| ctx.cancel()) {
                self.aborts.borrow_mut().push(c);
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Running::Promise(slot) = self {
            slot.dropped();
        }
    }
}

impl Drop for RunningMany {
    fn drop(&mut self) {
        if let RunningMany::Promise(slot) = self {
            slot.dropped();
        }
    }
}

/// The JS thread at work during one poll of a call.
pub(crate) struct NodeRt<'a> {
    pub(crate) js: Js,
    pub(crate) inner: &'a Rc<Inner>,
}

impl Host<Val> for NodeRt<'_> {
    fn encode(&self, value: &Val) -> std::result::Result<Vec<u8>, CodecError> {
        self.inner.host(self.js).encode(value)
    }
    fn decode(&self, bytes: &[u8]) -> std::result::Result<Val, CodecError> {
        self.inner.host(self.js).decode(bytes)
    }
    fn warn(&self, warning: &Warning<'_>) {
        self.inner.host(self.js).warn(warning)
    }
}

impl Runtime<Val, Node> for NodeRt<'_> {
    fn call(&self, loader: Loader, load: &Load<Val>) -> Running {
        self.inner
            .call_loader(self.js, loader, load)
            .unwrap_or_else(|e| Running::Ready(Some(Called::Interrupted(Raise::Js(e)))))
    }

    fn poll_loader(
        &self,
        running: &mut Running,
        cx: &mut Context<'_>,
    ) -> Poll<Called<Loaded<Val>, Raise>> {
        match running {
            Running::Ready(r) => Poll::Ready(r.take().unwrap_or_else(polled_twice)),
            Running::Promise(slot) => slot.poll(cx),
        }
    }

    fn call_many(&self, loader: &Rc<Ref>, keys: Vec<String>) -> RunningMany {
        self.inner
            .call_many_loader(self.js, loader, keys)
            .unwrap_or_else(|e| RunningMany::Ready(Some(Called::Interrupted(Raise::Js(e)))))
    }

    fn poll_many_loader(
        &self,
        running: &mut RunningMany,
        cx: &mut Context<'_>,
    ) -> Poll<Called<KeyAnswers<Val>, Raise>> {
        match running {
            RunningMany::Ready(r) => Poll::Ready(r.take().unwrap_or_else(polled_twice)),
            RunningMany::Promise(slot) => slot.poll(cx),
        }
    }

    fn spawn(&self, job: Job<Val, Node>) {
        self.inner.spawn(job);
    }

    fn report(&self, key: &str, failure: Failure<Raise>) {
        // A load's own failure is told by the engine's events; only what is no load's
        // answer (a failed Node-API call) is left to say, as a warning.
        let Failure::Raise(Raise::Js(e)) = failure else {
            return;
        };
        let js = self.js;
        let why = match e.status {
            napi::Status::PendingException => match js.take_exception() {
                Ok(thrown) => crate::js::describe(js, thrown),
                Err(e) => e.reason.clone(),
            },
            _ => e.reason.clone(),
        };
        let message = format!("herdless: a background load of '{key}' failed: {why}");
        let _ = crate::codec::warn(js, &message);
    }

    fn raise(&self, interrupted: CodecError) -> Raise {
        // Node's codecs are not interrupted by the language; a Node-API call that could not
        // run JS is: the engine handed the load over, the caller is told.
        Raise::Error(herdless::Error::Load(LoadError::new(interrupted)))
    }
}

/// A ready loader call polled again: a driver's mistake, answered, not a panic.
fn polled_twice<T>() -> Called<T, Raise> {
    Called::Interrupted(Raise::Error(herdless::Error::LoaderPanicked {
        message: None,
    }))
}

impl Inner {
    /// Calls the JS loader for `load` (through the load observer, with its load context).
    fn call_loader(self: &Rc<Self>, js: Js, loader: Loader, load: &Load<Val>) -> Result<Running> {
        let observer = match self.observer.borrow().as_ref() {
            Some(o) => Some(o.get(js)?),
            None => None,
        };
        let mut ctx = match loader.wants_context(js)? {
            true => Some(Box::new(Ctx::new(js, &self.table, load.context())?)),
            false => None,
        };
        let arg = ctx.as_ref().map(|c| c.object(js)).transpose()?;
        // No borrow is held here: the loader may call this cache again.
        let called = match observer {
            None => loader.call(js, arg)?,
            Some(o) => loader.call_observed(js, o, load.key(), load.is_background(), arg)?,
        };
        drop(loader);
        let promise = match called {
            Ok(v) => thenable(js, v)?,
            Err(_) => None,
        };
        let Some(promise) = promise else {
            return Ok(Running::Ready(Some(self.loaded(
                js,
                ctx.as_deref_mut(),
                called,
            ))));
        };
        let slot = Slot::new(&self.aborts, ctx, Vec::new());
        let (inner, s) = (Rc::clone(self), Rc::clone(&slot));
        on_settled(js, promise, move |js, outcome| {
            if let Some((mut ctx, _)) = s.settling() {
                s.settle(inner.loaded(js, ctx.as_deref_mut(), outcome));
                inner.run_woken(js)?;
            }
            Ok(())
        })?;
        Ok(Running::Promise(slot))
    }

    /// What a one-key loader's outcome answers (with what it set on its context).
    fn loaded(&self, js: Js, ctx: Option<&mut Ctx>, result: Outcome) -> Called<Loaded<Val>, Raise> {
        match self.read_loaded(js, ctx, result) {
            Ok(r) => Called::Answered(r),
            Err(e) => Called::Interrupted(Raise::Js(e)),
        }
    }

    fn read_loaded(
        &self,
        js: Js,
        ctx: Option<&mut Ctx>,
        result: Outcome,
    ) -> Result<std::result::Result<Loaded<Val>, LoadError>> {
        let v = match result {
            Ok(v) => v,
            Err(e) => {
                if let Some(ctx) = ctx {
                    ctx.finish();
                }
                return Ok(Err(LoadError::new(JsFailure::caught(js, &self.table, e)?)));
            }
        };
        let absent = self.is_absent(js, v)?;
        let Some(ctx) = ctx else {
            if absent {
                return Ok(Ok(Loaded::absent()));
            }
            return Ok(match self.table.store_answer(js, v)? {
                Ok(v) => Ok(Loaded::value(v)),
                Err(f) => Err(LoadError::new(f)),
            });
        };
        match ctx.answer(js, v, absent, |v| self.table.store(js, v)) {
            Ok(Ok(loaded)) => Ok(Ok(loaded)),
            Ok(Err(m)) => Ok(Err(LoadError::new(std::io::Error::other(m)))),
            // The answer could not be kept (not copyable, a getter threw): the load's
            // failure, not an exception left pending.
            Err(e) if e.status == napi::Status::PendingException => {
                let thrown = js.take_exception()?;
                Ok(Err(LoadError::new(JsFailure::caught(
                    js,
                    &self.table,
                    thrown,
                )?)))
            }
            Err(e) => Err(e),
        }
    }

    /// Calls a batch's JS loader with `keys`.
    fn call_many_loader(
        self: &Rc<Self>,
        js: Js,
        loader: &Ref,
        keys: Vec<String>,
    ) -> Result<RunningMany> {
        let f = loader.get(js)?;
        let list = js.array(keys.len())?;
        for (i, k) in keys.iter().enumerate() {
            js.set_element(list, i as u32, js.string(k)?)?;
        }
        // No borrow is held here: the loader may call this cache again.
        let called = js.call(f, js.undefined()?, &[list])?;
        let promise = match called {
            Ok(v) => thenable(js, v)?,
            Err(_) => None,
        };
        let Some(promise) = promise else {
            return Ok(RunningMany::Ready(Some(self.found(js, called, &keys))));
        };
        let slot = Slot::new(&self.aborts, None, keys);
        let (inner, s) = (Rc::clone(self), Rc::clone(&slot));
        on_settled(js, promise, move |js, outcome| {
            if let Some((_, keys)) = s.settling() {
                s.settle(inner.found(js, outcome, &keys));
                inner.run_woken(js)?;
            }
            Ok(())
        })?;
        Ok(RunningMany::Promise(slot))
    }

    /// What a batch loader's outcome answers for `keys`: a mapping (a `Map` or a plain
    /// object) of the keys to their values (`ABSENT`, or a key left out: absent), or its
    /// rejection for every key; a value that is no mapping fails the call.
    fn found(&self, js: Js, result: Outcome, keys: &[String]) -> Called<KeyAnswers<Val>, Raise> {
        let v = match result {
            Ok(v) => v,
            Err(e) => {
                return match JsFailure::caught(js, &self.table, e) {
                    Ok(f) => Called::Answered(Err(LoadError::new(f))),
                    Err(e) => Called::Interrupted(Raise::Js(e)),
                };
            }
        };
        let failed = |message: String| LoadError::new(std::io::Error::other(message));
        Called::Answered(match self.read_found(js, v, keys) {
            Ok(Ok(found)) => Ok(found),
            Ok(Err(message)) => Err(failed(message)),
            // What reading the answer threw (a getter, a Proxy trap, a value that cannot be
            // copied) fails the batch; left pending it would end the process.
            Err(e) if e.status == napi::Status::PendingException => match js
                .take_exception()
                .and_then(|t| JsFailure::caught(js, &self.table, t))
            {
                Ok(f) => Err(LoadError::new(f)),
                Err(e) => Err(failed(e.reason.clone())),
            },
            Err(e) => Err(failed(e.reason.clone())),
        })
    }

    fn read_found(
        &self,
        js: Js,
        v: Value,
        keys: &[String],
    ) -> Result<std::result::Result<KeyAnswers<Val>, String>> {
        let t = js.type_of(v)?;
        if !matches!(t, Type::Object) {
            return Ok(Err(format!(
                "a batch loader answers a Map or an object of key to value, got {}",
                t.name()
            )));
        }
        // An array is no mapping: read as one, its keys "0", "1"... match no key and every
        // key would be cached absent without a word.
        if js.is_array(v)? {
            return Ok(Err(
                "a batch loader answers a Map or an object of key to value, got an array"
                    .to_owned(),
            ));
        }
        let is_map = js.type_of(js.get(v, "has")?)? == Type::Function
            && js.type_of(js.get(v, "get")?)? == Type::Function;
        let own: std::collections::HashSet<String> = match is_map {
            true => Default::default(),
            false => js.keys(v)?.into_iter().collect(),
        };
        let mut out = Vec::with_capacity(keys.len());
        for k in keys {
            let key = js.string(k)?;
            let value = if is_map {
                if !js.get_bool(js.call_method(v, "has", &[key])?)? {
                    continue;
                }
                js.call_method(v, "get", &[key])?
            } else {
                if !own.contains(k) {
                    continue;
                }
                js.get(v, k)?
            };
            let loaded = match self.is_absent(js, value)? {
                true => Loaded::absent(),
                false => Loaded::value(self.table.store(js, value)?),
            };
            out.push((k.clone(), loaded));
        }
        Ok(Ok(out))
    }
}
