//! Wake-ups of asyncio bridges that arrive on threads not holding the GIL (the backend's
//! runtime, the timer thread, another Python thread's blocking call).
//!
//! Such a thread must never wait for the GIL inside a waker: it may be holding a lock of
//! its own (a Redis connection's list of wakers, the engine's flight record) that the
//! thread holding the GIL is about to take while it polls, and neither would go on. So a
//! waker called there only queues the wake-up, which a thread of its own (started on first
//! use, and again in a child of `fork`) hands to the loop with the GIL, holding no other
//! lock. A waker called with the GIL held (marked by [`Attached`]) hands it over at once.

use std::cell::Cell;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

/// A wake-up to hand to an event loop with the GIL.
pub(crate) trait Deliver: Send + Sync {
    /// Schedules the poll on the loop (called with no lock held).
    fn deliver(&self);
}

thread_local! {
    /// How many [`Attached`] marks this thread holds.
    static ATTACHED: Cell<u32> = const { Cell::new(0) };
}

/// Marks this thread as holding the GIL (in a poll on the loop, or finishing a load) while
/// alive: wake-ups here are handed over at once.
pub(crate) struct Attached(());

impl Attached {
    /// The mark; take it only while the GIL is held (a `Python<'_>` proves it).
    pub(crate) fn enter(_py: pyo3::Python<'_>) -> Self {
        ATTACHED.with(|a| a.set(a.get() + 1));
        Self(())
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        ATTACHED.with(|a| a.set(a.get() - 1));
    }
}

struct Queue {
    waiting: Vec<Arc<dyn Deliver>>,
    /// The process whose thread drains the queue (a child of `fork` starts its own).
    pid: u32,
}

static QUEUE: Mutex<Queue> = Mutex::new(Queue {
    waiting: Vec::new(),
    pid: 0,
});
static READY: Condvar = Condvar::new();

/// Hands `wake` to its loop: at once with the GIL held, else through the waking thread.
pub(crate) fn wake(wake: Arc<dyn Deliver>) {
    if ATTACHED.with(Cell::get) > 0 {
        wake.deliver();
        return;
    }
    let mut q = QUEUE.lock();
    let pid = std::process::id();
    if q.pid != pid {
        // No thread (the first wake-up, or a child of `fork`): start one. None can be
        // started (at exit): the wake-up is dropped with its bridge, as a closed loop's is.
        q.waiting.clear();
        let started = std::thread::Builder::new()
            .name("herdless-asyncio-wake".into())
            .spawn(drain);
        if started.is_err() {
            return;
        }
        q.pid = pid;
    }
    q.waiting.push(wake);
    READY.notify_one();
}

/// The waking thread: hands each queued wake-up over, holding no lock meanwhile.
fn drain() {
    loop {
        let batch = {
            let mut q = QUEUE.lock();
            while q.waiting.is_empty() {
                READY.wait(&mut q);
            }
            std::mem::take(&mut q.waiting)
        };
        for w in batch {
            w.deliver();
        }
    }
}
