//! The simulator's model of the fleet against a real fleet: one scenario (processes, one
//! hot key, Poisson arrivals, a load time, ttl, grace, beta) run by real processes (the
//! `fleet_worker` binary, `HL_MODE=traffic`) on a private redis-server, and by
//! `herdless-sim`'s fleet-wide mode over several seeds, side by side.
//!
//! Used by the short test (tests/sim_fleet/main.rs) and the full-length bench
//! (benches/sim_fleet.rs), which prints the table of BENCHMARKS.md.

use std::fmt::Write as _;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use herdless::backend::{Backend, StoredEntry};
use herdless_redis::{RedisBackend, block_on, now_ms};
use herdless_sim::{Fleet, Knobs, OriginConfig, Run, Strategy};

use crate::common::{Server, unique};

/// The strategies compared: XFetch off and on, grace off and on.
pub const STRATEGIES: [Strategy; 4] = [
    Strategy::SingleFlight,
    Strategy::Swr,
    Strategy::Xfetch,
    Strategy::SwrXfetch,
];

/// The key every request reads (the simulator's fleet scenario's).
const KEY: &str = herdless_sim::FLEET_KEY;

/// What both sides run.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Processes, each with its own L1.
    pub processes: usize,
    /// Requests per second sent to each process.
    pub rate: f64,
    /// How long requests arrive.
    pub duration: Duration,
    /// How long the loader takes.
    pub load: Duration,
    /// Fresh time of a value.
    pub ttl: Duration,
    /// Stale-while-revalidate window (strategies with grace).
    pub grace: Duration,
    /// XFetch beta (strategies with XFetch).
    pub beta: f64,
}

impl Scenario {
    fn knobs(&self) -> Knobs {
        let mut k = Knobs::new(self.ttl);
        k.grace = self.grace;
        k.beta = self.beta;
        k.jitter = 0.0;
        k
    }

    /// The simulator's fleet scenario with these parameters (fleet-wide coalescing: the
    /// model of the Redis tier).
    pub fn sim(&self) -> Fleet {
        Fleet {
            processes: self.processes,
            fleet_wide: true,
            rate: self.rate * self.processes as f64,
            duration: self.duration,
            origin: OriginConfig::new(self.load),
            knobs: self.knobs(),
        }
    }

    /// One line with the parameters, for the table's caption.
    pub fn describe(&self) -> String {
        format!(
            "{} processes x {} req/s (Poisson), one hot key, {} s, load {} ms, ttl {} ms, \
             grace {} ms (swr, swr+xfetch), beta {} (xfetch, swr+xfetch), jitter 0",
            self.processes,
            self.rate,
            self.duration.as_secs_f64(),
            self.load.as_millis(),
            self.ttl.as_millis(),
            self.grace.as_millis(),
            self.beta
        )
    }
}

/// What one side saw: counts, and client latency in ms at p50, p90, p99 and max.
#[derive(Clone, Debug, Default)]
pub struct Side {
    /// Requests sent.
    pub requests: f64,
    /// Origin (loader) calls.
    pub origin_calls: f64,
    /// Requests answered with an error.
    pub errors: f64,
    /// Lookups the processes' L1s could not answer (the engines' `misses`). The real
    /// fleet's count includes each process's first read (its L1 starts empty; the
    /// simulator's starts with the prefilled value).
    pub misses: f64,
    /// p50, p90, p99, max, in ms.
    pub latency_ms: [f64; 4],
}

/// The real fleet's figures.
#[derive(Clone, Debug)]
pub struct Real {
    /// Counts and latencies.
    pub side: Side,
    /// The worst process's p99 of how late a request started against its scheduled arrival
    /// (how loaded the machine was), in ms.
    pub late_p99_ms: f64,
    /// The first error a process reported, if any.
    pub first_error: Option<String>,
}

/// The model's figures: means over its seeds.
#[derive(Clone, Debug)]
pub struct Model {
    /// Means over the seeds.
    pub side: Side,
    /// Fewest and most origin calls of one seed.
    pub origin_range: (u64, u64),
}

