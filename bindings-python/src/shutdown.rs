//! Exiting cleanly while herdless is busy on other threads.
//!
//! At interpreter exit, CPython 3.11-3.13 end every daemon thread that tries to attach to
//! the interpreter again with `pthread_exit`, which unwinds the thread's stack. A thread
//! that is inside a herdless call (running a loader, or waiting with the GIL released)
//! has this module's frames on that stack, and unwinding through them aborts the process
//! ("FATAL: exception not rethrown"). So an `atexit` hook, registered at import:
//!
//! 1. marks the interpreter as shutting down: from then on herdless calls neither run
//!    loaders nor release the GIL (they raise `RuntimeError`), and its wakers stop
//!    attaching to the interpreter;
//! 2. waits, with the GIL released, until every herdless call that is running a loader or
//!    waiting has returned to Python, and every thread of herdless's own that is attached
//!    (a waker handing a wake-up to its loop, an event listener, a loader task cancelled
//!    from the runtime: [`attach`]) has detached, for at most [`DRAIN`]. Threads then end
//!    in Python code, which is what CPython's exit handles, and herdless's own threads
//!    never attach again. (A waker caught inside `call_soon_threadsafe`, which releases the
//!    GIL to write to the loop's pipe, was stopped there by finalisation and crashed the
//!    process at exit: `tests/test_exit.py`.)
//!
//! `atexit` hooks run after the non-daemon threads were joined and before daemon threads
//! are stopped, which is the window this needs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

/// The longest the exit waits for herdless calls on other threads.
pub(crate) const DRAIN: Duration = Duration::from_secs(10);

static SHUTTING_DOWN: AtomicBool = AtomicBool::new(false);
static ACTIVE: Mutex<usize> = Mutex::new(0);
static IDLE: Condvar = Condvar::new();

/// Whether the interpreter is exiting (the hook ran).
pub(crate) fn shutting_down() -> bool {
    SHUTTING_DOWN.load(Ordering::Acquire)
}

/// A herdless call that may run Python code or release the GIL: the exit waits for it.
pub(crate) struct Busy(());

impl Busy {
    /// Enters, or refuses once the interpreter is exiting.
    pub(crate) fn enter() -> PyResult<Self> {
        Self::counted().ok_or_else(|| {
            PyRuntimeError::new_err(
                "herdless: the interpreter is shutting down; no new loads or waits",
            )
        })
    }

    /// Counted, unless the interpreter is exiting. Checked under the count's lock, which the
    /// hook holds while it raises its flag: a caller (with the GIL or from a thread of
    /// herdless's own) is either counted before the hook waits, or sees the flag.
    fn counted() -> Option<Self> {
        let mut n = ACTIVE.lock();
        if shutting_down() {
            return None;
        }
        *n += 1;
        Some(Busy(()))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let mut n = ACTIVE.lock();
        *n -= 1;
        if *n == 0 {
            IDLE.notify_all();
        }
    }
}

/// Runs `f` attached to the interpreter, from a thread that may be one of herdless's own
/// (not started by Python), unless the interpreter is exiting (`None`, as when it is gone).
/// Counted as a [`Busy`] call, so the exit hook waits for it to detach.
pub(crate) fn attach<R>(f: impl for<'py> FnOnce(Python<'py>) -> R) -> Option<R> {
    let _busy = Busy::counted()?;
    Python::try_attach(f)
}

/// The `atexit` hook (see the module docs).
#[pyfunction]
pub(crate) fn _drain_at_exit(py: Python<'_>) {
    {
        let _n = ACTIVE.lock();
        SHUTTING_DOWN.store(true, Ordering::Release);
    }
    py.detach(|| {
        let until = Instant::now() + DRAIN;
        let mut n = ACTIVE.lock();
        while *n > 0 && Instant::now() < until {
            IDLE.wait_until(&mut n, until);
        }
    });
}
