"""OpenTelemetry metrics and load spans, read back through the SDK's in-memory exporters."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from herdless import Cache
from herdless.contrib.opentelemetry import instrument


@pytest.fixture
def otel() -> tuple[MeterProvider, InMemoryMetricReader, TracerProvider, InMemorySpanExporter]:
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    spans = InMemorySpanExporter()
    tracers = TracerProvider()
    tracers.add_span_processor(SimpleSpanProcessor(spans))
    return meters, reader, tracers, spans


def points(reader: InMemoryMetricReader) -> dict[str, list[tuple[dict[str, Any], Any]]]:
    data = reader.get_metrics_data()
    out: dict[str, list[tuple[dict[str, Any], Any]]] = {}
    assert data is not None
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                for p in m.data.data_points:
                    value: Any = (
                        (p.count, p.sum) if isinstance(p, HistogramDataPoint) else getattr(p, "value")
                    )
                    out.setdefault(m.name, []).append((dict(p.attributes or {}), value))
    return out


def test_metrics_are_the_engines_counters(otel: Any) -> None:
    meters, reader, tracers, _ = otel
    cache = Cache(ttl=60, redis="memory://otel-metrics")
    instrument(cache, meter_provider=meters, tracer_provider=tracers, name="pages")
    start = threading.Barrier(8)

    def load() -> str:
        time.sleep(0.1)
        return "Ada"

    def call() -> None:
        start.wait()
        cache.get_or_load("users:v1:#1", load)

    threads = [threading.Thread(target=call) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cache.get_or_load("users:v1:#1", load)
    got = points(reader)
    users = {"herdless.cache": "pages", "herdless.namespace": "users"}
    assert got["herdless.loads"] == [(users, 1)]
    total = cache.metrics().namespace("users")
    assert total is not None
    assert got["herdless.hits"] == [(users, total.counters.hits)]
    assert got["herdless.coalesced_waiters"] == [(users, total.counters.coalesced_waiters)]
    assert got["herdless.entries"] == [({"herdless.cache": "pages"}, 1)]
    assert got["herdless.redis.commits"] == [({"herdless.cache": "pages"}, 1)]
    [(attrs, (count, seconds))] = got["herdless.load.duration"]
    assert attrs == users and count == 1 and seconds >= 0.1
    assert got["herdless.load.time"][0][1] >= 0.1
    assert "herdless.alerts_active" not in got or all(v == 0 for _, v in got["herdless.alerts_active"])


def test_a_span_per_load_under_the_callers_span(otel: Any) -> None:
    meters, _, tracers, spans = otel
    cache = Cache(ttl=60)
    instrument(cache, meter_provider=meters, tracer_provider=tracers)
    tracer = tracers.get_tracer("test")
    inner: list[Any] = []

    def load() -> dict[str, int]:
        inner.append(trace.get_current_span().get_span_context().span_id)
        return {"id": 7}

    with tracer.start_as_current_span("GET /users/7") as request:
        assert cache.get_or_load("users:v1:#7", load) == {"id": 7}
        assert cache.get_or_load("users:v1:#7", load) == {"id": 7}  # a hit: no span
    finished = {s.name: s for s in spans.get_finished_spans()}
    assert set(finished) == {"herdless.load", "GET /users/7"}
    load_span = finished["herdless.load"]
    assert load_span.parent is not None
    assert load_span.parent.span_id == request.get_span_context().span_id
    assert inner == [load_span.context.span_id]  # current while the loader ran
    assert dict(load_span.attributes or {}) == {
        "cache.key": "users:v1:#7",
        "cache.operation": "load",
        "cache.hit": False,
        "herdless.namespace": "users",
    }


def test_a_failed_load_is_recorded_and_raised(otel: Any) -> None:
    meters, _, tracers, spans = otel
    cache = Cache()
    instrument(cache, meter_provider=meters, tracer_provider=tracers, record_keys=False)

    def fail() -> None:
        raise LookupError("no such row")

    with pytest.raises(LookupError):
        cache.get_or_load("rows:1", fail)
    [span] = spans.get_finished_spans()
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes is not None and span.attributes["error.type"] == "LookupError"
    assert "cache.key" not in span.attributes
    assert [e.name for e in span.events] == ["exception"]


def test_async_loads_and_background_refreshes(otel: Any) -> None:
    meters, _, tracers, spans = otel
    cache = Cache(ttl=0.05, grace=30, jitter=0, beta=0)
    instrumentation = instrument(cache, meter_provider=meters, tracer_provider=tracers)

    async def load() -> str:
        await asyncio.sleep(0.02)
        return "v"

    async def main() -> None:
        results = await asyncio.gather(*(cache.aget_or_load("feed:home", load) for _ in range(20)))
        assert results == ["v"] * 20
        await asyncio.sleep(0.1)
        await cache.aget_or_load("feed:home", load)  # stale: one refresh in the background
        for _ in range(100):
            if len(spans.get_finished_spans()) == 2:
                break
            await asyncio.sleep(0.01)

    asyncio.run(main())
    ops = [(s.attributes or {})["cache.operation"] for s in spans.get_finished_spans()]
    assert ops == ["load", "refresh"]
    first = spans.get_finished_spans()[0]
    assert first.end_time is not None and first.start_time is not None
    assert first.end_time - first.start_time >= 20_000_000  # the span covers the awaited load
    instrumentation.uninstrument()
    cache.set("x:1", 1)
    assert cache.get_or_load("x:2", lambda: 2) == 2
    assert len(spans.get_finished_spans()) == 2


def test_the_decorator_is_traced_too(otel: Any) -> None:
    meters, _, tracers, spans = otel
    cache = Cache(namespace="shop")
    instrument(cache, meter_provider=meters, tracer_provider=tracers)

    @cache.cached
    def price(product: int) -> int:
        return product * 10

    assert price(3) == 30 and price(3) == 30
    [span] = spans.get_finished_spans()
    assert (span.attributes or {})["herdless.namespace"] == "shop"


def test_off_unless_configured() -> None:
    cache = Cache()
    assert cache._load_observer is None
    with pytest.raises(TypeError):
        instrument("cache")  # type: ignore[arg-type]
