//! The command line: one subcommand per scenario, flags for its parameters, and the
//! output options (table, `--json`, `--svg DIR`).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::origin::OriginConfig;
use crate::scenario::{
    ColdRestart, Fleet, HotKey, IaStrategy, InternetArchive, MassExpiry, MissStorm,
    RefreshAheadStudy, Run, Scenario, XfetchStudy,
};
use crate::strategy::{Knobs, Strategy};

/// Parses "250ms", "1.5s", "2m", "100us" (a bare number is seconds).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("`{s}`: expected a duration like 200ms, 1.5s, 2m"))?;
    let secs = match unit.trim() {
        "" | "s" => n,
        "ms" => n / 1e3,
        "us" => n / 1e6,
        "m" | "min" => n * 60.0,
        u => return Err(format!("`{s}`: unknown unit `{u}` (us, ms, s, m)")),
    };
    Duration::try_from_secs_f64(secs).map_err(|e| format!("`{s}`: {e}"))
}

/// Discrete-event stampede simulator: the real herdless engine on a virtual clock, against
/// a simulated origin. Prints a table (or JSON) with one row per strategy and variant.
#[derive(Parser, Debug)]
#[command(name = "herdless-sim", version)]
pub struct Cli {
    /// The scenario to run.
    #[command(subcommand)]
    pub scenario: Command,
    /// Seed of every random choice: the same seed gives the same output.
    #[arg(long, global = true, default_value_t = 1)]
    pub seed: u64,
    /// Strategies to compare (comma-separated; default: the six of the issue).
    #[arg(long, global = true, value_delimiter = ',')]
    pub strategies: Vec<Strategy>,
    /// Print the rows as JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
    /// Print Markdown tables instead of plain text.
    #[arg(long, global = true, conflicts_with = "json")]
    pub markdown: bool,
    /// Write SVG plots into this directory (sim-<scenario>-origin.svg, -latency.svg).
    #[arg(long, global = true, value_name = "DIR")]
    pub svg: Option<PathBuf>,
}

/// Scenarios.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// One hot key read at --rate, loaded in --load-time, fresh for --ttl.
    HotKey(Common),
    /// --keys keys written together at time zero, read uniformly; --jitter spreads them.
    MassExpiry {
        /// Keys written together.
        #[arg(long)]
        keys: Option<usize>,
        /// Flags every scenario takes.
        #[command(flatten)]
        common: Common,
    },
    /// A flushed cache under Zipf traffic, with and without warm-up of the top keys.
    ColdRestart {
        /// Distinct keys.
        #[arg(long)]
        keys: Option<usize>,
        /// Zipf exponent of key popularity.
        #[arg(long)]
        alpha: Option<f64>,
        /// Keys to warm before traffic, most popular first.
        #[arg(long, default_value_t = 1000)]
        warm_top: usize,
        /// Warm-up loads at once.
        #[arg(long, default_value_t = 20)]
        warm_concurrency: usize,
        /// Which variants to run.
        #[arg(long, value_enum, default_value_t = Both::Both)]
        warm: Both,
        /// Flags every scenario takes.
        #[command(flatten)]
        common: Common,
    },
    /// Random absent ids, with and without negative caching.
    MissStorm {
        /// Distinct absent ids.
        #[arg(long)]
        ids: Option<u64>,
        /// When the storm begins (e.g. 60s; regular traffic before it).
        #[arg(long, value_parser = parse_duration)]
        storm_from: Option<Duration>,
        /// Requests per second of regular traffic on 100 ids that exist, all along.
        #[arg(long, default_value_t = 0.0)]
        regular_rate: f64,
        /// Which variants to run.
        #[arg(long, value_enum, default_value_t = Both::Both)]
        negative: Both,
        /// Flags every scenario takes.
        #[command(flatten)]
        common: Common,
    },
    /// --processes processes, each with its own engine: local vs fleet-wide coalescing.
    Fleet {
        /// Processes.
        #[arg(long)]
        processes: Option<usize>,
        /// Which variants to run: off = local only, on = fleet-wide only.
        #[arg(long, value_enum, default_value_t = Both::Both)]
        fleet_wide: Both,
        /// Flags every scenario takes.
        #[command(flatten)]
        common: Common,
    },
    /// A hot key under XFetch for each beta of --betas.
    XfetchStudy {
        /// Betas to compare.
        #[arg(long, value_delimiter = ',', default_values_t = [0.0, 0.5, 1.0, 2.0, 4.0])]
        betas: Vec<f64>,
        /// Flags every scenario takes.
        #[command(flatten)]
        common: Common,
    },
    /// XFetch (--beta) against refresh-ahead at each share of --shares, on one hot key and
    /// on a long tail of keys written together (--keys), with a summary per TTL.
    RefreshAheadStudy {
        /// Refresh-ahead shares of the TTL to compare, each in (0, 1).
        #[arg(long, value_delimiter = ',', default_values_t = [0.5, 0.8, 0.95])]
        shares: Vec<f64>,
        /// Workloads: key counts (1: the hot key; more: Zipf --alpha over that many keys).
        #[arg(long, value_delimiter = ',', default_values_t = [1, 1000])]
        keys: Vec<usize>,
        /// Zipf exponent of key popularity (0: uniform).
        #[arg(long)]
        alpha: Option<f64>,
        /// Flags every scenario takes.
        #[command(flatten)]
        common: Common,
    },
    /// The Internet Archive's RedisConf 2017 experiment (fetch, locked, xfetch, xlocked),
    /// printed beside their published tallies.
    InternetArchive {
        /// Worker processes.
        #[arg(long)]
        workers: Option<usize>,
        /// Flags every scenario takes.
        #[command(flatten)]
        common: Common,
    },
}

