//! Blocking on a future with the calling thread: how the sync API waits (std only).
//! Under `cfg(herdless_loom)` loom's `block_on` parks instead, so a model sees every
//! wake-up of `Waiter::wait` and `LoadGuard::begin_blocking` (a lost one is a deadlock).

#[cfg(herdless_loom)]
pub(crate) use loom::future::block_on;

#[cfg(not(herdless_loom))]
pub(crate) use self::os::block_on;

#[cfg(not(herdless_loom))]
/// Parking the OS thread between polls.
mod os {

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
