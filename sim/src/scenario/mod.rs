//! Scenarios of stampedes (a hot key, a mass expiry, a cold restart, a miss storm, a fleet,
//! XFetch, refresh-ahead against XFetch, the Internet Archive's experiment): who asks for
//! what, when, against which origin. Each is a plain struct of parameters (with defaults),
//! turned into traffic by [`Run`].

mod cold_restart;
mod fleet;
mod hot_key;
mod internet_archive;
mod mass_expiry;
mod miss_storm;
mod refresh_ahead_study;
mod setup;
mod traffic;
mod xfetch_study;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use herdless::{Builder, Cache, ConfigError, DefaultRng, MetricsSnapshot};
use rand_core::SeedableRng;

pub use self::cold_restart::ColdRestart;
pub use self::fleet::{FLEET_KEY, Fleet};
pub use self::hot_key::HotKey;
pub use self::internet_archive::{IA_ANCHORS, IaAnchor, IaStrategy, InternetArchive, comparison};
pub use self::mass_expiry::MassExpiry;
pub use self::miss_storm::MissStorm;
pub use self::refresh_ahead_study::RefreshAheadStudy;
pub use self::xfetch_study::XfetchStudy;

use self::setup::Setup;
use crate::clock::SimClock;
use crate::executor::Executor;
use crate::origin::{Origin, SimValue};
use crate::report::{Outcome, Row, render, render_markdown};
use crate::strategy::Strategy;
use crate::tier::FleetTier;
use crate::world::{Recorder, World};

/// Virtual time allowed after the traffic stops for the requests in flight to finish.
const DRAIN: Duration = Duration::from_secs(120);

/// A scenario with its parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum Scenario {
    /// One hot key expiring under load.
    HotKey(HotKey),
    /// Many keys written together, expiring together.
    MassExpiry(MassExpiry),
    /// A restart with an empty cache, with or without warm-up.
    ColdRestart(ColdRestart),
    /// Requests for random absent ids.
    MissStorm(MissStorm),
    /// Several processes, each with its own engine.
    Fleet(Fleet),
    /// XFetch on a hot key for one beta.
    XfetchStudy(XfetchStudy),
    /// Refresh-ahead against XFetch on one key or a long tail.
    RefreshAheadStudy(RefreshAheadStudy),
    /// The Internet Archive's RedisConf 2017 experiment.
    InternetArchive(InternetArchive),
}

impl Scenario {
    fn setup(&self) -> &dyn Setup {
        match self {
            Scenario::HotKey(s) => s,
            Scenario::MassExpiry(s) => s,
            Scenario::ColdRestart(s) => s,
            Scenario::MissStorm(s) => s,
            Scenario::Fleet(s) => s,
            Scenario::XfetchStudy(s) => s,
            Scenario::RefreshAheadStudy(s) => s,
            Scenario::InternetArchive(s) => s,
        }
    }

    /// Short name in tables.
    pub fn name(&self) -> &'static str {
        self.setup().name()
    }

    /// The variant, empty when the scenario has none.
    pub fn variant(&self) -> String {
        self.setup().variant()
    }

    /// The variant as a row of `strategy` names it (e.g. with the option it uses).
    pub fn variant_for(&self, strategy: Strategy) -> String {
        self.setup().variant_for(strategy)
    }

    /// How long clients send requests.
    pub fn duration(&self) -> Duration {
        self.setup().duration()
    }

    /// A one-line description with the parameters, for plot titles.
    pub fn title(&self) -> String {
        self.setup().title()
    }

    /// The origin's load time on an idle origin.
    pub fn load_time(&self) -> Duration {
        self.setup().origin().load_time
    }
}

macro_rules! into_scenario {
    ($($t:ident),*) => {$(
        impl From<$t> for Scenario {
            fn from(s: $t) -> Self {
                Scenario::$t(s)
            }
        }
    )*};
}
into_scenario!(
    HotKey,
    MassExpiry,
    ColdRestart,
    MissStorm,
    Fleet,
    XfetchStudy,
    RefreshAheadStudy,
    InternetArchive
);

type Configure = Rc<dyn Fn(Builder<SimValue>) -> Builder<SimValue>>;
type Observe = Rc<RefCell<dyn FnMut(Duration, &[Cache<SimValue>])>>;

/// One scenario under one strategy, on a seed.
///
/// ```
/// use herdless_sim::{HotKey, Run, Strategy};
/// use std::time::Duration;
///
/// let hot = HotKey { rate: 200.0, duration: Duration::from_secs(25), ..HotKey::default() };
/// let out = Run::new(hot, Strategy::SingleFlight).seed(7).run()?;
/// assert_eq!(out.origin.peak_per_key, 1); // the key never herded
/// # Ok::<(), herdless::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Run {
    scenario: Scenario,
    strategy: Strategy,
    seed: u64,
    configure: Option<Configure>,
    observe: Option<(Duration, Observe)>,
}

