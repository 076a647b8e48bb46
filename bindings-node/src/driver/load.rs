//! The loading state of a call: the JS loader called (through the load observer, with its
//! load context), its promise settling, and the soft and hard timeouts that wake it.

use std::rc::Rc;
use std::task::{Context, Poll};

use herdless::{LoadError, Loaded};
use herdless_redis::two_tier::{Deadline, Load};
use napi::Result;

use crate::call::Outcome;
use crate::call::{on_settled, thenable};
use crate::context::{self, Ctx};
use crate::js::Js;
use crate::value::{JsFailure, Val};

use super::{Call, Inner, State};

impl Inner {
    /// Calls the JS loader for `load`.
    pub(super) fn load(
        self: &Rc<Self>,
        js: Js,
        id: u64,
        mut call: Call,
        load: Load<Val>,
    ) -> Result<()> {
        let Some(loader) = call.loader.take() else {
            // A call loads at most once, and only with its loader.
            let step = load.fail(herdless::Error::LoaderPanicked { message: None });
            return self.drive(js, id, call, step);
        };
        let observer = match self.observer.borrow().as_ref() {
            Some(o) => Some((o.get(js)?, load.key().to_owned(), load.is_background())),
            None => None,
        };
        let ctx = match loader.wants_context(js)? {
            true => Some(Box::new(Ctx::new(js, &self.table, load.context())?)),
            false => None,
        };
        let arg = ctx.as_ref().map(|c| c.object(js)).transpose()?;
        call.ctx = ctx;
        call.state = State::Loading(Box::new(load));
        self.put(id, call);
        // No borrow is held here: the loader may call this cache again.
        let called = match observer {
            None => loader.call(js, arg),
            Some((o, key, background)) => loader.call_observed(js, o, &key, background, arg),
        };
        let result = match called {
            Ok(r) => r,
            Err(e) => {
                // Dropping the load hands it over.
                drop(self.take(id));
                return Err(e);
            }
        };
        drop(loader);
        match result {
            Err(thrown) => self.loaded(js, id, Err(thrown)),
            Ok(v) => match thenable(js, v)? {
                Some(promise) => {
                    let inner = Rc::clone(self);
                    on_settled(js, promise, move |js, result| inner.loaded(js, id, result))?;
                    // Arms the deadline timers.
                    self.poll(js, id)
                }
                None => self.loaded(js, id, Ok(v)),
            },
        }
    }

    /// The loader of call `id` settled: the engine takes it from there.
    pub(super) fn loaded(self: &Rc<Self>, js: Js, id: u64, result: Outcome) -> Result<()> {
        // Gone: the load timed out and was answered already; the value is dropped.
        let Some(mut call) = self.take(id) else {
            return Ok(());
        };
        let load = match std::mem::replace(&mut call.state, State::Start) {
            State::Loading(load) => *load,
            other => {
                call.state = other;
                self.put(id, call);
                return Ok(());
            }
        };
        let step = match call.ctx.take() {
            None => {
                let result = match result {
                    Ok(v) if self.is_absent(js, v)? => Ok(None),
                    Ok(v) => match self.table.store_answer(js, v)? {
                        Ok(v) => Ok(Some(v)),
                        Err(f) => Err(LoadError::new(f)),
                    },
                    Err(e) => Err(LoadError::new(JsFailure::caught(js, &self.table, e)?)),
                };
                match &call.tags {
                    None => load.loaded(result, &self.host(js)),
                    Some(tags) => {
                        let tagged = result.map(|v| Loaded::from(v).tags(tags.iter().cloned()));
                        load.loaded_with(tagged, &self.host(js))
                    }
                }
            }
            Some(mut ctx) => {
                let result = match result {
                    Ok(v) => {
                        let absent = self.is_absent(js, v)?;
                        match ctx.answer(js, v, absent, |v| self.table.store(js, v)) {
                            Ok(Ok(loaded)) => Ok(loaded),
                            Ok(Err(m)) => Err(LoadError::new(std::io::Error::other(m))),
                            // The answer could not be kept (not copyable, a getter threw):
                            // the load's failure, not an exception left pending.
                            Err(e) if e.status == napi::Status::PendingException => {
                                let thrown = js.take_exception()?;
                                Err(LoadError::new(JsFailure::caught(js, &self.table, thrown)?))
                            }
                            Err(e) => return Err(e),
                        }
                    }
                    Err(e) => {
                        ctx.finish();
                        Err(LoadError::new(JsFailure::caught(js, &self.table, e)?))
                    }
                };
                load.loaded_with(result, &self.host(js))
            }
        };
        let driven = self.drive(js, id, call, step);
        let woken = self.run_woken(js);
        driven.and(woken)
    }

    /// A loading call's deadline timer fired (or the timers are to be armed).
    pub(super) fn deadline(
        self: &Rc<Self>,
        js: Js,
        id: u64,
        mut call: Call,
        mut load: Box<Load<Val>>,
        cx: &mut Context<'_>,
    ) -> Result<()> {
        // The engine's cancellation signal aborts the context's AbortSignal, once.
        let abort = match &mut call.ctx {
            Some(ctx) => ctx.poll_cancelled(js, cx)?,
            None => None,
        };
        loop {
            match load.poll_deadline(cx) {
                Poll::Pending => {
                    call.state = State::Loading(load);
                    self.put(id, call);
                    // With no borrow held: the signal's listeners run JS.
                    return match abort {
                        Some(c) => context::abort(js, c),
                        None => Ok(()),
                    };
                }
                Poll::Ready(Deadline::Hard) => {
                    let abort = match (abort, call.ctx.take()) {
                        (Some(c), _) => Some(c),
                        (None, Some(mut ctx)) => ctx.fire(js)?,
                        (None, None) => None,
                    };
                    let step = load.timed_out();
                    let driven = self.drive(js, id, call, step);
                    if let Some(c) = abort {
                        context::abort(js, c)?;
                    }
                    return driven;
                }
                // Soft timeout: a waiting caller takes the fail-safe value; the load goes on.
                Poll::Ready(Deadline::Soft) => {
                    if call.answer.waiting() {
                        if let Some(stale) = load.answer_stale() {
                            self.reply_with(js, &mut call, Ok(Some(stale)))?;
                        }
                    }
                }
            }
        }
    }
}
