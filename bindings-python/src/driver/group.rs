//! `Cache.aget_or_load` and async decorated functions: the first lookup, and the herds.
//!
//! A herd is the asyncio callers of a key that wait, on one event loop, for a load. The
//! first caller of a loop whose lookup waits for a load is a call like any other (its
//! waiter registered with the flight, with its waker and deadline: the herd's anchor). Each
//! later caller of that loop that waits for that key while the anchor waits is a call of
//! its own, made from its own lookup (the engine counted it; its waiter keeps its own
//! arrival and deadline, never earlier than the anchor's), with its own asyncio future,
//! but is not polled until the anchor's call ends: a herd of 5,000 tasks costs one
//! registration, one waker and one wake-up instead of 5,000 of each, and no bridge per
//! member. When the anchor's call ends (answered, failed, cancelled, timed out), each
//! member is polled once: the machine answers it as it would have (the loaded value, a
//! fail-safe value, an error, its own timeout), and a member still waiting (its deadline
//! is later) or told to look up again goes on as a call of its own. Node's driver does the
//! same on the JS thread (`bindings-node/src/driver/group.rs`).
//!
//! A member whose task is cancelled is not told (that would take a done callback per
//! member): its call is dropped when the anchor ends, or sooner by the sweep each doubling
//! of a herd runs, so cancelled members never outnumber the live ones by much.

use std::sync::LazyLock;
use std::task::{Context, Poll, Waker};

use hashbrown::{Equivalent, HashMap};
use herdless::{Error, Lookup};
use herdless_redis::call::{Answer, Call, CallOptions, Failure};
use parking_lot::Mutex;
use pyo3::intern;
use pyo3::prelude::*;

use crate::asyncio::{create_future, get_running_loop, running_loop};
use crate::driver::Handle;
use crate::driver::event_loop::{Asyncio, Loop, caller_context, drive};
use crate::errors::map_error;
use crate::loader::Loader;
use crate::value::{Held, PyValue, to_caller};

/// The first step of `Cache.aget_or_load` (and of an async decorated function): `_Done` for
/// a plain hit (no call, no loader made), else, with `loader`, the asyncio future of the
/// call (run at once: no `_Call` object in between), without it a [`PendingCall`] to run
/// with the loader (the decorator makes its loader only past a plain hit).
pub(crate) fn lookup(
    py: Python<'_>,
    handle: &Handle,
    key: &str,
    options: CallOptions,
    loader: Option<Py<PyAny>>,
) -> PyResult<Py<PyAny>> {
    match handle.tt.l1().lookup(key) {
        Ok(Lookup::Hit(herdless::Hit {
            value,
            refresh: None,
            ..
        })) => Ok(Py::new(py, Done(to_caller(py, value.map(|v| v.value))?))?.into_any()),
        Err(e) => Err(map_error(py, e)),
        first => match loader {
            Some(loader) => run(py, handle, key, first, loader, options).map(Bound::unbind),
            None => {
                let call = PendingCall {
                    handle: handle.clone(),
                    key: key.to_owned(),
                    options,
                    first: Mutex::new(Some(first)),
                };
                Ok(Py::new(py, call)?.into_any())
            }
        },
    }
}

/// A plain hit's answer: `value` (`ABSENT` for an absence).
#[pyclass(frozen, module = "herdless._native", name = "_Done")]
pub(crate) struct Done(Py<PyAny>);

#[pymethods]
impl Done {
    /// The answer.
    #[getter]
    fn value(&self, py: Python<'_>) -> Py<PyAny> {
        self.0.clone_ref(py)
    }
}

/// A call of one key past its first lookup (a hit to refresh, a wait, a lead), waiting for
/// its loader: `await call.run(loader)` is the answer.
#[pyclass(frozen, module = "herdless._native", name = "_Call")]
pub(crate) struct PendingCall {
    handle: Handle,
    key: String,
    options: CallOptions,
    first: Mutex<Option<Result<Lookup<Held>, Error>>>,
}

#[pymethods]
impl PendingCall {
    /// An asyncio future of the value, loaded with `loader` when needed (see the module
    /// docs). Run once.
    fn run<'py>(&self, py: Python<'py>, loader: Py<PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let first = self.first.lock().take().ok_or_else(|| {
            pyo3::exceptions::PyRuntimeError::new_err("herdless: this call already ran")
        })?;
        run(
            py,
            &self.handle,
            &self.key,
            first,
            loader,
            self.options.clone(),
        )
    }
}

