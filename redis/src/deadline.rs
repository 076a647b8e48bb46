//! A loader future raced against the L1's hard timeout, on the L1's clock (runtime-agnostic:
//! the clock's timers wake it, whatever executor polls it).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use herdless::Clock;

/// `fut`, or `None` once `clock` reaches `at`.
pub(crate) struct WithDeadline<'c, F> {
    fut: Pin<Box<F>>,
    clock: &'c dyn Clock,
    at: Option<Duration>,
    timer: Option<Waker>,
}

impl<'c, F: Future> WithDeadline<'c, F> {
    pub(crate) fn new(fut: F, clock: &'c dyn Clock, at: Option<Duration>) -> Self {
        Self {
            fut: Box::pin(fut),
            clock,
            at,
            timer: None,
        }
    }
}

impl<F: Future> Future for WithDeadline<'_, F> {
    type Output = Option<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if let Poll::Ready(v) = this.fut.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        let Some(at) = this.at else {
            return Poll::Pending;
        };
        if this.clock.now() >= at {
            return Poll::Ready(None);
        }
        if !this.timer.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            this.timer = Some(cx.waker().clone());
            this.clock.wake_at(at, cx.waker().clone());
        }
        Poll::Pending
    }
}
