//! [`Many`]: a batch load (`get_or_load_many`) of the fleet engine, decided once and driven
//! by every language, as [`Step`] is for a single key.
//!
//! The machine runs the core's batch waves over the L1 ([`driver::batch`]): hits are
//! answered; the keys this process leads go to the fleet together, `max_batch` per loader
//! call ([`TwoTier::lead_many`]); each key's answer then steps on as a single load's (an
//! entry another process wrote is adopted, a won lock is a load); every load of the call is
//! made by ONE loader call under one unit of the origin budget; a key the loader omits is
//! absent; the publishes are awaited together. Keys other callers of this process load are
//! waited for after the leads are done (a batch never waits holding a flight). Refreshes
//! (stale-while-revalidate, XFetch, a fleet-wide stale entry) are handed to the driver as
//! a [`Many`] of their own to run in the background.
//!
//! A driver loops on [`Many::step`] and does what each [`ManyStep`] says:
//!
//! ```text
//! Tier(pending)  await it, then many.resume(reply)
//! Load(keys)     call the loader once with keys (watching many.poll_deadline), then
//!                many.loaded(result, host) | many.timed_out() | many.panicked(msg)
//! Wait(i, w)     await the waiter, then many.waited(i, result)
//! Refresh(m)     drive m the same way in the background, with the same loader
//! Done(answers)  the answers, in the order of the keys
//! ```

use std::collections::HashMap;
use std::task::{Context, Poll};

use herdless::driver::{self, Batch, OriginPermit, Timer, chunks_of};
use herdless::{Error, LoadError, LoadGuard, Loaded, Waited, Waiter};

use super::{Deadline, Host, Load, Pending, Reply, Step, TwoTier, Versioned};
use crate::join::join_all;

/// What a batch answers for one key: the value, `None` for an absence, or its error.
pub type ManyAnswer<V> = Result<Option<V>, Error>;

/// What a driver of a [`Many`] does next.
#[must_use = "a batch must be driven to its end, or its keys are handed over"]
pub enum ManyStep<V: Clone + Send + Sync + 'static> {
    /// Await this, then hand its output to [`Many::resume`].
    Tier(Pending<Resume<V>>),
    /// Call the loader once with these keys, then [`Many::loaded`] (or
    /// [`Many::timed_out`] once [`Many::poll_deadline`] says so, or [`Many::panicked`]).
    Load(Vec<String>),
    /// Await this waiter of key `.0` (a Future, or block on it), then [`Many::waited`].
    Wait(usize, Waiter<Versioned<V>>),
    /// A batch of refreshes: drive it like this one, in the background, with the same
    /// loader; nobody awaits its answers.
    Refresh(Box<Many<V>>),
    /// The answers, in the order of the keys (duplicates included).
    Done(Vec<ManyAnswer<V>>),
}

/// A key a batch leads in this process: its index, its flight, and the version of the
/// value a refresh replaces (0 for a miss).
type Lead<V> = (usize, LoadGuard<Versioned<V>>, u64);

/// What a [`ManyStep::Tier`] resolved to, for [`Many::resume`].
pub struct Resume<V: Clone + Send + Sync + 'static>(Resumed<V>);

enum Resumed<V: Clone + Send + Sync + 'static> {
    /// The shared tier's replies for keys of the call in progress.
    Replies(Vec<(usize, Reply<V>)>),
    /// The wait for the call's unit of the origin budget ended.
    Permit(Result<OriginPermit, Error>),
}

/// One loader call's keys, from the fleet's answer to their publishes.
struct Call<V: Clone + Send + Sync + 'static> {
    /// Steps to take, each with its key's index in the batch (or in `answers` of a
    /// detached refresh).
    steps: Vec<(usize, Step<V>)>,
    /// Loads of the call, gathered until the loader is called.
    loads: Vec<(usize, Load<V>)>,
    /// The call's unit of the origin budget, held until its keys are published.
    permit: Option<OriginPermit>,
    /// The loads already began under a unit (a refresh), or the permit was taken.
    covered: bool,
    /// The loader was called (its loads were handed their answers).
    called: bool,
    /// Loads of keys served stale within grace, refreshed for the fleet in the background.
    detached: Vec<Load<V>>,
    /// Fleet waits for keys other processes load, taken once this call's own loads are
    /// done: a batch never waits while it holds fleet locks.
    later: Vec<(usize, Step<V>)>,
}

