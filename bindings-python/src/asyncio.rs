//! The fleet engine's steps as Python objects, for the asyncio driver written in Python
//! (herdless/_aio.py), and the bridge that turns an engine future into an asyncio future.
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

use herdless::{Retry, Waited, Waiter};
use herdless_redis::two_tier::{Load, Pending, Reply, Step};
use parking_lot::Mutex;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use crate::blocking::Handle;
use crate::codec::PyHost;
use crate::context::{LoadContext, to_loaded};
use crate::errors::{PyLoadError, map_error};
use crate::value::{Held, PyValue, to_caller};

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

/// A step of the engine as the Python driver sees it. `Done(Err)` raises instead.
pub(crate) fn to_python(
    py: Python<'_>,
    handle: &Handle,
    step: Step<PyValue>,
    host: &PyHost<'_, '_>,
) -> PyResult<Py<PyAny>> {
    if let Some(err) = host.take_interrupt() {
        return Err(err);
    }
    Ok(match step {
        Step::Done(r) => Py::new(py, Done(crate::blocking::answer(py, r)?))?.into_any(),
        Step::Load(load) => Py::new(py, LoadStep::new(handle, load))?.into_any(),
        Step::Stale(value, refresh) => {
            let refresh = match refresh {
                Some(load) => Some(Py::new(py, LoadStep::new(handle, load))?.into_any()),
                None => None,
            };
            Py::new(py, Stale(to_caller(py, Some(value))?, refresh))?.into_any()
        }
        Step::Tier(pending) => Py::new(py, TierStep::new(handle, pending))?.into_any(),
        Step::Interrupted(e) => return Err(PyRuntimeError::new_err(format!("herdless: {e}"))),
    })
}

/// The answer: `value` (the loader's value, a hit, another process's entry, or a fail-safe
/// value; `ABSENT` for an absence).
#[pyclass(frozen, module = "herdless._native", name = "_Done")]
pub(crate) struct Done(pub(crate) Py<PyAny>);

#[pymethods]
impl Done {
    /// The answer.
    #[getter]
    fn value(&self, py: Python<'_>) -> Py<PyAny> {
        self.0.clone_ref(py)
    }
}

/// Answer `value` (stale) now; `refresh`, if any, is a step to run in the background.
#[pyclass(frozen, module = "herdless._native", name = "_Stale")]
pub(crate) struct Stale(pub(crate) Py<PyAny>, pub(crate) Option<Py<PyAny>>);

#[pymethods]
impl Stale {
    /// The value to answer with now.
    #[getter]
    fn value(&self, py: Python<'_>) -> Py<PyAny> {
        self.0.clone_ref(py)
    }

    /// The background step, or None.
    #[getter]
    fn refresh(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.1.as_ref().map(|r| r.clone_ref(py))
    }
}

/// Await the shared tier: `await step.next()` is the next step.
#[pyclass(frozen, module = "herdless._native", name = "_Tier")]
pub(crate) struct TierStep {
    handle: Handle,
    pending: Mutex<Option<Pending<Reply<PyValue>>>>,
}

impl TierStep {
    fn new(handle: &Handle, pending: Pending<Reply<PyValue>>) -> Self {
        Self {
            handle: handle.clone(),
            pending: Mutex::new(Some(pending)),
        }
    }
}

#[pymethods]
impl TierStep {
    /// An awaitable of the next step. Cancelling it hands the load over.
    fn next<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let pending = self
            .pending
            .lock()
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("this step was already awaited"))?;
        let handle = self.handle.clone();
        awaitable(py, pending, move |py, reply| {
            let host = PyHost::new(py, &handle.codec);
            let next = reply.next(&host);
            to_python(py, &handle, next, &host)
        })
    }
}

/// Run the loader, then finish with `loaded(value)` or `failed(exc)`; each returns the
/// next step. Dropped unfinished, the load is handed over.
#[pyclass(frozen, module = "herdless._native", name = "_Load")]
pub(crate) struct LoadStep {
    handle: Handle,
    load: Mutex<Option<Load<PyValue>>>,
}

impl LoadStep {
    fn new(handle: &Handle, load: Load<PyValue>) -> Self {
        Self {
            handle: handle.clone(),
            load: Mutex::new(Some(load)),
        }
    }

    fn take(&self) -> PyResult<Load<PyValue>> {
        self.load
            .lock()
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("this load was already finished"))
    }

    fn with<R>(&self, f: impl FnOnce(&mut Load<PyValue>) -> R) -> PyResult<R> {
        let mut load = self.load.lock();
        let load = load
            .as_mut()
            .ok_or_else(|| PyRuntimeError::new_err("this load was already finished"))?;
        Ok(f(load))
    }

    fn remaining(&self, deadline: Option<std::time::Duration>) -> Option<f64> {
        let now = self.handle.tt.l1().clock().now();
        deadline.map(|d| d.as_secs_f64() - now.as_secs_f64())
    }

    fn finish(
        &self,
        py: Python<'_>,
        f: impl FnOnce(Load<PyValue>, &PyHost<'_, '_>) -> Step<PyValue>,
    ) -> PyResult<Py<PyAny>> {
        let _attached = crate::wake::Attached::enter(py);
        let load = self.take()?;
        let host = PyHost::new(py, &self.handle.codec);
        let next = f(load, &host);
        to_python(py, &self.handle, next, &host)
    }
}

