//! The simulator's fleet model against a real fleet of 4 processes on a private
//! redis-server, short (the full-length comparison is `cargo bench -p herdless-redis --bench
//! sim_fleet`). The four strategies run at once, each fleet under its own prefix.

#[path = "../common/mod.rs"]
mod common;
mod compare;

use std::time::Duration;

use compare::{Compared, STRATEGIES, Scenario, Tolerance};

#[test]
fn the_simulated_fleet_matches_a_real_one() {
    if !common::redis_available() {
        return;
    }
    let scenario = Scenario {
        processes: 4,
        rate: 100.0,
        duration: Duration::from_secs(15),
        load: Duration::from_millis(200),
        ttl: Duration::from_secs(1),
        grace: Duration::from_secs(1),
        beta: 1.0,
    };
    let server = common::Server::start();
    // Debug-build workers take a moment to start and connect.
    let start_at = compare::start_in(Duration::from_secs(3));
    let fleets: Vec<_> = STRATEGIES
        .iter()
        .map(|&s| (s, compare::start(&server, &scenario, s, 1, start_at)))
        .collect();
    let rows: Vec<Compared> = fleets
        .into_iter()
        .map(|(strategy, fleet)| Compared {
            strategy,
            real: fleet.finish(),
            model: compare::model(&scenario, strategy, 20),
        })
        .collect();
    // A short run on a machine that other builds share: looser than the goals the bench
    // measures (few origin calls in 15 s; debug builds; a busy scheduler adds milliseconds).
    let loose = Tolerance {
        origin: 0.25,
        origin_floor: 2.0,
        latency: 0.25,
        latency_floor_ms: 15.0,
    };
    // The table says how the run fares against the goals; the test holds it to `loose`.
    let table = compare::markdown(&rows, Tolerance::GOALS);
    eprintln!("{}\n\n{table}", scenario.describe());
    let misses: Vec<String> = rows
        .iter()
        .flat_map(|c| {
            c.misses(loose)
                .into_iter()
                .map(|m| format!("{}: {m}", c.strategy.name()))
        })
        .collect();
    assert!(misses.is_empty(), "{misses:#?}\n{table}");
}