/// A batch load in progress (see the module docs).
pub struct Many<V: Clone + Send + Sync + 'static> {
    tt: TwoTier<V>,
    /// The batch of the L1; `None` for a detached refresh (its loads are all there is).
    batch: Option<Batch<Versioned<V>>>,
    /// Answers of a batch without L1 keys (a detached refresh): dropped.
    loose: Vec<Option<ManyAnswer<V>>>,
    /// Loader calls to make, each its guards (with the version a refresh replaces).
    calls: Vec<Vec<Lead<V>>>,
    call: Option<Call<V>>,
    waits: Vec<(usize, Waiter<Versioned<V>>)>,
    /// Whether this is a batch of refreshes (run in the background).
    background: bool,
}

impl<V: Clone + Send + Sync + 'static> std::fmt::Debug for Many<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Many")
            .field("background", &self.background)
            .finish_non_exhaustive()
    }
}

impl<V: Clone + Send + Sync + 'static> TwoTier<V> {
    /// A batch load of `keys` (see [`Many`]).
    pub fn get_many<I>(&self, keys: I) -> Many<V>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        Many {
            tt: self.clone(),
            batch: Some(driver::batch(self.l1(), keys)),
            loose: Vec::new(),
            calls: Vec::new(),
            call: None,
            waits: Vec::new(),
            background: false,
        }
    }
}

