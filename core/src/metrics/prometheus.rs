//! Prometheus text exposition format, version 0.0.4.

use alloc::string::String;
use core::fmt::Write;

use alloc::borrow::Cow;
use alloc::vec::Vec;

use super::{
    BUCKETS, HistogramSnapshot, MAX_LABELLED_NAMESPACES, MetricsSnapshot, NamespaceMetrics,
    OTHER_NAMESPACE,
};

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

/// Whether a namespace may be a label value as it is.
fn plain_word(ns: &str) -> bool {
    !ns.is_empty()
        && ns.len() <= 64
        && ns
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// How a namespace is shown as a label: itself if it is a plain word, else
/// [`OTHER_NAMESPACE`] (it may hold request input, a token in a URL).
pub(crate) fn shown(ns: &str) -> &str {
    match plain_word(ns) {
        true => ns,
        false => OTHER_NAMESPACE,
    }
}

fn add_histogram(to: &mut HistogramSnapshot, h: &HistogramSnapshot) {
    for (t, c) in to.counts.iter_mut().zip(h.counts.iter()) {
        *t += c;
    }
    to.sum += h.sum;
}

/// The namespaces as the exposition labels them (see [`MAX_LABELLED_NAMESPACES`]).
fn labelled(namespaces: &[NamespaceMetrics]) -> Vec<Cow<'_, NamespaceMetrics>> {
    let activity = |n: &NamespaceMetrics| -> u64 { n.counters.fields().iter().map(|f| f.2).sum() };
    let (mut plain, mut folded): (Vec<&NamespaceMetrics>, Vec<&NamespaceMetrics>) =
        namespaces.iter().partition(|n| plain_word(&n.namespace));
    if plain.len() > MAX_LABELLED_NAMESPACES {
        plain.sort_by(|a, b| {
            activity(b)
                .cmp(&activity(a))
                .then(a.namespace.cmp(&b.namespace))
        });
        folded.extend(plain.drain(MAX_LABELLED_NAMESPACES..));
        plain.sort_by(|a, b| a.namespace.cmp(&b.namespace));
    }
    let mut out: Vec<Cow<'_, NamespaceMetrics>> = plain.into_iter().map(Cow::Borrowed).collect();
    if !folded.is_empty() {
        let mut other = NamespaceMetrics {
            namespace: OTHER_NAMESPACE.into(),
            ..NamespaceMetrics::default()
        };
        for n in folded {
            other.counters.add(&n.counters);
            add_histogram(&mut other.load_duration, &n.load_duration);
            add_histogram(&mut other.lock_wait, &n.lock_wait);
        }
        out.push(Cow::Owned(other));
    }
    out
}

impl MetricsSnapshot {
    /// The snapshot in Prometheus text exposition format, every series labelled by namespace
    /// (at most [`MAX_LABELLED_NAMESPACES`] of them, the rest as [`OTHER_NAMESPACE`]).
    pub fn to_prometheus(&self) -> String {
        let mut out = String::new();
        let namespaces = labelled(&self.namespaces);
        let labels: Vec<String> = namespaces.iter().map(|n| ns_label(&n.namespace)).collect();
        let names = super::CounterSnapshot::default().fields();
        for (i, (name, help, _)) in names.iter().enumerate() {
            let _ = writeln!(out, "# HELP herdless_{name}_total {help}");
            let _ = writeln!(out, "# TYPE herdless_{name}_total counter");
            for (ns, label) in namespaces.iter().zip(&labels) {
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
            for (ns, label) in namespaces.iter().zip(&labels) {
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