#[pymethods]
impl LoadStep {
    /// The key being loaded.
    #[getter]
    fn key(&self) -> PyResult<String> {
        self.with(|l| l.key().to_owned())
    }

    /// Whether nobody awaits this load (a background refresh).
    #[getter]
    fn background(&self) -> PyResult<bool> {
        self.with(|l| l.is_background())
    }

    /// `(True, value)` when a fail-safe value would answer a failure, else `(False, None)`.
    #[getter]
    fn fallback(&self, py: Python<'_>) -> PyResult<(bool, Py<PyAny>)> {
        match self.with(|l| l.fallback().cloned())? {
            Some(v) => Ok((true, v.bind(py)?.unbind())),
            None => Ok((false, py.None())),
        }
    }

    /// Seconds until the soft timeout (negative when past), or None without one.
    fn soft_remaining(&self) -> PyResult<Option<f64>> {
        let d = self.with(|l| l.soft_deadline())?;
        Ok(self.remaining(d))
    }

    /// Seconds until the hard timeout (negative when past), or None without one.
    fn hard_remaining(&self) -> PyResult<Option<f64>> {
        let d = self.with(|l| l.hard_deadline())?;
        Ok(self.remaining(d))
    }

    /// The fail-safe value to answer the caller with at the soft timeout (counted), while
    /// the load goes on; `ABSENT` if there is none.
    fn answer_stale(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let v = self.with(|l| l.answer_stale())?;
        to_caller(py, v)
    }

    /// The context to hand a loader that takes one (`async def load(ctx)`).
    fn context(&self, py: Python<'_>) -> PyResult<Py<LoadContext>> {
        let ctx = self.with(|l| l.context())?;
        Py::new(py, LoadContext::new(ctx))
    }

    /// Finishes with the loader's value (`ABSENT`: an absence, a `Loaded`: its answer,
    /// with what the loader set on `ctx`); the next step.
    #[pyo3(signature = (value, ctx=None))]
    fn loaded(
        &self,
        py: Python<'_>,
        value: Bound<'_, PyAny>,
        ctx: Option<Py<LoadContext>>,
    ) -> PyResult<Py<PyAny>> {
        let loaded = match &ctx {
            Some(ctx) => ctx.get().answer(value, self.handle.codec.copy_values)?,
            None => to_loaded(value, self.handle.codec.copy_values)?,
        };
        self.finish(py, |load, host| load.loaded_with(Ok(loaded), host))
    }

    /// Finishes with the loader's exception (every waiter raises it); the next step, which
    /// raises it too unless a fail-safe value answers.
    fn failed(&self, py: Python<'_>, exc: Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let err = herdless::LoadError::new(PyLoadError::from_exception(exc));
        self.finish(py, |load, host| load.loaded_with(Err(err), host))
    }

    /// Finishes as past its hard timeout: the fail-safe value, or `LoadTimeout`.
    fn timed_out(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.finish(py, |load, _| load.timed_out())
    }

    /// Gives the load up without an answer: a waiter (here or in the fleet) takes it over.
    /// A no-op on a finished load.
    fn abandon(&self) {
        if let Some(l) = self.load.lock().take() {
            l.abandon();
        }
    }
}

/// Another caller is loading the key: `await wait.future()` is `_Done` or `_Retry`.
#[pyclass(frozen, module = "herdless._native", name = "_Wait")]
pub(crate) struct Wait {
    waiter: Mutex<Option<Waiter<Held>>>,
}

impl Wait {
    pub(crate) fn new(waiter: Waiter<Held>) -> Self {
        Self {
            waiter: Mutex::new(Some(waiter)),
        }
    }
}

/// The leader went away: look the key up again with this (the wait keeps its deadline).
#[pyclass(frozen, module = "herdless._native", name = "_Retry")]
pub(crate) struct RetryToken(pub(crate) Retry);

fn waited(py: Python<'_>, r: Result<Waited<Held>, herdless::Error>) -> PyResult<Py<PyAny>> {
    Ok(match r.map_err(|e| map_error(py, e))? {
        Waited::Loaded(v) => Py::new(py, Done(to_caller(py, v.map(|v| v.value))?))?.into_any(),
        Waited::Stale(v) => Py::new(py, Done(to_caller(py, Some(v.value))?))?.into_any(),
        Waited::Retry(r) => Py::new(py, RetryToken(r))?.into_any(),
    })
}

#[pymethods]
impl Wait {
    /// An awaitable of `_Done` or `_Retry`. Cancelling it removes only this waiter.
    fn future<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let waiter = self
            .waiter
            .lock()
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("this wait was already used"))?;
        awaitable(py, waiter, waited)
    }
}
