//! `get_or_load`: the blocking API. The leader runs the loader on its own thread; waiters
//! park; a background refresh gets a short-lived thread of its own.

use alloc::boxed::Box;
use alloc::string::String;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use super::load_error;
use crate::engine::Cache;
use crate::error::Error;
use crate::lookup::{LoadGuard, Lookup, Waited};

/// The message of a panic payload, when it is a string.
pub(crate) fn panic_message(payload: &(dyn core::any::Any + Send)) -> Option<String> {
    payload
        .downcast_ref::<&str>()
        .map(|s| String::from(*s))
        .or_else(|| payload.downcast_ref::<String>().cloned())
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

impl<V: Clone + Send + Sync + 'static> Cache<V> {
    /// The value of `key`, loading it with `loader` if needed; concurrent callers of one key
    /// share one load.
    ///
    /// The loader answers `Ok(Some(v))`, `Ok(None)` for "absent" (cached for
    /// `negative_ttl`), or an error (never cached; every waiter gets it). It runs on this
    /// thread when this caller leads, or on a background thread for a stale-while-revalidate
    /// or XFetch refresh, hence `Send + 'static`.
    ///
    /// # Panics
    /// A panic of the loader is re-raised here after every waiter received
    /// [`Error::LoaderPanicked`]; the next call loads again.
    ///
    /// ```
    /// let cache = herdless::Cache::<String>::new();
    /// let v = cache.get_or_load("user:42", || Ok::<_, std::io::Error>(Some("Ada".to_string())));
    /// assert_eq!(v.unwrap().as_deref(), Some("Ada"));
    /// ```
    pub fn get_or_load<F, E>(&self, key: &str, loader: F) -> Result<Option<V>, Error>
    where
        F: FnOnce() -> Result<Option<V>, E> + Send + 'static,
        E: Into<Box<dyn core::error::Error + Send + Sync>>,
    {
        let mut loader = Some(loader);
        let mut step = self.lookup(key)?;
        loop {
            match step {
                Lookup::Hit(hit) => {
                    if let (Some(mut guard), Some(loader)) = (hit.refresh, loader.take()) {
                        let spawned = std::thread::Builder::new()
                            .name("herdless-refresh".into())
                            .spawn(move || {
                                if guard.try_begin() {
                                    let _ = run(guard, loader);
                                }
                            });
                        // No thread: the guard is dropped, which hands the refresh over.
                        drop(spawned);
                    }
                    return Ok(hit.value);
                }
                Lookup::Wait(waiter) => match waiter.wait()? {
                    Waited::Loaded(v) => return Ok(v),
                    Waited::Stale(v) => return Ok(Some(v)),
                    Waited::Retry(r) => step = self.lookup_again(key, r)?,
                },
                Lookup::Lead(mut guard) => {
                    // Without a budget the load starts now, at the lookup's clock reading.
                    if !guard.begin_at_lookup() {
                        if let Err(e) = guard.begin_blocking() {
                            return guard.fail(e);
                        }
                    }
                    let loader = loader.take().expect("a caller leads at most once");
                    return run(guard, loader);
                }
            }
        }
    }
}
