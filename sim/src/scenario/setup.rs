//! What every scenario tells the runner.

use std::rc::Rc;
use std::time::Duration;

use crate::origin::OriginConfig;
use crate::strategy::{Knobs, Strategy};
use crate::world::World;

/// What every scenario tells the runner.
pub(crate) trait Setup {
    /// Short name in tables ("hot-key", ...).
    fn name(&self) -> &'static str;
    /// The variant run (e.g. "warm-up on"), empty when the scenario has none.
    fn variant(&self) -> String {
        String::new()
    }
    /// The variant as a row of `strategy` names it (e.g. with the option it uses).
    fn variant_for(&self, _strategy: Strategy) -> String {
        self.variant()
    }
    /// Engine options handed to the strategies.
    fn knobs(&self) -> Knobs;
    /// The origin.
    fn origin(&self) -> OriginConfig;
    /// Whether the origin has a value for `key` (else it answers absent).
    fn exists(&self) -> fn(&str) -> bool {
        |_| true
    }
    /// Simulated processes, each with its own engine.
    fn processes(&self) -> usize {
        1
    }
    /// Whether processes coalesce fleet-wide (a model of the Redis lock).
    fn fleet_wide(&self) -> bool {
        false
    }
    /// How long clients send requests.
    fn duration(&self) -> Duration;
    /// Spawns the scenario's tasks (prefill, warm-up, clients).
    fn start(&self, w: &Rc<World>);
    /// A one-line description with the parameters, for plot titles.
    fn title(&self) -> String;
}
