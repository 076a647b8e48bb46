//! `getOrLoadMany`: the Node driver of the fleet engine's batch ([`Many`]). The engine
//! decides everything; a batch is one [`Call`] of the cache's table whose state is a
//! [`Batch`]: it awaits the engine's tier steps and waits on the JS thread (woken like any
//! call), calls the JS loader with the keys the engine asks for, and answers an array in
//! the order of the keys, or rejects with a `BatchError` (code `HERDLESS_BATCH`) naming
//! each failed key.

use std::rc::Rc;
use std::task::{Context, Poll};

use herdless::{LoadError, Waiter};
use herdless_redis::two_tier::{Many, ManyAnswer, ManyStep, Pending, Resume};

use super::{Call, CallOptions, Entry, Inner, State};
use crate::call::{AbortWatch, Answer, Outcome, on_settled, thenable};
use crate::errors;
use crate::js::{ErrorKind, Js, Ref, Value};
use crate::value::{JsFailure, Val};
use napi::Result;

/// What a loader call answered: each key's value (`None`: absent).
type Found = Vec<(String, Option<Val>)>;

/// The batch of a `getOrLoadMany` call (or of its background refreshes).
pub(super) struct Batch {
    /// The keys of the request, in its order (empty for background refreshes).
    keys: Vec<String>,
    many: Many<Val>,
    now: Now,
    loader: Rc<Ref>,
}

/// What the batch is doing.
enum Now {
    /// About to ask the engine for its next step.
    Idle,
    Tier(Pending<Resume<Val>>),
    Wait(usize, Waiter<Entry>),
    /// The JS loader runs for these keys.
    Loading(Vec<String>),
}

impl Batch {
    /// Whether the batch sleeps until a waker fires (a running loader keeps the process
    /// alive by itself).
    pub(super) fn parked(&self) -> bool {
        matches!(self.now, Now::Tier(_) | Now::Wait(..))
    }
}

impl Inner {
    /// Starts `getOrLoadMany(keys, loader)`, answered through `answer`.
    pub(crate) fn start_many(
        self: &Rc<Self>,
        js: Js,
        keys: Vec<String>,
        loader: Value,
        options: CallOptions,
        answer: Answer,
    ) -> Result<()> {
        let (id, mut call) = self.new_call(String::new(), None, answer, None, None);
        if let Some(signal) = options.signal {
            if js.get_bool(js.get(signal, "aborted")?)? {
                let reason = js.get(signal, "reason")?;
                return self.reply(js, &mut call, Err(reason));
            }
            let inner = Rc::clone(self);
            let watch = AbortWatch::new(js, signal, move |js| {
                inner.abort(js, id)?;
                inner.run_woken(js)
            })?;
            call.abort = Some(watch);
        }
        call.state = State::Batch(Box::new(Batch {
            many: self.tt.get_many(&keys),
            keys,
            now: Now::Idle,
            loader: Rc::new(js.reference(loader)?),
        }));
        self.put(id, call);
        let r = self.poll(js, id);
        self.run_woken(js)?;
        r
    }