/// The nearest-rank `q` quantile of sorted values (the simulator's definition).
fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The simulator on `scenario` under `strategy`, seeds 1..=`seeds`.
pub fn model(scenario: &Scenario, strategy: Strategy, seeds: u64) -> Model {
    let mut side = Side::default();
    let (mut lo, mut hi) = (u64::MAX, 0);
    for seed in 1..=seeds {
        let out = Run::new(scenario.sim(), strategy)
            .seed(seed)
            .run()
            .expect("valid options");
        let n = seeds as f64;
        side.requests += out.row.requests as f64 / n;
        side.origin_calls += out.row.origin_calls as f64 / n;
        side.errors += (out.row.errors + out.row.timeouts) as f64 / n;
        side.misses += out.row.misses as f64 / n;
        let [p50, p90, p99, _, max] = out.latency_ms;
        for (acc, v) in side.latency_ms.iter_mut().zip([p50, p90, p99, max]) {
            *acc += v / n;
        }
        lo = lo.min(out.row.origin_calls);
        hi = hi.max(out.row.origin_calls);
    }
    Model {
        side,
        origin_range: (lo, hi),
    }
}

/// A real fleet running one strategy.
pub struct RealFleet {
    children: Vec<Child>,
}

/// Starts `scenario.processes` workers on `server` under `strategy`: requests arrive from
/// `start_at_ms` (Unix ms). The key's shared entry is written first, fresh from that
/// instant for one ttl, as the simulator's scenario prefills it.
pub fn start(
    server: &Server,
    scenario: &Scenario,
    strategy: Strategy,
    seed: u64,
    start_at_ms: u64,
) -> RealFleet {
    // The strategy's engine options, read from the simulator's own builder: one meaning of
    // each strategy for both sides.
    let options = strategy.builder(&scenario.knobs()).options();
    let ms = |d: Duration| u64::try_from(d.as_millis()).expect("ms");
    let prefix = unique(&strategy.name().replace('+', "-"));
    let backend = RedisBackend::builder(server.url())
        .prefix(prefix.clone())
        .build()
        .expect("backend");
    let fresh_until_ms = start_at_ms + ms(options.ttl);
    let prefill = StoredEntry {
        value: Some(b"\"prefilled\"".to_vec()),
        fresh_until_ms,
        stale_until_ms: fresh_until_ms + ms(options.grace),
        retain_until_ms: fresh_until_ms + ms(options.grace),
        load_duration: scenario.load,
        version: 0,
        epoch: 0,
        ttl: None,
        tti: None,
        meta: None,
        tags: Vec::new(),
        tag_marks: Vec::new(),
    };
    block_on(backend.commit(KEY, prefill, None))
        .expect("runtime")
        .expect("prefill");
    let children = (0..scenario.processes)
        .map(|p| {
            Command::new(env!("CARGO_BIN_EXE_fleet_worker"))
                .env("HL_MODE", "traffic")
                .env("HL_URL", server.url())
                .env("HL_PREFIX", &prefix)
                .env("HL_KEY", KEY)
                .env("HL_RATE", scenario.rate.to_string())
                .env("HL_DURATION_MS", ms(scenario.duration).to_string())
                .env("HL_START_AT_MS", start_at_ms.to_string())
                .env("HL_LOADER_MS", ms(scenario.load).to_string())
                .env("HL_TTL_MS", ms(options.ttl).to_string())
                .env("HL_GRACE_MS", ms(options.grace).to_string())
                .env("HL_BETA", options.beta.to_string())
                .env("HL_SEED", (seed * 1000 + p as u64).to_string())
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn fleet_worker")
        })
        .collect();
    RealFleet { children }
}

fn field<'a>(line: &'a str, name: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {name} in {line}"))
}

fn count(line: &str, name: &str) -> u64 {
    field(line, name)
        .parse()
        .unwrap_or_else(|_| panic!("{name} in {line}"))
}

impl RealFleet {
    /// Waits for every worker and adds up what they saw.
    pub fn finish(self) -> Real {
        let mut side = Side::default();
        let mut latencies: Vec<u64> = Vec::new();
        let mut late_p99_ms: f64 = 0.0;
        let mut first_error = None;
        for child in self.children {
            let out = child.wait_with_output().expect("worker output");
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "worker failed: {out:?}");
            let result = text
                .lines()
                .find(|l| l.starts_with("RESULT "))
                .unwrap_or_else(|| panic!("no RESULT in {text}"));
            side.requests += count(result, "requests") as f64;
            side.errors += count(result, "err") as f64;
            side.origin_calls += count(result, "loader_calls") as f64;
            side.misses += count(result, "misses") as f64;
            late_p99_ms = late_p99_ms.max(count(result, "late_p99_us") as f64 / 1e3);
            if first_error.is_none() && count(result, "err") > 0 {
                first_error = Some(result.to_owned());
            }
            let lat = text
                .lines()
                .find_map(|l| l.strip_prefix("LATENCY_US"))
                .unwrap_or_else(|| panic!("no LATENCY_US in {text}"));
            latencies.extend(
                lat.split_whitespace()
                    .map(|v| v.parse::<u64>().expect("us")),
            );
        }
        latencies.sort_unstable();
        let ms = |q: f64| quantile(&latencies, q) as f64 / 1e3;
        side.latency_ms = [ms(0.5), ms(0.9), ms(0.99), ms(1.0)];
        Real {
            side,
            late_p99_ms,
            first_error,
        }
    }
}

