//! Background work, injected. The engine never spawns by itself: a stale hit or an XFetch
//! decision hands the caller a refresh to run, and the async API runs it on a [`Spawn`].

use alloc::boxed::Box;
use core::future::Future;
use core::pin::Pin;

/// A boxed task the engine wants run in the background.
pub type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Runs background refreshes and loads that outlived their soft timeout.
///
/// Any `Fn(BoxFuture)` is a spawner, so tokio users write
/// `.spawner(|task| { tokio::spawn(task); })`.
pub trait Spawn: Send + Sync + 'static {
    /// Runs `task` to completion in the background.
    fn spawn(&self, task: BoxFuture);
}

impl<F: Fn(BoxFuture) + Send + Sync + 'static> Spawn for F {
    fn spawn(&self, task: BoxFuture) {
        self(task)
    }
}

/// The default spawner under `std`: one short-lived OS thread per task. Refreshes are rare
/// (one per stale key per period), so this costs little and needs no runtime.
#[cfg(feature = "std")]
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadSpawn;

#[cfg(feature = "std")]
impl Spawn for ThreadSpawn {
    fn spawn(&self, task: BoxFuture) {
        let spawned = std::thread::Builder::new()
            .name("herdless-refresh".into())
            .spawn(move || crate::sync::block_on(task));
        // Out of threads: the refresh is dropped, its guard hands the load over, and the
        // entry is refreshed by the next caller after grace.
        drop(spawned);
    }
}
