//! Pre-warming: `warm(keys, loader)` loads the keys that are not fresh, a few at
//! a time and within the origin budget, so a restart (or a green deployment) meets traffic
//! warm instead of sending the whole cold cache to the origin.
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

use crate::engine::Cache;
use crate::error::Error;
use crate::lookup::{Lookup, Waited};
use crate::sync::{AtomicUsize, Mutex, Ordering};

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

fn workers<V: Clone + Send + Sync + 'static>(cache: &Cache<V>, concurrency: usize) -> usize {
    let budget = cache.inner.cfg.origin_budget.unwrap_or(usize::MAX);
    concurrency.clamp(1, budget.max(1))
}

fn outcome<V>(r: Result<Option<V>, Error>) -> Warmed {
    match r {
        Ok(v) => Warmed::Loaded(v.is_some()),
        Err(e) => Warmed::Failed(e),
    }
}

fn ignore(_: &WarmReport) {}

#[cfg(feature = "std")]
impl<V: Clone + Send + Sync + 'static> Cache<V> {
    /// Loads `keys` that are not fresh with `loader`, `concurrency` at a time (never more
    /// than the origin budget), on scoped threads; returns what happened to each key.
    ///
    /// A loader error or panic fails that key only (waiters of that load get the error, as
    /// with [`get_or_load`](Self::get_or_load)); the warm-up goes on.
    ///
    /// ```
    /// let cache = herdless::Cache::<u64>::new();
    /// let report = cache.warm(["n:1", "n:2"], 4, |key: &str| {
    ///     Ok::<_, std::io::Error>(Some(key.len() as u64))
    /// });
    /// assert_eq!(report.loaded, 2);
    /// assert_eq!(cache.get("n:1"), Some(3));
    /// ```
    pub fn warm<I, F, E>(&self, keys: I, concurrency: usize, loader: F) -> WarmReport
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
        F: Fn(&str) -> Result<Option<V>, E> + Sync,
        E: Into<Box<dyn core::error::Error + Send + Sync>>,
    {
        self.warm_with_progress(keys, concurrency, loader, ignore)
    }

    /// [`warm`](Self::warm), calling `progress` with the report so far after each key.
    pub fn warm_with_progress<I, F, E>(
        &self,
        keys: I,
        concurrency: usize,
        loader: F,
        progress: impl Fn(&WarmReport) + Sync,
    ) -> WarmReport
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
        F: Fn(&str) -> Result<Option<V>, E> + Sync,
        E: Into<Box<dyn core::error::Error + Send + Sync>>,
    {
        let shared = Shared::new(keys, &progress);
        let n = workers(self, concurrency).min(shared.keys.len());
        std::thread::scope(|s| {
            for _ in 0..n {
                s.spawn(|| {
                    while let Some(key) = shared.take() {
                        shared.record(key, self.warm_one(key, &loader));
                    }
                });
            }
        });
        shared.into_report()
    }

    fn warm_one<F, E>(&self, key: &str, loader: &F) -> Warmed
    where
        F: Fn(&str) -> Result<Option<V>, E>,
        E: Into<Box<dyn core::error::Error + Send + Sync>>,
    {
        use std::panic::{AssertUnwindSafe, catch_unwind};
        let mut step = self.lookup(key);
        loop {
            let mut guard = match step {
                Err(e) => return Warmed::Failed(e),
                // Fresh, or stale while someone else refreshes it: nothing to do.
                Ok(Lookup::Hit(hit)) => match hit.refresh {
                    Some(g) => g,
                    None => return Warmed::Skipped,
                },
                Ok(Lookup::Wait(w)) => match w.wait() {
                    Ok(Waited::Retry(r)) => {
                        step = self.lookup_again(key, r);
                        continue;
                    }
                    Ok(_) => return Warmed::Skipped,
                    Err(e) => return Warmed::Failed(e),
                },
                Ok(Lookup::Lead(g)) => g,
            };
            if let Err(e) = guard.begin_blocking() {
                return outcome(guard.fail(e));
            }
            return match catch_unwind(AssertUnwindSafe(|| loader(key))) {
                Ok(r) => outcome(guard.complete(r.map_err(super::load_error))),
                Err(payload) => {
                    let message = super::blocking::panic_message(&*payload);
                    guard.panicked(message.clone());
                    Warmed::Failed(Error::LoaderPanicked { message })
                }
            };
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

impl<V: Clone + Send + Sync + 'static> Cache<V> {
    /// [`warm`](Self::warm) with an async loader, on any executor: `concurrency` loads at
    /// a time (never more than the origin budget), all in the calling task.
    ///
    /// # Panics
    /// With `std`, a panic of the loader is re-raised here after that load's waiters
    /// received [`Error::LoaderPanicked`].
    pub async fn warm_async<I, F, Fut, E>(
        &self,
        keys: I,
        concurrency: usize,
        loader: F,
    ) -> WarmReport
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
        F: Fn(String) -> Fut + Sync,
        Fut: Future<Output = Result<Option<V>, E>> + Send + 'static,
        E: Into<Box<dyn core::error::Error + Send + Sync>>,
    {
        self.warm_async_with_progress(keys, concurrency, loader, ignore)
            .await
    }

    /// [`warm_async`](Self::warm_async), calling `progress` with the report so far after
    /// each key.
    pub async fn warm_async_with_progress<I, F, Fut, E>(
        &self,
        keys: I,
        concurrency: usize,
        loader: F,
        progress: impl Fn(&WarmReport) + Sync,
    ) -> WarmReport
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
        F: Fn(String) -> Fut + Sync,
        Fut: Future<Output = Result<Option<V>, E>> + Send + 'static,
        E: Into<Box<dyn core::error::Error + Send + Sync>>,
    {
        let shared = Shared::new(keys, &progress);
        let n = workers(self, concurrency).min(shared.keys.len());
        let (shared_ref, loader) = (&shared, &loader);
        let futs = (0..n)
            .map(|_| {
                let f: Pin<Box<dyn Future<Output = ()> + Send + '_>> = Box::pin(async move {
                    while let Some(key) = shared_ref.take() {
                        let w = self.warm_one_async(key, loader).await;
                        shared_ref.record(key, w);
                    }
                });
                Some(f)
            })
            .collect();
        JoinAll { futs }.await;
        shared.into_report()
    }

    async fn warm_one_async<F, Fut, E>(&self, key: &str, loader: &F) -> Warmed
    where
        F: Fn(String) -> Fut + Sync,
        Fut: Future<Output = Result<Option<V>, E>> + Send + 'static,
        E: Into<Box<dyn core::error::Error + Send + Sync>>,
    {
        let mut step = self.lookup(key);
        loop {
            let mut guard = match step {
                Err(e) => return Warmed::Failed(e),
                Ok(Lookup::Hit(hit)) => match hit.refresh {
                    Some(g) => g,
                    None => return Warmed::Skipped,
                },
                Ok(Lookup::Wait(w)) => match w.await {
                    Ok(Waited::Retry(r)) => {
                        step = self.lookup_again(key, r);
                        continue;
                    }
                    Ok(_) => return Warmed::Skipped,
                    Err(e) => return Warmed::Failed(e),
                },
                Ok(Lookup::Lead(g)) => g,
            };
            if let Err(e) = guard.begin().await {
                return outcome(guard.fail(e));
            }
            let fut = Box::pin(loader(key.into()));
            return outcome(self.lead(guard, fut).await);
        }
    }
}
