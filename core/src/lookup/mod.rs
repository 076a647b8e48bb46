//! The caller's side of the state machine: what [`Cache::lookup`](crate::Cache::lookup)
//! decides, and the handles that finish the job — a [`LoadGuard`] for the caller that loads,
//! a [`Waiter`] for the callers that wait.

mod decide;
mod fallback;
mod guard;
mod step;
mod waiter;

pub(crate) use self::decide::{Refresh, lookup, lookup_again};
pub use self::guard::{Begin, LoadGuard};
pub use self::step::{Hit, Lookup};
pub use self::waiter::{Retry, Waited, Waiter};