impl<V: Clone + Send + Sync + 'static> Many<V> {
    /// A batch of background refreshes: `guards` began under one unit of the budget.
    fn refreshes(tt: TwoTier<V>, guards: Vec<Lead<V>>) -> Self {
        let mut calls = chunks_of(guards, tt.l1().options().max_batch);
        calls.reverse();
        Self {
            tt,
            batch: None,
            loose: Vec::new(),
            calls,
            call: None,
            waits: Vec::new(),
            background: true,
        }
    }

    /// Fleet refreshes of keys served stale within grace (each load holds its own share
    /// of the budget): one loader call for them, in the background.
    fn detached(tt: TwoTier<V>, loads: Vec<Load<V>>) -> Self {
        let loose = loads.iter().map(|_| None).collect();
        let call = Call {
            steps: Vec::new(),
            loads: loads.into_iter().enumerate().collect(),
            permit: None,
            covered: true,
            called: false,
            detached: Vec::new(),
            later: Vec::new(),
        };
        Self {
            tt,
            batch: None,
            loose,
            calls: Vec::new(),
            call: Some(call),
            waits: Vec::new(),
            background: true,
        }
    }

    fn answer(&mut self, i: usize, a: ManyAnswer<V>) {
        match &mut self.batch {
            // Rewrapped only to be handed back by `finish`; nothing reads its version.
            Some(b) => b.answer(i, a.map(|v| v.map(Versioned::local))),
            None => {
                if let Some(slot) = self.loose.get_mut(i) {
                    *slot = Some(a);
                }
            }
        }
    }

    /// The next thing to do.
    pub fn step(&mut self) -> ManyStep<V> {
        loop {
            if let Some(step) = self.step_call() {
                return step;
            }
            if let Some(guards) = self.calls.pop() {
                let background = self.background;
                let (index, guards): (Vec<usize>, Vec<_>) = guards
                    .into_iter()
                    .map(|(i, g, have)| (i, (g, have)))
                    .unzip();
                let pending = self.tt.lead_many(guards, background);
                self.call = Some(Call {
                    steps: Vec::new(),
                    loads: Vec::new(),
                    permit: None,
                    covered: background,
                    called: false,
                    detached: Vec::new(),
                    later: Vec::new(),
                });
                return ManyStep::Tier(Pending::new(async move {
                    let replies = pending.await;
                    Resume(Resumed::Replies(index.into_iter().zip(replies).collect()))
                }));
            }
            if let Some((i, waiter)) = self.waits.pop() {
                return ManyStep::Wait(i, waiter);
            }
            let Some(batch) = &mut self.batch else {
                return ManyStep::Done(Vec::new());
            };
            let Some(wave) = batch.wave() else {
                let answers = self.batch.take().expect("checked").finish();
                return ManyStep::Done(
                    answers
                        .into_iter()
                        .map(|a| a.map(|v| v.map(|v| v.value)))
                        .collect(),
                );
            };
            let leads: Vec<_> = wave.leads.into_iter().map(|(i, g)| (i, g, 0)).collect();
            let mut calls = chunks_of(leads, batch.max_batch());
            calls.reverse();
            self.calls = calls;
            self.waits = wave.waits;
            self.waits.reverse();
            // Refreshes of stale and XFetch hits: one background batch under one unit of
            // the budget, if it has room now (otherwise handed over).
            let mut refresh: Vec<_> = wave
                .refreshes
                .into_iter()
                .map(|(i, g)| {
                    let have = match batch.answered(i) {
                        Some(Ok(Some(v))) => v.version,
                        _ => 0,
                    };
                    (i, g, have)
                })
                .collect();
            if !refresh.is_empty() {
                let mut guards: Vec<_> = refresh.iter_mut().map(|(_, g, _)| g).collect();
                if begin_together(&mut guards) {
                    return ManyStep::Refresh(Box::new(Many::refreshes(self.tt.clone(), refresh)));
                }
            }
        }
    }

    /// The next step of the loader call in progress, if it has one.
    fn step_call(&mut self) -> Option<ManyStep<V>> {
        let call = self.call.as_mut()?;
        let mut tier = Vec::new();
        let mut done = Vec::new();
        for (i, step) in std::mem::take(&mut call.steps) {
            match step {
                Step::Done(r) => done.push((i, r)),
                Step::Load(load) => call.loads.push((i, load)),
                Step::Stale(v, refresh) => {
                    done.push((i, Ok(Some(v))));
                    call.detached.extend(refresh);
                }
                Step::Interrupted(e) => done.push((i, Err(Error::Load(LoadError::new(e))))),
                Step::Tier(pending) => tier.push((i, pending)),
            }
        }
        let detached = std::mem::take(&mut call.detached);
        let loads_waiting = !call.loads.is_empty() && !call.called;
        let (covered, finished) = (call.covered, tier.is_empty() && !loads_waiting);
        for (i, r) in done {
            self.answer(i, r);
        }
        if !tier.is_empty() {
            return Some(ManyStep::Tier(Pending::new(async move {
                let (index, pending): (Vec<usize>, Vec<_>) = tier.into_iter().unzip();
                // A multiplexed connection pipelines what is sent together; a stalled
                // node's operations never hold the others' back.
                let replies = join_all(pending).await;
                Resume(Resumed::Replies(index.into_iter().zip(replies).collect()))
            })));
        }
        if !detached.is_empty() {
            return Some(ManyStep::Refresh(Box::new(Many::detached(
                self.tt.clone(),
                detached,
            ))));
        }
        if loads_waiting {
            let call = self.call.as_mut().expect("checked");
            if !covered {
                return Some(ManyStep::Tier(self.permit()));
            }
            call.called = true;
            let keys: Vec<String> = call.loads.iter().map(|(_, l)| l.key().to_owned()).collect();
            driver::count_batch_call(self.tt.l1(), &keys);
            return Some(ManyStep::Load(keys));
        }
        if finished {
            let call = self.call.as_mut().expect("checked");
            if !call.later.is_empty() {
                // This call's own keys are published: now wait for the others'.
                call.steps = std::mem::take(&mut call.later);
                call.permit = None;
                return self.step_call();
            }
            // Published: the call's unit of the budget goes back.
            self.call = None;
        }
        None
    }

    /// Waits for the call's one unit of the origin budget, until `wait_timeout` from now.
    fn permit(&self) -> Pending<Resume<V>> {
        let l1 = self.tt.l1().clone();
        Pending::new(async move {
            if let Some(p) = driver::try_origin_permit(&l1) {
                return Resume(Resumed::Permit(Ok(p)));
            }
            let arrived = l1.clock().now();
            let deadline = arrived + l1.options().wait_timeout;
            let mut acquire = Box::pin(driver::origin_permit(&l1));
            let mut timer = Timer::default();
            let got = std::future::poll_fn(|cx| {
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
            .await;
            Resume(Resumed::Permit(got))
        })
    }

    /// Takes what a [`ManyStep::Tier`] resolved to; `host` decodes what the tier read.
    pub fn resume(&mut self, resume: Resume<V>, host: &dyn Host<V>) {
        let Some(call) = &mut self.call else {
            return;
        };
        match resume.0 {
            Resumed::Replies(replies) => {
                for (i, reply) in replies {
                    let later = reply.is_later();
                    let step = reply.next(host);
                    match later {
                        true => call.later.push((i, step)),
                        false => call.steps.push((i, step)),
                    }
                }
            }
            Resumed::Permit(Ok(permit)) => {
                // The loads began under the batch already (not counted against the budget
                // one by one): this unit is the call's.
                call.permit = Some(permit);
                call.covered = true;
            }
            Resumed::Permit(Err(e)) => {
                // This caller's wait for the budget ran out: its keys answer their
                // fail-safe values or the error, and are handed over.
                for (i, load) in std::mem::take(&mut call.loads) {
                    call.steps.push((i, load.give_up(e.clone())));
                }
            }
        }
    }

    /// Which deadline of the loader call passed: the hard one only (a batch's caller has
    /// no soft timeout of its own). The keys began together: the first one's is the
    /// call's.
    pub fn poll_deadline(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some((_, first)) = self.call.as_mut().and_then(|c| c.loads.first_mut()) else {
            return Poll::Pending;
        };
        loop {
            match first.poll_deadline(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Deadline::Hard) => return Poll::Ready(()),
                Poll::Ready(Deadline::Soft) => {}
            }
        }
    }

    /// Hands the loader's answer to the call's loads: each key its value (`None`:
    /// absent; a key the loader omitted is absent too), or the error of the whole call.
    pub fn loaded(
        &mut self,
        result: Result<Vec<(String, Option<V>)>, LoadError>,
        host: &dyn Host<V>,
    ) {
        let answers = result.map(|found| {
            found
                .into_iter()
                .map(|(k, v)| (k, Loaded::from(v)))
                .collect()
        });
        self.loaded_with(answers, host);
    }

    /// [`loaded`](Self::loaded) with each key's answer a [`Loaded`]: its own lifetimes,
    /// tags, metadata or "no cache", applied to that key as a single load applies them
    /// ([`Load::loaded_with`]). A key the loader omitted is absent.
    pub fn loaded_with(
        &mut self,
        result: Result<Vec<(String, Loaded<V>)>, LoadError>,
        host: &dyn Host<V>,
    ) {
        let Some(call) = &mut self.call else {
            return;
        };
        let loads = std::mem::take(&mut call.loads);
        match result {
            Ok(found) => {
                let mut found: HashMap<String, Loaded<V>> = found.into_iter().collect();
                for (i, load) in loads {
                    let answer = found.remove(load.key()).unwrap_or_else(Loaded::absent);
                    call.steps.push((i, load.loaded_with(Ok(answer), host)));
                }
            }
            Err(e) => {
                for (i, load) in loads {
                    call.steps.push((i, load.loaded(Err(e.clone()), host)));
                }
            }
        }
    }

    /// The loader call ran past the hard timeout: its keys time out (fail-safe values
    /// answer where there are some), and their fleet locks are handed back.
    pub fn timed_out(&mut self) {
        if let Some(call) = &mut self.call {
            for (i, load) in std::mem::take(&mut call.loads) {
                call.steps.push((i, load.timed_out()));
            }
        }
    }

    /// The loader panicked (or was interrupted): the waiters of its keys get
    /// `LoaderPanicked`; the driver re-raises. The batch is over.
    pub fn panicked(mut self, message: Option<String>) {
        if let Some(call) = &mut self.call {
            for (_, load) in std::mem::take(&mut call.loads) {
                load.panicked(message.clone());
            }
        }
    }

    /// The loader panicked and its language has nothing to re-raise: the keys of the call
    /// answer `LoaderPanicked`, as their waiters do; the batch goes on.
    pub fn loader_panicked(&mut self, message: Option<String>) {
        if let Some(call) = &mut self.call {
            for (i, load) in std::mem::take(&mut call.loads) {
                load.panicked(message.clone());
                let e = Error::LoaderPanicked {
                    message: message.clone(),
                };
                call.steps.push((i, Step::Done(Err(e))));
            }
        }
    }

    /// The wait for key `i` ended.
    pub fn waited(&mut self, i: usize, result: Result<Waited<Versioned<V>>, Error>) {
        match result {
            Ok(Waited::Loaded(v)) => self.answer(i, Ok(v.map(|v| v.value))),
            Ok(Waited::Stale(v)) => self.answer(i, Ok(Some(v.value))),
            Ok(Waited::Retry(r)) => {
                if let Some(b) = &mut self.batch {
                    b.retry(i, r);
                }
            }
            Err(e) => self.answer(i, Err(e)),
        }
    }
}

/// Begins refresh guards under one unit of the budget if it has room now: the first takes
/// it, the others begin under it (see [`driver::begin_in_batch`]).
fn begin_together<V: Clone + Send + Sync + 'static>(
    guards: &mut [&mut LoadGuard<Versioned<V>>],
) -> bool {
    let Some((first, rest)) = guards.split_first_mut() else {
        return true;
    };
    if !first.try_begin() {
        return false;
    }
    for g in rest {
        driver::begin_in_batch(g);
    }
    true
}
