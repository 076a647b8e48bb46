//! The virtual clock and its event queue.
//!
//! Every future in the simulation (the engine's waiters and budget waits, the origin's
//! connection queue, client think times) sleeps through [`Clock::wake_at`]. The clock turns
//! each such call into an event in one `BinaryHeap` ordered by (virtual time, sequence
//! number), so events due at the same instant fire in the order they were scheduled and a
//! run is deterministic. Time moves only when the executor pops the next event.

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Waker;
use std::time::Duration;

use herdless::Clock;

/// One scheduled event: wake this task at this virtual time.
struct Event {
    at: Duration,
    seq: u64,
    waker: Waker,
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    // Reversed: `BinaryHeap` is a max-heap and the earliest event must come out first.
    fn cmp(&self, other: &Self) -> CmpOrdering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

#[derive(Default)]
struct Queue {
    heap: BinaryHeap<Event>,
    seq: u64,
}

#[derive(Default)]
struct Inner {
    nanos: AtomicU64,
    queue: Mutex<Queue>,
}

/// The simulation's clock: a [`Clock`] whose timers are events of the simulator.
///
/// Cloning gives another handle to the same time line. The engine reads it through
/// `now`/`now_fast` (both exact here) and schedules its timers (wait timeouts, soft and hard
/// load timeouts, budget waits) through `wake_at`.
#[derive(Clone, Default)]
pub struct SimClock {
    inner: Arc<Inner>,
}

impl SimClock {
    /// A clock at time zero with no events.
    pub fn new() -> Self {
        Self::default()
    }

    /// Pops the earliest event, moves time to it and returns its waker.
    pub(crate) fn advance(&self) -> Option<Waker> {
        let event = self.lock().heap.pop()?;
        // Never backwards: an event scheduled "in the past" fires now.
        self.inner
            .nanos
            .fetch_max(nanos(event.at), Ordering::AcqRel);
        Some(event.waker)
    }

    /// Events not yet fired.
    pub fn pending(&self) -> usize {
        self.lock().heap.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.inner.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Clock for SimClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.inner.nanos.load(Ordering::Acquire))
    }

    fn wake_at(&self, deadline: Duration, waker: Waker) {
        // Due now still goes through the queue: the wake-up happens after the current
        // task yields, in sequence order, never re-entrantly inside the engine's call.
        let mut q = self.lock();
        q.seq += 1;
        let seq = q.seq;
        q.heap.push(Event {
            at: deadline,
            seq,
            waker,
        });
    }
}

impl std::fmt::Debug for SimClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimClock")
            .field("now", &self.now())
            .field("pending", &self.pending())
            .finish()
    }
}
