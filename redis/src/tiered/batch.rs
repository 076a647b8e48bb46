//! Batch loads of a [`TieredCache`]: the call machine's batch ([`CallMany`]), which decides
//! everything, with a Rust loader.

use std::error::Error as StdError;
use std::future::Future;
use std::panic::resume_unwind;
use std::sync::Arc;

use herdless::{Error, Loaded};

use super::TieredCache;
use super::lang::{ManyLoader, Rt, Runner};
use crate::call::{CallMany, Driven};
use crate::codec::Codec;
use crate::runtime::block_on;

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
        let loader: ManyLoader<V> = Arc::new(move |keys| {
            let fut = loader(keys);
            Box::pin(async move { fut.await.map(answers).map_err(Into::into) })
        });
        self.many(keys, loader, Runner::Task).await
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
        let loader: ManyLoader<V> = Arc::new(move |keys: Vec<String>| {
            Box::pin(std::future::ready(
                loader(&keys).map(answers).map_err(Into::into),
            ))
        });
        match block_on(self.many(keys, loader, Runner::Thread)) {
            Ok(answers) => answers,
            Err(e) => {
                let e = Error::from(e);
                (0..n).map(|_| Err(e.clone())).collect()
            }
        }
    }

    async fn many<I>(&self, keys: I, loader: ManyLoader<V>, runner: Runner) -> Vec<Answer<V>>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let call = CallMany::new(&self.tt, keys, loader);
        let rt = Rt {
            tt: self.tt.clone(),
            codec: self.codec.clone(),
            runner,
        };
        match Driven::new(call, rt).await {
            Ok(answers) => answers,
            Err(payload) => resume_unwind(payload),
        }
    }
}

/// A loader's answer, each key's value as a plain load's.
fn answers<V, R: IntoIterator<Item = (String, Option<V>)>>(found: R) -> Vec<(String, Loaded<V>)> {
    found
        .into_iter()
        .map(|(k, v)| (k, Loaded::from(v)))
        .collect()
}
