//! `get_or_load_async`: the runtime-agnostic async API. Waiting never blocks a thread (tokio
//! workers stay free); timers come from the cache's clock; background work goes to the
//! configured [`Spawn`](crate::Spawn).

use alloc::boxed::Box;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use core::time::Duration;

use super::load_error;
use crate::clock::Clock;
use crate::engine::Cache;
use crate::error::Error;
use crate::lookup::{LoadGuard, Lookup, Waited};

/// How a load driven under deadlines ended.
enum Driven<T> {
    Done(T),
    /// The loader panicked (std): the message, if a string, and the payload to re-raise.
    #[cfg(feature = "std")]
    Panicked(
        Option<alloc::string::String>,
        Box<dyn core::any::Any + Send>,
    ),
    SoftTimeout,
    HardTimeout,
}

/// Polls a loader future until it finishes or a deadline passes.
struct Drive<'a, F> {
    fut: Pin<&'a mut F>,
    clock: &'a dyn Clock,
    soft: Option<Duration>,
    hard: Option<Duration>,
    timer: Option<(Duration, Waker)>,
}

impl<F: Future> Future for Drive<'_, F> {
    type Output = Driven<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        #[cfg(feature = "std")]
        {
            let fut = &mut this.fut;
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
                Ok(Poll::Ready(v)) => return Poll::Ready(Driven::Done(v)),
                Ok(Poll::Pending) => {}
                Err(p) => {
                    let message = super::blocking::panic_message(&*p);
                    return Poll::Ready(Driven::Panicked(message, p));
                }
            }
        }
        #[cfg(not(feature = "std"))]
        if let Poll::Ready(v) = this.fut.as_mut().poll(cx) {
            return Poll::Ready(Driven::Done(v));
        }
        let now = this.clock.now();
        if this.hard.is_some_and(|d| now >= d) {
            return Poll::Ready(Driven::HardTimeout);
        }
        if this.soft.is_some_and(|d| now >= d) {
            return Poll::Ready(Driven::SoftTimeout);
        }
        if let Some(next) = [this.soft, this.hard].into_iter().flatten().min() {
            if !this
                .timer
                .as_ref()
                .is_some_and(|(d, w)| *d == next && w.will_wake(cx.waker()))
            {
                this.timer = Some((next, cx.waker().clone()));
                this.clock.wake_at(next, cx.waker().clone());
            }
        }
        Poll::Pending
    }
}

