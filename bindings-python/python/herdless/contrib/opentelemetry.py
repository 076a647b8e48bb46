"""OpenTelemetry metrics and load spans for a cache, through ``opentelemetry-api``.

    from herdless.contrib.opentelemetry import instrument

    instrument(cache)              # the global MeterProvider and TracerProvider
    instrument(cache, meter_provider=mp, tracer_provider=tp, name="pages")

Nothing is emitted until it is called (the application owns the SDK and its exporters), and
it adds nothing to a hit: metrics are observable instruments read from ``cache.metrics()``
when the SDK collects (each reads its own snapshot: the API has no callback shared by several
instruments), and spans are made by an observer the engine calls only when a loader
runs.

Metrics (attribute ``herdless.namespace``, and ``herdless.cache`` when ``name`` is given):
``herdless.<counter>`` for each counter of ``Counters`` (``herdless.hits``,
``herdless.loads``, ``herdless.coalesced_waiters``, ...; monotonic), ``herdless.load.time``
and ``herdless.lock_wait.time`` (seconds summed: divide by ``herdless.loads`` and
``herdless.coalesced_waiters``), the gauges ``herdless.entries``, ``herdless.weight`` and
``herdless.loads_in_flight``, the gauge ``herdless.alerts_active`` (attributes
``herdless.alert.kind`` and ``herdless.alert.cause``), and with ``redis=`` each counter of the
shared tier as ``herdless.redis.<counter>``. The histogram ``herdless.load.duration``
(seconds; ``error.type`` on failure) is recorded as each load ends.

Spans: one ``herdless.load`` span (kind INTERNAL) per loader call, the caller's span as
parent, current while the loader runs (so the loader's own queries nest under it), with
``cache.key`` (unless ``record_keys=False``: keys may carry user data),
``cache.operation`` (``load``, or ``refresh`` for a background refresh), ``cache.hit``
(false), ``herdless.namespace``; a loader's exception is recorded, with ``error.type``.
OpenTelemetry has no semantic conventions for caches yet: these names are the ones cache
instrumentations commonly use.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.trace import SpanKind, Status, StatusCode

from .. import _native
from .._cache import Cache

__all__ = ["Instrumentation", "instrument"]

_SCOPE = "herdless"


def _version() -> str:
    from importlib.metadata import version

    return version("herdless")


def _namespace(key: str) -> str:
    return key.split(":", 1)[0]


@dataclass(eq=False)
class Instrumentation:
    """What ``instrument`` set up; ``uninstrument()`` removes the span observer (the
    observable instruments stay registered with their provider, and read nothing more once
    the cache is gone)."""

    cache: Cache
    name: str | None
    _spans: bool

    def uninstrument(self) -> None:
        """Stops the spans (and the load-duration histogram) of this cache."""
        if self._spans:
            self.cache._set_load_observer(None)


def instrument(
    cache: Cache,
    *,
    meter_provider: metrics.MeterProvider | None = None,
    tracer_provider: trace.TracerProvider | None = None,
    name: str | None = None,
    spans: bool = True,
    record_keys: bool = True,
) -> Instrumentation:
    """Reports ``cache``'s metrics through OpenTelemetry and, with ``spans``, a span for each
    loader call (see the module docs). ``name`` tells several caches apart (attribute
    ``herdless.cache``)."""
    if not isinstance(cache, _native.Cache):
        raise TypeError(f"instrument() takes a herdless.Cache, got {type(cache).__qualname__}")
    meter = metrics.get_meter(_SCOPE, _version(), meter_provider)
    base: dict[str, str] = {} if name is None else {"herdless.cache": name}

    def per_namespace(read: Callable[[Any], float]) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def callback(_options: CallbackOptions) -> Iterable[Observation]:
            m = cache.metrics()
            return [
                Observation(read(ns), {**base, "herdless.namespace": ns.namespace})
                for ns in m.namespaces.values()
            ]

        return callback

    def counter_reader(field: str) -> Callable[[Any], float]:
        return lambda ns: getattr(ns.counters, field)

    for field, help_text in _native.COUNTERS:
        meter.create_observable_counter(
            f"herdless.{field}", [per_namespace(counter_reader(field))], "1", help_text
        )
    meter.create_observable_counter(
        "herdless.load.time",
        [per_namespace(lambda ns: ns.load_duration.sum)],
        "s",
        "Time spent in loader calls, summed.",
    )
    meter.create_observable_counter(
        "herdless.lock_wait.time",
        [per_namespace(lambda ns: ns.lock_wait.sum)],
        "s",
        "Time waiters waited for another caller's load, summed.",
    )

    def gauge(field: str, help_text: str) -> None:
        def callback(_options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(getattr(cache.metrics(), field), base)]

        meter.create_observable_gauge(f"herdless.{field}", [callback], "1", help_text)

    gauge("entries", "Entries held (values and cached absences).")
    gauge("weight", "Total weight of the entries held.")
    gauge("loads_in_flight", "Loads running now.")

    def alerts(_options: CallbackOptions) -> Iterable[Observation]:
        held: dict[tuple[str, str, str], int] = {}
        for a in cache.alerts():
            k = (a.namespace, a.kind, a.cause)
            held[k] = held.get(k, 0) + int(a.active)
        return [
            Observation(
                n,
                {**base, "herdless.namespace": ns, "herdless.alert.kind": kind, "herdless.alert.cause": cause},
            )
            for (ns, kind, cause), n in held.items()
        ]

    meter.create_observable_gauge(
        "herdless.alerts_active", [alerts], "1", "Stampede alerts holding now."
    )

    redis = cache.metrics().redis
    for field in redis or {}:

        def redis_callback(_options: CallbackOptions, field: str = field) -> Iterable[Observation]:
            r = cache.metrics().redis or {}
            return [Observation(r.get(field, 0), base)]

        meter.create_observable_counter(f"herdless.redis.{field}", [redis_callback], "1")

    if spans:
        tracer = trace.get_tracer(_SCOPE, _version(), tracer_provider)
        duration = meter.create_histogram(
            "herdless.load.duration", "s", "Duration of loader calls."
        )
        cache._set_load_observer(_observer(tracer, duration, base, record_keys))
    return Instrumentation(cache=cache, name=name, _spans=spans)


def _observer(
    tracer: trace.Tracer,
    duration: metrics.Histogram,
    base: dict[str, str],
    record_keys: bool,
) -> Callable[[str, bool, Callable[[], Any]], Any]:
    """The cache's load observer: runs each loader call inside a ``herdless.load`` span."""

    def observe(key: str, background: bool, call: Callable[[], Any]) -> Any:
        namespace = _namespace(key)
        attributes: dict[str, str | bool] = {
            **base,
            "cache.operation": "refresh" if background else "load",
            "cache.hit": False,
            "herdless.namespace": namespace,
        }
        if record_keys:
            attributes["cache.key"] = key
        span = tracer.start_span("herdless.load", kind=SpanKind.INTERNAL, attributes=attributes)
        ctx = trace.set_span_in_context(span)
        started = time.perf_counter()
        measured = {**base, "herdless.namespace": namespace}

        def end(exc: BaseException | None) -> None:
            if exc is not None:
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, str(exc)))
                span.set_attribute("error.type", type(exc).__qualname__)
                measured["error.type"] = type(exc).__qualname__
            duration.record(time.perf_counter() - started, measured)
            span.end()

        token = otel_context.attach(ctx)
        try:
            result = call()
        except BaseException as exc:
            end(exc)
            raise
        finally:
            otel_context.detach(token)
        if not inspect.isawaitable(result):
            end(None)
            return result
        return _finish(result, ctx, end)

    return observe


async def _finish(
    awaitable: Awaitable[Any], ctx: otel_context.Context, end: Callable[[BaseException | None], None]
) -> Any:
    token = otel_context.attach(ctx)
    try:
        value = await awaitable
    except BaseException as exc:
        end(exc)
        raise
    finally:
        otel_context.detach(token)
    end(None)
    return value