/// Run one variant, the other, or both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Both {
    /// With it only.
    On,
    /// Without it only.
    Off,
    /// Both, one row each.
    Both,
}

impl Both {
    /// The variants to run, "off" first (the baseline reads first in tables).
    pub fn values(self) -> Vec<bool> {
        match self {
            Both::On => vec![true],
            Both::Off => vec![false],
            Both::Both => vec![false, true],
        }
    }
}

/// Flags every scenario takes; unset ones keep the scenario's default.
#[derive(Args, Debug, Default, Clone)]
pub struct Common {
    /// Requests per second.
    #[arg(long)]
    pub rate: Option<f64>,
    /// How long clients send requests (e.g. 60s).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Origin load time on an idle origin (e.g. 200ms).
    #[arg(long, value_parser = parse_duration)]
    pub load_time: Option<Duration>,
    /// Origin connections (calls beyond them queue).
    #[arg(long)]
    pub pool: Option<usize>,
    /// Each running call makes a new call this fraction slower.
    #[arg(long)]
    pub slowdown: Option<f64>,
    /// A call queued for a connection longer than this fails.
    #[arg(long, value_parser = parse_duration)]
    pub queue_timeout: Option<Duration>,
    /// Fresh time of a value.
    #[arg(long, value_parser = parse_duration)]
    pub ttl: Option<Duration>,
    /// Stale-while-revalidate window (swr, combined).
    #[arg(long, value_parser = parse_duration)]
    pub grace: Option<Duration>,
    /// XFetch beta (xfetch, combined).
    #[arg(long)]
    pub beta: Option<f64>,
    /// Refresh-ahead share of the TTL, in (0, 1) (refresh-ahead, swr+ahead).
    #[arg(long)]
    pub ahead: Option<f64>,
    /// TTL jitter fraction (jitter, combined).
    #[arg(long)]
    pub jitter: Option<f64>,
    /// How long absences are cached.
    #[arg(long, value_parser = parse_duration)]
    pub negative_ttl: Option<Duration>,
    /// Origin budget of the engine (combined).
    #[arg(long)]
    pub budget: Option<usize>,
    /// How long waiters wait for a load.
    #[arg(long, value_parser = parse_duration)]
    pub wait_timeout: Option<Duration>,
}

impl Common {
    /// Applies the flags given to a scenario's origin, knobs and rate/duration.
    pub fn apply(
        &self,
        origin: &mut OriginConfig,
        knobs: &mut Knobs,
        rate: Option<&mut f64>,
        duration: &mut Duration,
    ) {
        if let (Some(r), Some(v)) = (rate, self.rate) {
            *r = v;
        }
        if let Some(v) = self.duration {
            *duration = v;
        }
        if let Some(v) = self.load_time {
            origin.load_time = v;
        }
        if let Some(v) = self.pool {
            origin.pool = Some(v);
        }
        if let Some(v) = self.slowdown {
            origin.slowdown = v;
        }
        if let Some(v) = self.queue_timeout {
            origin.queue_timeout = Some(v);
        }
        if let Some(v) = self.ttl {
            knobs.ttl = v;
            if self.grace.is_none() {
                knobs.grace = v / 2;
            }
        }
        if let Some(v) = self.grace {
            knobs.grace = v;
        }
        if let Some(v) = self.beta {
            knobs.beta = v;
        }
        if let Some(v) = self.ahead {
            knobs.ahead = v;
        }
        if let Some(v) = self.jitter {
            knobs.jitter = v;
        }
        if let Some(v) = self.negative_ttl {
            knobs.negative_ttl = Some(v);
        }
        if let Some(v) = self.budget {
            knobs.origin_budget = Some(v);
        }
        if let Some(v) = self.wait_timeout {
            knobs.wait_timeout = v;
        }
    }
}

