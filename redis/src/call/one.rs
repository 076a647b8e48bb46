//! [`Call`]: one caller's call of one key.

use std::pin::Pin;
use std::task::{Context, Poll};

use herdless::{Error, LoadReason, Lookup, Waited, Waiter};

use super::{Answer, CallOptions, Called, Failure, Job, JobKind, Lang, Runtime};
use crate::two_tier::{Deadline, Load, Pending, Reply, Step, TwoTier, Versioned};

enum State<V: Clone + Send + Sync + 'static, L: Lang<V>> {
    /// A lookup's answer, to act on.
    Lookup(Result<Lookup<Versioned<V>>, Error>),
    /// The engine step a background job starts with (boxed: a step is large, and only
    /// a job's first waits here).
    Start(Box<Step<V>>),
    /// Another caller of this process loads the key.
    Waiting(Waiter<Versioned<V>>),
    /// The shared tier (or the origin budget) is being awaited.
    Tier(Pending<Reply<V>>),
    /// The loader runs. Boxed: a load is several times the size of the other states.
    Loading(Box<Load<V>>, L::Running),
    /// Answered.
    Over,
}

/// One caller's call of one key, from its first lookup to its answer (see the
/// [module docs](super)): poll it with [`poll_call`](Self::poll_call) until it is ready.
///
/// Dropped unfinished, it hands its load over (to a waiter, here and in the fleet) and
/// cancels its loader call; a waiter just leaves.
pub struct Call<V: Clone + Send + Sync + 'static, L: Lang<V>> {
    tt: TwoTier<V>,
    key: String,
    options: CallOptions,
    loader: Option<L::Loader>,
    state: State<V, L>,
    /// Someone awaits the answer (not a background job).
    caller: bool,
    /// This call ran its loader.
    ran: bool,
}

