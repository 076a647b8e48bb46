//! Where locks, atomics, `Arc` and thread blocking come from: parking_lot under `std`, spin
//! without it, and loom's checked versions under `cfg(herdless_loom)`. This is the only
//! module that chooses; the rest of the crate imports from here, so a loom model exercises
//! the real code.
//!
//! [`unchecked`] holds the few primitives loom never replaces, each for a reason given there.

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

#[cfg(not(herdless_loom))]
pub(crate) use self::cell::UnsafeCell;
/// A cell written through a raw pointer, with loom's interface (`with`, `with_mut`), so a
/// lock-free publication built on it is checked under loom.
#[cfg(herdless_loom)]
pub(crate) use loom::cell::UnsafeCell;

#[cfg(not(herdless_loom))]
mod cell {
    /// `core::cell::UnsafeCell` behind loom's interface.
    #[derive(Debug, Default)]
    pub(crate) struct UnsafeCell<T>(core::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(value: T) -> Self {
            Self(core::cell::UnsafeCell::new(value))
        }

        /// Runs `f` on a pointer for reading.
        #[inline]
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        /// Runs `f` on a pointer for writing.
        #[inline]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}

/// Blocks the calling thread on a future: how the blocking API waits. Under loom, loom's
/// `block_on`, so a model sees every wake-up of `Waiter::wait` and `LoadGuard::begin_blocking`
/// (a lost one is a deadlock).
#[cfg(all(feature = "std", herdless_loom))]
pub(crate) use loom::future::block_on;

#[cfg(all(feature = "std", not(herdless_loom)))]
pub(crate) use self::park::block_on;

/// Primitives that are never loom's. Each is shared by the whole process or outlives a loom
/// model, or cannot be modelled at all:
/// - `Arc` for trait objects (`dyn Clock`, `dyn Spawn`, a weigher, a loader's `dyn Error`)
///   and wakers (`alloc::task::Wake` needs it): loom's `Arc` holds neither, and they are
///   immutable once made, so there is nothing to check;
/// - the system clock's timer thread and the cached clock resolution, which belong to the
///   process, not to one cache.
/// - the state of [`testing::Runner`](crate::testing::Runner), a test harness outside any
///   model.
pub(crate) mod unchecked {
    pub(crate) use alloc::sync::Arc;
    #[cfg(feature = "std")]
    pub(crate) use core::sync::atomic::AtomicBool;
    // Only Linux's clock caches its resolution.
    #[cfg(all(feature = "std", target_os = "linux"))]
    pub(crate) use core::sync::atomic::AtomicU64;
    #[cfg(feature = "std")]
    pub(crate) use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
    // The cached process id (`flight::process_id`): reset by `fork`, not shared state
    // between threads of one run.
    #[cfg(all(feature = "std", target_os = "linux"))]
    pub(crate) use core::sync::atomic::AtomicU32;
    #[cfg(all(feature = "std", target_os = "linux"))]
    pub(crate) use std::sync::Once;
}

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
        /// Always takes the lock: the sampled paths that only try (the detector's tick, the
        /// hot-key tracker's sampled hit) then run in every model instead of being skipped
        /// by whichever schedule found the lock taken.
        pub(crate) fn try_lock(&self) -> Option<loom::sync::MutexGuard<'_, T>> {
            Some(self.lock())
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

#[cfg(all(feature = "std", not(herdless_loom)))]
/// Parking the OS thread between polls.
mod park {
    use core::future::Future;
    use core::pin::pin;
    use core::task::{Context, Poll, Waker};
    use std::sync::Arc;
    use std::task::Wake;
    use std::thread::{self, Thread};

    struct Unpark(Thread);

    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.unpark();
        }
    }

    /// Polls `fut` on this thread, parking between polls, until it is ready.
    pub(crate) fn block_on<F: Future>(fut: F) -> F::Output {
        let waker = Waker::from(Arc::new(Unpark(thread::current())));
        let mut cx = Context::from_waker(&waker);
        let mut fut = pin!(fut);
        loop {
            if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
                return v;
            }
            thread::park();
        }
    }
}

/// Pads a value to its own cache line so hot counters of different stripes do not share one.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct CachePadded<T>(pub(crate) T);