/// The runs a command line asks for: every variant of its scenario under every strategy.
pub fn plan(cli: &Cli) -> Vec<Run> {
    let strategies = |default: &[Strategy]| -> Vec<Strategy> {
        if cli.strategies.is_empty() {
            default.to_vec()
        } else {
            cli.strategies.clone()
        }
    };
    let mut scenarios: Vec<(Scenario, Vec<Strategy>)> = Vec::new();
    match &cli.scenario {
        Command::HotKey(c) => {
            let mut s = HotKey::default();
            c.apply(
                &mut s.origin,
                &mut s.knobs,
                Some(&mut s.rate),
                &mut s.duration,
            );
            scenarios.push((s.into(), strategies(&Strategy::MAIN)));
        }
        Command::MassExpiry { keys, common } => {
            let mut s = MassExpiry::default();
            common.apply(
                &mut s.origin,
                &mut s.knobs,
                Some(&mut s.rate),
                &mut s.duration,
            );
            s.keys = keys.unwrap_or(s.keys);
            scenarios.push((s.into(), strategies(&Strategy::MAIN)));
        }
        Command::ColdRestart {
            keys,
            alpha,
            warm_top,
            warm_concurrency,
            warm,
            common,
        } => {
            for on in warm.values() {
                let mut s = ColdRestart::default();
                common.apply(
                    &mut s.origin,
                    &mut s.knobs,
                    Some(&mut s.rate),
                    &mut s.duration,
                );
                s.keys = keys.unwrap_or(s.keys);
                s.alpha = alpha.unwrap_or(s.alpha);
                s.warm_top = on.then_some(*warm_top);
                s.warm_concurrency = *warm_concurrency;
                scenarios.push((s.into(), strategies(&Strategy::MAIN)));
            }
        }
        Command::MissStorm {
            ids,
            storm_from,
            regular_rate,
            negative,
            common,
        } => {
            for on in negative.values() {
                let mut s = MissStorm::default();
                common.apply(
                    &mut s.origin,
                    &mut s.knobs,
                    Some(&mut s.rate),
                    &mut s.duration,
                );
                s.ids = ids.unwrap_or(s.ids);
                s.storm_from = storm_from.unwrap_or(s.storm_from);
                s.regular_rate = regular_rate.max(0.0);
                if !on {
                    s.knobs.negative_ttl = None;
                }
                // Naive code caches no absence: one row of it is enough.
                let mut st =
                    strategies(&[Strategy::Naive, Strategy::SingleFlight, Strategy::Combined]);
                if on {
                    st.retain(|s| !s.is_naive());
                }
                scenarios.push((s.into(), st));
            }
        }
        Command::Fleet {
            processes,
            fleet_wide,
            common,
        } => {
            for on in fleet_wide.values() {
                let mut s = Fleet::default();
                common.apply(
                    &mut s.origin,
                    &mut s.knobs,
                    Some(&mut s.rate),
                    &mut s.duration,
                );
                s.processes = processes.unwrap_or(s.processes);
                s.fleet_wide = on;
                let mut st = strategies(&Strategy::MAIN);
                if on {
                    // Naive code has no fleet-wide mode: it is the same row as local.
                    st.retain(|s| !s.is_naive());
                }
                scenarios.push((s.into(), st));
            }
        }
        Command::XfetchStudy { betas, common } => {
            for beta in betas {
                let mut hot = HotKey::default();
                common.apply(
                    &mut hot.origin,
                    &mut hot.knobs,
                    Some(&mut hot.rate),
                    &mut hot.duration,
                );
                hot.knobs.beta = *beta;
                scenarios.push((XfetchStudy { hot }.into(), strategies(&[Strategy::Xfetch])));
            }
        }
        Command::RefreshAheadStudy {
            shares,
            keys,
            alpha,
            common,
        } => {
            // XFetch once per workload, then each strategy using the share once per share.
            let chosen = strategies(&[Strategy::Xfetch, Strategy::RefreshAhead]);
            for &n in keys {
                let mut s = RefreshAheadStudy::default();
                common.apply(
                    &mut s.origin,
                    &mut s.knobs,
                    Some(&mut s.rate),
                    &mut s.duration,
                );
                s.keys = n;
                s.alpha = alpha.unwrap_or(s.alpha);
                let (ahead, other): (Vec<Strategy>, Vec<Strategy>) =
                    chosen.iter().partition(|st| st.uses_ahead());
                if !other.is_empty() {
                    scenarios.push((s.clone().into(), other));
                }
                if !ahead.is_empty() {
                    for &share in shares {
                        let mut s = s.clone();
                        s.knobs.ahead = share;
                        scenarios.push((s.into(), ahead.clone()));
                    }
                }
            }
        }
        Command::InternetArchive { workers, common } => {
            let mut s = InternetArchive::default();
            common.apply(&mut s.origin, &mut s.knobs, None, &mut s.duration);
            s.workers = workers.unwrap_or(s.workers);
            let ia: Vec<Strategy> = IaStrategy::ALL.iter().map(|s| s.strategy()).collect();
            scenarios.push((s.into(), strategies(&ia)));
        }
    }
    scenarios
        .into_iter()
        .flat_map(|(scenario, strategies)| {
            strategies
                .into_iter()
                .map(move |st| Run::new(scenario.clone(), st).seed(cli.seed))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("200ms"), Ok(Duration::from_millis(200)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("ms").is_err());
    }

    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
