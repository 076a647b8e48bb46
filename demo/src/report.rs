//! The tables printed at the end of the demonstration (Markdown, so they paste as is).

use std::fmt::Write;
use std::time::Duration;

use crate::clients::RunResult;
use crate::scenario::Scenario;

/// One line describing the scenario.
pub fn scenario_line(s: &Scenario) -> String {
    format!(
        "{} clients read one hot key for {} per strategy (pause 0-{} between requests); \
         origin call {}; ttl {}; grace {} (SWR rows); key warmed to expire first at {}",
        group(s.clients as u64),
        duration(s.duration),
        duration(s.think * 2),
        duration(s.origin),
        duration(s.ttl),
        duration(s.grace),
        duration(s.first_expiry),
    )
}

/// The main table: what the origin and the clients saw.
pub fn table(results: &[RunResult]) -> String {
    let mut rows = vec![
        [
            "strategy",
            "requests",
            "origin calls",
            "peak origin concurrency",
            "p50",
            "p99",
            "max",
            "oldest value served",
        ]
        .map(String::from),
    ];
    for r in results {
        rows.push([
            r.strategy.name().to_owned(),
            group(r.requests() as u64),
            group(r.origin.calls),
            group(u64::from(r.origin.peak)),
            duration(r.latency(0.50)),
            duration(r.latency(0.99)),
            duration(r.latency(1.0)),
            duration(r.max_age),
        ]);
    }
    markdown(&rows)
}

/// herdless's own counters for its rows: how the engine saw the same run.
pub fn counters(results: &[RunResult]) -> String {
    let mut rows = vec![
        [
            "strategy",
            "loads",
            "coalesced waiters",
            "stale served",
            "early refreshes",
            "misses",
        ]
        .map(String::from),
    ];
    for r in results {
        let Some(m) = &r.metrics else { continue };
        rows.push([
            r.strategy.name().to_owned(),
            group(m.loads),
            group(m.coalesced_waiters),
            group(m.stale_served),
            group(m.early_refreshes),
            group(m.misses),
        ]);
    }
    if rows.len() == 1 {
        return String::new();
    }
    markdown(&rows)
}

/// Errors seen by clients, if any (none is the expected outcome).
pub fn errors(results: &[RunResult]) -> String {
    let mut out = String::new();
    for r in results {
        for (message, count) in &r.errors {
            let _ = writeln!(out, "{}: {count} x {message}", r.strategy.name());
        }
    }
    out
}

fn markdown<const N: usize>(rows: &[[String; N]]) -> String {
    let widths: Vec<usize> = (0..N)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        for (c, cell) in row.iter().enumerate() {
            // Text left, numbers right: as a reader compares them.
            if c == 0 {
                let _ = write!(out, "| {cell:<w$} ", w = widths[c]);
            } else {
                let _ = write!(out, "| {cell:>w$} ", w = widths[c]);
            }
        }
        out.push_str("|\n");
        if i == 0 {
            for (c, w) in widths.iter().enumerate() {
                let dashes = "-".repeat(*w);
                if c == 0 {
                    let _ = write!(out, "|-{dashes}-");
                } else {
                    let _ = write!(out, "|-{dashes}:");
                }
            }
            out.push_str("|\n");
        }
    }
    out
}

/// 12345 -> "12,345".
pub fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// A duration as a person reads it: 3 µs, 201.4 ms, 2.05 s.
pub fn duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos < 10_000 {
        format!("{:.1} µs", d.as_secs_f64() * 1e6)
    } else if nanos < 1_000_000 {
        format!("{} µs", (nanos + 500) / 1_000)
    } else if nanos < 1_000_000_000 {
        format!("{:.1} ms", d.as_secs_f64() * 1e3)
    } else {
        format!("{:.2} s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_like_numbers() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1_000), "1,000");
        assert_eq!(group(1_234_567), "1,234,567");
        assert_eq!(duration(Duration::from_nanos(2_640)), "2.6 µs");
        assert_eq!(duration(Duration::from_nanos(12_600)), "13 µs");
        assert_eq!(duration(Duration::from_micros(201_400)), "201.4 ms");
        assert_eq!(duration(Duration::from_millis(2_050)), "2.05 s");
    }

    #[test]
    fn tables_align_in_markdown() {
        let t = markdown(&[
            ["a".to_string(), "n".to_string()],
            ["long name".to_string(), "12".to_string()],
        ]);
        assert_eq!(
            t,
            "| a         |  n |\n|-----------|---:|\n| long name | 12 |\n"
        );
    }
}
