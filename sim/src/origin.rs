//! The origin: a database (or upstream) behind a connection pool.
//!
//! A call queues for a connection (first come, first served), holds it for the load time,
//! and answers a value born at the end of the load. The load time may grow with the number
//! of calls running (`slowdown`): a herd then also makes every load slower, as it does to a
//! real database. Every call is recorded, so a run can say how many calls the origin saw,
//! how many were outstanding at once (running or queued), and when.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use herdless::Clock;
use serde::Serialize;

use crate::executor::Handle;

/// A value as the simulation caches it: when the origin produced it and how long that took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimValue {
    /// Virtual time at which the origin produced it (the end of its load).
    pub born: Duration,
    /// How long its load took (XFetch's delta, for strategies that keep it client-side).
    pub delta: Duration,
}

/// How the origin behaves.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OriginConfig {
    /// Time one call takes on an idle origin.
    pub load_time: Duration,
    /// Connections: at most this many calls run at once, the rest queue (None: unlimited).
    pub pool: Option<usize>,
    /// Each call already running when a call starts makes it this fraction slower
    /// (0: load time independent of load).
    pub slowdown: f64,
    /// A call still queued for a connection after this long fails (None: waits forever).
    pub queue_timeout: Option<Duration>,
}

impl OriginConfig {
    /// An origin answering in `load_time` with an unlimited pool and no slowdown.
    pub fn new(load_time: Duration) -> Self {
        Self {
            load_time,
            pool: None,
            slowdown: 0.0,
            queue_timeout: None,
        }
    }
}

/// Why an origin call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OriginError {
    /// Queued for a connection longer than `queue_timeout`.
    QueueTimeout,
}

impl std::fmt::Display for OriginError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("timed out waiting for an origin connection")
    }
}

impl std::error::Error for OriginError {}

/// What the origin saw during a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct OriginStats {
    /// Calls made (each a request to the origin, whether it got a connection or not).
    pub calls: u64,
    /// Calls that failed (queue timeout).
    pub errors: u64,
    /// Most calls outstanding at once (running or queued).
    pub peak: u32,
    /// Most calls for one key outstanding at once (1: that key never herded).
    pub peak_per_key: u32,
    /// Calls that started while another call of the same key was outstanding.
    pub simultaneous: u64,
    /// Start time of every call, in order.
    #[serde(skip)]
    pub starts: Vec<Duration>,
    /// Calls made for each key.
    #[serde(skip)]
    pub calls_by_key: BTreeMap<String, u64>,
    /// (time, calls outstanding) at every change.
    #[serde(skip)]
    pub timeline: Vec<(Duration, u32)>,
}

#[derive(Default)]
struct State {
    running: usize,
    queue: VecDeque<u64>,
    wakers: HashMap<u64, Waker>,
    granted: Vec<u64>,
    next_ticket: u64,
    outstanding: u32,
    per_key: HashMap<String, u32>,
    stats: OriginStats,
}

/// The simulated origin of one run.
pub(crate) struct Origin {
    cfg: OriginConfig,
    exists: fn(&str) -> bool,
    state: RefCell<State>,
}

impl Origin {
    /// An origin where `exists(key)` says whether a key has a value (else it answers absent).
    pub(crate) fn new(cfg: OriginConfig, exists: fn(&str) -> bool) -> Rc<Self> {
        Rc::new(Self {
            cfg,
            exists,
            state: RefCell::default(),
        })
    }

    pub(crate) fn stats(&self) -> OriginStats {
        self.state.borrow().stats.clone()
    }

    /// Calls the origin for `key`.
    pub(crate) async fn call(
        self: &Rc<Self>,
        handle: &Handle,
        key: &str,
    ) -> Result<Option<SimValue>, OriginError> {
        let now = handle.now();
        self.enter(key, now);
        let got = Connect {
            origin: self.clone(),
            handle: handle.clone(),
            ticket: None,
            deadline: self.cfg.queue_timeout.map(|t| now + t),
            armed: false,
        }
        .await;
        if got.is_err() {
            let mut st = self.state.borrow_mut();
            st.stats.errors += 1;
            drop(st);
            self.leave(key, handle.now());
            return Err(OriginError::QueueTimeout);
        }
        let others = self.state.borrow().running.saturating_sub(1);
        let load = self
            .cfg
            .load_time
            .mul_f64(1.0 + self.cfg.slowdown * others as f64);
        handle.sleep(load).await;
        self.release();
        let now = handle.now();
        self.leave(key, now);
        Ok((self.exists)(key).then_some(SimValue {
            born: now,
            delta: load,
        }))
    }

    fn enter(&self, key: &str, now: Duration) {
        let mut st = self.state.borrow_mut();
        st.stats.calls += 1;
        st.stats.starts.push(now);
        *st.stats.calls_by_key.entry(key.to_string()).or_insert(0) += 1;
        st.outstanding += 1;
        st.stats.peak = st.stats.peak.max(st.outstanding);
        let o = st.outstanding;
        st.stats.timeline.push((now, o));
        let n = st.per_key.entry(key.to_string()).or_insert(0);
        *n += 1;
        let n = *n;
        if n > 1 {
            st.stats.simultaneous += 1;
        }
        st.stats.peak_per_key = st.stats.peak_per_key.max(n);
    }

    fn leave(&self, key: &str, now: Duration) {
        let mut st = self.state.borrow_mut();
        st.outstanding -= 1;
        let o = st.outstanding;
        st.stats.timeline.push((now, o));
        if let Some(n) = st.per_key.get_mut(key) {
            *n -= 1;
            if *n == 0 {
                st.per_key.remove(key);
            }
        }
    }

    /// Gives the connection to the first queued call, or back to the pool.
    fn release(&self) {
        let mut st = self.state.borrow_mut();
        match st.queue.pop_front() {
            Some(t) => {
                st.granted.push(t);
                if let Some(w) = st.wakers.remove(&t) {
                    drop(st);
                    w.wake();
                }
            }
            None => st.running -= 1,
        }
    }
}

/// Waiting for a connection.
struct Connect {
    origin: Rc<Origin>,
    handle: Handle,
    ticket: Option<u64>,
    deadline: Option<Duration>,
    armed: bool,
}

impl Future for Connect {
    type Output = Result<(), OriginError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let mut st = this.origin.state.borrow_mut();
        match this.ticket {
            None => {
                let free = this.origin.cfg.pool.is_none_or(|p| st.running < p);
                if free && st.queue.is_empty() {
                    st.running += 1;
                    return Poll::Ready(Ok(()));
                }
                let t = st.next_ticket;
                st.next_ticket += 1;
                st.queue.push_back(t);
                this.ticket = Some(t);
            }
            Some(t) => {
                if let Some(i) = st.granted.iter().position(|&g| g == t) {
                    // The connection was handed over by `release`: `running` stays as is.
                    st.granted.swap_remove(i);
                    this.ticket = None;
                    return Poll::Ready(Ok(()));
                }
                if this.deadline.is_some_and(|d| this.handle.now() >= d) {
                    st.queue.retain(|&q| q != t);
                    st.wakers.remove(&t);
                    this.ticket = None;
                    return Poll::Ready(Err(OriginError::QueueTimeout));
                }
            }
        }
        let t = this.ticket.expect("queued");
        st.wakers.insert(t, cx.waker().clone());
        drop(st);
        if let (Some(d), false) = (this.deadline, this.armed) {
            this.armed = true;
            this.handle.clock().wake_at(d, cx.waker().clone());
        }
        Poll::Pending
    }
}
