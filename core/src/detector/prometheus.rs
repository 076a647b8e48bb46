//! The detector's alerts in Prometheus text exposition format, beside the metrics'.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

use super::alerts::Alert;
use crate::metrics::prometheus::{ns_label, shown};

/// The detector's alerts as the gauge `herdless_alerts_active{namespace, kind, cause}`: how
/// many alerts of that kind and cause hold now. An alert still listed after its condition
/// stopped (the hold time) reads 0, so a dashboard sees the series fall rather than vanish.
/// Keys are not labels: they may carry user data, and every key would be a new series.
pub(crate) fn alerts_gauge(alerts: &[Alert]) -> String {
    let mut out = String::new();
    out.push_str(
        "# HELP herdless_alerts_active Stampede alerts holding now, by namespace, kind and likely cause.\n",
    );
    out.push_str("# TYPE herdless_alerts_active gauge\n");
    let mut series: Vec<(&str, &str, &str, u32)> = Vec::new();
    for a in alerts {
        let labels = (shown(&a.namespace), a.kind.name(), a.cause.name());
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
