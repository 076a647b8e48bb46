//! Prometheus text exposition format, version 0.0.4.

use alloc::string::String;
use core::fmt::Write;

use super::{BUCKETS, HistogramSnapshot, MetricsSnapshot};
use crate::detector::Alert;

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

fn ns_label(ns: &str) -> String {
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
        let names = crate::metrics::CounterSnapshot::default().fields();
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
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        }
        out
    }
}

/// The detector's alerts as the gauge `herdless_alerts_active{namespace, kind, cause}`: how
/// many alerts of that kind and cause hold now. An alert still listed after its condition
/// stopped (the hold time) reads 0, so a dashboard sees the series fall rather than vanish.
/// Keys are not labels: they may carry user data, and every key would be a new series.
pub(crate) fn alerts(alerts: &[Alert]) -> String {
    let mut out = String::new();
    out.push_str(
        "# HELP herdless_alerts_active Stampede alerts holding now, by namespace, kind and likely cause.\n",
    );
    out.push_str("# TYPE herdless_alerts_active gauge\n");
    let mut series: alloc::vec::Vec<(&str, &str, &str, u32)> = alloc::vec::Vec::new();
    for a in alerts {
        let labels = (a.namespace.as_str(), a.kind.name(), a.cause.name());
        let active = u32::from(a.active);
        match series.iter_mut().find(|s| (s.0, s.1, s.2) == labels) {
            Some(s) => s.3 += active,
            None => series.push((labels.0, labels.1, labels.2, active)),
        }
    }
    for (ns, kind, cause, n) in series {
        let _ = writeln!(
            out,
            "herdless_alerts_active{{{},kind=\"{kind}\",cause=\"{cause}\"}} {n}",
            ns_label(ns)
        );
    }
    out
}