    /// Runs the batch of call `id` until it must wait, or answers.
    pub(super) fn drive_many(
        self: &Rc<Self>,
        js: Js,
        id: u64,
        mut call: Call,
        mut b: Box<Batch>,
        cx: &mut Context<'_>,
    ) -> Result<()> {
        loop {
            match std::mem::replace(&mut b.now, Now::Idle) {
                Now::Tier(mut pending) => match std::pin::Pin::new(&mut pending).poll(cx) {
                    Poll::Pending => return self.park(id, call, b, Now::Tier(pending)),
                    Poll::Ready(r) => b.many.resume(r, &self.host(js)),
                },
                Now::Wait(i, mut waiter) => match std::pin::Pin::new(&mut waiter).poll(cx) {
                    Poll::Pending => return self.park(id, call, b, Now::Wait(i, waiter)),
                    Poll::Ready(r) => b.many.waited(i, r),
                },
                Now::Loading(keys) => match b.many.poll_deadline(cx) {
                    Poll::Pending => return self.park(id, call, b, Now::Loading(keys)),
                    Poll::Ready(()) => b.many.timed_out(),
                },
                Now::Idle => match b.many.step() {
                    ManyStep::Tier(pending) => b.now = Now::Tier(pending),
                    ManyStep::Wait(i, waiter) => b.now = Now::Wait(i, waiter),
                    ManyStep::Refresh(background) => {
                        let (rid, mut refresh) =
                            self.new_call(String::new(), None, Answer::Nobody, None, None);
                        refresh.state = State::Batch(Box::new(Batch {
                            keys: Vec::new(),
                            many: *background,
                            now: Now::Idle,
                            loader: b.loader.clone(),
                        }));
                        refresh.waker.wake_by_ref();
                        self.put(rid, refresh);
                    }
                    ManyStep::Load(keys) => {
                        let loader = b.loader.get(js)?;
                        let list = js.array(keys.len())?;
                        for (i, k) in keys.iter().enumerate() {
                            js.set_element(list, i as u32, js.string(k)?)?;
                        }
                        b.now = Now::Loading(keys);
                        self.put(id, call_with(call, b));
                        // No borrow is held here: the loader may call this cache again.
                        let undefined = js.undefined()?;
                        let called = match js.call(loader, undefined, &[list]) {
                            Ok(outcome) => outcome,
                            Err(e) => {
                                // Dropping the batch hands its keys over.
                                drop(self.take(id));
                                return Err(e);
                            }
                        };
                        let outcome = match called {
                            Err(thrown) => Err(thrown),
                            Ok(v) => match thenable(js, v)? {
                                Some(promise) => {
                                    let inner = Rc::clone(self);
                                    on_settled(js, promise, move |js, result| {
                                        inner.many_loaded(js, id, result)
                                    })?;
                                    // Arms the hard-timeout timer.
                                    return self.poll(js, id);
                                }
                                None => Ok(v),
                            },
                        };
                        // A sync answer goes on in this loop, not through many_loaded: that
                        // polls this batch again, a stack frame per loader call, and a batch
                        // of 120,000 keys overflowed the stack.
                        let Some(mut taken) = self.take(id) else {
                            return Ok(());
                        };
                        let Some(batch) = take_batch(&mut taken) else {
                            self.put(id, taken);
                            return Ok(());
                        };
                        (call, b) = (taken, batch);
                        self.apply_loaded(js, &mut b, outcome)?;
                    }
                    ManyStep::Done(answers) => {
                        return self.reply_many(js, &mut call, &b.keys, answers);
                    }
                },
            }
        }
    }

    fn park(&self, id: u64, call: Call, mut b: Box<Batch>, now: Now) -> Result<()> {
        b.now = now;
        self.put(id, call_with(call, b));
        Ok(())
    }

    /// The JS loader of batch `id` settled: a mapping (a `Map` or a plain object) of the
    /// keys it was asked for to their values (`ABSENT`, or a key left out: absent), or its
    /// rejection for every key.
    fn many_loaded(self: &Rc<Self>, js: Js, id: u64, result: Outcome) -> Result<()> {
        let Some(mut call) = self.take(id) else {
            return Ok(());
        };
        let Some(mut b) = take_batch(&mut call) else {
            self.put(id, call);
            return Ok(());
        };
        self.apply_loaded(js, &mut b, result)?;
        self.put(id, call_with(call, b));
        let polled = self.poll(js, id);
        let woken = self.run_woken(js);
        polled.and(woken)
    }

    /// Hands the loader's answer to the batch if it still waits for it (a batch timed out
    /// meanwhile drops the late answer).
    fn apply_loaded(&self, js: Js, b: &mut Batch, result: Outcome) -> Result<()> {
        let keys = match std::mem::replace(&mut b.now, Now::Idle) {
            Now::Loading(keys) => keys,
            other => {
                b.now = other;
                return Ok(());
            }
        };
        let found = match result {
            Ok(v) => self.found(js, v, &keys),
            Err(e) => Err(LoadError::new(JsFailure::caught(js, &self.table, e)?)),
        };
        b.many.loaded(found, &self.host(js));
        Ok(())
    }

