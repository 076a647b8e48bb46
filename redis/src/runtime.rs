//! The backend's own tokio runtime, and how futures reach it from any caller.
//!
//! Redis connections, timers, lease extension and the pub/sub listener live on a small
//! runtime the backend owns, so every caller works the same: a tokio task of another
//! runtime, a non-tokio executor (Python's asyncio bridge, Node's), or a plain thread.
//!
//! - [`InRuntime`] polls a future with the runtime's context entered, so tokio timers and
//!   sockets made inside it belong to the backend's runtime whoever polls it; the runtime's
//!   worker threads drive the I/O and timers and wake the poller.
//! - [`block_on`] runs a future to its end on the calling thread. It may be called from
//!   any thread, including a worker of another tokio runtime (it blocks that worker, which
//!   is a waste but never a deadlock, since the work happens on the backend's runtime). On
//!   one of the backend's own threads it would wait for itself: it returns
//!   [`Error::BlockingInRuntime`](crate::Error::BlockingInRuntime) instead.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

use tokio::runtime::Handle;

use crate::error::Error;

thread_local! {
    static OWN_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// The runtime: owned (shut down in the background on drop), or a handle to the user's.
pub(crate) struct Runtime {
    owned: Option<tokio::runtime::Runtime>,
    handle: Handle,
}

impl Runtime {
    /// A multi-thread runtime of `threads` workers, named `herdless-redis`.
    pub(crate) fn new(threads: usize) -> std::io::Result<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name("herdless-redis")
            .on_thread_start(|| OWN_THREAD.with(|c| c.set(true)))
            .enable_all()
            .build()?;
        let handle = rt.handle().clone();
        Ok(Self {
            owned: Some(rt),
            handle,
        })
    }

    /// Runs on a runtime the caller owns (its threads must keep running).
    pub(crate) fn from_handle(handle: Handle) -> Self {
        Self {
            owned: None,
            handle,
        }
    }

    pub(crate) fn handle(&self) -> &Handle {
        &self.handle
    }

    /// `fut`, polled with this runtime's context entered.
    pub(crate) fn enter<F: Future>(&self, fut: F) -> InRuntime<F> {
        in_runtime(&self.handle, fut)
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // `Runtime`'s own drop panics inside an async context; this one never blocks.
        if let Some(rt) = self.owned.take() {
            rt.shutdown_background();
        }
    }
}

/// `fut`, polled with `handle`'s runtime context entered.
pub(crate) fn in_runtime<F: Future>(handle: &Handle, fut: F) -> InRuntime<F> {
    InRuntime {
        handle: handle.clone(),
        fut: Box::pin(fut),
    }
}

/// A future polled inside a runtime's context (see the module docs).
pub struct InRuntime<F> {
    handle: Handle,
    fut: Pin<Box<F>>,
}

impl<F: Future> Future for InRuntime<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        let _entered = this.handle.enter();
        this.fut.as_mut().poll(cx)
    }
}

struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Whether the current thread is one of a backend runtime's workers.
pub(crate) fn on_own_thread() -> bool {
    OWN_THREAD.with(Cell::get)
}

/// Runs `fut` to completion on this thread (see the module docs). Re-entrant: a loader run
/// inside may call the blocking API again.
pub fn block_on<F: Future>(fut: F) -> Result<F::Output, Error> {
    if on_own_thread() {
        return Err(Error::BlockingInRuntime);
    }
    let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return Ok(v);
        }
        // A spurious unpark only costs another poll.
        thread::park();
    }
}
