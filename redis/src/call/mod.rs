//! The call machine: one caller's call, from its key to its answer, decided once for every
//! language and both tiers.
//!
//! [`TwoTier`](crate::TwoTier) decides what the one local leader of a key does with the
//! shared tier ([`Step`](crate::two_tier::Step)), and the L1 decides who leads
//! ([`Lookup`](herdless::Lookup)). Everything around them is decided here, once:
//!
//! - the pre-lead loop: a hit is answered (and a refresh it chose this caller for goes to
//!   the background with the call's ttl and the served value's version), a wait is awaited
//!   and looked up again after a hand-over (keeping the first arrival), a lead steps on;
//! - the deadline race of a running loader: at the soft timeout, with a fail-safe value and
//!   a caller to answer, the caller gets that value and the load goes on in the background;
//!   at the hard timeout the loader call is dropped (cancelled) and the load times out;
//! - what a loader's end becomes: its answer (`Loaded`, its error), a panic (waiters get
//!   `LoaderPanicked` with its message; the caller re-raises), an interruption of the
//!   language (the load is handed over; the caller re-raises);
//! - the caller leaving: dropped, the call hands its load over (a waiter, here or in the
//!   fleet, takes it) and cancels its loader call; [`Call::leave`] instead lets the load go
//!   on for the other callers (their answer is stored), as Node's `AbortSignal` asks;
//! - background work (refreshes, loads past their soft timeout, batch refreshes) and how its
//!   failures are reported ([`Runtime::report`]);
//! - batches ([`CallMany`]) and warm-ups ([`Warm`], [`WarmPlan`]: the concurrency, the
//!   budget cap, the report).
//!
//! A language drives it: Rust ([`TieredCache`](crate::TieredCache), blocking and tokio),
//! Python (threads and asyncio), Node (its event loop). Its side is two traits:
//! [`Lang`] names its types (its loaders, a loader call in progress, what it re-raises), and
//! [`Runtime`] is the language at work during one poll: it calls a loader the language's
//! way (on this thread; a sync loader answers at once), runs background jobs, reports their
//! failures, and is the codec ([`Host`]). A call is polled with a runtime each time
//! ([`Call::poll_call`]), so a runtime may borrow what is only valid during one callback
//! (the GIL, a Node-API env).
//!
//! **Where I/O happens.** Nowhere here: the shared tier's operations are
//! [`Pending`](crate::two_tier::Pending) futures whose I/O runs on the backend's runtime
//! (a tokio runtime of the backend's own), which wakes the call; timers are the L1's clock;
//! loaders run where the runtime runs them. The call itself only polls.

mod many;
mod one;
mod warm;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use herdless::{Error, LoadError, Loaded};

pub use many::CallMany;
pub use one::Call;
pub use warm::{DEFAULT_WARM_CONCURRENCY, Warm, WarmPlan, Warmed, warm_workers};

use crate::codec::CodecError;
use crate::two_tier::{Host, Load};

/// How a loader call ended.
#[derive(Debug)]
pub enum Called<T, X> {
    /// The loader answered: its value(s), or its error (the load's result).
    Answered(Result<T, LoadError>),
    /// The loader panicked: the waiters get `LoaderPanicked` with `message`; the caller
    /// re-raises `raise` (if any: a Rust panic's payload).
    Panicked {
        /// The panic's message, if it had one.
        message: Option<String>,
        /// What the caller re-raises.
        raise: Option<X>,
    },
    /// Something that is not about the load (Python's `KeyboardInterrupt`, a task's
    /// cancellation, a failed Node-API call): the load is handed over (a waiter takes it)
    /// and the caller re-raises this.
    Interrupted(X),
}

/// Why a call did not answer a value.
#[derive(Debug)]
pub enum Failure<X> {
    /// The engine's answer: the load's error, a timeout, a tier error...
    Error(Error),
    /// The language's own interruption (or a panic), to re-raise in the caller.
    Raise(X),
}

impl<X> From<Error> for Failure<X> {
    fn from(e: Error) -> Self {
        Failure::Error(e)
    }
}

/// A batch loader's answer: each key with its own answer.
pub type KeyAnswers<V> = Vec<(String, Loaded<V>)>;

