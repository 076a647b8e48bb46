//! `get_or_load_async`: the runtime-agnostic async driver of the state machine. Waiting never
//! blocks a thread (tokio workers stay free); timers come from the cache's clock; background
//! work goes to the configured [`Spawn`](crate::Spawn).

use alloc::boxed::Box;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use core::time::Duration;

use crate::clock::Clock;
use crate::context::LoadContext;
use crate::error::{Error, load_error};
use crate::loaded::Loaded;
use crate::lookup::{self, LoadGuard, Lookup, Refresh, Retry, Waited};
use crate::sync::Arc;
use crate::table::Table;

/// How a load driven under deadlines ended.
pub(crate) enum Driven<T> {
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
pub(crate) struct Drive<'a, F> {
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
                    let message = crate::error::panic_message(&*p);
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

/// Polls `fut` until it ends, panics, or the clock reaches `hard` (a batch's loader call,
/// which has no soft timeout of its own).
pub(crate) fn until_hard_deadline<'a, F: Future>(
    clock: &'a dyn Clock,
    fut: Pin<&'a mut F>,
    hard: Option<Duration>,
) -> Drive<'a, F> {
    Drive {
        fut,
        clock,
        soft: None,
        hard,
        timer: None,
    }
}

/// The value of `key`, loaded by the async `loader` in this task if this caller leads; a
/// stale or XFetch hit hands the refresh to the spawner.
pub(crate) async fn get_or_load<V, F, Fut, E>(
    table: &Arc<Table<V>>,
    key: &str,
    loader: F,
) -> Result<Option<V>, Error>
where
    V: Clone + Send + Sync + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = Result<Option<V>, E>> + Send + 'static,
    E: Into<Box<dyn core::error::Error + Send + Sync>>,
{
    let loader = move |_: LoadContext<V>| {
        let fut = loader();
        async move { fut.await.map(Loaded::from) }
    };
    drive_loop(table, key, false, loader).await
}

