//! The convenience APIs over [`Cache::lookup`](crate::Cache::lookup): `get_or_load` (blocking,
//! `std`) and `get_or_load_async` (any executor).

mod asynchronous;
#[cfg(feature = "std")]
mod blocking;
mod warm;

pub use self::warm::WarmReport;

use alloc::boxed::Box;

use crate::error::LoadError;

/// The error types a loader may return: anything that converts into a boxed error.
pub(crate) fn load_error<E: Into<Box<dyn core::error::Error + Send + Sync>>>(e: E) -> LoadError {
    LoadError::from_boxed(e.into())
}
