//! OpenTelemetry for a cache (feature `opentelemetry`): its metrics as observable instruments,
//! and a span per loader call.
//!
//! ```no_run
//! # use herdless::Cache;
//! # fn load_user() -> Result<Option<String>, std::io::Error> { Ok(None) }
//! use opentelemetry::global;
//!
//! let cache: Cache<String> = Cache::builder().build()?;
//! herdless::otel::observe(&cache, &global::meter("herdless"), None);
//!
//! let key = "users:v1:#42";
//! let user = cache.get_or_load(key, herdless::otel::traced(key, load_user))?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Nothing is emitted unless these are called (the application owns the SDK and its
//! exporters), and neither touches the hit path: the instruments read
//! [`Cache::metrics`] when the SDK collects, and a [`traced`] loader starts its span only when
//! the cache calls it.
//!
//! Metrics (attribute `herdless.namespace`, and `herdless.cache` when a name is given):
//! `herdless.<counter>` for each counter of [`CounterSnapshot`](crate::metrics::CounterSnapshot)
//! (`herdless.hits`, `herdless.loads`, `herdless.coalesced_waiters`, ...; monotonic),
//! `herdless.load.time` and `herdless.lock_wait.time` (seconds summed), the gauges
//! `herdless.entries`, `herdless.weight`, `herdless.loads_in_flight`, and
//! `herdless.alerts_active` (attributes `herdless.alert.kind`, `herdless.alert.cause`). The
//! Python and Node integrations emit the same instruments.
//!
//! Spans (of the global tracer provider): `herdless.load` (kind INTERNAL), current while the loader runs, with `cache.key`,
//! `cache.operation` (`load`), `cache.hit` (false) and `herdless.namespace`; a loader's error
//! sets the status and `error.type`. OpenTelemetry has no semantic conventions for caches
//! yet: these are the names cache instrumentations commonly use.

use alloc::borrow::Cow;
use alloc::boxed::Box;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::future::Future;
use core::pin::Pin;

use opentelemetry::metrics::{AsyncInstrument, Meter};
use opentelemetry::trace::{FutureExt, SpanKind, Status, TraceContextExt, Tracer, TracerProvider};
use opentelemetry::{Context, KeyValue, global};

use crate::cache::Cache;
use crate::key::namespace_of;
use crate::metrics::{CounterSnapshot, MetricsSnapshot, NamespaceMetrics};

/// Registers `cache`'s metrics with `meter` as observable instruments (see the module docs);
/// `name`, when given, is the attribute `herdless.cache` of every measurement. The
/// instruments keep a handle to the cache: it lives as long as the meter provider.
pub fn observe<V: Clone + Send + Sync + 'static>(
    cache: &Cache<V>,
    meter: &Meter,
    name: Option<&str>,
) {
    let base: Vec<KeyValue> = name
        .map(|n| KeyValue::new("herdless.cache", n.to_string()))
        .into_iter()
        .collect();
    let names = CounterSnapshot::default().fields();
    for (i, (field, help, _)) in names.into_iter().enumerate() {
        per_namespace(
            cache,
            meter,
            &base,
            format!("herdless.{field}"),
            help,
            "1",
            move |ns| ns.counters.fields()[i].2,
        );
    }
    let seconds = [
        (
            "herdless.load.time",
            "Time spent in loader calls, summed.",
            (|ns: &NamespaceMetrics| ns.load_duration.sum.as_secs_f64()) as fn(&_) -> f64,
        ),
        (
            "herdless.lock_wait.time",
            "Time waiters waited for another caller's load, summed.",
            |ns| ns.lock_wait.sum.as_secs_f64(),
        ),
    ];
    for (instrument, help, read) in seconds {
        let (cache, base) = (cache.clone(), base.clone());
        meter
            .f64_observable_counter(instrument)
            .with_description(help)
            .with_unit("s")
            .with_callback(move |o: &dyn AsyncInstrument<f64>| {
                for ns in &cache.metrics().namespaces {
                    o.observe(read(ns), &with_namespace(&base, &ns.namespace));
                }
            })
            .build();
    }
    let gauges = [
        (
            "herdless.entries",
            "Entries held (values and cached absences).",
            (|m: &MetricsSnapshot| m.entries) as fn(&_) -> u64,
        ),
        (
            "herdless.weight",
            "Total weight of the entries held.",
            |m| m.weight,
        ),
        ("herdless.loads_in_flight", "Loads running now.", |m| {
            m.loads_in_flight
        }),
    ];
    for (instrument, help, read) in gauges {
        let (cache, base) = (cache.clone(), base.clone());
        meter
            .u64_observable_gauge(instrument)
            .with_description(help)
            .with_unit("1")
            .with_callback(move |o: &dyn AsyncInstrument<u64>| {
                o.observe(read(&cache.metrics()), &base)
            })
            .build();
    }
    let (alerting, base) = (cache.clone(), base);
    meter
        .u64_observable_gauge("herdless.alerts_active")
        .with_description("Stampede alerts holding now.")
        .with_unit("1")
        .with_callback(move |o: &dyn AsyncInstrument<u64>| {
            let mut held: Vec<(String, &'static str, &'static str, u64)> = Vec::new();
            for a in alerting.alerts() {
                let k = (a.namespace, a.kind.name(), a.cause.name());
                match held
                    .iter_mut()
                    .find(|h| (h.0.as_str(), h.1, h.2) == (&k.0, k.1, k.2))
                {
                    Some(h) => h.3 += u64::from(a.active),
                    None => held.push((k.0, k.1, k.2, u64::from(a.active))),
                }
            }
            for (ns, kind, cause, n) in held {
                let mut attrs = with_namespace(&base, &ns);
                attrs.push(KeyValue::new("herdless.alert.kind", kind));
                attrs.push(KeyValue::new("herdless.alert.cause", cause));
                o.observe(n, &attrs);
            }
        })
        .build();
}

