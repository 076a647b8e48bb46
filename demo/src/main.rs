//! `cargo run --release -p herdless-demo`: the stampede demonstration. See `--help`.

use std::process::ExitCode;
use std::time::Instant;

use herdless_demo::scenario::{Command, USAGE};
use herdless_demo::{Scenario, plot, report, run};

fn main() -> ExitCode {
    let scenario = match Scenario::from_args(std::env::args().skip(1)) {
        Ok(Command::Run(s)) => s,
        Ok(Command::Help) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("herdless-demo: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_time()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("herdless-demo: cannot start tokio: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("{}\n", report::scenario_line(&scenario));
    let started = Instant::now();
    let mut results = Vec::new();
    for &strategy in &scenario.strategies {
        eprintln!("running {} ...", strategy.name());
        match runtime.block_on(run(strategy, &scenario)) {
            Ok(r) => results.push(r),
            Err(e) => {
                eprintln!("herdless-demo: {}: {e}", strategy.name());
                return ExitCode::FAILURE;
            }
        }
    }
    println!("{}", report::table(&results));
    let counters = report::counters(&results);
    if !counters.is_empty() {
        println!("herdless counters for the same runs:\n\n{counters}");
    }
    let errors = report::errors(&results);
    if !errors.is_empty() {
        println!("client errors:\n{errors}");
    }
    if let Err(e) = plot::write(&scenario.out, &scenario, &results) {
        eprintln!("herdless-demo: cannot write the plot: {e}");
        return ExitCode::FAILURE;
    }
    println!(
        "plot: {} (measured in {:.1} s)",
        scenario.out.display(),
        started.elapsed().as_secs_f64()
    );
    if errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
