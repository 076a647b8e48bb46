//! Prometheus text exposition format, version 0.0.4.

use alloc::string::String;
use core::fmt::Write;

use super::{BUCKETS, HistogramSnapshot, MetricsSnapshot};

fn escape(label: &str, out: &mut String) {
    for ch in label.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// The label `namespace="..."`, escaped.
pub(crate) fn ns_label(ns: &str) -> String {
    let mut s = String::from("namespace=\"");
    escape(ns, &mut s);
    s.push('"');
    s
}

fn histogram(out: &mut String, name: &str, label: &str, h: &HistogramSnapshot) {
    let mut cumulative = 0;
    for (i, c) in h.counts.iter().enumerate() {
        cumulative += c;
        let le = match BUCKETS.get(i) {
            Some(b) => {
                let mut s = String::new();
                let _ = write!(s, "{b}");
                s
            }
            None => "+Inf".into(),
        };
        let _ = writeln!(out, "{name}_bucket{{{label},le=\"{le}\"}} {cumulative}");
    }
    let _ = writeln!(out, "{name}_sum{{{label}}} {}", h.sum.as_secs_f64());
    let _ = writeln!(out, "{name}_count{{{label}}} {cumulative}");
}

impl MetricsSnapshot {
    /// The snapshot in Prometheus text exposition format, every series labelled by namespace.
    pub fn to_prometheus(&self) -> String {
        let mut out = String::new();
        let labels: alloc::vec::Vec<String> = self
            .namespaces
            .iter()
            .map(|n| ns_label(&n.namespace))
            .collect();
        let names = super::CounterSnapshot::default().fields();
        for (i, (name, help, _)) in names.iter().enumerate() {
            let _ = writeln!(out, "# HELP herdless_{name}_total {help}");
            let _ = writeln!(out, "# TYPE herdless_{name}_total counter");
            for (ns, label) in self.namespaces.iter().zip(&labels) {
                let v = ns.counters.fields()[i].2;
                let _ = writeln!(out, "herdless_{name}_total{{{label}}} {v}");
            }
        }
        for (name, help, pick) in [
            (
                "herdless_load_duration_seconds",
                "Duration of loader calls.",
                (|n: &super::NamespaceMetrics| &n.load_duration) as fn(&_) -> &_,
            ),
            (
                "herdless_lock_wait_seconds",
                "Time waiters waited for another caller's load.",
                |n| &n.lock_wait,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} histogram");
            for (ns, label) in self.namespaces.iter().zip(&labels) {
                histogram(&mut out, name, label, pick(ns));
            }
        }
        for (name, help, v) in [
            ("herdless_entries", "Entries held.", self.entries),
            (
                "herdless_weight",
                "Total weight of the entries held.",
                self.weight,
            ),
            (
                "herdless_loads_in_flight",
                "Loads running now.",
                self.loads_in_flight,
            ),
            ("herdless_tags", "Tag records held.", self.tags),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        }
        for (name, help, v) in [
            (
                "herdless_tag_invalidations_total",
                "Tags invalidated (their entries became misses).",
                self.tag_invalidations,
            ),
            (
                "herdless_tag_expirations_total",
                "Tags expired (their entries became stale).",
                self.tag_expirations,
            ),
            (
                "herdless_retired_tags_total",
                "Tag records retired to stay within max_tags (their entries became misses).",
                self.retired_tags,
            ),
        ] {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
            );
        }
        out
    }
}