/// How close the two sides must be.
#[derive(Clone, Copy, Debug)]
pub struct Tolerance {
    /// Origin calls: the largest difference, as a fraction of the model's.
    pub origin: f64,
    /// Origin calls: a difference this small always passes (few calls in a short run).
    pub origin_floor: f64,
    /// Latency percentiles: the largest difference, as a fraction of the model's.
    pub latency: f64,
    /// Latency percentiles: a difference this small (ms) always passes. The model has no
    /// CPU and no network (a hit takes 0 ms, a Redis round trip 0 ms), so the machine's own
    /// cost (a task, an L1 read, a round trip, a timer's tick) is under this floor.
    pub latency_floor_ms: f64,
}

impl Tolerance {
    /// The goals: origin calls within 10 %, p50 and p99 within 20 % (or 2 ms).
    pub const GOALS: Tolerance = Tolerance {
        origin: 0.10,
        origin_floor: 0.0,
        latency: 0.20,
        latency_floor_ms: 2.0,
    };
}

fn near(real: f64, model: f64, fraction: f64, floor: f64) -> bool {
    (real - model).abs() <= (fraction * model).max(floor)
}

/// One strategy on both sides.
#[derive(Clone, Debug)]
pub struct Compared {
    /// The strategy.
    pub strategy: Strategy,
    /// The real fleet.
    pub real: Real,
    /// The simulator.
    pub model: Model,
}

impl Compared {
    /// The figures that are not within `t`, in words (empty: all are).
    pub fn misses(&self, t: Tolerance) -> Vec<String> {
        let (r, m) = (&self.real.side, &self.model.side);
        let mut out = Vec::new();
        if r.errors > 0.0 {
            out.push(format!(
                "{} real requests failed: {:?}",
                r.errors, self.real.first_error
            ));
        }
        if !near(r.origin_calls, m.origin_calls, t.origin, t.origin_floor) {
            out.push(format!(
                "origin calls {} (real) against {:.1} (model)",
                r.origin_calls, m.origin_calls
            ));
        }
        for (i, name) in [(0, "p50"), (2, "p99")] {
            let (a, b) = (r.latency_ms[i], m.latency_ms[i]);
            if !near(a, b, t.latency, t.latency_floor_ms) {
                out.push(format!("{name} {a:.2} ms (real) against {b:.2} ms (model)"));
            }
        }
        out
    }
}

fn ms(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn diff(real: f64, model: f64) -> String {
    if model == 0.0 {
        return "-".into();
    }
    format!("{:+.1} %", (real - model) / model * 100.0)
}

/// The comparison as a Markdown table: real and model side by side, latencies in ms.
pub fn markdown(rows: &[Compared], t: Tolerance) -> String {
    let mut out = String::from(
        "| strategy | requests real / model | origin calls real | model (seeds' range) | diff | \
         L1 misses real / model | p50 real / model | p90 real / model | p99 real / model | \
         max real / model | real arrivals late, p99 | within goals |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for c in rows {
        let (r, m) = (&c.real.side, &c.model.side);
        let lat = |i: usize| format!("{} / {}", ms(r.latency_ms[i]), ms(m.latency_ms[i]));
        let misses = c.misses(t);
        let verdict = if misses.is_empty() {
            "yes".to_string()
        } else {
            format!("no: {}", misses.join("; "))
        };
        let _ = writeln!(
            out,
            "| {} | {:.0} / {:.0} | {} | {:.1} ({}-{}) | {} | {:.0} / {:.0} | {} | {} | {} | {} | {} ms | {} |",
            c.strategy.name(),
            r.requests,
            m.requests,
            r.origin_calls,
            m.origin_calls,
            c.model.origin_range.0,
            c.model.origin_range.1,
            diff(r.origin_calls, m.origin_calls),
            r.misses,
            m.misses,
            lat(0),
            lat(1),
            lat(2),
            lat(3),
            ms(c.real.late_p99_ms),
            verdict
        );
    }
    out
}

/// Today's Unix time in ms plus `lead` (when the workers' traffic should begin).
pub fn start_in(lead: Duration) -> u64 {
    now_ms() + u64::try_from(lead.as_millis()).expect("ms")
}
