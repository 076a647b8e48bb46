//! `get_or_load`: the blocking driver of the state machine. The leader runs the loader on
//! its own thread; waiters park; a background refresh goes to the cache's spawner.

use alloc::boxed::Box;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use crate::error::{Error, load_error, panic_message};
use crate::lookup::{self, LoadGuard, Lookup, Refresh, Waited};
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
    drive(table, key, Refresh::IfSpawner, loader, |guard, loader| {
        refresh_in_background(table, guard, loader)
    })
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
    drive(table, key, Refresh::Never, loader, |guard, _| drop(guard))
}

/// The loop of the blocking driver: look up, then serve, wait (and look up again after a
/// hand-over, keeping the first arrival) or lead.
fn drive<V, F, E>(
    table: &Arc<Table<V>>,
    key: &str,
    refresh: Refresh,
    loader: F,
    on_refresh: impl FnOnce(LoadGuard<V>, F),
) -> Result<Option<V>, Error>
where
    V: Clone + Send + Sync + 'static,
    F: FnOnce() -> Result<Option<V>, E>,
    E: Into<Box<dyn core::error::Error + Send + Sync>>,
{
    let mut step = lookup::lookup(table, key, refresh)?;
    loop {
        match step {
            Lookup::Hit(hit) => {
                if let Some(guard) = hit.refresh {
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
                return run(guard, loader);
            }
        }
    }
}

/// Runs a refresh on the spawner, if the origin budget has room for it now; otherwise (or
/// without a spawner) the guard is dropped, which hands the refresh over.
fn refresh_in_background<V, F, E>(table: &Table<V>, mut guard: LoadGuard<V>, loader: F)
where
    V: Clone + Send + Sync + 'static,
    F: FnOnce() -> Result<Option<V>, E> + Send + 'static,
    E: Into<Box<dyn core::error::Error + Send + Sync>>,
{
    if let Some(spawner) = &table.spawner {
        spawner.spawn(Box::pin(async move {
            if guard.try_begin() {
                let _ = run(guard, loader);
            }
        }));
    }
}

/// Runs `loader` for `guard`, turning a panic into [`Error::LoaderPanicked`] for the
/// waiters before it carries on unwinding in this thread.
fn run<V, F, E>(guard: LoadGuard<V>, loader: F) -> Result<Option<V>, Error>
where
    V: Clone + Send + Sync + 'static,
    F: FnOnce() -> Result<Option<V>, E>,
    E: Into<Box<dyn core::error::Error + Send + Sync>>,
{
    match catch_unwind(AssertUnwindSafe(loader)) {
        Ok(result) => guard.complete(result.map_err(load_error)),
        Err(payload) => {
            let message = panic_message(&*payload);
            guard.panicked(message);
            resume_unwind(payload)
        }
    }
}
