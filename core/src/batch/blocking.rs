//! `get_or_load_many`: the blocking driver of a batch. The loader runs on the caller's
//! thread for the keys it leads, on the spawner for batched refreshes; waits park.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use super::chunk::{Answer, Chunk};
use super::plan::{Batch, chunks};
use crate::error::{load_error, panic_message};
use crate::lookup::LoadGuard;
use crate::sync::Arc;
use crate::sync::unchecked::Arc as StdArc;
use crate::table::Table;

/// The answers for `keys`, in their order, loading the misses this caller leads with
/// `loader`, `max_batch` keys per call.
pub(crate) fn get_or_load_many<V, I, F, R, E>(
    table: &Arc<Table<V>>,
    keys: I,
    loader: F,
) -> Vec<Answer<V>>
where
    V: Clone + Send + Sync + 'static,
    I: IntoIterator,
    I::Item: AsRef<str>,
    F: Fn(&[String]) -> Result<R, E> + Send + Sync + 'static,
    R: IntoIterator<Item = (String, Option<V>)>,
    E: Into<Box<dyn core::error::Error + Send + Sync>>,
{
    let loader = StdArc::new(loader);
    let mut plan = Batch::new(table, keys);
    while let Some(wave) = plan.wave() {
        refresh_in_background(table, wave.refreshes, &loader);
        load(table, wave.leads, &*loader, &mut plan);
        for (i, waiter) in wave.waits {
            plan.waited(i, waiter.wait());
        }
    }
    plan.finish()
}

/// Loads the led keys, `max_batch` per loader call. A panic of the loader fails that call's
/// keys with [`Error::LoaderPanicked`](crate::Error::LoaderPanicked), hands the keys of the
/// calls not yet made over to their waiters, and is re-raised.
fn load<V, F, R, E>(
    table: &Table<V>,
    leads: Vec<(usize, LoadGuard<V>)>,
    loader: &F,
    plan: &mut Batch<V>,
) where
    V: Clone + Send + Sync + 'static,
    F: Fn(&[String]) -> Result<R, E>,
    R: IntoIterator<Item = (String, Option<V>)>,
    E: Into<Box<dyn core::error::Error + Send + Sync>>,
{
    let mut calls = chunks(leads, table.cfg.max_batch).into_iter();
    while let Some(mut chunk) = calls.next() {
        if !chunk.begin_at_lookup() {
            if let Err(e) = crate::sync::block_on(chunk.begin()) {
                plan.answer_all(chunk.give_up(e));
                continue;
            }
        }
        match run(chunk, loader) {
            Ok(answers) => plan.answer_all(answers),
            Err(payload) => {
                calls.for_each(Chunk::abandon);
                resume_unwind(payload);
            }
        }
    }
}

/// Runs one loader call and completes its keys; a panic is handed back to re-raise once
/// the call's waiters know.
#[allow(clippy::type_complexity)]
fn run<V, F, R, E>(
    chunk: Chunk<V>,
    loader: &F,
) -> Result<Vec<(usize, Answer<V>)>, Box<dyn core::any::Any + Send>>
where
    V: Clone + Send + Sync + 'static,
    F: Fn(&[String]) -> Result<R, E>,
    R: IntoIterator<Item = (String, Option<V>)>,
    E: Into<Box<dyn core::error::Error + Send + Sync>>,
{
    let keys = chunk.keys();
    chunk.count_call();
    match catch_unwind(AssertUnwindSafe(|| loader(&keys))) {
        Ok(result) => Ok(chunk.complete(result.map_err(load_error))),
        Err(payload) => {
            chunk.panicked(panic_message(&*payload));
            Err(payload)
        }
    }
}

/// Runs the refreshes of a wave's stale and XFetch hits on the spawner, `max_batch` keys
/// per loader call, each call if the origin budget has room for it now; otherwise (or
/// without a spawner) its guards are dropped, which hands the refresh over.
fn refresh_in_background<V, F, R, E>(
    table: &Table<V>,
    guards: Vec<(usize, LoadGuard<V>)>,
    loader: &StdArc<F>,
) where
    V: Clone + Send + Sync + 'static,
    F: Fn(&[String]) -> Result<R, E> + Send + Sync + 'static,
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
        let loader = loader.clone();
        spawner.spawn(Box::pin(async move {
            // The waiters of a panicked refresh were told; nobody waits for this task.
            let _ = run(chunk, &*loader);
        }));
    }
}
