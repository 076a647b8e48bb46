//! The backend's own tokio runtime, and how futures reach it from any caller.
//!
//! Redis connections, timers, lease extension and the pub/sub listener live on a small
//! runtime the backend owns, so every caller works the same: a tokio task of another
//! runtime, a non-tokio executor (Python's asyncio bridge, Node's), or a plain thread.
//!
//! - [`InRuntime`] polls a future with the runtime's context entered, so tokio timers and
//!   sockets made inside it belong to the backend's runtime whoever polls it; the runtime's
//!   worker threads drive the I/O and timers and wake the poller.
//! - [`Runtime::close`] shuts an owned runtime down at once (its worker thread ends, its
//!   tasks, the connections' included, are dropped, so their sockets close); every future
//!   made by [`Runtime::enter`] that is still held answers "closed" when next polled, and
//!   is never polled inside the dead runtime (a tokio timer polled there panics).
//! - [`block_on`] runs a future to its end on the calling thread. It may be called from
//!   any thread, including a worker of another tokio runtime (it blocks that worker, which
//!   is a waste but never a deadlock, since the work happens on the backend's runtime). On
//!   one of the backend's own threads it would wait for itself: it returns
//!   [`Error::BlockingInRuntime`](crate::Error::BlockingInRuntime) instead.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

use tokio::runtime::Handle;

use crate::error::Error;

thread_local! {
    static OWN_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// The runtime: owned (shut down in the background on drop or [`close`](Self::close)), or
/// a handle to the user's.
pub(crate) struct Runtime {
    owned: Mutex<Option<tokio::runtime::Runtime>>,
    handle: Handle,
    /// Set by `close` under the write lock; a poll of a [`Gated`] future holds the read
    /// lock, so none is inside the runtime when it is shut down, and none enters it after.
    closed: Arc<RwLock<bool>>,
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
            owned: Mutex::new(Some(rt)),
            handle,
            closed: Arc::default(),
        })
    }

    /// Runs on a runtime the caller owns (its threads must keep running).
    pub(crate) fn from_handle(handle: Handle) -> Self {
        Self {
            owned: Mutex::new(None),
            handle,
            closed: Arc::default(),
        }
    }

    pub(crate) fn handle(&self) -> &Handle {
        &self.handle
    }

    /// `fut`, polled with this runtime's context entered; once the runtime is closed, it
    /// answers `closed()` instead, without being polled again.
    pub(crate) fn enter<F: Future>(&self, fut: F, closed: fn() -> F::Output) -> Gated<F> {
        Gated {
            inner: in_runtime(&self.handle, fut),
            gate: self.closed.clone(),
            closed,
        }
    }

    /// A backend's operation: `f` polled inside this runtime, bounded by `after` (then
    /// [`Error::Timeout`] naming `op`), a failure counted in `errors`; once the runtime is
    /// closed, [`Error::Closed`] (not counted). Every shared tier runs its calls through it.
    pub(crate) fn bounded<'a, T: Send + 'a>(
        &self,
        op: &'static str,
        after: std::time::Duration,
        errors: &'a std::sync::atomic::AtomicU64,
        f: impl Future<Output = Result<T, Error>> + Send + 'a,
    ) -> Gated<impl Future<Output = Result<T, Error>> + Send + 'a> {
        let bounded = async move {
            let r = match tokio::time::timeout(after, f).await {
                Ok(r) => r,
                Err(_) => Err(Error::Timeout { op, after }),
            };
            if r.is_err() {
                crate::metrics::inc(errors);
            }
            r
        };
        self.enter(bounded, || Err(Error::Closed))
    }

    /// Closes the runtime: futures of [`enter`](Self::enter) answer "closed" from now on,
    /// and an owned runtime is shut down without waiting (its thread ends, its tasks are
    /// dropped: timers fire, which wakes those futures, and sockets close). A user's
    /// runtime is left running. Idempotent.
    pub(crate) fn close(&self) {
        // Waits for the polls in progress (they are short: no user code runs in them).
        *self.closed.write().unwrap_or_else(PoisonError::into_inner) = true;
        let owned = self
            .owned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(rt) = owned {
            rt.shutdown_background();
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // `Runtime`'s own drop panics inside an async context; this one never blocks.
        let owned = self.owned.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(rt) = owned.take() {
            rt.shutdown_background();
        }
    }
}

/// A future of [`Runtime::enter`]: polled inside the runtime while it is open, answering
/// its `closed` value once the runtime was closed.
pub(crate) struct Gated<F: Future> {
    inner: InRuntime<F>,
    gate: Arc<RwLock<bool>>,
    closed: fn() -> F::Output,
}

impl<F: Future> Future for Gated<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        let closed = this.gate.read().unwrap_or_else(PoisonError::into_inner);
        if *closed {
            return Poll::Ready((this.closed)());
        }
        Pin::new(&mut this.inner).poll(cx)
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
