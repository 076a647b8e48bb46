//! The scenario every strategy runs, and its command-line flags.

use std::path::PathBuf;
use std::time::Duration;

use crate::strategy::Strategy;

/// What the demonstration simulates. The defaults follow the seed story: a 200 ms
/// aggregation behind a hot key, with about 5,000 requests in flight when it expires.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Concurrent client tasks reading the hot key.
    pub clients: usize,
    /// Mean pause between two requests of one client (drawn uniformly in `0..2*think`).
    pub think: Duration,
    /// Time the origin takes per call.
    pub origin: Duration,
    /// Time to live of the cached value.
    pub ttl: Duration,
    /// Stale-while-revalidate window of the strategies that use it.
    pub grace: Duration,
    /// When the warmed key first expires, counted from the start of a run (the warm-up
    /// load stores it with this TTL, so the first herd comes early).
    pub first_expiry: Duration,
    /// How long the clients run, per strategy.
    pub duration: Duration,
    /// Where the SVG is written.
    pub out: PathBuf,
    /// The strategies to run, in order.
    pub strategies: Vec<Strategy>,
}

impl Default for Scenario {
    fn default() -> Self {
        Self {
            clients: 5_000,
            think: Duration::from_millis(100),
            origin: Duration::from_millis(200),
            ttl: Duration::from_secs(2),
            grace: Duration::from_secs(2),
            first_expiry: Duration::from_millis(400),
            duration: Duration::from_millis(5_500),
            out: PathBuf::from("out/stampede.svg"),
            strategies: Strategy::ALL.to_vec(),
        }
    }
}

/// The `--help` text.
pub const USAGE: &str = "\
herdless-demo: one hot key expiring under thousands of concurrent clients,
naive cache-aside side by side with herdless.

USAGE: herdless-demo [FLAGS]

FLAGS (durations take a unit: 200ms, 2s, 1.5s):
  --clients N          concurrent clients                      [default: 5000]
  --think D            mean pause between a client's requests  [default: 100ms]
  --origin D           time the origin takes per call          [default: 200ms]
  --ttl D              time to live of the cached value        [default: 2s]
  --grace D            stale-while-revalidate window           [default: 2s]
  --first-expiry D     when the warmed key first expires       [default: 400ms]
  --duration D         how long the clients run, per strategy  [default: 5.5s]
  --out PATH           where the SVG plot is written           [default: out/stampede.svg]
  --only NAMES         comma-separated subset of: naive,single-flight,swr,xfetch,combined
  -h, --help           this text
";

/// What the command line asked for.
#[derive(Debug)]
pub enum Command {
    /// Run this scenario.
    Run(Box<Scenario>),
    /// Print [`USAGE`].
    Help,
}

impl Scenario {
    /// Parses the flags (without the program name).
    pub fn from_args(args: impl IntoIterator<Item = String>) -> Result<Command, String> {
        let mut s = Scenario::default();
        let mut args = args.into_iter();
        while let Some(flag) = args.next() {
            if flag == "-h" || flag == "--help" {
                return Ok(Command::Help);
            }
            let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
            match flag.as_str() {
                "--clients" => {
                    s.clients = value
                        .parse()
                        .map_err(|_| format!("--clients: not a count: {value}"))?
                }
                "--think" => s.think = parse_duration(&value)?,
                "--origin" => s.origin = parse_duration(&value)?,
                "--ttl" => s.ttl = parse_duration(&value)?,
                "--grace" => s.grace = parse_duration(&value)?,
                "--first-expiry" => s.first_expiry = parse_duration(&value)?,
                "--duration" => s.duration = parse_duration(&value)?,
                "--out" => s.out = PathBuf::from(value),
                "--only" => {
                    s.strategies = value
                        .split(',')
                        .map(|name| {
                            Strategy::from_flag(name.trim())
                                .ok_or_else(|| format!("--only: unknown strategy {name}"))
                        })
                        .collect::<Result<_, _>>()?
                }
                _ => return Err(format!("unknown flag {flag} (try --help)")),
            }
        }
        s.check()?;
        Ok(Command::Run(Box::new(s)))
    }

    fn check(&self) -> Result<(), String> {
        let zero = [
            ("--clients", self.clients == 0),
            ("--origin", self.origin.is_zero()),
            ("--ttl", self.ttl.is_zero()),
            ("--grace", self.grace.is_zero()),
            ("--first-expiry", self.first_expiry.is_zero()),
            ("--duration", self.duration.is_zero()),
            ("--only", self.strategies.is_empty()),
        ];
        match zero.iter().find(|(_, is_zero)| *is_zero) {
            Some((flag, _)) => Err(format!("{flag} must not be zero or empty")),
            None => Ok(()),
        }
    }
}

/// Parses `250ms`, `2s` or `1.5s`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("not a duration with a unit (ms or s): {text}");
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else {
        return Err(bad());
    };
    let n: f64 = number.trim().parse().map_err(|_| bad())?;
    Duration::try_from_secs_f64(n * scale).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Result<Command, String> {
        Scenario::from_args(list.iter().map(|s| s.to_string()))
    }

    #[test]
    fn durations_need_a_unit() {
        assert_eq!(parse_duration("200ms"), Ok(Duration::from_millis(200)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("200").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn flags_override_defaults() {
        let Ok(Command::Run(s)) = args(&["--clients", "10", "--ttl", "1s", "--only", "naive,swr"])
        else {
            panic!("flags should parse");
        };
        assert_eq!(s.clients, 10);
        assert_eq!(s.ttl, Duration::from_secs(1));
        assert_eq!(
            s.strategies,
            [Strategy::Naive, Strategy::StaleWhileRevalidate]
        );
        assert_eq!(s.origin, Scenario::default().origin);
    }

    #[test]
    fn bad_flags_are_refused() {
        assert!(args(&["--clients", "0"]).is_err());
        assert!(args(&["--ttl"]).is_err());
        assert!(args(&["--only", "magic"]).is_err());
        assert!(args(&["--frobnicate", "1"]).is_err());
        assert!(matches!(args(&["--help"]), Ok(Command::Help)));
    }
}