impl<V: Clone + Send + Sync + 'static> Cache<V> {
    /// The value of `key`, loading it with the async `loader` if needed; concurrent callers
    /// of one key share one load. Works on any executor.
    ///
    /// Same contract as [`get_or_load`](Self::get_or_load). The leader enforces the loader
    /// timeouts: at the soft timeout, if a fail-safe value exists, it answers with it and
    /// the load finishes in the background (on the spawner); at the hard timeout the loader
    /// future is dropped and the load fails with [`Error::LoadTimeout`].
    ///
    /// # Panics
    /// With `std`, a panic of the loader is re-raised here after every waiter received
    /// [`Error::LoaderPanicked`].
    pub async fn get_or_load_async<F, Fut, E>(
        &self,
        key: &str,
        loader: F,
    ) -> Result<Option<V>, Error>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<Option<V>, E>> + Send + 'static,
        E: Into<Box<dyn core::error::Error + Send + Sync>>,
    {
        let mut loader = Some(loader);
        let mut step = self.lookup(key)?;
        loop {
            match step {
                Lookup::Hit(hit) => {
                    if let (Some(guard), Some(loader)) = (hit.refresh, loader.take()) {
                        self.spawn_refresh(guard, loader);
                    }
                    return Ok(hit.value);
                }
                Lookup::Wait(waiter) => match waiter.await? {
                    Waited::Loaded(v) => return Ok(v),
                    Waited::Stale(v) => return Ok(Some(v)),
                    Waited::Retry(r) => step = self.lookup_again(key, r)?,
                },
                Lookup::Lead(mut guard) => {
                    // Without a budget the load starts now, at the lookup's clock reading.
                    if !guard.begin_at_lookup() {
                        if let Err(e) = guard.begin().await {
                            return guard.fail(e);
                        }
                    }
                    let loader = loader.take().expect("a caller leads at most once");
                    let fut = Box::pin(loader());
                    return self.lead(guard, fut).await;
                }
            }
        }
    }

    /// Runs the leader's load under the flight's deadlines. At the soft timeout, with a
    /// fail-safe value at hand and a spawner, it answers that value and moves the rest of
    /// the load to the spawner.
    pub(super) async fn lead<Fut, E>(
        &self,
        guard: LoadGuard<V>,
        mut fut: Pin<Box<Fut>>,
    ) -> Result<Option<V>, Error>
    where
        Fut: Future<Output = Result<Option<V>, E>> + Send + 'static,
        E: Into<Box<dyn core::error::Error + Send + Sync>>,
    {
        let spawner = self
            .inner
            .spawner
            .as_ref()
            .filter(|_| guard.fallback().is_some());
        let soft = spawner.and(guard.soft_deadline());
        match self.drive(&guard, fut.as_mut(), soft).await {
            Driven::SoftTimeout => {
                let stale = guard.fallback().cloned();
                guard.count_failsafe();
                let cache = self.clone();
                if let Some(spawner) = spawner {
                    spawner.spawn(Box::pin(async move {
                        let _ = cache.run_to_end(guard, fut).await;
                    }));
                }
                Ok(stale)
            }
            driven => self.settle(guard, driven),
        }
    }

    /// Runs a load to its end (or its hard timeout) and completes the guard.
    async fn run_to_end<Fut, E>(
        self,
        guard: LoadGuard<V>,
        mut fut: Pin<Box<Fut>>,
    ) -> Result<Option<V>, Error>
    where
        Fut: Future<Output = Result<Option<V>, E>> + Send + 'static,
        E: Into<Box<dyn core::error::Error + Send + Sync>>,
    {
        let driven = self.drive(&guard, fut.as_mut(), None).await;
        self.settle(guard, driven)
    }

    fn drive<'a, Fut: Future>(
        &'a self,
        guard: &LoadGuard<V>,
        fut: Pin<&'a mut Fut>,
        soft: Option<Duration>,
    ) -> Drive<'a, Fut> {
        Drive {
            fut,
            clock: &*self.inner.clock,
            soft,
            hard: guard.hard_deadline(),
            timer: None,
        }
    }

    fn settle<E>(
        &self,
        guard: LoadGuard<V>,
        driven: Driven<Result<Option<V>, E>>,
    ) -> Result<Option<V>, Error>
    where
        E: Into<Box<dyn core::error::Error + Send + Sync>>,
    {
        match driven {
            Driven::Done(result) => guard.complete(result.map_err(load_error)),
            #[cfg(feature = "std")]
            Driven::Panicked(message, payload) => {
                guard.panicked(message);
                std::panic::resume_unwind(payload)
            }
            Driven::HardTimeout | Driven::SoftTimeout => {
                let after = self.inner.cfg.hard_timeout.unwrap_or_default();
                guard.fail(Error::LoadTimeout { after })
            }
        }
    }

    /// Runs a stale-while-revalidate or XFetch refresh on the spawner. Without a spawner,
    /// or when the origin budget is exhausted, the refresh is skipped (handed over).
    fn spawn_refresh<F, Fut, E>(&self, mut guard: LoadGuard<V>, loader: F)
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<Option<V>, E>> + Send + 'static,
        E: Into<Box<dyn core::error::Error + Send + Sync>>,
    {
        let Some(spawner) = &self.inner.spawner else {
            return;
        };
        if !guard.try_begin() {
            return;
        }
        let cache = self.clone();
        spawner.spawn(Box::pin(async move {
            let fut = Box::pin(loader());
            let _ = cache.run_to_end(guard, fut).await;
        }));
    }
}
