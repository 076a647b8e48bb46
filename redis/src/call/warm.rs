//! Warm-ups (`warm(keys, loader)`): the keys that are not fresh are loaded, a few at a
//! time and within the origin budget, so that a restart meets traffic warm.
//!
//! Every key goes through a [`Call`] like any caller's, in warm-up mode: a fresh key is
//! skipped, a key another caller loads is waited for (and skipped), a stale key is
//! refreshed in the foreground, a missing one loaded; the loader is told
//! [`LoadReason::Warm`](herdless::LoadReason::Warm). [`WarmPlan`] holds the decisions (how
//! many at once, what each key's end counts as, the report); [`Warm`] drives a plan's calls
//! together in one task, for languages that wait on an event loop; a language whose loaders
//! block runs [`WarmPlan::workers`] threads, each taking keys with [`WarmPlan::next`].

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use herdless::{Error, WarmReport};

use super::{Call, CallOptions, Failure, Lang, Runtime};
use crate::two_tier::TwoTier;

/// How many keys a warm-up loads at once when its caller does not say.
pub const DEFAULT_WARM_CONCURRENCY: usize = 4;

/// How many keys a warm-up of `keys` keys loads at once: `concurrency` (default
/// [`DEFAULT_WARM_CONCURRENCY`]), at least 1, never more than `origin_budget` (the rest would
/// only queue on it, and time out behind slow loads) nor than the keys. [`WarmPlan::new`]'s
/// rule, for the languages that drive their warm-ups themselves.
pub fn warm_workers(
    concurrency: Option<usize>,
    origin_budget: Option<usize>,
    keys: usize,
) -> usize {
    let budget = origin_budget.unwrap_or(usize::MAX);
    concurrency
        .unwrap_or(DEFAULT_WARM_CONCURRENCY)
        .clamp(1, budget.max(1))
        .min(keys.max(1))
}

/// What became of one key of a warm-up.
#[derive(Debug)]
pub enum Warmed {
    /// Loaded by this warm-up: with a value (`true`) or an absence.
    Loaded(bool),
    /// Fresh already, or loaded by another caller meanwhile.
    Skipped,
    /// Its load failed.
    Failed(Error),
}

impl Warmed {
    /// What `answer` counts as, for a call that ran its loader (`ran`) or not.
    pub fn of<V>(ran: bool, answer: &Result<Option<V>, Error>) -> Self {
        match answer {
            Err(e) => Warmed::Failed(e.clone()),
            Ok(v) if ran => Warmed::Loaded(v.is_some()),
            Ok(_) => Warmed::Skipped,
        }
    }
}

/// The decisions of one warm-up: its keys, how many load at once, its report.
#[derive(Debug)]
pub struct WarmPlan {
    keys: Vec<String>,
    next: AtomicUsize,
    workers: usize,
    options: CallOptions,
    report: Mutex<WarmReport>,
}

impl WarmPlan {
    /// A warm-up of `keys` over `tt`: at most `concurrency` loads at once (default
    /// [`DEFAULT_WARM_CONCURRENCY`]), never more than the origin budget; `options` hold the
    /// ttl (and tags) of the values it loads.
    pub fn new<V: Clone + Send + Sync + 'static>(
        tt: &TwoTier<V>,
        keys: Vec<String>,
        concurrency: Option<usize>,
        mut options: CallOptions,
    ) -> Self {
        let workers = warm_workers(concurrency, tt.l1().options().origin_budget, keys.len());
        options.warm = true;
        let mut report = WarmReport::default();
        report.total = keys.len();
        Self {
            keys,
            next: AtomicUsize::new(0),
            workers,
            options,
            report: Mutex::new(report),
        }
    }

    /// How many keys load at once.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// The next key to warm, if any is left.
    pub fn next(&self) -> Option<&str> {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        self.keys.get(i).map(String::as_str)
    }

    /// The call of `key` a worker makes (warm-up mode, the plan's options).
    pub fn call<V: Clone + Send + Sync + 'static, L: Lang<V>>(
        &self,
        tt: &TwoTier<V>,
        key: &str,
        loader: L::Loader,
    ) -> Call<V, L> {
        Call::lookup(tt, key, loader, self.options.clone())
    }

    /// Records what became of `key`; the report so far (for a progress callback).
    pub fn record(&self, key: &str, warmed: Warmed) -> WarmReport {
        let mut r = self.report.lock().unwrap_or_else(|e| e.into_inner());
        match warmed {
            Warmed::Loaded(true) => r.loaded += 1,
            Warmed::Loaded(false) => r.absent += 1,
            Warmed::Skipped => r.skipped += 1,
            Warmed::Failed(e) => r.failed.push((key.to_owned(), e)),
        }
        r.clone()
    }

    /// The report.
    pub fn report(&self) -> WarmReport {
        self.report
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// A warm-up driven in one task: [`WarmPlan::workers`] calls at a time. Poll it with
/// [`poll_warm`](Self::poll_warm).
pub struct Warm<V: Clone + Send + Sync + 'static, L: Lang<V>, M> {
    tt: TwoTier<V>,
    plan: WarmPlan,
    /// Makes the loader of one key.
    make: M,
    running: Vec<Call<V, L>>,
}

