//! [`CallMany`]: one caller's batch call (`get_or_load_many`), over the fleet engine's
//! batch ([`Many`]).

use std::pin::Pin;
use std::task::{Context, Poll};

use herdless::Waiter;

use super::{Called, Job, JobKind, Lang, Runtime};
use crate::two_tier::{Many, ManyAnswer, ManyStep, Pending, Resume, TwoTier, Versioned};

enum State<V: Clone + Send + Sync + 'static, L: Lang<V>> {
    /// Ask the batch what to do next.
    Idle,
    /// The shared tier (or the origin budget) is being awaited.
    Tier(Pending<Resume<V>>),
    /// Another caller of this process loads key `.0`.
    Waiting(usize, Waiter<Versioned<V>>),
    /// The loader runs for one loader call of the batch.
    Loading(L::RunningMany),
}

/// One caller's batch call: the values of many keys, with one loader call for the keys this
/// process loads for the fleet (`max_batch` keys per call), each key single-flight with
/// every other caller of it. Poll it with [`poll_many`](Self::poll_many).
///
/// A loader call runs under the hard timeout of its keys: past it, the call is dropped
/// (cancelled) and its keys time out (fail-safe values answer where there are some), their
/// fleet locks handed back. Dropped unfinished, the batch hands its keys over and cancels
/// its loader call.
pub struct CallMany<V: Clone + Send + Sync + 'static, L: Lang<V>> {
    many: Option<Many<V>>,
    loader: L::ManyLoader,
    state: State<V, L>,
}

impl<V: Clone + Send + Sync + 'static, L: Lang<V>> CallMany<V, L> {
    /// A batch call of `keys` (in their order, duplicates allowed) over `tt`.
    pub fn new<I>(tt: &TwoTier<V>, keys: I, loader: L::ManyLoader) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        Self::of(tt.get_many(keys), loader)
    }

    fn of(many: Many<V>, loader: L::ManyLoader) -> Self {
        Self {
            many: Some(many),
            loader,
            state: State::Idle,
        }
    }

    /// Whether the batch sleeps until a waker fires (a wait, the shared tier), rather than
    /// waiting for its loader.
    pub fn is_parked(&self) -> bool {
        matches!(self.state, State::Tier(_) | State::Waiting(..))
    }

    /// Drives the batch on; ready with each key's answer, in the order of the keys, or what
    /// the loader raised that was not its answer (a panic, an interruption: the batch's
    /// keys were handed over).
    pub fn poll_many<R: Runtime<V, L>>(
        &mut self,
        cx: &mut Context<'_>,
        rt: &R,
    ) -> Poll<Result<Vec<ManyAnswer<V>>, L::Raise>> {
        loop {
            let Some(many) = self.many.as_mut() else {
                return Poll::Ready(Ok(Vec::new()));
            };
            match std::mem::replace(&mut self.state, State::Idle) {
                State::Idle => match many.step() {
                    ManyStep::Done(answers) => {
                        self.many = None;
                        return Poll::Ready(Ok(answers));
                    }
                    ManyStep::Tier(pending) => self.state = State::Tier(pending),
                    ManyStep::Wait(i, waiter) => self.state = State::Waiting(i, waiter),
                    ManyStep::Refresh(refresh) => {
                        let job = Self::of(*refresh, self.loader.clone());
                        rt.spawn(Job(JobKind::Many(Box::new(job))));
                    }
                    ManyStep::Load(keys) => {
                        self.state = State::Loading(rt.call_many(&self.loader, keys));
                    }
                },
                State::Tier(mut pending) => match Pin::new(&mut pending).poll(cx) {
                    Poll::Pending => {
                        self.state = State::Tier(pending);
                        return Poll::Pending;
                    }
                    Poll::Ready(resume) => many.resume(resume, rt),
                },
                State::Waiting(i, mut waiter) => match Pin::new(&mut waiter).poll(cx) {
                    Poll::Pending => {
                        self.state = State::Waiting(i, waiter);
                        return Poll::Pending;
                    }
                    Poll::Ready(waited) => many.waited(i, waited),
                },
                State::Loading(mut running) => match rt.poll_many_loader(&mut running, cx) {
                    Poll::Ready(Called::Answered(r)) => many.loaded_with(r, rt),
                    Poll::Ready(Called::Panicked {
                        message,
                        raise: Some(x),
                    }) => {
                        // Waiters of the call's keys get `LoaderPanicked`; the caller
                        // re-raises.
                        let many = self.many.take().expect("checked");
                        many.panicked(message);
                        return Poll::Ready(Err(x));
                    }
                    Poll::Ready(Called::Panicked {
                        message,
                        raise: None,
                    }) => {
                        many.loader_panicked(message);
                    }
                    Poll::Ready(Called::Interrupted(x)) => {
                        // Not about the load: the batch's keys are handed over.
                        self.many = None;
                        return Poll::Ready(Err(x));
                    }
                    Poll::Pending => match many.poll_deadline(cx) {
                        Poll::Pending => {
                            self.state = State::Loading(running);
                            return Poll::Pending;
                        }
                        Poll::Ready(()) => {
                            // Dropping the loader call cancels it.
                            drop(running);
                            many.timed_out();
                        }
                    },
                },
            }
        }
    }
}

// Nothing of it is pinned (see `Job`).
impl<V: Clone + Send + Sync + 'static, L: Lang<V>> Unpin for CallMany<V, L> {}

impl<V: Clone + Send + Sync + 'static, L: Lang<V>> std::fmt::Debug for CallMany<V, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallMany").finish_non_exhaustive()
    }
}