fn with_namespace(base: &[KeyValue], namespace: &str) -> Vec<KeyValue> {
    let mut attrs = base.to_vec();
    attrs.push(KeyValue::new("herdless.namespace", namespace.to_string()));
    attrs
}

/// A monotonic counter per namespace, read from a fresh snapshot at each collection.
fn per_namespace<V: Clone + Send + Sync + 'static>(
    cache: &Cache<V>,
    meter: &Meter,
    base: &[KeyValue],
    instrument: String,
    help: &'static str,
    unit: &'static str,
    read: impl Fn(&NamespaceMetrics) -> u64 + Send + Sync + 'static,
) {
    let (cache, base) = (cache.clone(), base.to_vec());
    meter
        .u64_observable_counter(Cow::Owned(instrument))
        .with_description(help)
        .with_unit(unit)
        .with_callback(move |o: &dyn AsyncInstrument<u64>| {
            for ns in &cache.metrics().namespaces {
                o.observe(read(ns), &with_namespace(&base, &ns.namespace));
            }
        })
        .build();
}

fn attributes(key: &str) -> Vec<KeyValue> {
    alloc::vec![
        KeyValue::new("cache.key", key.to_string()),
        KeyValue::new("cache.operation", "load"),
        KeyValue::new("cache.hit", false),
        KeyValue::new("herdless.namespace", namespace_of(key).to_string()),
    ]
}

/// A `herdless.load` span of the global tracer provider, in a context of its own.
fn start(key: &str) -> Context {
    let tracer = global::tracer_provider().tracer("herdless");
    let span = tracer
        .span_builder("herdless.load")
        .with_kind(SpanKind::Internal)
        .with_attributes(attributes(key))
        .start(&tracer);
    Context::current_with_span(span)
}

fn end<T, E: core::fmt::Display>(cx: &Context, result: &Result<T, E>) {
    let span = cx.span();
    if let Err(e) = result {
        span.set_status(Status::error(e.to_string()));
        let type_name = core::any::type_name::<E>();
        let short = type_name.rsplit("::").next().unwrap_or(type_name);
        span.set_attribute(KeyValue::new("error.type", short.to_string()));
    }
    span.end();
}

/// `loader`, made a `herdless.load` span of the global tracer provider when the cache calls
/// it; the span is current while the loader runs, so the loader's own spans nest under it.
/// A hit never calls the loader, so it makes no span; it pays for `key`'s copy alone.
pub fn traced<F, V, E>(
    key: impl Into<String>,
    loader: F,
) -> impl FnOnce() -> Result<V, E> + Send + 'static
where
    F: FnOnce() -> Result<V, E> + Send + 'static,
    E: core::fmt::Display,
{
    let key = key.into();
    move || {
        let cx = start(&key);
        let result = {
            let _current = cx.clone().attach();
            loader()
        };
        end(&cx, &result);
        result
    }
}

/// The future of a [`traced_async`] loader.
pub type TracedFuture<V, E> = Pin<Box<dyn Future<Output = Result<V, E>> + Send>>;

/// [`traced`] for an async loader (`get_or_load_async`): the span covers the awaited load and
/// is current in its future.
pub fn traced_async<F, Fut, V, E>(
    key: impl Into<String>,
    loader: F,
) -> impl FnOnce() -> TracedFuture<V, E> + Send + 'static
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = Result<V, E>> + Send + 'static,
    V: Send + 'static,
    E: core::fmt::Display + Send + 'static,
{
    let key = key.into();
    move || {
        let cx = start(&key);
        let load = loader().with_context(cx.clone());
        Box::pin(async move {
            let result = load.await;
            end(&cx, &result);
            result
        })
    }
}