impl Run {
    /// `scenario` under `strategy`, seed 1.
    pub fn new(scenario: impl Into<Scenario>, strategy: Strategy) -> Self {
        Self {
            scenario: scenario.into(),
            strategy,
            seed: 1,
            configure: None,
            observe: None,
        }
    }

    /// The seed of every random choice (arrivals, keys, the engines' jitter and XFetch).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Adjusts each engine's builder after the strategy configured it (and after the
    /// simulator set its clock and rng), e.g. to try an option the strategies do not name.
    pub fn configure(
        mut self,
        f: impl Fn(Builder<SimValue>) -> Builder<SimValue> + 'static,
    ) -> Self {
        self.configure = Some(Rc::new(f));
        self
    }

    /// Calls `f` with the virtual time and every process's engine each `every` of virtual
    /// time while clients send requests (e.g. to sample metrics, or to feed a detector on
    /// rolling windows). It runs between events, like a monitoring thread would.
    pub fn observe(
        mut self,
        every: Duration,
        f: impl FnMut(Duration, &[Cache<SimValue>]) + 'static,
    ) -> Self {
        let f: Observe = Rc::new(RefCell::new(f));
        self.observe = Some((every.max(Duration::from_nanos(1)), f));
        self
    }

    /// The scenario run.
    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    /// The strategy run.
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// Runs the simulation to the end and reports what happened.
    pub fn run(&self) -> Result<Outcome, ConfigError> {
        let setup = self.scenario.setup();
        let knobs = setup.knobs();
        let clock = SimClock::new();
        let mut executor = Executor::new(clock.clone());
        let fleet_wide = setup.fleet_wide() && !self.strategy.is_naive();
        let mut processes = Vec::new();
        for p in 0..setup.processes() as u64 {
            let mut b =
                self.strategy
                    .builder(&knobs)
                    .clock(clock.clone())
                    .rng(DefaultRng::seed_from_u64(
                        self.seed ^ (p + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
                    ));
            if fleet_wide {
                // The shared entry is jittered once, when written; the engines keep its TTL.
                b = b.jitter(0.0);
            }
            if let Some(f) = &self.configure {
                b = f(b);
            }
            processes.push(b.build()?);
        }
        let world = Rc::new(World {
            handle: executor.handle(),
            origin: Origin::new(setup.origin(), setup.exists()),
            processes,
            strategy: self.strategy,
            knobs,
            fleet: fleet_wide.then(FleetTier::default),
            rec: RefCell::new(Recorder::default()),
            rng: RefCell::new(DefaultRng::seed_from_u64(self.seed)),
            decide: RefCell::new(DefaultRng::seed_from_u64(!self.seed)),
            setup_misses: Default::default(),
        });
        setup.start(&world);
        if let Some((every, f)) = self.observe.clone() {
            let (w, until) = (world.clone(), setup.duration());
            world.handle.spawn(async move {
                while w.now() + every <= until {
                    w.handle.sleep(every).await;
                    (f.borrow_mut())(w.now(), &w.processes);
                }
            });
        }
        executor.run(setup.duration() + DRAIN);
        let metrics: Vec<MetricsSnapshot> = world.processes.iter().map(|c| c.metrics()).collect();
        let origin = world.origin.stats();
        let named = (
            self.scenario.name(),
            self.scenario.variant_for(self.strategy),
        );
        let row = Row::new(named, self.strategy, &world, &origin, &metrics);
        Ok(Outcome {
            row,
            origin,
            metrics,
            fleet_lock_waits: world.fleet.as_ref().map_or(0, |f| f.lock_waits.get()),
            latency_ms: crate::report::latency_curve(&world),
        })
    }
}

/// The refresh-ahead study's summary: per row, origin calls per TTL (over all keys), the
/// refreshes by kind, misses, the origin's peak, latency, the mean and oldest age of the
/// values served. `runs` and `outcomes` are in the same order; runs of other scenarios are
/// left out.
pub fn ahead_summary(runs: &[Run], outcomes: &[Outcome], markdown: bool) -> String {
    let cells: Vec<Vec<String>> = runs
        .iter()
        .zip(outcomes)
        .filter_map(|(run, o)| match run.scenario() {
            Scenario::RefreshAheadStudy(s) => Some(s.summary_cells(o)),
            _ => None,
        })
        .collect();
    let head = RefreshAheadStudy::SUMMARY_HEAD;
    // A blank line after the caption: Markdown starts a table only after one.
    let mut out = String::from(
        "Refresh-ahead against XFetch (per TTL: origin calls in one TTL, over all keys)\n\n",
    );
    out.push_str(&if markdown {
        render_markdown(&head, &cells)
    } else {
        render(&head, &cells)
    });
    out
}
