//! The stampede demonstration: one hot key expiring under thousands of concurrent clients,
//! naive cache-aside side by side with herdless.
//!
//! Every strategy gets the same scenario in turn ([`Scenario`]): a key warmed so that it
//! first expires shortly after the start, `clients` tasks reading it in a loop with a
//! random think time, and a simulated [`Origin`] that takes `origin` time per call and
//! records how many calls are in flight. [`run`] drives one strategy and returns what a
//! person would measure: origin calls, peak origin concurrency, client latency and the
//! age of the values served. [`report`] prints the table, [`plot`] draws the SVG.

pub mod clients;
pub mod origin;
pub mod plot;
pub mod reader;
pub mod report;
pub mod scenario;
pub mod strategy;

pub use clients::{RunResult, run};
pub use origin::{Feed, Origin, OriginStats};
pub use scenario::Scenario;
pub use strategy::Strategy;
