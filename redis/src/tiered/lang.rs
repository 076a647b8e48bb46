//! Rust as a language of the call machine ([`crate::call`]): loaders are closures (a
//! blocking one answers when called; an async one is a future polled by the call), a panic
//! is caught, answered to the waiters as `LoaderPanicked` and re-raised in the caller, and
//! background jobs run on the backend's runtime (async loaders) or on a short-lived thread
//! (blocking loaders must not hold the runtime's workers).

use std::any::Any;
use std::error::Error as StdError;
use std::future::Future;
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use herdless::{LoadContext, LoadError, Loaded};

use crate::call::{Called, Driven, Failure, Job, Lang, Runtime};
use crate::codec::{Codec, CodecError};
use crate::runtime::block_on;
use crate::two_tier::{Load, TwoTier};

/// A loader's error, boxed.
pub(crate) type BoxError = Box<dyn StdError + Send + Sync>;
type Boxed<T> = Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send>>;
/// A one-key loader.
pub(crate) type Loader<V> = Box<dyn FnOnce(LoadContext<V>) -> Boxed<Loaded<V>> + Send>;
/// A batch loader.
pub(crate) type ManyLoader<V> =
    Arc<dyn Fn(Vec<String>) -> Boxed<Vec<(String, Loaded<V>)>> + Send + Sync>;
/// A panic's payload, re-raised in the caller.
pub(crate) type Payload = Box<dyn Any + Send>;

/// Rust, as the call machine sees it.
pub(crate) struct Rust<V>(PhantomData<fn() -> V>);

impl<V: Clone + Send + Sync + 'static> Lang<V> for Rust<V> {
    type Loader = Loader<V>;
    type ManyLoader = ManyLoader<V>;
    type Raise = Payload;
    type Running = Unwinding<Loaded<V>>;
    type RunningMany = Unwinding<Vec<(String, Loaded<V>)>>;
}

/// A loader call whose panics are caught.
pub(crate) struct Unwinding<T>(Result<Boxed<T>, Option<Payload>>);

impl<T> Unwinding<T> {
    /// Calls `call` now (a blocking loader runs here), catching a panic.
    fn call(call: impl FnOnce() -> Boxed<T>) -> Self {
        Self(catch_unwind(AssertUnwindSafe(call)).map_err(Some))
    }
}

impl<T> Future for Unwinding<T> {
    type Output = Called<T, Payload>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let fut = match &mut self.0 {
            Ok(fut) => fut,
            Err(payload) => return Poll::Ready(panicked(payload.take())),
        };
        match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(r)) => Poll::Ready(Called::Answered(r.map_err(LoadError::from_boxed))),
            Err(payload) => Poll::Ready(panicked(Some(payload))),
        }
    }
}

fn panicked<T>(payload: Option<Payload>) -> Called<T, Payload> {
    let message = payload.as_ref().and_then(|p| {
        p.downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| p.downcast_ref::<String>().cloned())
    });
    Called::Panicked {
        message,
        raise: payload,
    }
}

/// Where a background job runs.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Runner {
    /// On the backend's runtime (async loaders).
    Task,
    /// On a short-lived thread (blocking loaders must not hold the runtime's workers).
    Thread,
}

/// A tiered cache at work for one call: its engine and codec, and where its background
/// jobs run.
pub(crate) struct Rt<V: Clone + Send + Sync + 'static, C> {
    pub(crate) tt: TwoTier<V>,
    pub(crate) codec: Arc<C>,
    pub(crate) runner: Runner,
}

impl<V: Clone + Send + Sync + 'static, C> Clone for Rt<V, C> {
    fn clone(&self) -> Self {
        Self {
            tt: self.tt.clone(),
            codec: self.codec.clone(),
            runner: self.runner,
        }
    }
}

// The cache's codec; `Host` comes with it.
impl<V, C> Codec<V> for Rt<V, C>
where
    V: Clone + Send + Sync + 'static,
    C: Codec<V> + Send + Sync + 'static,
{
    fn encode(&self, value: &V) -> Result<Vec<u8>, CodecError> {
        self.codec.encode(value)
    }
    fn decode(&self, bytes: &[u8]) -> Result<V, CodecError> {
        self.codec.decode(bytes)
    }
}

impl<V, C> Runtime<V, Rust<V>> for Rt<V, C>
where
    V: Clone + Send + Sync + 'static,
    C: Codec<V> + Send + Sync + 'static,
{
    fn call(&self, loader: Loader<V>, load: &Load<V>) -> Unwinding<Loaded<V>> {
        let ctx = load.context();
        Unwinding::call(move || loader(ctx))
    }

    fn poll_loader(
        &self,
        running: &mut Unwinding<Loaded<V>>,
        cx: &mut Context<'_>,
    ) -> Poll<Called<Loaded<V>, Payload>> {
        Pin::new(running).poll(cx)
    }

    fn poll_many_loader(
        &self,
        running: &mut Unwinding<Vec<(String, Loaded<V>)>>,
        cx: &mut Context<'_>,
    ) -> Poll<Called<Vec<(String, Loaded<V>)>, Payload>> {
        Pin::new(running).poll(cx)
    }

    fn call_many(
        &self,
        loader: &ManyLoader<V>,
        keys: Vec<String>,
    ) -> Unwinding<Vec<(String, Loaded<V>)>> {
        Unwinding::call(|| loader(keys))
    }

    fn spawn(&self, job: Job<V, Rust<V>>) {
        let job = Driven::new(job, self.clone());
        match self.runner {
            Runner::Task => {
                match self.tt.tier() {
                    Some(tier) => drop(tier.handle().spawn(job)),
                    // No tier, no runtime of its own: the caller's tokio runtime.
                    None => drop(tokio::spawn(job)),
                }
            }
            Runner::Thread => {
                // No thread: the job (and its load) is dropped, which hands the load over.
                let _ = std::thread::Builder::new()
                    .name("herdless-refresh".into())
                    .spawn(move || block_on(job));
            }
        }
    }

    fn report(&self, key: &str, failure: Failure<Payload>) {
        match failure {
            Failure::Error(e) => log::warn!("herdless: background load of {key:?} failed: {e}"),
            Failure::Raise(_) => log::warn!("herdless: background load of {key:?} panicked"),
        }
    }

    fn raise(&self, interrupted: CodecError) -> Payload {
        // Rust codecs are not interrupted by the language; should one say so, its message
        // is what the caller's panic carries.
        Box::new(interrupted.to_string())
    }
}
