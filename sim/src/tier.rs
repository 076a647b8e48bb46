//! The modelled shared tier: one entry and one lock per key across the simulated processes
//! (see [`fleet`](crate::fleet) for how a process's leader uses it).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::origin::SimValue;

/// A shared entry.
#[derive(Clone, Copy)]
pub(crate) struct Shared {
    pub(crate) value: Option<SimValue>,
    pub(crate) fresh_until: Duration,
    pub(crate) delta: Duration,
}

/// Held while a key is being loaded for the whole fleet; wakes the waiting processes.
#[derive(Default)]
pub(crate) struct Notice {
    done: Cell<bool>,
    wakers: RefCell<Vec<Waker>>,
    /// Processes whose local leader waits for this load: they read the new entry
    /// themselves, so the notice leaves their copies alone.
    pub(crate) waiting: RefCell<Vec<usize>>,
}

/// The shared tier and the per-key fleet locks.
#[derive(Default)]
pub(crate) struct FleetTier {
    pub(crate) entries: RefCell<HashMap<String, Shared>>,
    pub(crate) locks: RefCell<HashMap<String, Rc<Notice>>>,
    /// Local leaders that found the fleet lock taken and waited for its holder.
    pub(crate) lock_waits: Cell<u64>,
}

impl FleetTier {
    /// Writes a shared entry directly (a scenario's prefill).
    pub(crate) fn insert(&self, key: &str, v: SimValue, fresh_until: Duration, delta: Duration) {
        self.entries.borrow_mut().insert(
            key.to_string(),
            Shared {
                value: Some(v),
                fresh_until,
                delta,
            },
        );
    }

    /// Frees the key's lock and wakes its waiters; returns the processes that waited.
    pub(crate) fn unlock(&self, key: &str) -> Vec<usize> {
        let Some(n) = self.locks.borrow_mut().remove(key) else {
            return Vec::new();
        };
        n.done.set(true);
        for w in n.wakers.take() {
            w.wake();
        }
        n.waiting.take()
    }
}

pub(crate) struct Notified(pub(crate) Rc<Notice>);

impl Future for Notified {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.done.get() {
            return Poll::Ready(());
        }
        self.0.wakers.borrow_mut().push(cx.waker().clone());
        Poll::Pending
    }
}