    /// The loader's answer for `keys`; a value that is no mapping fails the call.
    fn found(&self, js: Js, v: Value, keys: &[String]) -> std::result::Result<Found, LoadError> {
        let read = || -> Result<std::result::Result<Found, String>> {
            let t = js.type_of(v)?;
            if !matches!(t, crate::js::Type::Object) {
                return Ok(Err(format!(
                    "a batch loader answers a Map or an object of key to value, got {}",
                    t.name()
                )));
            }
            // An array is no mapping: read as one, its keys "0", "1"... match no key and
            // every key would be cached absent without a word.
            if js.is_array(v)? {
                return Ok(Err(
                    "a batch loader answers a Map or an object of key to value, got an array"
                        .to_owned(),
                ));
            }
            let is_map = js.type_of(js.get(v, "has")?)? == crate::js::Type::Function
                && js.type_of(js.get(v, "get")?)? == crate::js::Type::Function;
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
                let value = match self.is_absent(js, value)? {
                    true => None,
                    false => Some(self.table.store(js, value)?),
                };
                out.push((k.clone(), value));
            }
            Ok(Ok(out))
        };
        match read() {
            Ok(Ok(found)) => Ok(found),
            Ok(Err(message)) => Err(LoadError::new(std::io::Error::other(message))),
            // What reading the answer threw (a getter, a Proxy trap, a value that cannot be
            // copied) fails the batch; left pending it would end the process.
            Err(e) if e.status == napi::Status::PendingException => {
                match js
                    .take_exception()
                    .and_then(|t| JsFailure::caught(js, &self.table, t))
                {
                    Ok(f) => Err(LoadError::new(f)),
                    Err(e) => Err(LoadError::new(std::io::Error::other(e.reason.clone()))),
                }
            }
            Err(e) => Err(LoadError::new(std::io::Error::other(e.reason.clone()))),
        }
    }

    /// Answers the batch's caller: the array of values (`undefined` for an absence), or a
    /// `BatchError` when some keys failed.
    fn reply_many(
        &self,
        js: Js,
        call: &mut Call,
        keys: &[String],
        answers: Vec<ManyAnswer<Val>>,
    ) -> Result<()> {
        if !call.answer.waiting() {
            return Ok(());
        }
        let values = js.array(answers.len())?;
        let errors = js.object()?;
        let mut failed = 0;
        for (i, a) in answers.iter().enumerate() {
            let v = match a {
                Ok(Some(v)) => self.table.load(js, v)?,
                Ok(None) => js.undefined()?,
                Err(e) => {
                    failed += 1;
                    let err = errors::to_js(js, &self.table, e)?;
                    if let Some(k) = keys.get(i) {
                        js.set(errors, k, err)?;
                    }
                    err
                }
            };
            js.set_element(values, i as u32, v)?;
        }
        if failed == 0 {
            return self.reply(js, call, Ok(values));
        }
        let message = format!("{failed} of the {} keys failed", answers.len());
        let err = js.error(ErrorKind::Error, errors::code::BATCH, &message)?;
        js.set(err, "name", js.string("BatchError")?)?;
        js.set(err, "errors", errors)?;
        js.set(err, "values", values)?;
        self.reply(js, call, Err(err))
    }
}

/// The batch out of `call`, or None (the call unchanged) when it is no longer a batch.
fn take_batch(call: &mut Call) -> Option<Box<Batch>> {
    match std::mem::replace(&mut call.state, State::Start) {
        State::Batch(b) => Some(b),
        other => {
            call.state = other;
            None
        }
    }
}

fn call_with(mut call: Call, b: Box<Batch>) -> Call {
    call.state = State::Batch(b);
    call
}
