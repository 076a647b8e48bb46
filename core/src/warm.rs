//! Pre-warming: `warm(keys, loader)` loads the keys that are not fresh, a few at a time and
//! within the origin budget, so a restart (or a green deployment) meets traffic warm instead
//! of sending the whole cold cache to the origin.
//!
//! Every key goes through the engine like any caller's: a fresh key is skipped, a key that
//! another caller is loading is waited for (and counted as skipped), a stale key is refreshed
//! and a missing one loaded. Loads take a share of the origin budget like any load, and at
//! most `min(concurrency, budget)` run at once.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use crate::context::LoadReason;
use crate::error::Error;
use crate::loaded::Loaded;
use crate::lookup::{self, LoadGuard, Lookup, Refresh, Waited, Waiter};
use crate::sync::{Arc, AtomicUsize, Mutex, Ordering};
use crate::table::Table;

/// How a warm-up went; also its progress, handed to the progress callback after each key.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct WarmReport {
    /// Keys asked for.
    pub total: usize,
    /// Keys loaded with a value.
    pub loaded: usize,
    /// Keys the loader answered "absent" for (cached as absences).
    pub absent: usize,
    /// Keys already fresh, or loaded meanwhile by another caller.
    pub skipped: usize,
    /// Keys that failed, with their errors.
    pub failed: Vec<(String, Error)>,
}

impl WarmReport {
    /// Keys dealt with so far (loaded, absent, skipped or failed).
    pub fn done(&self) -> usize {
        self.loaded + self.absent + self.skipped + self.failed.len()
    }
}

/// What became of one key.
enum Warmed {
    Loaded(bool),
    Skipped,
    Failed(Error),
}

/// The keys of one warm-up, handed out one at a time to its workers, and its report.
struct Shared<'a> {
    keys: Vec<String>,
    next: AtomicUsize,
    report: Mutex<WarmReport>,
    progress: &'a (dyn Fn(&WarmReport) + Sync),
}

impl Shared<'_> {
    fn new<I>(keys: I, progress: &(dyn Fn(&WarmReport) + Sync)) -> Shared<'_>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let keys: Vec<String> = keys.into_iter().map(|k| k.as_ref().into()).collect();
        Shared {
            report: Mutex::new(WarmReport {
                total: keys.len(),
                ..WarmReport::default()
            }),
            keys,
            next: AtomicUsize::new(0),
            progress,
        }
    }

    fn take(&self) -> Option<&str> {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        self.keys.get(i).map(String::as_str)
    }

    fn record(&self, key: &str, w: Warmed) {
        let mut r = self.report.lock();
        match w {
            Warmed::Loaded(true) => r.loaded += 1,
            Warmed::Loaded(false) => r.absent += 1,
            Warmed::Skipped => r.skipped += 1,
            Warmed::Failed(e) => r.failed.push((key.into(), e)),
        }
        (self.progress)(&r);
    }

    fn into_report(self) -> WarmReport {
        core::mem::take(&mut *self.report.lock())
    }
}

fn workers<V>(table: &Table<V>, concurrency: usize) -> usize {
    let budget = table.cfg.origin_budget.unwrap_or(usize::MAX);
    concurrency.clamp(1, budget.max(1))
}

fn outcome<V>(r: Result<Option<V>, Error>) -> Warmed {
    match r {
        Ok(v) => Warmed::Loaded(v.is_some()),
        Err(e) => Warmed::Failed(e),
    }
}

/// A progress callback that ignores the progress.
pub(crate) fn ignore(_: &WarmReport) {}

/// What a warm-up does with a key after one lookup: nothing more (fresh, or failed), load
/// it under this guard, or wait for another caller's load of it.
enum Next<V: Clone + Send + Sync + 'static> {
    Done(Warmed),
    Load(LoadGuard<V>),
    Wait(Waiter<V>),
}

/// One lookup's answer for a warm-up: a hit with a refresh is loaded like a miss.
fn next<V: Clone + Send + Sync + 'static>(step: Result<Lookup<V>, Error>) -> Next<V> {
    match step {
        Err(e) => Next::Done(Warmed::Failed(e)),
        // Fresh, or stale while someone else refreshes it: nothing to do.
        Ok(Lookup::Hit(hit)) => match hit.refresh {
            Some(g) => Next::Load(g),
            None => Next::Done(Warmed::Skipped),
        },
        Ok(Lookup::Lead(g)) => Next::Load(g),
        Ok(Lookup::Wait(w)) => Next::Wait(w),
    }
}

/// A waiter's end, for a warm-up: `Err` after a hand-over (look up again).
fn waited<V>(w: Result<Waited<V>, Error>) -> Result<Warmed, lookup::Retry> {
    match w {
        Ok(Waited::Retry(r)) => Err(r),
        Ok(_) => Ok(Warmed::Skipped),
        Err(e) => Ok(Warmed::Failed(e)),
    }
}

