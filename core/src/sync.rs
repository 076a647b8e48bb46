//! Where locks, atomics and `Arc` come from: parking_lot under `std`, spin without it, and
//! loom's checked versions under `cfg(herdless_loom)`. The rest of the crate imports only
//! from here, so a loom model exercises the real code.

#[cfg(not(herdless_loom))]
pub(crate) use alloc::sync::Arc;
#[cfg(not(herdless_loom))]
pub(crate) use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

#[cfg(herdless_loom)]
pub(crate) use loom::sync::Arc;
#[cfg(herdless_loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

#[cfg(all(feature = "std", not(herdless_loom)))]
pub(crate) type Mutex<T> = parking_lot::Mutex<T>;
#[cfg(all(feature = "std", not(herdless_loom)))]
pub(crate) type RwLock<T> = parking_lot::RwLock<T>;

#[cfg(all(not(feature = "std"), not(herdless_loom)))]
pub(crate) type Mutex<T> = spin::Mutex<T>;
#[cfg(all(not(feature = "std"), not(herdless_loom)))]
pub(crate) type RwLock<T> = spin::RwLock<T>;

#[cfg(herdless_loom)]
pub(crate) use self::loom_locks::{Mutex, RwLock};

#[cfg(herdless_loom)]
mod loom_locks {
    /// loom's Mutex with the poison-free interface the crate uses.
    #[derive(Debug, Default)]
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);
    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Self(loom::sync::Mutex::new(value))
        }
        pub(crate) fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
            self.0.lock().unwrap_or_else(|e| e.into_inner())
        }
    }

    /// loom's RwLock with the poison-free interface the crate uses.
    #[derive(Debug, Default)]
    pub(crate) struct RwLock<T>(loom::sync::RwLock<T>);
    impl<T> RwLock<T> {
        pub(crate) fn new(value: T) -> Self {
            Self(loom::sync::RwLock::new(value))
        }
        pub(crate) fn read(&self) -> loom::sync::RwLockReadGuard<'_, T> {
            self.0.read().unwrap_or_else(|e| e.into_inner())
        }
        pub(crate) fn write(&self) -> loom::sync::RwLockWriteGuard<'_, T> {
            self.0.write().unwrap_or_else(|e| e.into_inner())
        }
    }
}

/// Pads a value to its own cache line so hot counters of different stripes do not share one.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct CachePadded<T>(pub(crate) T);
