"""The example catalog under FastAPI's TestClient: concurrent requests reach the origin once,
/metrics shows it, and an OpenTelemetry SDK sees a span per load."""

from __future__ import annotations

import threading
from typing import Any

from fastapi.testclient import TestClient
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

# The application's SDK, installed before the app is imported (as a service's startup does).
spans = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(spans))
trace.set_tracer_provider(provider)

import catalog  # noqa: E402


def stampede(client: TestClient, url: str, n: int) -> list[Any]:
    answers: list[Any] = []

    def get() -> None:
        r = client.get(url)
        answers.append((r.status_code, r.json()))

    threads = [threading.Thread(target=get) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers


def test_concurrent_requests_reach_the_origin_once() -> None:
    with TestClient(catalog.app) as client:
        assert stampede(client, "/products/7", 24) == [(200, {"id": 7, "name": "Product 7"})] * 24
        assert catalog.ORIGIN_CALLS["product"] == 1
        assert client.get("/products/404").status_code == 404
        assert client.get("/products/404").status_code == 404
        assert catalog.ORIGIN_CALLS["product"] == 2

        assert stampede(client, "/stock/A-1", 24) == [(200, {"sku": "A-1", "units": 12})] * 24
        assert catalog.ORIGIN_CALLS["stock"] == 1

        scrape = client.get("/metrics").text
        assert 'herdless_loads_total{namespace="catalog"} 3.0' in scrape
        assert 'herdless_coalesced_waiters_total{namespace="catalog"}' in scrape

    loads = [s for s in spans.get_finished_spans() if s.name == "herdless.load"]
    assert len(loads) == 3
    assert {(s.attributes or {})["herdless.namespace"] for s in loads} == {"catalog"}


def test_the_cache_dependency_can_be_overridden() -> None:
    from herdless import Cache

    fresh = Cache(ttl=60)
    catalog.app.dependency_overrides[catalog.get_cache] = lambda: fresh
    try:
        with TestClient(catalog.app) as client:
            assert client.get("/stock/B-2").json() == {"sku": "B-2", "units": 12}
        assert fresh.get("catalog:v1:stock:B-2") == 12
    finally:
        catalog.app.dependency_overrides.clear()