/// A call's answer: the value, `None` for an absence, or why there is none.
pub type Answer<V, X> = Result<Option<V>, Failure<X>>;

/// The types of the language that drives the machine (a marker type, `'static`, so calls
/// can be kept between callbacks).
pub trait Lang<V: Clone + Send + Sync + 'static>: 'static {
    /// A loader of one key (called at most once).
    type Loader;
    /// A loader of many keys (called once per loader call of a batch; cloned for a batch's
    /// background refreshes).
    type ManyLoader: Clone;
    /// What a caller re-raises that is not the engine's error.
    type Raise;
    /// A call of a one-key loader in progress, polled by [`Runtime::poll_loader`]. Dropped
    /// unfinished, the call is cancelled (a future dropped, a task cancelled, a signal
    /// aborted).
    type Running;
    /// A call of a many-key loader in progress, polled by [`Runtime::poll_many_loader`].
    type RunningMany;
}

/// The language at work during one poll of a call (see the module docs).
pub trait Runtime<V: Clone + Send + Sync + 'static, L: Lang<V>>: Host<V> {
    /// Calls `loader` for `load` the language's way (on this thread; its context is
    /// [`Load::context`], its key [`Load::key`], and whether it is a background refresh
    /// [`Load::is_background`]).
    fn call(&self, loader: L::Loader, load: &Load<V>) -> L::Running;
    /// Polls a loader call: its answer once it ended (its value, an absence, a
    /// [`Loaded`], its error), its panic, or an interruption of the language.
    fn poll_loader(
        &self,
        running: &mut L::Running,
        cx: &mut Context<'_>,
    ) -> Poll<Called<Loaded<V>, L::Raise>>;
    /// Calls a batch's `loader` with `keys`.
    fn call_many(&self, loader: &L::ManyLoader, keys: Vec<String>) -> L::RunningMany;
    /// Polls a batch loader call: each key's answer (a key it omits is absent).
    fn poll_many_loader(
        &self,
        running: &mut L::RunningMany,
        cx: &mut Context<'_>,
    ) -> Poll<Called<KeyAnswers<V>, L::Raise>>;
    /// Runs `job` in the background, where nobody awaits it: poll it with a runtime
    /// ([`Job::poll_job`]) until it is ready.
    fn spawn(&self, job: Job<V, L>);
    /// A background job failed (nobody awaits it): told once per failure, the language's
    /// way (a log record, a warning).
    fn report(&self, key: &str, failure: Failure<L::Raise>);
    /// The codec was interrupted by the language (only Python's can be): what the caller
    /// re-raises.
    fn raise(&self, interrupted: CodecError) -> L::Raise;
}

/// A call's options beyond its key and loader.
#[derive(Clone, Debug, Default)]
pub struct CallOptions {
    ttl: Option<Duration>,
    tti: Option<Duration>,
    tags: Option<Arc<[String]>>,
    /// A key of a warm-up: a stale hit is refreshed in the foreground, and the loader is
    /// told `LoadReason::Warm`.
    warm: bool,
}

impl CallOptions {
    /// The ttl of the value this call loads, instead of the cache's.
    pub fn ttl(mut self, ttl: Option<Duration>) -> Self {
        self.ttl = ttl;
        self
    }

    /// The time-to-idle of the value this call loads, unless its loader sets its own
    /// ([`herdless::Loaded::tti`]).
    pub fn tti(mut self, tti: Option<Duration>) -> Self {
        self.tti = tti;
        self
    }

    /// The tags of the value this call loads, unless its loader sets its own.
    pub fn tags(mut self, tags: Option<Arc<[String]>>) -> Self {
        self.tags = tags;
        self
    }

    /// `loaded` with the call's tags and time-to-idle, unless the loader set its own.
    fn shape<V>(&self, loaded: Loaded<V>) -> Loaded<V> {
        let loaded = match &self.tags {
            Some(tags) if loaded.tags_set().is_none() => loaded.tags(tags.iter().cloned()),
            _ => loaded,
        };
        match self.tti {
            Some(tti) if loaded.tti_set().is_none() => loaded.tti(tti),
            _ => loaded,
        }
    }
}

/// Background work of a call: a refresh, a load past its soft timeout, a batch's refreshes.
/// Nobody awaits it; a failure goes to [`Runtime::report`].
pub struct Job<V: Clone + Send + Sync + 'static, L: Lang<V>>(JobKind<V, L>);

