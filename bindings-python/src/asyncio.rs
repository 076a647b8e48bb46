//! The bridge that turns an engine future (or a call of the call machine, polled with the
//! GIL: `driver::event_loop`) into an asyncio future.
//!
//! The bridge needs no runtime of its own: the future is polled on the event loop's
//! thread; when it is woken (by a leader finishing, the backend's runtime, or the clock),
//! the waker asks the loop to poll it again with `call_soon_threadsafe` (on the loop's own
//! thread, in a batch with the bridges woken there meanwhile: one `call_soon` for a herd). A waker called on a thread without the GIL only queues the wake-up
//! for a small waking thread (`crate::wake`, started again in a child of `fork`): waiting
//! for the GIL there could deadlock with the loop's thread. Cancelling the asyncio future drops the engine
//! future (a waiter leaves; a leader's pending step hands the load over). A wake-up for a
//! loop that is already closed is dropped silently.

use std::future::Future;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use parking_lot::Mutex;
use pyo3::intern;
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
            // Exiting: the engine future is left to the process's end.
            return;
        }
        let bridge = self.0.get();
        // Counted, so the interpreter's exit waits for this hand-over to finish.
        let scheduled = crate::shutdown::attach(|py| {
            let event_loop = bridge.event_loop.bind(py);
            // Woken inside the loop itself (a leader that finished on it wakes its whole
            // herd from there): polled with the others woken meanwhile by one callback of
            // the loop, not a `call_soon_threadsafe` each, which writes to the loop's
            // self-pipe once per waiter (a system call each).
            if running_loop(py).is_ok_and(|l| l.is(event_loop)) {
                return due(py, self.0.clone_ref(py), event_loop);
            }
            // The bridge itself is the callback (`bridge()` polls): no bound method per wake-up.
            let poll = self.0.bind(py).clone();
            event_loop
                .call_method1(intern!(py, "call_soon_threadsafe"), (poll,))
                .map(drop)
        });
        if !matches!(scheduled, Some(Ok(()))) {
            // The loop is closed (or the interpreter gone): let the engine future go.
            let poller = bridge.poller.lock().take();
            drop(poller);
        }
    }
}

/// Bridges woken on their loop's thread, polled in the order they were woken by one
/// callback of the loop (`call_soon(due)`): a herd of N waiters woken by its leader costs the
/// loop one callback, not N (each a `Handle` made in Python, with a copy of the context).
#[pyclass(frozen, module = "herdless._native", name = "_Due")]
pub(crate) struct Due {
    event_loop: Py<PyAny>,
    /// `None` once polled: later wake-ups make a new batch.
    bridges: Mutex<Option<Vec<Py<Bridge>>>>,
}

thread_local! {
    /// The batch this thread's loop will poll next, while it takes more bridges.
    static DUE: std::cell::RefCell<Option<Py<Due>>> = const { std::cell::RefCell::new(None) };
}

/// Adds `bridge` to the batch of `event_loop` (running on this thread), scheduling a new
/// batch when there is none open for it.
fn due(py: Python<'_>, bridge: Py<Bridge>, event_loop: &Bound<'_, PyAny>) -> PyResult<()> {
    let bridge = DUE.with(|d| {
        let d = d.borrow();
        match d.as_ref().map(Py::get) {
            Some(due) if due.event_loop.is(event_loop) => match due.bridges.lock().as_mut() {
                Some(open) => {
                    open.push(bridge);
                    None
                }
                None => Some(bridge),
            },
            _ => Some(bridge),
        }
    });
    let Some(bridge) = bridge else {
        return Ok(());
    };
    let batch = Py::new(
        py,
        Due {
            event_loop: event_loop.clone().unbind(),
            bridges: Mutex::new(Some(vec![bridge])),
        },
    )?;
    // No borrow held while the loop's (Python) `call_soon` runs.
    event_loop.call_method1(intern!(py, "call_soon"), (batch.clone_ref(py),))?;
    DUE.with(|d| *d.borrow_mut() = Some(batch));
    Ok(())
}

#[pymethods]
impl Due {
    /// Polls the batch's bridges; the first error is raised (to the loop's exception
    /// handler) after every bridge was polled.
    fn __call__(&self, py: Python<'_>) -> PyResult<()> {
        let bridges = self.bridges.lock().take().unwrap_or_default();
        let mut first = Ok(());
        for bridge in bridges {
            let polled = Bridge::poll(bridge.bind(py), false);
            if first.is_ok() {
                first = polled;
            }
        }
        first
    }
}

