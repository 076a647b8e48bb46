"""Hit path with the integrations on and off: a plain cache against one instrumented with
OpenTelemetry (an SDK with in-memory exporters, spans and metrics on) and registered with a
prometheus_client collector, side by side in interleaved rounds (best round kept), in
nanoseconds per call. Needs the package and requirements-dev.txt (scripts/test.sh's venv):

    target/python/venv/bin/python bindings-python/benchmarks/bench_instrumented.py
"""

from __future__ import annotations

import asyncio
import timeit
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

import herdless
from herdless.contrib.opentelemetry import instrument
from herdless.contrib.prometheus import HerdlessCollector

ROUNDS = 21
NUMBER = 200_000


def main() -> None:
    key, value = "bench:v1:item:#42", {"id": 42}
    loader = lambda: value  # noqa: E731

    async def aload() -> dict[str, int]:
        return value

    plain = herdless.Cache(ttl=3600)
    on = herdless.Cache(ttl=3600)
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    instrument(on, meter_provider=MeterProvider(metric_readers=[InMemoryMetricReader()]), tracer_provider=tracing)
    CollectorRegistry().register(HerdlessCollector(on))

    cases: list[tuple[str, Callable[[], float]]] = []
    for name, cache in (("off", plain), ("on ", on)):
        cache.get_or_load(key, loader)

        @cache.cached(ttl=3600)
        def fn(item_id: int) -> dict[str, int]:
            return value

        fn(42)
        gol = cache.get_or_load
        t1 = timeit.Timer(lambda gol=gol: gol(key, loader))  # type: ignore[misc]
        t2 = timeit.Timer(lambda fn=fn: fn(42))  # type: ignore[misc]
        aget = cache.aget_or_load

        async def loop(aget: Any = aget) -> float:
            t0 = timeit.default_timer()
            for _ in range(NUMBER // 4):
                await aget(key, aload)
            return timeit.default_timer() - t0

        cases.append((f"get_or_load(key, loader) hit, integrations {name}", lambda t=t1: t.timeit(NUMBER) / NUMBER * 1e9))
        cases.append((f"@cache.cached hit: f(42), integrations {name}", lambda t=t2: t.timeit(NUMBER) / NUMBER * 1e9))
        cases.append((f"await aget_or_load(key, loader) hit, integrations {name}", lambda loop=loop: asyncio.run(loop()) / (NUMBER // 4) * 1e9))
    best = [float("inf")] * len(cases)
    for _ in range(ROUNDS):
        for i, (_, measure) in enumerate(cases):
            best[i] = min(best[i], measure())
    rows = sorted(zip((n for n, _ in cases), best))
    for name, ns in rows:
        print(f"{name:<62} {ns:8.1f} ns")
    by = dict(rows)
    for call in ("get_or_load(key, loader) hit", "@cache.cached hit: f(42)", "await aget_or_load(key, loader) hit"):
        on, off = by[f"{call}, integrations on "], by[f"{call}, integrations off"]
        print(f"{call}: on/off {on / off:.2f}x")


if __name__ == "__main__":
    main()
