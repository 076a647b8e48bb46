//! What a run reports: one [`Row`] of figures (the table and the JSON), and the full
//! [`Outcome`] (origin timeline, each engine's metrics) for plots and tests.

use std::fmt::Write as _;
use std::time::Duration;

use herdless::CounterSnapshot;
use herdless::MetricsSnapshot;
use serde::Serialize;

use crate::origin::OriginStats;
use crate::strategy::Strategy;
use crate::world::World;

/// The figures of one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// Scenario name.
    pub scenario: &'static str,
    /// Scenario variant (may be empty).
    pub variant: String,
    /// Strategy.
    pub strategy: Strategy,
    /// Client requests.
    pub requests: u64,
    /// Origin calls (loads, refreshes, warm-up loads, naive recomputes).
    pub origin_calls: u64,
    /// Most origin calls outstanding at once (running or queued for a connection).
    pub peak_origin: u32,
    /// Most origin calls of one key outstanding at once.
    pub peak_per_key: u32,
    /// Origin calls that started while another of the same key was outstanding.
    pub simultaneous: u64,
    /// Client latency, median, in milliseconds.
    pub p50_ms: f64,
    /// Client latency, 99th percentile, in milliseconds.
    pub p99_ms: f64,
    /// Client latency, worst, in milliseconds.
    pub max_ms: f64,
    /// Answers with a stale value (within grace, or fail-safe).
    pub stale_served: u64,
    /// Age of the oldest value served (time since the origin produced it), in seconds.
    pub oldest_served_s: f64,
    /// Mean age of the values served, in seconds.
    pub mean_age_s: f64,
    /// Requests that ended in an error.
    pub errors: u64,
    /// Requests that ended in a timeout (wait or load).
    pub timeouts: u64,
    /// Lookups that found nothing servable (the engines' `misses`, traffic only).
    pub misses: u64,
    /// Refreshes before expiry (XFetch; client-side for xfetch-uncoordinated).
    pub early_refreshes: u64,
    /// Refresh-ahead refreshes (the first read past the share of the TTL).
    pub ahead_refreshes: u64,
    /// Callers that waited for another caller's load in their process.
    pub coalesced: u64,
}

fn ms(nanos: u64) -> f64 {
    nanos as f64 / 1e6
}

/// The `q` quantile of sorted values (nearest rank), 0 when empty.
pub(crate) fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

impl Row {
    /// The row of `strategy` in scenario `name` (its `variant`).
    pub(crate) fn new(
        (name, variant): (&'static str, String),
        strategy: Strategy,
        w: &World,
        origin: &OriginStats,
        metrics: &[MetricsSnapshot],
    ) -> Self {
        let total = total(metrics);
        let rec = w.rec.borrow();
        let mut lat = rec.latencies.clone();
        lat.sort_unstable();
        Self {
            scenario: name,
            variant,
            strategy,
            requests: rec.requests,
            origin_calls: origin.calls,
            peak_origin: origin.peak,
            peak_per_key: origin.peak_per_key,
            simultaneous: origin.simultaneous,
            p50_ms: ms(quantile(&lat, 0.5)),
            p99_ms: ms(quantile(&lat, 0.99)),
            max_ms: ms(lat.last().copied().unwrap_or(0)),
            stale_served: rec.stale,
            oldest_served_s: rec.oldest.as_secs_f64(),
            mean_age_s: rec.age_sum.as_secs_f64() / rec.aged.max(1) as f64,
            errors: rec.errors,
            timeouts: rec.timeouts,
            misses: total.misses.saturating_sub(w.setup_misses.get()),
            early_refreshes: total.early_refreshes + rec.early,
            ahead_refreshes: total.ahead_refreshes,
            coalesced: total.coalesced_waiters,
        }
    }
}

/// Counters summed over every process (of a fleet run).
pub fn total(metrics: &[MetricsSnapshot]) -> CounterSnapshot {
    metrics
        .iter()
        .fold(CounterSnapshot::default(), |t, m| add(&t, &m.total()))
}

fn add(a: &CounterSnapshot, b: &CounterSnapshot) -> CounterSnapshot {
    // `CounterSnapshot` is non-exhaustive: every field by name (a test checks none is left).
    let mut t = a.clone();
    t.hits += b.hits;
    t.negative_hits += b.negative_hits;
    t.stale_served += b.stale_served;
    t.misses += b.misses;
    t.expired_misses += b.expired_misses;
    t.cold_misses += b.cold_misses;
    t.failsafe_served += b.failsafe_served;
    t.loads += b.loads;
    t.load_errors += b.load_errors;
    t.load_timeouts += b.load_timeouts;
    t.abandoned_loads += b.abandoned_loads;
    t.coalesced_waiters += b.coalesced_waiters;
    t.lock_acquired += b.lock_acquired;
    t.batch_loads += b.batch_loads;
    t.lock_contended += b.lock_contended;
    t.wait_timeouts += b.wait_timeouts;
    t.early_refreshes += b.early_refreshes;
    t.refreshes += b.refreshes;
    t.backend_errors += b.backend_errors;
    t.evictions += b.evictions;
    t.retired_namespaces += b.retired_namespaces;
    t.ahead_refreshes += b.ahead_refreshes;
    t.not_modified += b.not_modified;
    t.events_dropped += b.events_dropped;
    t.admission_rejections += b.admission_rejections;
    t
}

/// Everything one run produced.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The figures.
    pub row: Row,
    /// What the origin saw, with its timeline.
    pub origin: OriginStats,
    /// Each process's engine metrics at the end of the run.
    pub metrics: Vec<MetricsSnapshot>,
    /// Local leaders that waited for another process's load (fleet-wide mode).
    pub fleet_lock_waits: u64,
    /// Client latency in milliseconds at p50, p90, p99, p99.9 and max.
    pub latency_ms: [f64; 5],
}

