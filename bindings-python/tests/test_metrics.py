"""metrics() mirrors the engine's snapshot; prometheus() is its text exposition."""

from __future__ import annotations

import dataclasses
import math

from herdless import ABSENT, Cache, Counters, Metrics
from herdless import _native


def test_counter_fields_mirror_the_engine() -> None:
    assert [f.name for f in dataclasses.fields(Counters)] == [name for name, _ in _native.COUNTERS]


def test_snapshot(cache: Cache) -> None:
    cache.get_or_load("a:1", lambda: 1)
    cache.get_or_load("a:1", lambda: 1)
    cache.get_or_load("b:1", lambda: ABSENT)
    cache.get_or_load("b:1", lambda: ABSENT)
    m = cache.metrics()
    assert isinstance(m, Metrics)
    assert set(m.namespaces) == {"a", "b"}
    a = m.namespace("a")
    assert a is not None
    assert (a.counters.loads, a.counters.hits, a.counters.misses) == (1, 1, 1)
    assert m.total.negative_hits == 1 and m.total.loads == 2
    assert m.entries == 2 and m.loads_in_flight == 0
    assert a.load_duration.count == 1 and a.load_duration.sum >= 0
    assert a.load_duration.bounds[-1] == math.inf
    assert len(a.load_duration.bounds) == len(a.load_duration.counts)
    q = a.load_duration.quantile(0.5)
    assert q is not None and q > 0
    assert a.lock_wait.quantile(0.5) is None
    assert m.namespace("zzz") is None


def test_prometheus(cache: Cache) -> None:
    cache.get_or_load("a:1", lambda: 1)
    text = cache.prometheus()
    assert '# TYPE herdless_loads_total counter' in text
    assert 'herdless_loads_total{namespace="a"} 1' in text
