//! `get_or_load_many_async`: the async driver of a batch, on any executor. The loader's
//! future runs in the caller's task for the keys it leads, on the spawner for batched
//! refreshes; a call running past the hard timeout is dropped and its keys fail with
//! [`Error::LoadTimeout`].
//!
//! The batch's caller has no soft timeout of its own (like a blocking leader, it waits for
//! its loader call); the waiters of its keys holding fail-safe values take them at the soft
//! timeout, as from any leader.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::future::Future;

use super::chunk::{Answer, Chunk};
use super::plan::{Batch, chunks};
use crate::asynchronous::{Driven, until_hard_deadline};
use crate::error::{Error, load_error};
use crate::lookup::LoadGuard;
use crate::sync::Arc;
use crate::sync::unchecked::Arc as StdArc;
use crate::table::Table;

/// A loader's panic, caught to tell its waiters, then re-raised.
type Payload = Box<dyn core::any::Any + Send>;

/// The answers for `keys`, in their order, loading the misses this caller leads with the
/// async `loader`, `max_batch` keys per call. Dropping the future hands the keys it leads
/// over to their waiters.
pub(crate) async fn get_or_load_many<V, I, F, Fut, R, E>(
    table: &Arc<Table<V>>,
    keys: I,
    loader: F,
) -> Vec<Answer<V>>
where
    V: Clone + Send + Sync + 'static,
    I: IntoIterator,
    I::Item: AsRef<str>,
    F: Fn(Vec<String>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, E>> + Send + 'static,
    R: IntoIterator<Item = (String, Option<V>)>,
    E: Into<Box<dyn core::error::Error + Send + Sync>>,
{
    let loader = StdArc::new(loader);
    let mut plan = Batch::new(table, keys);
    while let Some(wave) = plan.wave() {
        refresh_in_background(table, wave.refreshes, &loader);
        let mut calls = chunks(wave.leads, table.cfg.max_batch).into_iter();
        while let Some(mut chunk) = calls.next() {
            if !chunk.begin_at_lookup() {
                if let Err(e) = chunk.begin().await {
                    plan.answer_all(chunk.give_up(e));
                    continue;
                }
            }
            match run(table, chunk, &*loader).await {
                Ok(answers) => plan.answer_all(answers),
                Err(payload) => {
                    calls.for_each(Chunk::abandon);
                    reraise(payload);
                }
            }
        }
        for (i, waiter) in wave.waits {
            plan.waited(i, waiter.await);
        }
    }
    plan.finish()
}

/// Runs one loader call under the hard timeout and completes its keys; a panic is handed
/// back to re-raise once the call's waiters know.
async fn run<V, F, Fut, R, E>(
    table: &Table<V>,
    chunk: Chunk<V>,
    loader: &F,
) -> Result<Vec<(usize, Answer<V>)>, Payload>
where
    V: Clone + Send + Sync + 'static,
    F: Fn(Vec<String>) -> Fut,
    Fut: Future<Output = Result<R, E>>,
    R: IntoIterator<Item = (String, Option<V>)>,
    E: Into<Box<dyn core::error::Error + Send + Sync>>,
{
    chunk.count_call();
    let hard = chunk.hard_deadline();
    let mut fut = Box::pin(loader(chunk.keys()));
    match until_hard_deadline(&*table.clock, fut.as_mut(), hard).await {
        Driven::Done(result) => Ok(chunk.complete(result.map_err(load_error))),
        #[cfg(feature = "std")]
        Driven::Panicked(message, payload) => {
            chunk.panicked(message);
            Err(payload)
        }
        Driven::HardTimeout | Driven::SoftTimeout => {
            let after = table.cfg.hard_timeout.unwrap_or_default();
            Ok(chunk.fail(Error::LoadTimeout { after }))
        }
    }
}

#[cfg(feature = "std")]
fn reraise(payload: Payload) -> ! {
    std::panic::resume_unwind(payload)
}

#[cfg(not(feature = "std"))]
fn reraise(_: Payload) -> ! {
    unreachable!("without std a loader's panic is not caught")
}

/// Runs the refreshes of a wave's stale and XFetch hits on the spawner, `max_batch` keys
/// per loader call, each call if the origin budget has room for it now; otherwise (or
/// without a spawner) its guards are dropped, which hands the refresh over.
fn refresh_in_background<V, F, Fut, R, E>(
    table: &Arc<Table<V>>,
    guards: Vec<(usize, LoadGuard<V>)>,
    loader: &StdArc<F>,
) where
    V: Clone + Send + Sync + 'static,
    F: Fn(Vec<String>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, E>> + Send + 'static,
    R: IntoIterator<Item = (String, Option<V>)>,
    E: Into<Box<dyn core::error::Error + Send + Sync>>,
{
    let Some(spawner) = &table.spawner else {
        return;
    };
    for mut chunk in chunks(guards, table.cfg.max_batch) {
        if !chunk.try_begin() {
            continue;
        }
        let (table, loader) = (table.clone(), loader.clone());
        spawner.spawn(Box::pin(async move {
            // The waiters of a panicked refresh were told; nobody waits for this task.
            let _ = run(&table, chunk, &*loader).await;
        }));
    }
}
