//! The world of one run: what its tasks share (the engines of the simulated processes,
//! the origin, the fleet tier, the draws) and what its clients saw.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use herdless::{Cache, Error};
use rand_core::Rng;

use crate::executor::Handle;
use crate::origin::{Origin, SimValue};
use crate::strategy::{Knobs, Strategy};
use crate::tier::FleetTier;

/// What the clients of one run saw.
#[derive(Default)]
pub(crate) struct Recorder {
    pub(crate) requests: u64,
    /// Client latency of every answered or failed request, in nanoseconds.
    pub(crate) latencies: Vec<u64>,
    pub(crate) stale: u64,
    pub(crate) oldest: Duration,
    /// Sum of the ages of the values served, and how many there were (for the mean).
    pub(crate) age_sum: Duration,
    pub(crate) aged: u64,
    pub(crate) errors: u64,
    pub(crate) timeouts: u64,
    /// Client-side XFetch decisions (xfetch-uncoordinated only).
    pub(crate) early: u64,
}

/// Everything the tasks of one run share.
pub(crate) struct World {
    pub(crate) handle: Handle,
    pub(crate) origin: Rc<Origin>,
    /// One engine per simulated process.
    pub(crate) processes: Vec<Cache<SimValue>>,
    pub(crate) strategy: Strategy,
    pub(crate) knobs: Knobs,
    /// The fleet-wide lock and shared tier, when processes coalesce across the fleet.
    pub(crate) fleet: Option<FleetTier>,
    pub(crate) rec: RefCell<Recorder>,
    /// Draws of the traffic (arrivals, keys, pauses).
    pub(crate) rng: RefCell<herdless::DefaultRng>,
    /// Draws of the strategies (client-side XFetch, the fleet tier's jitter): a stream of
    /// its own, so every strategy sees the same arrivals.
    pub(crate) decide: RefCell<herdless::DefaultRng>,
    /// Misses the engines counted while the scenario filled or warmed them before traffic.
    pub(crate) setup_misses: Cell<u64>,
}

impl World {
    pub(crate) fn now(&self) -> Duration {
        self.handle.now()
    }

    /// Uniform in [0, 1).
    pub(crate) fn unit(&self) -> f64 {
        (self.rng.borrow_mut().next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [0, 1), from the strategies' stream.
    pub(crate) fn decide_unit(&self) -> f64 {
        (self.decide.borrow_mut().next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [0, n).
    pub(crate) fn below(&self, n: u64) -> u64 {
        (self.unit() * n as f64) as u64 % n.max(1)
    }

    /// An exponential gap of mean `1 / rate` seconds (Poisson arrivals).
    pub(crate) fn exp_gap(&self, rate: f64) -> Duration {
        Duration::from_secs_f64(-(1.0 - self.unit()).ln() / rate)
    }

    pub(crate) fn serve(&self, arrived: Duration, value: Option<SimValue>, stale: bool) {
        let now = self.now();
        let mut rec = self.rec.borrow_mut();
        rec.latencies.push(nanos(now - arrived));
        if stale {
            rec.stale += 1;
        }
        if let Some(v) = value {
            let age = now.saturating_sub(v.born);
            rec.oldest = rec.oldest.max(age);
            rec.age_sum += age;
            rec.aged += 1;
        }
    }

    pub(crate) fn fail(&self, arrived: Duration, error: &Error) {
        let now = self.now();
        let mut rec = self.rec.borrow_mut();
        rec.latencies.push(nanos(now - arrived));
        match error {
            Error::WaitTimeout { .. } | Error::LoadTimeout { .. } => rec.timeouts += 1,
            _ => rec.errors += 1,
        }
    }

    pub(crate) fn answer(&self, arrived: Duration, result: Result<Option<SimValue>, Error>) {
        match result {
            Ok(v) => self.serve(arrived, v, false),
            Err(e) => self.fail(arrived, &e),
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
