//! Warm-ups of a [`TieredCache`]: the call machine's ([`WarmPlan`], [`Warm`]), with a
//! Rust loader of one key.

use std::error::Error as StdError;
use std::future::Future;
use std::panic::resume_unwind;
use std::sync::Arc;

use herdless::{Error, Loaded, WarmReport};

use super::TieredCache;
use super::lang::{Loader, Rt, Runner};
use crate::call::{CallOptions, Driven, Failure, Warm, WarmPlan, Warmed};
use crate::codec::Codec;
use crate::runtime::block_on;

impl<V, C> TieredCache<V, C>
where
    V: Clone + Send + Sync + 'static,
    C: Codec<V> + Send + Sync + 'static,
{
    /// Loads the `keys` that are not fresh yet with `loader(key)`, at most `concurrency`
    /// at once (default 4, never more than the origin budget), each for the whole fleet
    /// as a `get_or_load` would (a key fresh here or in Redis is skipped, one another
    /// caller loads is waited for; the loader is told `LoadReason::Warm`): e.g. before
    /// traffic arrives after a restart. Blocking: the loads run on scoped threads.
    ///
    /// # Panics
    /// A panic of the loader is re-raised here after that key's waiters received
    /// [`Error::LoaderPanicked`].
    pub fn warm<I, F, E>(&self, keys: I, concurrency: Option<usize>, loader: F) -> WarmReport
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
        F: Fn(&str) -> Result<Option<V>, E> + Send + Sync + 'static,
        E: Into<Box<dyn StdError + Send + Sync>>,
    {
        let keys = keys.into_iter().map(|k| k.as_ref().to_owned()).collect();
        let plan = WarmPlan::new(&self.tt, keys, concurrency, CallOptions::default());
        let loader = Arc::new(loader);
        let rt = Rt {
            tt: self.tt.clone(),
            codec: self.codec.clone(),
            runner: Runner::Thread,
        };
        std::thread::scope(|s| {
            for _ in 0..plan.workers() {
                s.spawn(|| {
                    while let Some(key) = plan.next() {
                        let load = loader.clone();
                        let key_of = key.to_owned();
                        let one: Loader<V> = Box::new(move |_| {
                            let r = load(&key_of).map(Loaded::from).map_err(Into::into);
                            Box::pin(std::future::ready(r))
                        });
                        let mut call = Driven::new(plan.call(&self.tt, key, one), rt.clone());
                        let answer = match block_on(&mut call) {
                            Ok(Ok(v)) => Ok(v),
                            Ok(Err(Failure::Error(e))) => Err(e),
                            Ok(Err(Failure::Raise(payload))) => resume_unwind(payload),
                            Err(e) => Err(Error::from(e)),
                        };
                        plan.record(key, Warmed::of(call.get_ref().ran_loader(), &answer));
                    }
                });
            }
        });
        plan.report()
    }

    /// [`warm`](Self::warm) with an async loader: `concurrency` loads at a time, all in
    /// the calling task.
    ///
    /// # Panics
    /// A panic of the loader is re-raised here after that key's waiters received
    /// [`Error::LoaderPanicked`].
    pub async fn warm_async<I, F, Fut, E>(
        &self,
        keys: I,
        concurrency: Option<usize>,
        loader: F,
    ) -> WarmReport
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
        F: Fn(String) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Option<V>, E>> + Send + 'static,
        E: Into<Box<dyn StdError + Send + Sync>>,
    {
        let keys = keys.into_iter().map(|k| k.as_ref().to_owned()).collect();
        let plan = WarmPlan::new(&self.tt, keys, concurrency, CallOptions::default());
        let loader = Arc::new(loader);
        // The loader is called only when the key's load runs (a fresh key is skipped).
        let make = move |key: &str| -> Loader<V> {
            let (load, key) = (loader.clone(), key.to_owned());
            Box::new(move |_| {
                let fut = load(key);
                Box::pin(async move { fut.await.map(Loaded::from).map_err(Into::into) })
            })
        };
        let mut warm = Warm::new(&self.tt, plan, make);
        let rt = Rt {
            tt: self.tt.clone(),
            codec: self.codec.clone(),
            runner: Runner::Task,
        };
        let report = std::future::poll_fn(|cx| warm.poll_warm(cx, &rt, &mut |_| {})).await;
        report.unwrap_or_else(|payload| resume_unwind(payload))
    }
}
