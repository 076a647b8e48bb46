//! Batch loads of a [`TieredCache`]: a driver of the fleet engine's batch
//! ([`Many`](crate::two_tier::Many)), which decides everything; this runs the Rust loader
//! (one call per step that asks for it), awaits, and spawns the background refreshes.

use std::error::Error as StdError;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use herdless::Error;

use super::{Runner, TieredCache, load_error};
use crate::codec::Codec;
use crate::runtime::block_on;
use crate::two_tier::{Many, ManyStep};

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
        let many = self.tt.get_many(keys);
        self.drive_many(many, loader, runner).await
    }

    /// Does what each step of the fleet engine's batch says (see [`Many`]).
    fn drive_many<F, Fut, R, E>(
        &self,
        mut many: Many<V>,
        loader: Arc<F>,
        runner: Runner,
    ) -> Pin<Box<dyn Future<Output = Vec<Answer<V>>> + Send + '_>>
    where
        F: Fn(Vec<String>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, E>> + Send + 'static,
        R: IntoIterator<Item = (String, Option<V>)>,
        E: Into<Box<dyn StdError + Send + Sync>>,
    {
        Box::pin(async move {
            loop {
                match many.step() {
                    ManyStep::Done(answers) => return answers,
                    ManyStep::Tier(pending) => {
                        let reply = pending.await;
                        many.resume(reply, &*self.codec);
                    }
                    ManyStep::Wait(i, waiter) => {
                        let waited = waiter.await;
                        many.waited(i, waited);
                    }
                    ManyStep::Refresh(background) => {
                        let (this, loader) = (self.clone(), loader.clone());
                        self.spawn_job(
                            async move {
                                let _ = this.drive_many(*background, loader, runner).await;
                            },
                            runner,
                        );
                    }
                    ManyStep::Load(keys) => {
                        let mut fut = Box::pin(loader(keys));
                        let ended = std::future::poll_fn(|cx| {
                            match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
                                Ok(Poll::Ready(r)) => return Poll::Ready(Ok(r)),
                                Ok(Poll::Pending) => {}
                                Err(payload) => return Poll::Ready(Err(Some(payload))),
                            }
                            match many.poll_deadline(cx) {
                                Poll::Ready(()) => Poll::Ready(Err(None)),
                                Poll::Pending => Poll::Pending,
                            }
                        })
                        .await;
                        match ended {
                            Ok(Ok(found)) => {
                                let found = found.into_iter().collect();
                                many.loaded(Ok(found), &*self.codec);
                            }
                            Ok(Err(e)) => many.loaded(Err(load_error(e)), &*self.codec),
                            Err(None) => many.timed_out(),
                            Err(Some(payload)) => {
                                let message = payload
                                    .downcast_ref::<&str>()
                                    .map(|s| (*s).to_owned())
                                    .or_else(|| payload.downcast_ref::<String>().cloned());
                                many.panicked(message);
                                resume_unwind(payload)
                            }
                        }
                    }
                }
            }
        })
    }
}