enum JobKind<V: Clone + Send + Sync + 'static, L: Lang<V>> {
    One(Box<Call<V, L>>),
    Many(Box<CallMany<V, L>>),
}

impl<V: Clone + Send + Sync + 'static, L: Lang<V>> Job<V, L> {
    /// Drives the job on; ready once it is over (its failure, if any, reported).
    pub fn poll_job<R: Runtime<V, L>>(&mut self, cx: &mut Context<'_>, rt: &R) -> Poll<()> {
        match &mut self.0 {
            JobKind::One(call) => match call.poll_call(cx, rt) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Ok(_)) => Poll::Ready(()),
                Poll::Ready(Err(f)) => {
                    rt.report(call.key(), f);
                    Poll::Ready(())
                }
            },
            JobKind::Many(many) => match many.poll_many(cx, rt) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Ok(_)) => Poll::Ready(()),
                Poll::Ready(Err(x)) => {
                    rt.report("", Failure::Raise(x));
                    Poll::Ready(())
                }
            },
        }
    }

    /// Whether the job sleeps until a waker fires (not while a loader of the language
    /// runs: a runtime whose process must stay alive for wakers can tell them apart).
    pub fn is_parked(&self) -> bool {
        match &self.0 {
            JobKind::One(c) => c.is_parked(),
            JobKind::Many(m) => m.is_parked(),
        }
    }
}

// Nothing of a job is pinned: it polls what it holds through `Pin::new` on `Unpin` parts
// (a `Pending` is boxed, a running loader `Unpin` by its bound).
impl<V: Clone + Send + Sync + 'static, L: Lang<V>> Unpin for Job<V, L> {}

impl<V: Clone + Send + Sync + 'static, L: Lang<V>> std::fmt::Debug for Job<V, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match &self.0 {
            JobKind::One(_) => "Job::One",
            JobKind::Many(_) => "Job::Many",
        })
    }
}

/// A call, batch call or job polled with a runtime it owns (a language whose runtime can
/// be kept between polls, such as Rust's): a `Future`.
pub struct Driven<T, R> {
    inner: T,
    rt: R,
}

impl<T, R> Driven<T, R> {
    /// `inner`, polled with `rt`.
    pub fn new(inner: T, rt: R) -> Self {
        Self { inner, rt }
    }

    /// What is being driven (e.g. to ask a call, once it answered, whether it loaded).
    pub fn get_ref(&self) -> &T {
        &self.inner
    }
}

/// What [`Driven`] can drive.
pub trait Drivable<R> {
    /// What it ends with.
    type Output;
    /// Polls it with `rt`.
    fn poll_with(&mut self, cx: &mut Context<'_>, rt: &R) -> Poll<Self::Output>;
}

impl<V, L, R> Drivable<R> for Call<V, L>
where
    V: Clone + Send + Sync + 'static,
    L: Lang<V>,
    R: Runtime<V, L>,
{
    type Output = Answer<V, L::Raise>;
    fn poll_with(&mut self, cx: &mut Context<'_>, rt: &R) -> Poll<Self::Output> {
        self.poll_call(cx, rt)
    }
}

impl<V, L, R> Drivable<R> for CallMany<V, L>
where
    V: Clone + Send + Sync + 'static,
    L: Lang<V>,
    R: Runtime<V, L>,
{
    type Output = Result<Vec<crate::two_tier::ManyAnswer<V>>, L::Raise>;
    fn poll_with(&mut self, cx: &mut Context<'_>, rt: &R) -> Poll<Self::Output> {
        self.poll_many(cx, rt)
    }
}

impl<V, L, R> Drivable<R> for Job<V, L>
where
    V: Clone + Send + Sync + 'static,
    L: Lang<V>,
    R: Runtime<V, L>,
{
    type Output = ();
    fn poll_with(&mut self, cx: &mut Context<'_>, rt: &R) -> Poll<()> {
        self.poll_job(cx, rt)
    }
}

impl<T, R> Future for Driven<T, R>
where
    T: Drivable<R> + Unpin,
    R: Unpin,
{
    type Output = T::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T::Output> {
        let this = &mut *self;
        this.inner.poll_with(cx, &this.rt)
    }
}