impl<V, L, M> Warm<V, L, M>
where
    V: Clone + Send + Sync + 'static,
    L: Lang<V>,
    M: FnMut(&str) -> L::Loader,
{
    /// A warm-up of `plan` over `tt`; `make(key)` is the loader of `key`.
    pub fn new(tt: &TwoTier<V>, plan: WarmPlan, make: M) -> Self {
        Self {
            tt: tt.clone(),
            plan,
            make,
            running: Vec::new(),
        }
    }

    /// Whether one of its calls sleeps until a waker fires (see [`Call::is_parked`]): a
    /// runtime whose process must stay alive for wakers keeps it alive then.
    pub fn is_parked(&self) -> bool {
        self.running.iter().any(Call::is_parked)
    }

    /// Drives the warm-up on; `progress` is told the report after each key. Ready with the
    /// report, or with what a loader raised that was not its answer (the warm-up stops; its
    /// other calls are dropped, handing their loads over).
    pub fn poll_warm<R: Runtime<V, L>>(
        &mut self,
        cx: &mut Context<'_>,
        rt: &R,
        progress: &mut dyn FnMut(&WarmReport),
    ) -> Poll<Result<WarmReport, L::Raise>> {
        loop {
            while self.running.len() < self.plan.workers() {
                let Some(key) = self.plan.next() else { break };
                let key = key.to_owned();
                let loader = (self.make)(&key);
                self.running.push(self.plan.call(&self.tt, &key, loader));
            }
            if self.running.is_empty() {
                return Poll::Ready(Ok(self.plan.report()));
            }
            let mut ended = false;
            let mut i = 0;
            while i < self.running.len() {
                let answer = match self.running[i].poll_call(cx, rt) {
                    Poll::Pending => {
                        i += 1;
                        continue;
                    }
                    Poll::Ready(a) => a,
                };
                let call = self.running.swap_remove(i);
                let answer = match answer {
                    Ok(v) => Ok(v),
                    Err(Failure::Error(e)) => Err(e),
                    Err(Failure::Raise(x)) => {
                        self.running.clear();
                        return Poll::Ready(Err(x));
                    }
                };
                let report = self
                    .plan
                    .record(call.key(), Warmed::of(call.ran_loader(), &answer));
                progress(&report);
                ended = true;
            }
            if !ended {
                return Poll::Pending;
            }
        }
    }
}

impl<V: Clone + Send + Sync + 'static, L: Lang<V>, M> std::fmt::Debug for Warm<V, L, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Warm")
            .field("plan", &self.plan)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::{DEFAULT_WARM_CONCURRENCY, warm_workers};

    #[test]
    fn warm_workers_default_budget_and_keys() {
        assert_eq!(warm_workers(None, None, 100), DEFAULT_WARM_CONCURRENCY);
        assert_eq!(warm_workers(Some(16), None, 100), 16);
        // Never more than the origin budget, nor than the keys; never 0.
        assert_eq!(warm_workers(Some(16), Some(3), 100), 3);
        assert_eq!(warm_workers(None, Some(2), 100), 2);
        assert_eq!(warm_workers(None, None, 2), 2);
        assert_eq!(warm_workers(Some(0), None, 100), 1);
        assert_eq!(warm_workers(None, Some(0), 100), 1);
        assert_eq!(warm_workers(None, None, 0), 1);
    }
}