impl<V: Clone + Send + Sync + 'static, L: Lang<V>> Call<V, L> {
    /// A call of `key` whose first lookup (of `tt`'s L1) answered `first`: a driver looks
    /// up itself, to answer a plain hit without making a call.
    pub fn new(
        tt: &TwoTier<V>,
        key: &str,
        first: Result<Lookup<Versioned<V>>, Error>,
        loader: L::Loader,
        options: CallOptions,
    ) -> Self {
        Self {
            tt: tt.clone(),
            key: key.to_owned(),
            options,
            loader: Some(loader),
            state: State::Lookup(first),
            caller: true,
            ran: false,
        }
    }

    /// A call of `key` that looks it up first.
    pub fn lookup(tt: &TwoTier<V>, key: &str, loader: L::Loader, options: CallOptions) -> Self {
        let first = tt.l1().lookup(key);
        Self::new(tt, key, first, loader, options)
    }

    /// A background job of `key` that starts at `step` (nobody awaits it).
    fn job(&self, key: String, state: State<V, L>, loader: Option<L::Loader>) -> Job<V, L> {
        Job(JobKind::One(Box::new(Self {
            tt: self.tt.clone(),
            key,
            options: self.options.clone(),
            loader,
            state,
            caller: false,
            ran: false,
        })))
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Whether this call ran its loader (a warm-up counts the key loaded, not skipped).
    pub fn ran_loader(&self) -> bool {
        self.ran
    }

    /// Whether the call sleeps until a waker fires (a wait, the shared tier), rather than
    /// waiting for its loader.
    pub fn is_parked(&self) -> bool {
        matches!(self.state, State::Waiting(_) | State::Tier(_))
    }

    /// Whether the loader runs.
    pub fn is_loading(&self) -> bool {
        matches!(self.state, State::Loading(..))
    }

    /// The caller leaves (Node's `AbortSignal`): a wait is dropped; a load, or an engine
    /// step of one, goes on in the background for the other callers, its result stored
    /// unless nobody wants it any more (then the loader's context says it is cancelled).
    pub fn leave<R: Runtime<V, L>>(mut self, rt: &R) {
        match std::mem::replace(&mut self.state, State::Over) {
            State::Loading(mut load, running) => {
                load.release();
                let key = std::mem::take(&mut self.key);
                rt.spawn(self.job(key, State::Loading(load, running), None));
            }
            state @ (State::Tier(_) | State::Start(_)) => {
                let key = std::mem::take(&mut self.key);
                let loader = self.loader.take();
                rt.spawn(self.job(key, state, loader));
            }
            State::Lookup(_) | State::Waiting(_) | State::Over => {}
        }
    }

    /// Drives the call on; ready with the caller's answer. Background work it leaves (a
    /// refresh, the rest of a load answered at its soft timeout) goes to `rt.spawn`.
    pub fn poll_call<R: Runtime<V, L>>(
        &mut self,
        cx: &mut Context<'_>,
        rt: &R,
    ) -> Poll<Answer<V, L::Raise>> {
        loop {
            let step = match std::mem::replace(&mut self.state, State::Over) {
                State::Over => {
                    // Polled after its answer: a driver's mistake, answered, not a panic.
                    return Poll::Ready(Err(Error::LoaderPanicked { message: None }.into()));
                }
                State::Start(step) => *step,
                State::Lookup(first) => match self.looked_up(first, rt) {
                    Ok(Some(step)) => step,
                    Ok(None) => continue,
                    Err(answer) => return Poll::Ready(answer),
                },
                State::Waiting(mut waiter) => match Pin::new(&mut waiter).poll(cx) {
                    Poll::Pending => {
                        self.state = State::Waiting(waiter);
                        return Poll::Pending;
                    }
                    Poll::Ready(Ok(Waited::Loaded(v))) => {
                        return Poll::Ready(Ok(v.map(|v| v.value)));
                    }
                    Poll::Ready(Ok(Waited::Stale(v))) => return Poll::Ready(Ok(Some(v.value))),
                    // The leader went away: look up again, keeping the first arrival.
                    Poll::Ready(Ok(Waited::Retry(r))) => {
                        self.state = State::Lookup(self.tt.l1().lookup_again(&self.key, r));
                        continue;
                    }
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e.into())),
                },
                State::Tier(mut pending) => match Pin::new(&mut pending).poll(cx) {
                    Poll::Pending => {
                        self.state = State::Tier(pending);
                        return Poll::Pending;
                    }
                    Poll::Ready(reply) => reply.next(rt),
                },
                State::Loading(load, running) => match self.loading(load, running, cx, rt) {
                    Ok(Some(step)) => step,
                    Ok(None) => return Poll::Pending,
                    Err(answer) => return Poll::Ready(answer),
                },
            };
            if let Err(answer) = self.stepped(step, rt) {
                return Poll::Ready(answer);
            }
        }
    }

    /// Acts on a lookup's answer: the step to take (`None`: the next state is set), or
    /// the answer.
    fn looked_up<R: Runtime<V, L>>(
        &mut self,
        first: Result<Lookup<Versioned<V>>, Error>,
        rt: &R,
    ) -> Result<Option<Step<V>>, Answer<V, L::Raise>> {
        let first = first.map_err(|e| Err(Failure::Error(e)))?;
        match first {
            Lookup::Hit(hit) => {
                let Some(mut guard) = hit.refresh else {
                    return Err(Ok(hit.value.map(|v| v.value)));
                };
                // The refresh replaces the version being served: only a newer shared entry
                // ends it without a load.
                let have = hit.value.as_ref().map_or(0, |v| v.version);
                if self.options.warm {
                    // A warm-up refreshes a stale key itself, in the foreground.
                    guard.set_reason(LoadReason::Warm);
                    return Ok(Some(self.tt.renew(guard, have, self.options.ttl)));
                }
                let refresh = self.tt.refresh(guard, have, self.options.ttl);
                if let (Some(first), Some(loader)) = (refresh, self.loader.take()) {
                    let start = State::Start(Box::new(first));
                    rt.spawn(self.job(self.key.clone(), start, Some(loader)));
                }
                Err(Ok(hit.value.map(|v| v.value)))
            }
            Lookup::Wait(waiter) => {
                self.state = State::Waiting(waiter);
                Ok(None)
            }
            Lookup::Lead(mut guard) => {
                if self.options.warm {
                    guard.set_reason(LoadReason::Warm);
                }
                Ok(Some(self.tt.lead(guard, self.options.ttl)))
            }
        }
    }

    /// Acts on engine steps until one leaves something to await (the state is set), or
    /// the answer.
    fn stepped<R: Runtime<V, L>>(
        &mut self,
        mut step: Step<V>,
        rt: &R,
    ) -> Result<(), Answer<V, L::Raise>> {
        loop {
            step = match step {
                Step::Done(r) => return Err(r.map_err(Failure::Error)),
                Step::Tier(pending) => {
                    self.state = State::Tier(pending);
                    return Ok(());
                }
                Step::Stale(value, refresh) => {
                    // Answered now; the fleet's refresh (if any) goes on in the background.
                    if let (Some(load), Some(loader)) = (refresh, self.loader.take()) {
                        let start = State::Start(Box::new(Step::Load(load)));
                        rt.spawn(self.job(self.key.clone(), start, Some(loader)));
                    }
                    return Err(Ok(Some(value)));
                }
                Step::Interrupted(e) => return Err(Err(Failure::Raise(rt.raise(e)))),
                Step::Load(load) => match self.loader.take() {
                    // A call loads at most once, with its own loader (the rest of a load
                    // moved to the background has none to start again with).
                    None => load.fail(Error::LoaderPanicked { message: None }),
                    Some(loader) => {
                        self.ran = true;
                        let running = rt.call(loader, &load);
                        self.state = State::Loading(Box::new(load), running);
                        return Ok(());
                    }
                },
            };
        }
    }

    /// Polls a running loader against its load's deadlines: the step to take, `None`
    /// while pending, or the answer.
    fn loading<R: Runtime<V, L>>(
        &mut self,
        mut load: Box<Load<V>>,
        mut running: L::Running,
        cx: &mut Context<'_>,
        rt: &R,
    ) -> Result<Option<Step<V>>, Answer<V, L::Raise>> {
        match rt.poll_loader(&mut running, cx) {
            Poll::Ready(Called::Answered(r)) => {
                let r = r.map(|loaded| self.options.shape(loaded));
                return Ok(Some(load.loaded_with(r, rt)));
            }
            Poll::Ready(Called::Panicked { message, raise }) => {
                load.panicked(message.clone());
                return Err(Err(match raise {
                    Some(x) => Failure::Raise(x),
                    None => Failure::Error(Error::LoaderPanicked { message }),
                }));
            }
            Poll::Ready(Called::Interrupted(x)) => {
                // Not about the load: hand it over.
                load.abandon();
                return Err(Err(Failure::Raise(x)));
            }
            Poll::Pending => {}
        }
        loop {
            match load.poll_deadline(cx) {
                Poll::Pending => {
                    self.state = State::Loading(load, running);
                    return Ok(None);
                }
                Poll::Ready(Deadline::Hard) => {
                    // Dropping the loader call cancels it (a future is dropped, a task
                    // cancelled, a signal aborted).
                    drop(running);
                    return Ok(Some(load.timed_out()));
                }
                Poll::Ready(Deadline::Soft) if self.caller => {
                    if let Some(stale) = load.answer_stale() {
                        // The caller takes the fail-safe value; the load goes on and is
                        // stored.
                        let key = self.key.clone();
                        rt.spawn(self.job(key, State::Loading(load, running), None));
                        return Err(Ok(Some(stale)));
                    }
                }
                // Nobody to answer early: on until the hard deadline.
                Poll::Ready(Deadline::Soft) => {}
            }
        }
    }
}

// Nothing of it is pinned (see `Job`).
impl<V: Clone + Send + Sync + 'static, L: Lang<V>> Unpin for Call<V, L> {}

impl<V: Clone + Send + Sync + 'static, L: Lang<V>> std::fmt::Debug for Call<V, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("key", &self.key)
            .field("caller", &self.caller)
            .finish_non_exhaustive()
    }
}