/// `asyncio._get_running_loop`: the loop running in this thread, or `None` (no exception).
static GET_RUNNING_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// The event loop running in this thread, or `None`.
pub(crate) fn running_loop(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    call_asyncio(py, &GET_RUNNING_LOOP, "_get_running_loop")
}

/// `asyncio.<name>()`, the function looked up once into `cell`.
fn call_asyncio<'py>(
    py: Python<'py>,
    cell: &PyOnceLock<Py<PyAny>>,
    name: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let f = cell.get_or_try_init(py, || {
        py.import("asyncio")?.getattr(name).map(Bound::unbind)
    })?;
    f.bind(py).call0()
}

#[pymethods]
impl Bridge {
    /// `bridge()` polls the engine future (on the loop's thread: the bridge itself is what
    /// `call_soon` is given); `bridge(future)` is the asyncio future's done callback.
    #[pyo3(signature = (future=None))]
    fn __call__(slf: &Bound<'_, Self>, future: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        match future {
            None => Self::poll(slf, false),
            Some(future) => slf.get().done(future),
        }
    }
}

impl Bridge {
    /// Polls the engine future (on the loop's thread); delivers its answer when ready.
    /// `first`: the poll that made the asyncio future, which cannot be done yet.
    fn poll(slf: &Bound<'_, Self>, first: bool) -> PyResult<()> {
        let py = slf.py();
        let _attached = crate::wake::Attached::enter(py);
        let this = slf.get();
        this.queued.store(false, Ordering::Release);
        let future = this.future.bind(py);
        if !first && future.call_method0(intern!(py, "done"))?.is_truthy()? {
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
        // The done callback is only for a cancellation: taken off before the answer, so
        // that setting it schedules the awaiting task alone (not one more callback per
        // future, each a `call_soon` of the loop).
        future.call_method1(intern!(py, "remove_done_callback"), (slf,))?;
        match deliver(py) {
            Ok(v) => future.call_method1(intern!(py, "set_result"), (v,))?,
            Err(e) => future.call_method1(intern!(py, "set_exception"), (e.into_value(py),))?,
        };
        Ok(())
    }

    /// The asyncio future is done: a cancelled one lets the engine future go.
    fn done(&self, future: &Bound<'_, PyAny>) -> PyResult<()> {
        if future
            .call_method0(intern!(future.py(), "cancelled"))?
            .is_truthy()?
        {
            drop(self.poller.lock().take());
        }
        Ok(())
    }
}

/// `asyncio.get_running_loop` (raises without a running loop).
static GET_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// The event loop running in this thread (`RuntimeError` without one, as asyncio raises).
pub(crate) fn get_running_loop(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    call_asyncio(py, &GET_LOOP, "get_running_loop")
}

/// A new asyncio future of `event_loop`.
pub(crate) fn create_future<'py>(event_loop: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    event_loop.call_method0(intern!(event_loop.py(), "create_future"))
}

/// An asyncio future of `fut`'s answer, converted by `deliver` on the loop's thread.
pub(crate) fn awaitable<'py, T: Send + 'static>(
    py: Python<'py>,
    fut: impl Future<Output = T> + Send + 'static,
    deliver: impl FnOnce(Python<'_>, T) -> PyResult<Py<PyAny>> + Send + 'static,
) -> PyResult<Bound<'py, PyAny>> {
    let mut fut = Box::pin(fut);
    let event_loop = get_running_loop(py)?;
    let future = create_future(&event_loop)?;
    bridge(
        &event_loop,
        &future,
        move |_, cx| fut.as_mut().poll(cx),
        deliver,
    )?;
    Ok(future)
}

/// Makes `future` (of `event_loop`, running in this thread) end with what `poll` ends with,
/// converted by `deliver`; `poll` is called on the loop's thread with the GIL (so it may
/// call Python: a batch's loader), the first time now.
pub(crate) fn bridge<'py, T: Send + 'static>(
    event_loop: &Bound<'py, PyAny>,
    future: &Bound<'py, PyAny>,
    mut poll: impl FnMut(Python<'_>, &mut Context<'_>) -> Poll<T> + Send + 'static,
    deliver: impl FnOnce(Python<'_>, T) -> PyResult<Py<PyAny>> + Send + 'static,
) -> PyResult<()> {
    let py = event_loop.py();
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
            event_loop: event_loop.clone().unbind(),
            queued: AtomicBool::new(false),
        },
    )?;
    future.call_method1(intern!(py, "add_done_callback"), (bridge.clone(),))?;
    Bridge::poll(&bridge, true)
}
