//! The simulator's fleet model against a real fleet, full length: 4 release-built
//! `fleet_worker` processes on a private redis-server, one strategy after the other, beside
//! `herdless-sim`'s fleet-wide mode on the same parameters (mean of 20 seeds). Prints the
//! Markdown table of BENCHMARKS.md ("Simulator").
//!
//! ```sh
//! cargo bench -p herdless-redis --bench sim_fleet
//! HL_SIM_SECONDS=30 cargo bench -p herdless-redis --bench sim_fleet   # shorter
//! ```

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/sim_fleet/compare.rs"]
mod compare;

use std::time::Duration;

use compare::{Compared, STRATEGIES, Scenario, Tolerance};

/// Seeds the model is run with (its figures are their means).
const SEEDS: u64 = 20;

fn main() {
    if !common::redis_available() {
        return;
    }
    let seconds: u64 = std::env::var("HL_SIM_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let scenario = Scenario {
        processes: 4,
        rate: 100.0,
        duration: Duration::from_secs(seconds),
        load: Duration::from_millis(200),
        ttl: Duration::from_secs(1),
        grace: Duration::from_secs(1),
        beta: 1.0,
    };
    let server = common::Server::start();
    println!(
        "{}\nmodel: herdless-sim's fleet scenario, fleet-wide, mean of {SEEDS} seeds\n",
        scenario.describe()
    );
    let mut rows = Vec::new();
    for strategy in STRATEGIES {
        let fleet = compare::start(
            &server,
            &scenario,
            strategy,
            1,
            compare::start_in(Duration::from_millis(1500)),
        );
        let real = fleet.finish();
        let model = compare::model(&scenario, strategy, SEEDS);
        rows.push(Compared {
            strategy,
            real,
            model,
        });
        eprintln!("{} done", strategy.name());
    }
    print!("{}", compare::markdown(&rows, Tolerance::GOALS));
}
