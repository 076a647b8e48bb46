//! `get_or_load` and `get_or_load_with`: the blocking driver of the state machine. The
//! leader runs the loader on its own thread; waiters park; a background refresh goes to the
//! cache's spawner.

use alloc::boxed::Box;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use crate::context::LoadContext;
use crate::error::{Error, LoadError, load_error, panic_message};
use crate::loaded::Loaded;
use crate::lookup::{self, LoadGuard, Lookup, Refresh, Retry, Waited};
use crate::sync::Arc;
use crate::table::Table;

/// The value of `key`, loaded by `loader` on this thread if this caller leads; a stale or
/// XFetch hit hands the refresh to the spawner.
pub(crate) fn get_or_load<V, F, E>(
    table: &Arc<Table<V>>,
    key: &str,
    loader: F,
) -> Result<Option<V>, Error>
where
    V: Clone + Send + Sync + 'static,
    F: FnOnce() -> Result<Option<V>, E> + Send + 'static,
    E: Into<Box<dyn core::error::Error + Send + Sync>>,
{
    // Told no context, so none is made (an allocation, a clone of the previous value); its
    // plain answer completes the guard as is, never built into a `Loaded`.
    let loader = move |_: &LoadGuard<V>| loader();
    drive(
        table,
        key,
        Refresh::IfSpawner,
        false,
        loader,
        |guard, loader| refresh_in_background(table, guard, loader),
    )
}

/// [`get_or_load`] with a loader told its [`LoadContext`] and answering a [`Loaded`]. A
/// loader that fails after its load was withdrawn (superseded, or left by every caller)
/// answers nobody: its caller looks up again.
pub(crate) fn get_or_load_with<V, F, E>(
    table: &Arc<Table<V>>,
    key: &str,
    loader: F,
) -> Result<Option<V>, Error>
where
    V: Clone + Send + Sync + 'static,
    F: FnOnce(LoadContext<V>) -> Result<Loaded<V>, E> + Send + 'static,
    E: Into<Box<dyn core::error::Error + Send + Sync>>,
{
    let loader = move |guard: &LoadGuard<V>| loader(guard.context());
    drive(
        table,
        key,
        Refresh::IfSpawner,
        true,
        loader,
        |guard, loader| refresh_in_background(table, guard, loader),
    )
}

/// [`get_or_load`] with a loader that may borrow from the caller: it runs here or not at
/// all, so no hit hands this caller a refresh.
pub(crate) fn get_or_load_scoped<V, F, E>(
    table: &Arc<Table<V>>,
    key: &str,
    loader: F,
) -> Result<Option<V>, Error>
where
    V: Clone + Send + Sync + 'static,
    F: FnOnce() -> Result<Option<V>, E>,
    E: Into<Box<dyn core::error::Error + Send + Sync>>,
{
    let loader = move |_: &LoadGuard<V>| loader();
    drive(table, key, Refresh::Never, false, loader, |guard, _| {
        drop(guard)
    })
}