/// An asyncio future of the value of `key` from its first lookup `first`, loaded with
/// `loader` when needed: a member of the loop's herd of `key` when `first` waits for a load
/// and the herd is open, the anchor of a new herd when it waits and none is, else a call
/// of its own (see the module docs).
fn run<'py>(
    py: Python<'py>,
    handle: &Handle,
    key: &str,
    first: Result<Lookup<Held>, Error>,
    loader: Py<PyAny>,
    options: CallOptions,
) -> PyResult<Bound<'py, PyAny>> {
    let event_loop = get_running_loop(py)?;
    let future = create_future(&event_loop)?;
    let context = caller_context(py)?;
    let waits = matches!(first, Ok(Lookup::Wait(_)));
    let call = Call::new(&handle.tt, key, first, Loader::Call0(loader), options);
    if !waits {
        start(&event_loop, &future, handle, context, call, None)?;
        return Ok(future);
    }
    let of = HerdOf {
        cache: cache_id(handle),
        on: event_loop.as_ptr() as usize,
        key,
    };
    let member = Member {
        call,
        future: future.clone().unbind(),
        context,
    };
    let Some(Member { call, context, .. }) = HERDS.join(of, member, |m| is_done(m.future.bind(py)))
    else {
        return Ok(future);
    };
    let anchor = Anchor {
        handle: handle.clone(),
        on: event_loop.clone().unbind(),
        key: key.to_owned(),
    };
    HERDS.open(anchor.of());
    start(&event_loop, &future, handle, context, call, Some(anchor))?;
    Ok(future)
}

/// Drives `call` to `future`'s answer (see `event_loop::drive`); with `anchor`, ending it
/// (dropping it) ends its herd.
fn start(
    event_loop: &Bound<'_, PyAny>,
    future: &Bound<'_, PyAny>,
    handle: &Handle,
    context: Py<PyAny>,
    call: Call<PyValue, Asyncio>,
    anchor: Option<Anchor>,
) -> PyResult<()> {
    // The call before the anchor: its waiter leaves (or hands its lead over) before the
    // members go on.
    let poll = |(call, _): &mut (Call<PyValue, Asyncio>, Option<Anchor>),
                cx: &mut Context<'_>,
                rt: &Loop<'_, '_>| call.poll_call(cx, rt);
    let deliver = |py: Python<'_>, r: PyResult<Answer<PyValue, PyErr>>| answer(py, r?);
    drive(
        event_loop,
        future,
        handle,
        context,
        (call, anchor),
        poll,
        deliver,
    )
}

/// What the caller of a one-key call receives (or raises) for what the machine answered.
fn answer(py: Python<'_>, r: Answer<PyValue, PyErr>) -> PyResult<Py<PyAny>> {
    match r {
        Ok(v) => to_caller(py, v),
        Err(Failure::Error(e)) => Err(map_error(py, e)),
        Err(Failure::Raise(err)) => Err(err),
    }
}

/// The herds open now (see the module docs).
static HERDS: Groups = Groups {
    open: LazyLock::new(Default::default),
};

/// The herds open now, by cache, event loop and key.
struct Groups {
    open: LazyLock<Mutex<Index>>,
}

/// Each open herd by its cache, loop and key (see [`HerdOf`]).
type Index = HashMap<(usize, usize, String), Herd>;

/// Which herd: a cache and an event loop (by address: the anchor keeps both alive while
/// its herd is open), and a key.
#[derive(Hash, Clone, Copy)]
struct HerdOf<'a> {
    cache: usize,
    on: usize,
    key: &'a str,
}

impl Equivalent<(usize, usize, String)> for HerdOf<'_> {
    fn equivalent(&self, k: &(usize, usize, String)) -> bool {
        self.cache == k.0 && self.on == k.1 && self.key == k.2
    }
}

/// A cache's address, for the herds' index.
fn cache_id(handle: &Handle) -> usize {
    std::sync::Arc::as_ptr(&handle.codec) as usize
}

/// The members of a herd, in their order, and the size at which they are next swept.
struct Herd {
    members: Vec<Member>,
    sweep_at: usize,
}

/// A caller waiting in a herd: its call, the future its task awaits, its context.
struct Member {
    call: Call<PyValue, Asyncio>,
    future: Py<PyAny>,
    context: Py<PyAny>,
}

