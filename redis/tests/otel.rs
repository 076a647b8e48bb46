//! The core's OpenTelemetry support (`herdless::otel`, feature `opentelemetry`), read back
//! through the SDK's in-memory exporters: the engine's counters as observable instruments,
//! and a span per loader call, none on a hit.

use std::sync::{Arc, Barrier, OnceLock};
use std::time::Duration;

use herdless::Cache;
use opentelemetry::metrics::MeterProvider;
use opentelemetry::trace::{Status, TraceContextExt, Tracer, TracerProvider};
use opentelemetry::{KeyValue, Value, global};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};

/// The global tracer provider (`traced` reports to it), set once for the tests of this file,
/// which tell their spans apart by key.
fn tracers() -> &'static (SdkTracerProvider, InMemorySpanExporter) {
    static TRACERS: OnceLock<(SdkTracerProvider, InMemorySpanExporter)> = OnceLock::new();
    TRACERS.get_or_init(|| {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        global::set_tracer_provider(provider.clone());
        (provider, exporter)
    })
}

/// The finished spans of the given name whose `cache.key` (or name) is `key`.
fn spans_of(key: &str) -> Vec<SpanData> {
    tracers()
        .1
        .get_finished_spans()
        .unwrap()
        .into_iter()
        .filter(|s| {
            s.name == key
                || s.attributes
                    .contains(&KeyValue::new("cache.key", key.to_string()))
        })
        .collect()
}

/// `name` -> (attributes, value) of every u64 data point of a collection.
fn u64_points(metrics: &[ResourceMetrics], name: &str) -> Vec<(Vec<KeyValue>, u64)> {
    let mut out = Vec::new();
    for rm in metrics {
        for sm in rm.scope_metrics() {
            for m in sm.metrics().filter(|m| m.name() == name) {
                match m.data() {
                    AggregatedMetrics::U64(MetricData::Sum(s)) => {
                        for p in s.data_points() {
                            out.push((p.attributes().cloned().collect(), p.value()));
                        }
                    }
                    AggregatedMetrics::U64(MetricData::Gauge(g)) => {
                        for p in g.data_points() {
                            out.push((p.attributes().cloned().collect(), p.value()));
                        }
                    }
                    other => panic!("{name}: unexpected data {other:?}"),
                }
            }
        }
    }
    out
}

fn sorted(mut kv: Vec<KeyValue>) -> Vec<KeyValue> {
    kv.sort_by(|a, b| a.key.as_str().cmp(b.key.as_str()));
    kv
}

#[test]
fn metrics_are_the_engines_counters_and_spans_wrap_loads_only() {
    let metric_exporter = InMemoryMetricExporter::default();
    let reader = PeriodicReader::builder(metric_exporter.clone()).build();
    let meters = SdkMeterProvider::builder().with_reader(reader).build();
    tracers();
    let cache: Cache<String> = Cache::builder()
        .ttl(Duration::from_secs(60))
        .build()
        .unwrap();
    herdless::otel::observe(&cache, &meters.meter("test"), Some("pages"));

    let start = Arc::new(Barrier::new(8));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (cache, start) = (cache.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                let key = "users:v1:#1";
                let load = || {
                    std::thread::sleep(Duration::from_millis(100));
                    Ok::<_, std::io::Error>(Some("Ada".to_string()))
                };
                cache
                    .get_or_load(key, herdless::otel::traced(key, load))
                    .unwrap()
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap().as_deref(), Some("Ada"));
    }
    // A hit: the wrapper is made, its span is not.
    let key = "users:v1:#1";
    let hit = cache.get_or_load(
        key,
        herdless::otel::traced(key, || Ok::<_, std::io::Error>(None)),
    );
    assert_eq!(hit.unwrap().as_deref(), Some("Ada"));

    let failed = cache.get_or_load(
        "rows:1",
        herdless::otel::traced("rows:1", || {
            Err::<Option<String>, _>(std::io::Error::other("down"))
        }),
    );
    assert!(failed.is_err());

    meters.force_flush().unwrap();
    let collected = metric_exporter.get_finished_metrics().unwrap();
    let users = sorted(vec![
        KeyValue::new("herdless.cache", "pages"),
        KeyValue::new("herdless.namespace", "users"),
    ]);
    let m = cache.metrics();
    let c = &m.namespace("users").unwrap().counters;
    let loads: Vec<_> = u64_points(&collected, "herdless.loads")
        .into_iter()
        .map(|(a, v)| (sorted(a), v))
        .collect();
    assert!(loads.contains(&(users.clone(), 1)), "{loads:?}");
    let waiters = u64_points(&collected, "herdless.coalesced_waiters");
    assert!(
        waiters
            .iter()
            .any(|(a, v)| sorted(a.clone()) == users && *v == c.coalesced_waiters)
    );
    assert_eq!(
        u64_points(&collected, "herdless.entries"),
        vec![(vec![KeyValue::new("herdless.cache", "pages")], 1)]
    );

    let loaded = spans_of("users:v1:#1");
    assert_eq!(
        loaded.len(),
        1,
        "one load for 9 callers, none for the hit: {loaded:?}"
    );
    let ok = &loaded[0];
    assert_eq!(ok.name, "herdless.load");
    for kv in [
        KeyValue::new("cache.operation", "load"),
        KeyValue::new("cache.hit", false),
        KeyValue::new("herdless.namespace", "users"),
    ] {
        assert!(ok.attributes.contains(&kv), "{:?}", ok.attributes);
    }
    let bad = &spans_of("rows:1")[0];
    assert!(matches!(bad.status, Status::Error { .. }));
    assert!(
        bad.attributes
            .iter()
            .any(|kv| kv.key.as_str() == "error.type" && kv.value == Value::from("Error"))
    );
}

#[test]
fn an_async_load_is_one_span_current_in_its_future() {
    let tracer = tracers().0.tracer("test");
    let cache: Cache<u64> = Cache::builder().build().unwrap();
    let parent = tracer.start("GET /price");
    let cx = opentelemetry::Context::current_with_span(parent);
    let _attached = cx.clone().attach();
    let value = futures_executor_block_on(cache.get_or_load_async(
        "prices:1",
        herdless::otel::traced_async("prices:1", || async {
            let current = opentelemetry::Context::current();
            assert!(current.span().span_context().is_valid());
            Ok::<_, std::io::Error>(Some(7))
        }),
    ));
    assert_eq!(value.unwrap(), Some(7));
    cx.span().end();
    let load = &spans_of("prices:1")[0];
    let request = &spans_of("GET /price")[0];
    assert_eq!(load.parent_span_id, request.span_context.span_id());
}

fn futures_executor_block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}
