//! The bridge that turns an engine future (or a call of the call machine, polled with the
//! GIL: `driver::event_loop`) into an asyncio future.
//!
//! The bridge needs no runtime of its own: the future is polled on the event loop's
//! thread; when it is woken (by a leader finishing, the backend's runtime, or the clock),
//! the waker asks the loop to poll it again with `call_soon_threadsafe` (`call_soon` on the
//! loop's own thread). A waker called on a thread without the GIL only queues the wake-up
//! for a small waking thread (`crate::wake`, started again in a child of `fork`): waiting
//! for the GIL there could deadlock with the loop's thread. Cancelling the asyncio future drops the engine
//! future (a waiter leaves; a leader's pending step hands the load over). A wake-up for a
//! loop that is already closed is dropped silently.

use std::future::Future;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

/// Turns an engine answer into the Python object the awaiting task receives.
type Deliver = Box<dyn FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send>;
type Poller = Box<dyn FnMut(Python<'_>, &mut Context<'_>) -> Poll<Deliver> + Send>;

/// An engine future bridged to an asyncio future (see the module docs).
#[pyclass(frozen, module = "herdless._native", name = "_Bridge")]
pub(crate) struct Bridge {
    poller: Mutex<Option<Poller>>,
    future: Py<PyAny>,
    event_loop: Py<PyAny>,
    /// A poll is scheduled on the loop: more wake-ups before it runs add nothing.
    queued: AtomicBool,
}

struct BridgeWaker(Py<Bridge>);

impl Wake for BridgeWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let bridge = self.0.get();
        // At exit the interpreter cannot be attached to from other threads: nobody is left
        // to deliver to (see `shutdown`).
        if crate::shutdown::shutting_down() || bridge.queued.swap(true, Ordering::AcqRel) {
            return;
        }
        // Never waits for the GIL here (see `wake`).
        crate::wake::wake(self.clone());
    }
}

impl crate::wake::Deliver for BridgeWaker {
    fn deliver(&self) {
        if crate::shutdown::shutting_down() {
            return;
        }
        let bridge = self.0.get();
        let scheduled = Python::try_attach(|py| {
            let poll = self.0.bind(py).getattr("_poll")?;
            let event_loop = bridge.event_loop.bind(py);
            // Woken inside the loop itself (a leader that finished on it wakes its whole
            // herd from there): `call_soon`, not `call_soon_threadsafe`, which writes to
            // the loop's self-pipe once per waiter (a system call each).
            let method = match running_loop(py).is_ok_and(|l| l.is(event_loop)) {
                true => "call_soon",
                false => "call_soon_threadsafe",
            };
            event_loop.call_method1(method, (poll,)).map(drop)
        });
        if !matches!(scheduled, Some(Ok(()))) {
            // The loop is closed (or the interpreter gone): let the engine future go.
            let poller = bridge.poller.lock().take();
            drop(poller);
        }
    }
}

/// `asyncio._get_running_loop`: the loop running in this thread, or `None` (no exception).
static GET_RUNNING_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// The event loop running in this thread, or `None`.
fn running_loop(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    let get = GET_RUNNING_LOOP.get_or_try_init(py, || {
        py.import("asyncio")?
            .getattr("_get_running_loop")
            .map(Bound::unbind)
    })?;
    get.bind(py).call0()
}

#[pymethods]
impl Bridge {
    /// Polls the engine future (on the loop's thread); delivers its answer when ready.
    fn _poll(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        let _attached = crate::wake::Attached::enter(py);
        let this = slf.get();
        this.queued.store(false, Ordering::Release);
        let future = this.future.bind(py);
        if future.call_method0("done")?.is_truthy()? {
            drop(this.poller.lock().take());
            return Ok(());
        }
        let waker = Waker::from(Arc::new(BridgeWaker(slf.clone().unbind())));
        let mut cx = Context::from_waker(&waker);
        let mut poller = this.poller.lock();
        let Some(poll) = poller.as_mut() else {
            return Ok(());
        };
        let Poll::Ready(deliver) = poll(py, &mut cx) else {
            return Ok(());
        };
        *poller = None;
        drop(poller);
        match deliver(py) {
            Ok(v) => future.call_method1("set_result", (v,))?,
            Err(e) => future.call_method1("set_exception", (e.into_value(py),))?,
        };
        Ok(())
    }

    /// The asyncio future is done: a cancelled one lets the engine future go.
    fn _done(&self, future: &Bound<'_, PyAny>) -> PyResult<()> {
        if future.call_method0("cancelled")?.is_truthy()? {
            drop(self.poller.lock().take());
        }
        Ok(())
    }
}

/// An asyncio future of `fut`'s answer, converted by `deliver` on the loop's thread.
pub(crate) fn awaitable<'py, T: Send + 'static>(
    py: Python<'py>,
    fut: impl Future<Output = T> + Send + 'static,
    deliver: impl FnOnce(Python<'_>, T) -> PyResult<Py<PyAny>> + Send + 'static,
) -> PyResult<Bound<'py, PyAny>> {
    let mut fut = Box::pin(fut);
    awaitable_with(py, move |_, cx| fut.as_mut().poll(cx), deliver)
}

/// An asyncio future of what `poll` ends with, converted by `deliver`; `poll` is called on
/// the loop's thread with the GIL (so it may call Python: a batch's loader).
pub(crate) fn awaitable_with<'py, T: Send + 'static>(
    py: Python<'py>,
    mut poll: impl FnMut(Python<'_>, &mut Context<'_>) -> Poll<T> + Send + 'static,
    deliver: impl FnOnce(Python<'_>, T) -> PyResult<Py<PyAny>> + Send + 'static,
) -> PyResult<Bound<'py, PyAny>> {
    let event_loop = py.import("asyncio")?.call_method0("get_running_loop")?;
    let future = event_loop.call_method0("create_future")?;
    let mut deliver = Some(deliver);
    let poller: Poller = Box::new(move |py, cx| match poll(py, cx) {
        Poll::Pending => Poll::Pending,
        Poll::Ready(v) => {
            let d = deliver.take().expect("delivered once");
            Poll::Ready(Box::new(move |py| d(py, v)))
        }
    });
    let bridge = Bound::new(
        py,
        Bridge {
            poller: Mutex::new(Some(poller)),
            future: future.clone().unbind(),
            event_loop: event_loop.unbind(),
            queued: AtomicBool::new(false),
        },
    )?;
    future.call_method1("add_done_callback", (bridge.getattr("_done")?,))?;
    Bridge::_poll(&bridge)?;
    Ok(future)
}