/// The smallest herd swept for cancelled members.
const SWEEP_FROM: usize = 64;

impl Groups {
    /// Adds `member` to the open herd `of`, if there is one; else gives it back. At each
    /// doubling of the herd, drops the members `gone` says are (outside the index's lock:
    /// `gone` and the members' drops may run Python code).
    fn join(
        &self,
        of: HerdOf<'_>,
        member: Member,
        gone: impl Fn(&Member) -> bool,
    ) -> Option<Member> {
        let mut open = self.open.lock();
        let Some(herd) = open.get_mut(&of) else {
            return Some(member);
        };
        herd.members.push(member);
        if herd.members.len() < herd.sweep_at {
            return None;
        }
        let mut members = std::mem::take(&mut herd.members);
        drop(open);
        members.retain(|m| !gone(m));
        let mut open = self.open.lock();
        // Only the loop's own thread ends a herd while the loop runs: it is still open.
        if let Some(herd) = open.get_mut(&of) {
            herd.sweep_at = SWEEP_FROM.max(2 * members.len());
            members.append(&mut herd.members);
            herd.members = members;
        }
        None
    }

    /// Opens the herd `of` (its anchor's call is starting).
    fn open(&self, of: HerdOf<'_>) {
        let herd = Herd {
            members: Vec::new(),
            sweep_at: SWEEP_FROM,
        };
        let key = (of.cache, of.on, of.key.to_owned());
        self.open.lock().insert(key, herd);
    }

    /// Closes the herd `of` (its anchor's call ended): its members, in their order.
    fn close(&self, of: HerdOf<'_>) -> Vec<Member> {
        let herd = self.open.lock().remove(&of);
        herd.map(|h| h.members).unwrap_or_default()
    }
}

/// A herd's anchor, held beside its call: dropped (the call ended, whichever way), it
/// closes the herd and its members go on.
struct Anchor {
    handle: Handle,
    on: Py<PyAny>,
    key: String,
}

impl Anchor {
    /// Its herd.
    fn of(&self) -> HerdOf<'_> {
        HerdOf {
            cache: cache_id(&self.handle),
            on: self.on.as_ptr() as usize,
            key: &self.key,
        }
    }
}

impl Drop for Anchor {
    fn drop(&mut self) {
        let members = HERDS.close(self.of());
        if members.is_empty() {
            return;
        }
        crate::shutdown::attach(|py| {
            let event_loop = self.on.bind(py);
            // Off the loop's thread, the loop is closed (a wake-up came too late): nobody
            // awaits the members, their calls are dropped.
            if running_loop(py).is_ok_and(|l| l.is(event_loop)) {
                go_on(py, &self.handle, event_loop, members);
            }
        });
    }
}

/// Each member of an ended herd polled once, on its loop's thread: answered, or going on
/// as a call of its own (see the module docs).
fn go_on(py: Python<'_>, handle: &Handle, event_loop: &Bound<'_, PyAny>, members: Vec<Member>) {
    let mut cx = Context::from_waker(Waker::noop());
    for Member {
        mut call,
        future,
        context,
    } in members
    {
        let future = future.bind(py);
        if is_done(future) {
            // Cancelled: its call is dropped (its waiter leaves).
            continue;
        }
        let rt = Loop::new(py, handle, &context);
        let polled = call.poll_call(&mut cx, &rt);
        let polled = match rt.take_interrupt() {
            Some(err) => Poll::Ready(Err(err)),
            None => polled.map(Ok),
        };
        let r = match polled {
            Poll::Ready(r) => match r.and_then(|r| answer(py, r)) {
                Ok(v) => future.call_method1(intern!(py, "set_result"), (v,)),
                Err(e) => future.call_method1(intern!(py, "set_exception"), (e.into_value(py),)),
            }
            .map(drop),
            // Polled again at once with a waker of its own.
            Poll::Pending => start(event_loop, future, handle, context, call, None),
        };
        // As the loop's exception handler would see a failing callback.
        if let Err(e) = r {
            e.write_unraisable(py, Some(future));
        }
    }
}

/// Whether `future` is done (a member's: only a cancellation ends it before its herd).
fn is_done(future: &Bound<'_, PyAny>) -> bool {
    future
        .call_method0(intern!(future.py(), "done"))
        .and_then(|d| d.is_truthy())
        .unwrap_or(true)
}