/// Client latency in milliseconds at p50, p90, p99, p99.9 and max.
pub(crate) fn latency_curve(w: &World) -> [f64; 5] {
    let mut lat = w.rec.borrow().latencies.clone();
    lat.sort_unstable();
    [0.5, 0.9, 0.99, 0.999, 1.0].map(|q| ms(quantile(&lat, q)))
}

fn dur(ms: f64) -> String {
    if ms >= 10_000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else if ms >= 100.0 || ms == 0.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

/// The rows as a plain-text table.
pub fn table(rows: &[Row]) -> String {
    let (head, cells) = table_cells(rows);
    render(&head, &cells)
}

/// The rows as a Markdown table (for BENCHMARKS.md).
pub fn markdown(rows: &[Row]) -> String {
    let (head, cells) = table_cells(rows);
    render_markdown(&head, &cells)
}

fn table_cells(rows: &[Row]) -> ([&'static str; 14], Vec<Vec<String>>) {
    let head = [
        "scenario",
        "variant",
        "strategy",
        "requests",
        "origin calls",
        "peak origin",
        "misses",
        "p50",
        "p99",
        "max",
        "stale served",
        "oldest served",
        "errors",
        "timeouts",
    ];
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.scenario.to_string(),
                r.variant.clone(),
                r.strategy.name().to_string(),
                r.requests.to_string(),
                r.origin_calls.to_string(),
                r.peak_origin.to_string(),
                r.misses.to_string(),
                dur(r.p50_ms),
                dur(r.p99_ms),
                dur(r.max_ms),
                r.stale_served.to_string(),
                format!("{:.1} s", r.oldest_served_s),
                r.errors.to_string(),
                r.timeouts.to_string(),
            ]
        })
        .collect();
    (head, cells)
}

/// Renders a Markdown table: text columns left-aligned, figures right-aligned.
pub(crate) fn render_markdown(head: &[&str], cells: &[Vec<String>]) -> String {
    let mut out = format!("| {} |\n|", head.join(" | "));
    for i in 0..head.len() {
        out.push_str(if i < 3 { "---|" } else { "---:|" });
    }
    out.push('\n');
    for row in cells {
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    out
}

/// Renders a table with left-aligned text columns (the first three) and right-aligned
/// figures.
pub(crate) fn render(head: &[&str], cells: &[Vec<String>]) -> String {
    let mut width: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for row in cells {
        for (w, c) in width.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, row: &[String]| {
        for (i, (c, w)) in row.iter().zip(&width).enumerate() {
            let sep = if i == 0 { "" } else { "  " };
            if i < 3 {
                let _ = write!(out, "{sep}{c:<w$}");
            } else {
                let _ = write!(out, "{sep}{c:>w$}");
            }
        }
        out.push('\n');
    };
    let head: Vec<String> = head.iter().map(|h| h.to_string()).collect();
    line(&mut out, &head);
    let rule: Vec<String> = width.iter().map(|w| "-".repeat(*w)).collect();
    line(&mut out, &rule);
    for row in cells {
        line(&mut out, row);
    }
    out
}

/// Formats a duration for captions.
pub(crate) fn human(d: Duration) -> String {
    dur(d.as_secs_f64() * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_sum_every_counter() {
        // A snapshot with every counter at 1, built through the engine's own field list.
        let cache: herdless::Cache<u32> = herdless::Cache::builder().build().expect("valid");
        let _ = cache.get("ns:a");
        let m = cache.metrics();
        let one = m.total();
        let twice = add(&one, &one);
        for ((name, _, a), (_, _, b)) in one.fields().iter().zip(twice.fields()) {
            assert_eq!(b, 2 * a, "counter `{name}` is not summed");
        }
        // And the field list is the one `add` knows: a counter added to the engine later
        // must be added there too.
        assert_eq!(one.fields().len(), 25);
    }
}
