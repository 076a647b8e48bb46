//! Batch loads of a [`TieredCache`]: the L1's batch waves (the core's
//! [`Batch`](herdless::driver::Batch)), the fleet part of each loader call asked at once
//! ([`TwoTier::lead_many`](crate::TwoTier::lead_many)), one loader call for every key the
//! fleet hands this process, and the rest of each key's steps driven together.

use std::collections::HashMap;
use std::error::Error as StdError;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use herdless::driver::{self, Timer};
use herdless::{Error, LoadError, LoadGuard, Waited};

use super::{Runner, TieredCache, load_error};
use crate::codec::Codec;
use crate::runtime::block_on;
use crate::two_tier::{Deadline, Load, Pending, Step, Versioned};

/// What a batch answers for one key.
type Answer<V> = Result<Option<V>, Error>;

impl<V, C> TieredCache<V, C>
where
    V: Clone + Send + Sync + 'static,
    C: Codec<V> + Send + Sync + 'static,
{
    /// The values of `keys`, in their order (duplicates allowed): from L1, else from
    /// Redis, else loaded with one call of `loader` for all the keys this process loads
    /// for the fleet; each key stays single-flight in the whole fleet (a key another
    /// process loads is waited for and answered as it lands). The loader's contract and
    /// the per-key answers are [`Cache::get_or_load_many`](herdless::Cache::get_or_load_many)'s.
    ///
    /// Redis sees one round trip for the locks and entries of the keys this process leads
    /// (one per Cluster slot group, i.e. per namespace, on a Cluster), then one publish
    /// per loaded key, sent together.
    pub async fn get_or_load_many_async<I, F, Fut, R, E>(
        &self,
        keys: I,
        loader: F,
    ) -> Vec<Answer<V>>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
        F: Fn(Vec<String>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, E>> + Send + 'static,
        R: IntoIterator<Item = (String, Option<V>)>,
        E: Into<Box<dyn StdError + Send + Sync>>,
    {
        self.many(keys, Arc::new(loader), Runner::Task).await
    }

    /// [`get_or_load_many_async`](Self::get_or_load_many_async), blocking, with a blocking
    /// loader run on this thread (background refreshes get a thread of their own).
    /// Called on the backend's own threads, every key answers
    /// [`crate::Error::BlockingInRuntime`] (as [`Error::Backend`]).
    pub fn get_or_load_many<I, F, R, E>(&self, keys: I, loader: F) -> Vec<Answer<V>>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
        F: Fn(&[String]) -> Result<R, E> + Send + Sync + 'static,
        R: IntoIterator<Item = (String, Option<V>)>,
        E: Into<Box<dyn StdError + Send + Sync>>,
    {
        let keys: Vec<String> = keys.into_iter().map(|k| k.as_ref().to_owned()).collect();
        let n = keys.len();
        // Answers made `Send` here: the batch's background refresh carries them.
        let loader = Arc::new(move |keys: Vec<String>| {
            let answer = loader(&keys)
                .map(|found| found.into_iter().collect::<Vec<_>>())
                .map_err(Into::<Box<dyn StdError + Send + Sync>>::into);
            std::future::ready(answer)
        });
        match block_on(self.many(keys, loader, Runner::Thread)) {
            Ok(answers) => answers,
            Err(e) => {
                let e = Error::from(e);
                (0..n).map(|_| Err(e.clone())).collect()
            }
        }
    }

    async fn many<I, F, Fut, R, E>(&self, keys: I, loader: Arc<F>, runner: Runner) -> Vec<Answer<V>>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
        F: Fn(Vec<String>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, E>> + Send + 'static,
        R: IntoIterator<Item = (String, Option<V>)>,
        E: Into<Box<dyn StdError + Send + Sync>>,
    {
        let mut batch = driver::batch(self.tt.l1(), keys);
        while let Some(wave) = batch.wave() {
            // Refreshes of stale and XFetch hits: one background call, under one unit of
            // the budget if it has room now (otherwise handed over).
            let mut refresh: Vec<(LoadGuard<Versioned<V>>, u64)> = Vec::new();
            let mut guards: Vec<LoadGuard<Versioned<V>>> = Vec::new();
            for (i, g) in wave.refreshes {
                let have = match batch.answered(i) {
                    Some(Ok(Some(v))) => v.version,
                    _ => 0,
                };
                refresh.push((g, have));
            }
            if !refresh.is_empty() {
                let haves: Vec<u64> = refresh.iter().map(|(_, h)| *h).collect();
                guards.extend(refresh.into_iter().map(|(g, _)| g));
                if driver::try_begin_batch(&mut guards) {
                    let refresh = guards.drain(..).zip(haves).collect();
                    let (this, loader) = (self.clone(), loader.clone());
                    self.spawn_job(
                        async move {
                            let _ = this.lead_call(refresh, true, &*loader, None).await;
                        },
                        runner,
                    );
                }
                guards.clear();
            }
            let max = batch.max_batch().max(1);
            let mut leads = wave.leads;
            while !leads.is_empty() {
                let rest = leads.split_off(leads.len().min(max));
                let call = std::mem::replace(&mut leads, rest);
                let (index, guards): (Vec<usize>, Vec<_>) = call.into_iter().unzip();
                let guards = guards.into_iter().map(|g| (g, 0)).collect();
                let answers = self
                    .lead_call(guards, false, &*loader, Some((&loader, runner)))
                    .await;
                for (i, a) in index.into_iter().zip(answers) {
                    // Rewrapped only to be handed back by `finish`; nothing reads its version.
                    batch.answer(i, a.map(|v| v.map(Versioned::local)));
                }
            }
            for (i, waiter) in wave.waits {
                match waiter.await {
                    Ok(Waited::Loaded(v)) => batch.answer(i, Ok(v)),
                    Ok(Waited::Stale(v)) => batch.answer(i, Ok(Some(v))),
                    Ok(Waited::Retry(r)) => batch.retry(i, r),
                    Err(e) => batch.answer(i, Err(e)),
                }
            }
        }
        batch
            .finish()
            .into_iter()
            .map(|a| a.map(|v| v.map(|v| v.value)))
            .collect()
    }

    /// One loader call's keys, led in this process: asked of the fleet together, then one
    /// loader call for those the fleet hands this process, then every key driven to its
    /// answer. `spawner`: where a detached fleet refresh (a foreground key served stale
    /// within grace) runs its one batched loader call; `None` in the background.
    async fn lead_call<F, Fut, R, E>(
        &self,
        guards: Vec<(LoadGuard<Versioned<V>>, u64)>,
        background: bool,
        loader: &F,
        spawner: Option<(&Arc<F>, Runner)>,
    ) -> Vec<Answer<V>>
    where
        F: Fn(Vec<String>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, E>> + Send + 'static,
        R: IntoIterator<Item = (String, Option<V>)>,
        E: Into<Box<dyn StdError + Send + Sync>>,
    {
        let n = guards.len();
        let mut answers: Vec<Option<Answer<V>>> = (0..n).map(|_| None).collect();
        let replies = self.tt.lead_many(guards, background).await;
        let steps = replies
            .into_iter()
            .map(|r| r.next(&*self.codec))
            .enumerate()
            .collect();
        let (loads, detached) = self.settle(steps, &mut answers).await;
        if !detached.is_empty()
            && let Some((loader, runner)) = spawner
        {
            let (this, loader) = (self.clone(), loader.clone());
            let detached: Vec<_> = detached.into_iter().enumerate().collect();
            self.spawn_job(
                async move {
                    let mut ignored = (0..detached.len()).map(|_| None).collect::<Vec<_>>();
                    let steps = this.call(detached, &*loader, None).await;
                    let _ = this.settle(steps, &mut ignored).await;
                },
                runner,
            );
        }
        if !loads.is_empty() {
            let permit = if background {
                None // the refresh's guards began under one unit already
            } else {
                match self.permit().await {
                    Ok(p) => Some(p),
                    Err(e) => {
                        for (i, load) in loads {
                            answers[i] = Some(settled(load.fail(e.clone())));
                        }
                        return finish(answers);
                    }
                }
            };
            let steps = self.call(loads, loader, Some(permit)).await;
            let (more, _) = self.settle(steps, &mut answers).await;
            debug_assert!(more.is_empty(), "a loaded key does not load again");
        }
        finish(answers)
    }

    /// Waits for one unit of the origin budget for a loader call, until the earliest wait
    /// deadline of its keys.
    async fn permit(&self) -> Result<driver::OriginPermit, Error> {
        let l1 = self.tt.l1();
        if let Some(p) = driver::try_origin_permit(l1) {
            return Ok(p);
        }
        let arrived = l1.clock().now();
        let deadline = arrived + l1.options().wait_timeout;
        let mut acquire = Box::pin(driver::origin_permit(l1));
        let mut timer = Timer::default();
        std::future::poll_fn(|cx| {
            if let Poll::Ready(p) = acquire.as_mut().poll(cx) {
                return Poll::Ready(Ok(p));
            }
            match timer.poll_at(l1.clock(), deadline, cx) {
                Poll::Ready(()) => Poll::Ready(Err(Error::WaitTimeout {
                    waited: l1.clock().now().saturating_sub(arrived),
                })),
                Poll::Pending => Poll::Pending,
            }
        })
        .await
    }

    /// Makes one loader call for `loads` and hands each its key's answer: a key the loader
    /// omitted is absent, an error of the call is every key's. Past the hard timeout the
    /// call is dropped and every load times out; a panic is re-raised once the loads know.
    async fn call<F, Fut, R, E>(
        &self,
        loads: Vec<(usize, Load<V>)>,
        loader: &F,
        permit: Option<Option<driver::OriginPermit>>,
    ) -> Vec<(usize, Step<V>)>
    where
        F: Fn(Vec<String>) -> Fut,
        Fut: Future<Output = Result<R, E>>,
        R: IntoIterator<Item = (String, Option<V>)>,
        E: Into<Box<dyn StdError + Send + Sync>>,
    {
        let keys: Vec<String> = loads.iter().map(|(_, l)| l.key().to_owned()).collect();
        driver::count_batch_call(self.tt.l1(), &keys);
        let mut loads = loads;
        let mut fut = Box::pin(loader(keys));
        let ended = std::future::poll_fn(|cx| {
            match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
                Ok(Poll::Ready(r)) => return Poll::Ready(Ok(r)),
                Ok(Poll::Pending) => {}
                Err(payload) => return Poll::Ready(Err(Some(payload))),
            }
            // The keys began together: the first one's hard deadline is the call's.
            let Some((_, first)) = loads.first_mut() else {
                return Poll::Pending;
            };
            loop {
                match first.poll_deadline(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Deadline::Hard) => return Poll::Ready(Err(None)),
                    // A batch's caller has no soft timeout of its own.
                    Poll::Ready(Deadline::Soft) => {}
                }
            }
        })
        .await;
        let steps = match ended {
            Ok(Ok(found)) => {
                let mut found: HashMap<String, Option<V>> = found.into_iter().collect();
                loads
                    .into_iter()
                    .map(|(i, load)| {
                        let v = found.remove(load.key()).flatten();
                        (i, load.loaded(Ok(v), &*self.codec))
                    })
                    .collect()
            }
            Ok(Err(e)) => {
                let e = load_error(e);
                loads
                    .into_iter()
                    .map(|(i, load)| (i, load.loaded(Err(e.clone()), &*self.codec)))
                    .collect()
            }
            Err(None) => loads
                .into_iter()
                .map(|(i, load)| (i, load.timed_out()))
                .collect(),
            Err(Some(payload)) => {
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| payload.downcast_ref::<String>().cloned());
                for (_, load) in loads {
                    load.panicked(message.clone());
                }
                resume_unwind(payload)
            }
        };
        drop(permit);
        steps
    }

    /// Drives `steps` together until each is answered (into `answers`), a load to make
    /// (returned first), or a detached refresh of a key served stale (returned second).
    async fn settle(
        &self,
        mut steps: Vec<(usize, Step<V>)>,
        answers: &mut [Option<Answer<V>>],
    ) -> (Vec<(usize, Load<V>)>, Vec<Load<V>>) {
        let (mut loads, mut detached) = (Vec::new(), Vec::new());
        while !steps.is_empty() {
            let mut tier = Vec::new();
            for (i, step) in steps.drain(..) {
                match step {
                    Step::Done(r) => answers[i] = Some(r),
                    Step::Load(load) => loads.push((i, load)),
                    Step::Stale(v, refresh) => {
                        answers[i] = Some(Ok(Some(v)));
                        detached.extend(refresh);
                    }
                    // Rust codecs are never interrupted.
                    Step::Interrupted(e) => answers[i] = Some(Err(Error::Load(LoadError::new(e)))),
                    Step::Tier(pending) => tier.push((i, pending)),
                }
            }
            let (index, pending): (Vec<usize>, Vec<_>) = tier.into_iter().unzip();
            for (i, reply) in index.into_iter().zip(join_all(pending).await) {
                steps.push((i, reply.next(&*self.codec)));
            }
        }
        (loads, detached)
    }
}

fn settled<V>(step: Step<V>) -> Answer<V>
where
    V: Clone + Send + Sync + 'static,
{
    match step {
        Step::Done(r) => r,
        _ => Err(Error::LoaderPanicked { message: None }),
    }
}

fn finish<V>(answers: Vec<Option<Answer<V>>>) -> Vec<Answer<V>> {
    answers
        .into_iter()
        .map(|a| a.unwrap_or(Err(Error::LoaderPanicked { message: None })))
        .collect()
}

/// Awaits every operation of the shared tier at once (a multiplexed connection pipelines
/// what is sent together); the answers in order.
async fn join_all<T>(mut pending: Vec<Pending<T>>) -> Vec<T> {
    let mut out: Vec<Option<T>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx: &mut Context<'_>| {
        let mut done = true;
        for (slot, p) in out.iter_mut().zip(pending.iter_mut()) {
            if slot.is_none() {
                match Pin::new(p).poll(cx) {
                    Poll::Ready(v) => *slot = Some(v),
                    Poll::Pending => done = false,
                }
            }
        }
        if done { Poll::Ready(()) } else { Poll::Pending }
    })
    .await;
    out.into_iter()
        .map(|v| v.expect("every operation ended"))
        .collect()
}
