//! `herdless-sim`: runs a scenario under each strategy on a virtual clock and prints a table
//! (or `--json`), optionally with SVG plots. See `herdless-sim --help` and sim/README.md.

use std::process::ExitCode;

use clap::Parser;
use herdless_sim::cli::{Cli, Command, plan};
use herdless_sim::{Outcome, ahead_summary, comparison, markdown, plot, table};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runs = plan(&cli);
    let mut outcomes: Vec<Outcome> = Vec::with_capacity(runs.len());
    for run in &runs {
        match run.run() {
            Ok(o) => outcomes.push(o),
            Err(e) => {
                eprintln!("herdless-sim: {}: {e}", run.strategy().name());
                return ExitCode::FAILURE;
            }
        }
    }
    let rows: Vec<_> = outcomes.iter().map(|o| o.row.clone()).collect();
    if cli.json {
        match serde_json::to_string_pretty(&rows) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("herdless-sim: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        if cli.markdown {
            print!("{}", markdown(&rows));
        } else {
            print!("{}", table(&rows));
        }
        if let (Command::InternetArchive { .. }, Some(run)) = (&cli.scenario, runs.first()) {
            println!();
            print!(
                "{}",
                comparison(
                    &outcomes,
                    run.scenario().duration().as_secs_f64(),
                    cli.markdown
                )
            );
        }
        if let Command::RefreshAheadStudy { .. } = &cli.scenario {
            println!();
            print!("{}", ahead_summary(&runs, &outcomes, cli.markdown));
        }
    }
    if let (Some(dir), Some(run)) = (&cli.svg, runs.first()) {
        let scenario = run.scenario();
        let name = scenario.name();
        let until = scenario.duration() + scenario.load_time() * 2;
        let origin = dir.join(format!("sim-{name}-origin.svg"));
        let latency = dir.join(format!("sim-{name}-latency.svg"));
        let title = scenario.title();
        let written = plot::origin(&origin, &title, &outcomes, until)
            .and_then(|()| plot::latency(&latency, &title, &outcomes));
        if let Err(e) = written {
            eprintln!("herdless-sim: {e}");
            return ExitCode::FAILURE;
        }
        eprintln!("wrote {} and {}", origin.display(), latency.display());
    }
    ExitCode::SUCCESS
}