/// The loop of the blocking driver: look up, then serve, wait (and look up again after a
/// hand-over, keeping the first arrival) or lead. `retry`: a withdrawn load's failure sends
/// its leader back to the lookup (once: the loader is spent).
fn drive<V, F, A, E>(
    table: &Arc<Table<V>>,
    key: &str,
    refresh: Refresh,
    retry: bool,
    loader: F,
    on_refresh: impl FnOnce(LoadGuard<V>, F),
) -> Result<Option<V>, Error>
where
    V: Clone + Send + Sync + 'static,
    F: FnOnce(&LoadGuard<V>) -> Result<A, E>,
    A: Answered<V>,
    E: Into<Box<dyn core::error::Error + Send + Sync>>,
{
    let mut loader = Some(loader);
    let mut failed = None;
    let mut step = lookup::lookup(table, key, refresh)?;
    loop {
        match step {
            Lookup::Hit(hit) => {
                if let (Some(guard), Some(loader)) = (hit.refresh, loader.take()) {
                    on_refresh(guard, loader);
                }
                return Ok(hit.value);
            }
            Lookup::Wait(waiter) => match waiter.wait()? {
                Waited::Loaded(v) => return Ok(v),
                Waited::Stale(v) => return Ok(Some(v)),
                Waited::Retry(r) => step = lookup::lookup_again(table, key, r, refresh)?,
            },
            Lookup::Lead(mut guard) => {
                // Without a budget the load starts now, at the lookup's clock reading; with
                // one, a caller that waits for it past its own deadline hands the load over.
                if !guard.begin_at_lookup() {
                    if let Err(e) = guard.begin_blocking() {
                        return guard.give_up(e);
                    }
                }
                let Some(loader) = loader.take() else {
                    // Back from a withdrawn load with nothing to load again with: its error,
                    // and the load handed over to whoever waits.
                    return guard.give_up(failed.take().expect("set with the retry"));
                };
                match run(guard, loader, retry) {
                    Ok(answer) => return answer,
                    Err((r, e)) => {
                        failed = Some(e);
                        step = lookup::lookup_again(table, key, r, refresh)?;
                    }
                }
            }
        }
    }
}

/// What a loader answers: a plain value (`Option<V>`, completed as is) or a [`Loaded`].
trait Answered<V: Clone + Send + Sync + 'static>: Sized {
    /// Finishes `guard`'s load with this answer (see [`LoadGuard::complete`]).
    fn complete(guard: LoadGuard<V>, result: Result<Self, LoadError>) -> Result<Option<V>, Error>;
}

impl<V: Clone + Send + Sync + 'static> Answered<V> for Option<V> {
    fn complete(guard: LoadGuard<V>, result: Result<Self, LoadError>) -> Result<Option<V>, Error> {
        guard.complete(result)
    }
}

impl<V: Clone + Send + Sync + 'static> Answered<V> for Loaded<V> {
    fn complete(guard: LoadGuard<V>, result: Result<Self, LoadError>) -> Result<Option<V>, Error> {
        guard.complete_loaded(result)
    }
}

/// Runs a refresh on the spawner, if the origin budget has room for it now; otherwise (or
/// without a spawner) the guard is dropped, which hands the refresh over.
fn refresh_in_background<V, F, A, E>(table: &Table<V>, mut guard: LoadGuard<V>, loader: F)
where
    V: Clone + Send + Sync + 'static,
    F: FnOnce(&LoadGuard<V>) -> Result<A, E> + Send + 'static,
    A: Answered<V>,
    E: Into<Box<dyn core::error::Error + Send + Sync>>,
{
    if let Some(spawner) = &table.spawner {
        spawner.spawn(Box::pin(async move {
            if guard.try_begin() {
                let _ = run(guard, loader, false);
            }
        }));
    }
}

/// Runs `loader` for `guard` (it makes its [`LoadContext`] from the guard if it takes one),
/// turning a panic into [`Error::LoaderPanicked`] for the waiters before it carries on
/// unwinding in this thread. `Err`: the load was withdrawn and failed, and `retry` sends its
/// caller back to the lookup.
fn run<V, F, A, E>(
    guard: LoadGuard<V>,
    loader: F,
    retry: bool,
) -> Result<Result<Option<V>, Error>, (Retry, Error)>
where
    V: Clone + Send + Sync + 'static,
    F: FnOnce(&LoadGuard<V>) -> Result<A, E>,
    A: Answered<V>,
    E: Into<Box<dyn core::error::Error + Send + Sync>>,
{
    let borrowed = &guard;
    match catch_unwind(AssertUnwindSafe(move || loader(borrowed))) {
        Ok(result) => {
            let result = result.map_err(load_error);
            if retry {
                let (guard, result) = guard.withdrawn_failure(result)?;
                return Ok(A::complete(guard, result));
            }
            Ok(A::complete(guard, result))
        }
        Err(payload) => {
            let message = panic_message(&*payload);
            guard.panicked(message);
            resume_unwind(payload)
        }
    }
}