/// [`get_or_load`] with a loader told its [`LoadContext`] and answering a [`Loaded`]. A
/// loader that fails after its load was withdrawn (superseded, or left by every caller)
/// answers nobody: its caller looks up again.
pub(crate) async fn get_or_load_with<V, F, Fut, E>(
    table: &Arc<Table<V>>,
    key: &str,
    loader: F,
) -> Result<Option<V>, Error>
where
    V: Clone + Send + Sync + 'static,
    F: FnOnce(LoadContext<V>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<Loaded<V>, E>> + Send + 'static,
    E: Into<Box<dyn core::error::Error + Send + Sync>>,
{
    drive_loop(table, key, true, loader).await
}

/// The loop of the async driver: look up, then serve, wait (and look up again after a
/// hand-over) or lead. `retry`: a withdrawn load's failure sends its leader back to the
/// lookup (once: the loader is spent).
async fn drive_loop<V, F, Fut, E>(
    table: &Arc<Table<V>>,
    key: &str,
    retry: bool,
    loader: F,
) -> Result<Option<V>, Error>
where
    V: Clone + Send + Sync + 'static,
    F: FnOnce(LoadContext<V>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<Loaded<V>, E>> + Send + 'static,
    E: Into<Box<dyn core::error::Error + Send + Sync>>,
{
    let mut loader = Some(loader);
    let mut failed = None;
    let mut step = lookup::lookup(table, key, Refresh::IfSpawner)?;
    loop {
        match step {
            Lookup::Hit(hit) => {
                if let (Some(guard), Some(loader)) = (hit.refresh, loader.take()) {
                    refresh_in_background(table, guard, loader);
                }
                return Ok(hit.value);
            }
            Lookup::Wait(waiter) => match waiter.await? {
                Waited::Loaded(v) => return Ok(v),
                Waited::Stale(v) => return Ok(Some(v)),
                Waited::Retry(r) => {
                    step = lookup::lookup_again(table, key, r, Refresh::IfSpawner)?;
                }
            },
            Lookup::Lead(mut guard) => {
                // Without a budget the load starts now, at the lookup's clock reading; with
                // one, a caller that waits for it past its own deadline hands the load over.
                if !guard.begin_at_lookup() {
                    if let Err(e) = guard.begin().await {
                        return guard.give_up(e);
                    }
                }
                let Some(loader) = loader.take() else {
                    // Back from a withdrawn load with nothing to load again with: its error,
                    // and the load handed over to whoever waits.
                    return guard.give_up(failed.take().expect("set with the retry"));
                };
                let fut = Box::pin(loader(guard.context()));
                match lead(table, guard, fut, retry).await {
                    Ok(answer) => return answer,
                    Err((r, e)) => {
                        failed = Some(e);
                        step = lookup::lookup_again(table, key, r, Refresh::IfSpawner)?;
                    }
                }
            }
        }
    }
}

/// Runs the leader's load under the flight's deadlines. At the soft timeout, with a
/// fail-safe value at hand and a spawner, it answers that value and moves the rest of
/// the load to the spawner. `Err`: the load was withdrawn and failed, and `retry` sends its
/// caller back to the lookup.
#[allow(clippy::type_complexity)]
pub(crate) async fn lead<V, Fut, E>(
    table: &Arc<Table<V>>,
    guard: LoadGuard<V>,
    mut fut: Pin<Box<Fut>>,
    retry: bool,
) -> Result<Result<Option<V>, Error>, (Retry, Error)>
where
    V: Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Loaded<V>, E>> + Send + 'static,
    E: Into<Box<dyn core::error::Error + Send + Sync>>,
{
    let spawner = table
        .spawner
        .as_ref()
        .filter(|_| guard.fallback().is_some());
    let soft = spawner.and(guard.soft_deadline());
    match drive(table, &guard, fut.as_mut(), soft).await {
        Driven::SoftTimeout => {
            let stale = guard.fallback().cloned();
            guard.count_failsafe();
            if let Some(spawner) = spawner {
                let table = table.clone();
                spawner.spawn(Box::pin(async move {
                    let _ = run_to_end(table, guard, fut).await;
                }));
            }
            Ok(Ok(stale))
        }
        Driven::Done(result) if retry => {
            let (guard, result) = guard.withdrawn_failure(result.map_err(load_error))?;
            Ok(guard.complete_loaded(result))
        }
        driven => Ok(complete_driven(table, guard, driven)),
    }
}

/// Runs a load to its end (or its hard timeout) and completes the guard.
async fn run_to_end<V, Fut, E>(
    table: Arc<Table<V>>,
    guard: LoadGuard<V>,
    mut fut: Pin<Box<Fut>>,
) -> Result<Option<V>, Error>
where
    V: Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Loaded<V>, E>> + Send + 'static,
    E: Into<Box<dyn core::error::Error + Send + Sync>>,
{
    let driven = drive(&table, &guard, fut.as_mut(), None).await;
    complete_driven(&table, guard, driven)
}

fn drive<'a, V, Fut: Future>(
    table: &'a Table<V>,
    guard: &LoadGuard<V>,
    fut: Pin<&'a mut Fut>,
    soft: Option<Duration>,
) -> Drive<'a, Fut>
where
    V: Clone + Send + Sync + 'static,
{
    Drive {
        fut,
        clock: &*table.clock,
        soft,
        hard: guard.hard_deadline(),
        timer: None,
    }
}

/// Completes `guard` with how its load ended: the loader's answer, its panic (re-raised
/// here once the waiters know), or its timeout.
fn complete_driven<V, E>(
    table: &Table<V>,
    guard: LoadGuard<V>,
    driven: Driven<Result<Loaded<V>, E>>,
) -> Result<Option<V>, Error>
where
    V: Clone + Send + Sync + 'static,
    E: Into<Box<dyn core::error::Error + Send + Sync>>,
{
    match driven {
        Driven::Done(result) => guard.complete_loaded(result.map_err(load_error)),
        #[cfg(feature = "std")]
        Driven::Panicked(message, payload) => {
            guard.panicked(message);
            std::panic::resume_unwind(payload)
        }
        Driven::HardTimeout | Driven::SoftTimeout => {
            let after = table.cfg.hard_timeout.unwrap_or_default();
            guard.fail(Error::LoadTimeout { after })
        }
    }
}

/// Runs a stale-while-revalidate or XFetch refresh on the spawner. When the origin budget
/// is exhausted (or there is no spawner), the refresh is skipped (handed over).
fn refresh_in_background<V, F, Fut, E>(table: &Arc<Table<V>>, mut guard: LoadGuard<V>, loader: F)
where
    V: Clone + Send + Sync + 'static,
    F: FnOnce(LoadContext<V>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<Loaded<V>, E>> + Send + 'static,
    E: Into<Box<dyn core::error::Error + Send + Sync>>,
{
    let Some(spawner) = &table.spawner else {
        return;
    };
    if !guard.try_begin() {
        return;
    }
    let table = table.clone();
    spawner.spawn(Box::pin(async move {
        let fut = Box::pin(loader(guard.context()));
        let _ = run_to_end(table, guard, fut).await;
    }));
}
