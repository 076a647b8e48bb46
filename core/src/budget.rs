//! The origin budget: at most N loader calls at once across all keys, so a mass
//! expiry or a cold start cannot exceed the origin's connection pool. Permits are handed over
//! first come, first served; a waiter that leaves gives back a permit it was already handed.

use alloc::collections::VecDeque;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};

use crate::sync::{Arc, Mutex};

struct Queued {
    id: u64,
    waker: Option<Waker>,
}

struct State {
    available: usize,
    queue: VecDeque<Queued>,
    /// Ids that were handed a permit while queued and have not collected it yet.
    granted: alloc::vec::Vec<u64>,
    next_id: u64,
}

/// A counting semaphore of loader calls.
pub(crate) struct Budget {
    state: Mutex<State>,
    max: usize,
}

/// One loader call's share of the budget; returned when dropped.
pub(crate) struct Permit {
    budget: Arc<Budget>,
}

/// A share of the origin budget held by a load that runs outside a [`LoadGuard`]
/// (e.g. the Redis tier's detached refresh of a stale shared entry): while it lives, the
/// load counts against the budget; dropping it gives the share back.
///
/// [`LoadGuard`]: crate::LoadGuard
#[must_use = "the share is given back as soon as the permit is dropped"]
pub struct OriginPermit {
    // Held for its `Drop` (None: the cache has no budget).
    permit: Option<Permit>,
}

impl OriginPermit {
    pub(crate) fn new(permit: Option<Permit>) -> Self {
        Self { permit }
    }
}

impl core::fmt::Debug for OriginPermit {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("OriginPermit")
            .field("budgeted", &self.permit.is_some())
            .finish()
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.budget.release();
    }
}

impl Budget {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            state: Mutex::new(State {
                available: max,
                queue: VecDeque::new(),
                granted: alloc::vec::Vec::new(),
                next_id: 0,
            }),
            max,
        }
    }

    /// Loader calls running now.
    pub(crate) fn in_use(&self) -> usize {
        let st = self.state.lock();
        self.max - st.available - st.granted.len()
    }

    /// A permit if one is free and nobody queues before us.
    // `this`, not `self: &Arc<Self>`: loom's Arc cannot be a method receiver.
    pub(crate) fn try_acquire(this: &Arc<Self>) -> Option<Permit> {
        let mut st = this.state.lock();
        if st.available > 0 && st.queue.is_empty() {
            st.available -= 1;
            return Some(Permit {
                budget: this.clone(),
            });
        }
        None
    }

    /// Waits for a permit, first come first served.
    pub(crate) fn acquire(this: &Arc<Self>) -> Acquire {
        Acquire {
            budget: this.clone(),
            id: None,
        }
    }

    fn release(&self) {
        let waker = {
            let mut st = self.state.lock();
            match st.queue.pop_front() {
                Some(q) => {
                    st.granted.push(q.id);
                    q.waker
                }
                None => {
                    st.available += 1;
                    None
                }
            }
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// The future of [`Budget::acquire`].
pub(crate) struct Acquire {
    budget: Arc<Budget>,
    id: Option<u64>,
}

impl Future for Acquire {
    type Output = Permit;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Permit> {
        let this = &mut *self;
        let mut st = this.budget.state.lock();
        match this.id {
            None => {
                if st.available > 0 && st.queue.is_empty() {
                    st.available -= 1;
                    drop(st);
                    return Poll::Ready(Permit {
                        budget: this.budget.clone(),
                    });
                }
                let id = st.next_id;
                st.next_id += 1;
                st.queue.push_back(Queued {
                    id,
                    waker: Some(cx.waker().clone()),
                });
                this.id = Some(id);
                Poll::Pending
            }
            Some(id) => {
                if let Some(pos) = st.granted.iter().position(|&g| g == id) {
                    st.granted.swap_remove(pos);
                    this.id = None;
                    drop(st);
                    return Poll::Ready(Permit {
                        budget: this.budget.clone(),
                    });
                }
                if let Some(q) = st.queue.iter_mut().find(|q| q.id == id) {
                    q.waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}

impl Drop for Acquire {
    fn drop(&mut self) {
        let Some(id) = self.id else { return };
        let mut st = self.budget.state.lock();
        if let Some(pos) = st.granted.iter().position(|&g| g == id) {
            // Handed a permit we will never use: pass it on.
            st.granted.swap_remove(pos);
            drop(st);
            self.budget.release();
        } else if let Some(pos) = st.queue.iter().position(|q| q.id == id) {
            st.queue.remove(pos);
        }
    }
}
