//! Listeners: what happened to entries and loads ([`Event`]), told to a closure registered
//! on the builder ([`Builder::listener`](crate::Builder::listener)).
//!
//! The engine never calls the listener itself. It pushes an event into a bounded queue (a
//! `try_lock`, never a wait: a busy or full queue drops the event and counts it in
//! `events_dropped`) and, once its own locks are released, hands the draining to the
//! cache's spawner (one drain at a time), or, without a spawner, drains on that thread.
//! A slow listener therefore slows only the drain, and a stuck one only fills the queue.

use alloc::boxed::Box;
use alloc::collections::VecDeque;

use crate::error::Error;
use crate::spawn::Spawn;
use crate::sync::unchecked::Arc as StdArc;
use crate::sync::{AtomicBool, Mutex, Ordering};

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventKind {
    /// An entry was evicted to stay within capacity.
    Evicted,
    /// An entry expired past its retention without a refresh replacing it (seen when it
    /// was dropped: by the next lookup of its key or by eviction).
    Expired,
    /// A load failed (the loader's error or panic, or its hard timeout): see
    /// [`Event::error`].
    LoadFailed,
    /// A load failed and the key's stale value is served instead (fail-safe), without a
    /// new load for `failsafe_backoff`.
    FailSafe,
}

impl EventKind {
    /// The kind's name, as the bindings spell it: `"evict"`, `"expire"`, `"load_error"`,
    /// `"failsafe"`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Evicted => "evict",
            EventKind::Expired => "expire",
            EventKind::LoadFailed => "load_error",
            EventKind::FailSafe => "failsafe",
        }
    }
}

/// One event, for a [listener](crate::Builder::listener).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// To which key.
    pub key: Box<str>,
    /// The load's error, for [`EventKind::LoadFailed`] and [`EventKind::FailSafe`].
    pub error: Option<Error>,
}

/// A registered listener.
pub(crate) type Listener = StdArc<dyn Fn(Event) + Send + Sync>;

/// The bounded queue between the engine and its listener.
pub(crate) struct Events {
    queue: Mutex<VecDeque<Event>>,
    capacity: usize,
    /// A drain is running or handed to the spawner.
    draining: AtomicBool,
    /// Something was pushed since the last drain began (read without the queue's lock).
    pending: AtomicBool,
    /// Events are queued (not muted by [`Cache::set_listening`](crate::Cache::set_listening)).
    listening: AtomicBool,
    listener: Listener,
}

impl Events {
    pub(crate) fn new(listener: Listener, capacity: usize) -> Self {
        Self {
            queue: Mutex::new(VecDeque::new()),
            capacity,
            draining: AtomicBool::new(false),
            pending: AtomicBool::new(false),
            listening: AtomicBool::new(true),
            listener,
        }
    }

    /// Whether events are queued now (a relaxed load: a switch need not order anything).
    #[inline]
    pub(crate) fn listening(&self) -> bool {
        self.listening.load(Ordering::Relaxed)
    }

    pub(crate) fn set_listening(&self, on: bool) {
        self.listening.store(on, Ordering::Relaxed);
    }

    /// Queues `event`; `false` when it was dropped (the queue full or busy).
    pub(crate) fn push(&self, event: Event) -> bool {
        let Some(mut q) = self.queue.try_lock() else {
            return false;
        };
        if q.len() >= self.capacity {
            return false;
        }
        q.push_back(event);
        self.pending.store(true, Ordering::Release);
        true
    }

    /// Starts a drain if events wait and none runs: on `spawner`, or here without one.
    /// Called with none of the engine's locks held.
    pub(crate) fn deliver(self: &StdArc<Self>, spawner: Option<&StdArc<dyn Spawn>>) {
        if !self.pending.load(Ordering::Acquire) || self.draining.swap(true, Ordering::AcqRel) {
            return;
        }
        match spawner {
            Some(s) => {
                let me = self.clone();
                s.spawn(Box::pin(async move { me.drain() }));
            }
            None => self.drain(),
        }
    }

    /// Tells the listener every queued event, then lets the next drain start; picks up
    /// what was pushed while it let go.
    fn drain(&self) {
        loop {
            self.pending.store(false, Ordering::Release);
            loop {
                let next = self.queue.lock().pop_front();
                let Some(event) = next else { break };
                #[cfg(feature = "std")]
                {
                    // A panicking listener loses its event, not the drain.
                    let call = || (self.listener)(event);
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(call));
                }
                #[cfg(not(feature = "std"))]
                (self.listener)(event);
            }
            self.draining.store(false, Ordering::Release);
            if !self.pending.load(Ordering::Acquire) || self.draining.swap(true, Ordering::AcqRel) {
                return;
            }
        }
    }
}
