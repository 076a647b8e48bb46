//! Blocking a Python thread on an engine future (a waiter, the origin budget) with the GIL
//! released, without becoming deaf to Ctrl-C.
//!
//! Python runs signal handlers only on the main thread, between bytecodes; a main thread
//! parked in Rust would sit through Ctrl-C until its wait ended. So the main thread parks in
//! short slices and runs pending signal handlers between them; other threads (which never
//! receive signals) park until woken, re-checking deadlines now and then (see
//! [`RECHECK_SLICE`]). [`block_on`] polls an engine future with the GIL released;
//! [`drive`] polls with the GIL held (a call of the call machine runs loaders and codecs as
//! it is polled) and releases it only to park.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

/// How often a blocked main thread looks for pending signals.
const SIGNAL_SLICE: Duration = Duration::from_millis(20);

/// How often any blocked thread polls again without being woken. The engine's timers
/// (`wait_timeout`, the origin budget's deadline) are woken by a timer thread, which does not
/// exist in a process forked after it started (gunicorn, Celery prefork): a waiter there
/// would never time out. Polling checks the deadlines itself, so waits stay bounded.
const RECHECK_SLICE: Duration = Duration::from_millis(100);

struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

static MAIN_THREAD: PyOnceLock<u64> = PyOnceLock::new();

thread_local! {
    /// This thread's answer of [`on_main_thread`], asked of `threading` once per thread.
    static IS_MAIN: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

/// Whether this is the interpreter's main thread (the one signal handlers run on).
fn on_main_thread(py: Python<'_>) -> PyResult<bool> {
    if let Some(main) = IS_MAIN.with(|m| m.get()) {
        return Ok(main);
    }
    let threading = py.import("threading")?;
    let main = *MAIN_THREAD.get_or_try_init(py, || {
        threading
            .call_method0("main_thread")?
            .getattr("ident")?
            .extract::<u64>()
    })?;
    let is_main = threading.call_method0("get_ident")?.extract::<u64>()? == main;
    IS_MAIN.with(|m| m.set(Some(is_main)));
    Ok(is_main)
}

/// Polls `fut` to completion on this thread with the GIL released. On the main thread, a
/// signal handler that raises (KeyboardInterrupt) ends the wait with its exception; `fut` is
/// then dropped by the caller, which is how a waiter leaves or a leader hands its load over.
pub(crate) fn block_on<F>(py: Python<'_>, fut: &mut F) -> PyResult<F::Output>
where
    F: Future + Unpin + Send,
    F::Output: Send,
{
    // The exit waits for this wait (and refuses new ones): see `shutdown`.
    let _busy = crate::shutdown::Busy::enter()?;
    let main = on_main_thread(py)?;
    // One waker for the whole wait, so that the engine's `will_wake` checks hold and a
    // sliced wait does not register a new timer per slice.
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    loop {
        let ready = py.detach(|| {
            let mut cx = Context::from_waker(&waker);
            loop {
                if let Poll::Ready(v) = Pin::new(&mut *fut).poll(&mut cx) {
                    return Some(v);
                }
                if main {
                    thread::park_timeout(SIGNAL_SLICE);
                    if let Poll::Ready(v) = Pin::new(&mut *fut).poll(&mut cx) {
                        return Some(v);
                    }
                    return None;
                }
                thread::park_timeout(RECHECK_SLICE);
            }
        });
        match ready {
            Some(v) => return Ok(v),
            None => py.check_signals()?,
        }
    }
}

/// Polls `poll` (with the GIL: it may run Python code) until it is ready, parking this
/// thread with the GIL released in between; signals are handled as in [`block_on`] (a
/// raising handler ends the drive, and the caller drops what `poll` drives, which hands its
/// load over). The exit waits for a drive that parked (see `shutdown`); one that never
/// parks (a hit) costs no more than its poll.
pub(crate) fn drive<T>(
    py: Python<'_>,
    mut poll: impl FnMut(&mut Context<'_>) -> Poll<T>,
) -> PyResult<T> {
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut parked: Option<(crate::shutdown::Busy, bool)> = None;
    loop {
        if let Poll::Ready(v) = poll(&mut cx) {
            return Ok(v);
        }
        let main = match &parked {
            Some((_, main)) => *main,
            None => {
                parked
                    .insert((crate::shutdown::Busy::enter()?, on_main_thread(py)?))
                    .1
            }
        };
        let slice = if main { SIGNAL_SLICE } else { RECHECK_SLICE };
        py.detach(|| thread::park_timeout(slice));
        if main {
            py.check_signals()?;
        }
    }
}
