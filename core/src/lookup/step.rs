//! What [`Cache::lookup`](crate::Cache::lookup) answers: the step its caller takes next.

use super::guard::LoadGuard;
use super::waiter::Waiter;
use crate::entry::HitState;

/// What a caller of [`Cache::lookup`](crate::Cache::lookup) does next.
#[must_use = "a Lead must be completed and a Wait awaited, or the key's waiters are handed over"]
pub enum Lookup<V: Clone + Send + Sync + 'static> {
    /// Serve this value now.
    Hit(Hit<V>),
    /// You load the value: run the loader and [`complete`](LoadGuard::complete) the guard.
    /// Callers arriving meanwhile wait for you.
    Lead(LoadGuard<V>),
    /// Someone else is loading: await (or [`wait`](Waiter::wait) on) this.
    Wait(Waiter<V>),
}

/// A value to serve now, possibly with a refresh for the caller to run in the background.
pub struct Hit<V: Clone + Send + Sync + 'static> {
    /// The value; `None` is a cached absence.
    pub value: Option<V>,
    /// How fresh it is.
    pub state: HitState,
    /// When set, this caller was chosen (alone) to refresh the key: run the loader in the
    /// background and complete the guard; do not make the current request wait for it.
    /// Never set on a cache without a spawner
    /// ([`Builder::without_spawner`](crate::Builder::without_spawner)).
    pub refresh: Option<LoadGuard<V>>,
}