/// `warm` and `warm_with_progress`: on scoped threads, `concurrency` at a time.
#[cfg(feature = "std")]
pub(crate) fn warm<V, I, F, E>(
    table: &Arc<Table<V>>,
    keys: I,
    concurrency: usize,
    loader: F,
    progress: impl Fn(&WarmReport) + Sync,
) -> WarmReport
where
    V: Clone + Send + Sync + 'static,
    I: IntoIterator,
    I::Item: AsRef<str>,
    F: Fn(&str) -> Result<Option<V>, E> + Sync,
    E: Into<Box<dyn core::error::Error + Send + Sync>>,
{
    let shared = Shared::new(keys, &progress);
    let n = workers(table, concurrency).min(shared.keys.len());
    std::thread::scope(|s| {
        for _ in 0..n {
            s.spawn(|| {
                while let Some(key) = shared.take() {
                    shared.record(key, warm_one(table, key, &loader));
                }
            });
        }
    });
    shared.into_report()
}

#[cfg(feature = "std")]
fn warm_one<V, F, E>(table: &Arc<Table<V>>, key: &str, loader: &F) -> Warmed
where
    V: Clone + Send + Sync + 'static,
    F: Fn(&str) -> Result<Option<V>, E>,
    E: Into<Box<dyn core::error::Error + Send + Sync>>,
{
    use std::panic::{AssertUnwindSafe, catch_unwind};
    let mut step = lookup::lookup(table, key, Refresh::Always);
    let mut guard = loop {
        match next(step) {
            Next::Done(w) => return w,
            Next::Load(g) => break g,
            Next::Wait(w) => match waited(w.wait()) {
                Ok(w) => return w,
                Err(r) => step = lookup::lookup_again(table, key, r, Refresh::Always),
            },
        }
    };
    guard.set_reason(LoadReason::Warm);
    if let Err(e) = guard.begin_blocking() {
        return outcome(guard.give_up(e));
    }
    match catch_unwind(AssertUnwindSafe(|| loader(key))) {
        Ok(r) => outcome(guard.complete(r.map_err(crate::error::load_error))),
        Err(payload) => {
            let message = crate::error::panic_message(&*payload);
            guard.panicked(message.clone());
            Warmed::Failed(Error::LoaderPanicked { message })
        }
    }
}

/// Polls a few futures to completion, in one task.
struct JoinAll<'a> {
    futs: Vec<Option<Pin<Box<dyn Future<Output = ()> + Send + 'a>>>>,
}

impl Future for JoinAll<'_> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut pending = false;
        for slot in self.futs.iter_mut() {
            if let Some(f) = slot {
                if f.as_mut().poll(cx).is_ready() {
                    *slot = None;
                } else {
                    pending = true;
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    }
}

/// `warm_async` and `warm_async_with_progress`: `concurrency` loads at a time, all in the
/// calling task.
pub(crate) async fn warm_async<V, I, F, Fut, E>(
    table: &Arc<Table<V>>,
    keys: I,
    concurrency: usize,
    loader: F,
    progress: impl Fn(&WarmReport) + Sync,
) -> WarmReport
where
    V: Clone + Send + Sync + 'static,
    I: IntoIterator,
    I::Item: AsRef<str>,
    F: Fn(String) -> Fut + Sync,
    Fut: Future<Output = Result<Option<V>, E>> + Send + 'static,
    E: Into<Box<dyn core::error::Error + Send + Sync>>,
{
    let shared = Shared::new(keys, &progress);
    let n = workers(table, concurrency).min(shared.keys.len());
    let (shared_ref, loader) = (&shared, &loader);
    let futs = (0..n)
        .map(|_| {
            let f: Pin<Box<dyn Future<Output = ()> + Send + '_>> = Box::pin(async move {
                while let Some(key) = shared_ref.take() {
                    let w = warm_one_async(table, key, loader).await;
                    shared_ref.record(key, w);
                }
            });
            Some(f)
        })
        .collect();
    JoinAll { futs }.await;
    shared.into_report()
}

async fn warm_one_async<V, F, Fut, E>(table: &Arc<Table<V>>, key: &str, loader: &F) -> Warmed
where
    V: Clone + Send + Sync + 'static,
    F: Fn(String) -> Fut + Sync,
    Fut: Future<Output = Result<Option<V>, E>> + Send + 'static,
    E: Into<Box<dyn core::error::Error + Send + Sync>>,
{
    let mut step = lookup::lookup(table, key, Refresh::Always);
    let mut guard = loop {
        match next(step) {
            Next::Done(w) => return w,
            Next::Load(g) => break g,
            Next::Wait(w) => match waited(w.await) {
                Ok(w) => return w,
                Err(r) => step = lookup::lookup_again(table, key, r, Refresh::Always),
            },
        }
    };
    guard.set_reason(LoadReason::Warm);
    if let Err(e) = guard.begin().await {
        return outcome(guard.give_up(e));
    }
    let fut = loader(key.into());
    let fut = Box::pin(async move { fut.await.map(Loaded::from) });
    match crate::asynchronous::lead(table, guard, fut, false).await {
        Ok(answer) => outcome(answer),
        Err((_, e)) => outcome::<V>(Err(e)),
    }
}
