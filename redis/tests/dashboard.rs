//! The Grafana dashboard (docs/grafana/herdless.json) queries only metrics the Rust exporter
//! really emits: every metric name in its queries is in a scrape of `prometheus()` of a
//! tiered cache that served traffic (the Python and Node suites check theirs the same way).

use std::collections::BTreeSet;
use std::time::Duration;

use herdless_redis::memory::MemoryStore;
use herdless_redis::{Json, TieredCache};

/// Every PromQL expression of the dashboard: panel targets and template variables.
fn queries(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("expr" | "definition", serde_json::Value::String(s)) => out.push(s.clone()),
                    _ => queries(v, out),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| queries(v, out)),
        _ => {}
    }
}

fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find("herdless_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.push(tail[..end].to_string());
        rest = &tail[end..];
    }
    names
}

/// The names a scrape emits: its samples', and each declared family's (a histogram's with
/// its `_bucket`, `_sum` and `_count` series).
fn emitted(scrape: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in scrape.lines() {
        if let Some(t) = line.strip_prefix("# TYPE ") {
            let mut parts = t.split(' ');
            let (name, kind) = (parts.next().unwrap(), parts.next().unwrap());
            names.insert(name.to_string());
            if kind == "histogram" {
                for s in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{s}"));
                }
            }
        } else if !line.starts_with('#') && !line.is_empty() {
            let end = line.find(['{', ' ']).unwrap();
            names.insert(line[..end].to_string());
        }
    }
    names
}

#[test]
fn every_dashboard_query_names_a_metric_the_exporter_emits() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/grafana/herdless.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut exprs = Vec::new();
    queries(&dashboard, &mut exprs);
    assert!(exprs.len() >= 20, "only {} queries found", exprs.len());

    let store = MemoryStore::new();
    let backend = store.backend().build().unwrap();
    let cache: TieredCache<String, Json> = TieredCache::builder(backend, Json)
        .ttl(Duration::from_secs(60))
        .build()
        .unwrap();
    for _ in 0..3 {
        cache
            .get_or_load("users:v1:#1", || {
                Ok::<_, std::io::Error>(Some("Ada".into()))
            })
            .unwrap();
    }
    let scrape = cache.prometheus();
    let emitted = emitted(&scrape);
    for expr in &exprs {
        let names = metric_names(expr);
        assert!(
            !names.is_empty(),
            "a query names no herdless metric: {expr}"
        );
        for name in names {
            assert!(
                emitted.contains(&name),
                "the dashboard queries {name}, which the Rust exporter does not emit ({expr})"
            );
        }
    }
}
