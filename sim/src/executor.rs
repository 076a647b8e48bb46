//! A single-threaded executor on the virtual clock.
//!
//! Simulated clients, background refreshes and workers are ordinary futures. They run until
//! they wait (for the engine, the origin or a think time); a wake-up puts them on the ready
//! queue, which is drained before time moves to the next event of the [`SimClock`]. Nothing
//! runs on a real thread or a real timer, so seconds of traffic take milliseconds.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use herdless::Clock;

use crate::clock::SimClock;

type Task = Pin<Box<dyn Future<Output = ()>>>;

/// Tasks woken and waiting to be polled, in wake-up order.
type Ready = Arc<Mutex<VecDeque<u64>>>;

struct TaskWaker {
    id: u64,
    ready: Ready,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.ready
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(self.id);
    }
}

/// What tasks use to reach the executor: spawn more tasks, sleep, read the time.
#[derive(Clone)]
pub(crate) struct Handle {
    clock: SimClock,
    spawned: Rc<RefCell<Vec<(u64, Task)>>>,
    next_id: Rc<Cell<u64>>,
}

impl Handle {
    /// Runs `task` from the next round on.
    pub(crate) fn spawn(&self, task: impl Future<Output = ()> + 'static) {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        self.spawned.borrow_mut().push((id, Box::pin(task)));
    }

    /// The virtual time now.
    pub(crate) fn now(&self) -> Duration {
        self.clock.now()
    }

    /// The clock (for the engine).
    pub(crate) fn clock(&self) -> &SimClock {
        &self.clock
    }

    /// Resolves at virtual time `at`.
    pub(crate) fn sleep_until(&self, at: Duration) -> Sleep {
        Sleep {
            clock: self.clock.clone(),
            at,
            armed: false,
        }
    }

    /// Resolves after `d` of virtual time.
    pub(crate) fn sleep(&self, d: Duration) -> Sleep {
        self.sleep_until(self.now() + d)
    }
}

/// The future of [`Handle::sleep_until`].
pub(crate) struct Sleep {
    clock: SimClock,
    at: Duration,
    armed: bool,
}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.clock.now() >= self.at {
            return Poll::Ready(());
        }
        if !self.armed {
            self.armed = true;
            self.clock.wake_at(self.at, cx.waker().clone());
        }
        Poll::Pending
    }
}

/// Runs tasks on a [`SimClock`] until no task can make progress.
pub(crate) struct Executor {
    handle: Handle,
    tasks: HashMap<u64, (Task, Waker)>,
    ready: Ready,
}

impl Executor {
    pub(crate) fn new(clock: SimClock) -> Self {
        Self {
            handle: Handle {
                clock,
                spawned: Rc::default(),
                next_id: Rc::new(Cell::new(0)),
            },
            tasks: HashMap::new(),
            ready: Ready::default(),
        }
    }

    pub(crate) fn handle(&self) -> Handle {
        self.handle.clone()
    }

    /// Runs until every task has finished and no event is left, or time passes `until`
    /// (tasks still waiting then are dropped, as a process being stopped would drop them).
    pub(crate) fn run(&mut self, until: Duration) {
        loop {
            self.run_ready();
            let Some(waker) = self.handle.clock.advance() else {
                break;
            };
            if self.handle.now() > until {
                break;
            }
            waker.wake();
        }
        // Drop what is left in a fixed order (the engine's guards hand their loads over on
        // drop, which must not depend on hash order).
        let mut left: Vec<_> = self.tasks.drain().collect();
        left.sort_by_key(|(id, _)| *id);
        drop(left);
    }

    fn run_ready(&mut self) {
        loop {
            let spawned = std::mem::take(&mut *self.handle.spawned.borrow_mut());
            for (id, task) in spawned {
                let waker = Waker::from(Arc::new(TaskWaker {
                    id,
                    ready: self.ready.clone(),
                }));
                self.tasks.insert(id, (task, waker));
                self.ready
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push_back(id);
            }
            let next = self
                .ready
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop_front();
            let Some(id) = next else {
                if self.handle.spawned.borrow().is_empty() {
                    return;
                }
                continue;
            };
            // A wake-up for a finished task (a stale timer) is ignored.
            let Some((task, waker)) = self.tasks.get_mut(&id) else {
                continue;
            };
            let waker = waker.clone();
            let mut cx = Context::from_waker(&waker);
            if task.as_mut().poll(&mut cx).is_ready() {
                self.tasks.remove(&id);
            }
        }
    }
}
