"""herdless's metrics on a prometheus_client registry: the same series as ``prometheus()``."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from herdless import Cache
from herdless.contrib.prometheus import HerdlessCollector, register


def samples(text: str) -> set[tuple[str, tuple[tuple[str, str], ...], float]]:
    return {
        (s.name, tuple(sorted(s.labels.items())), s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def busy_cache(name: str) -> Cache:
    cache = Cache(ttl=60, redis=f"memory://{name}")
    cache.get_or_load("users:v1:#1", lambda: "Ada")
    cache.get_or_load("users:v1:#1", lambda: "never")
    cache.get_or_load("orders:v1:#1", lambda: {"total": 3})
    assert cache.get("users:v1:#2") is None
    return cache


def test_a_scrape_of_the_registry_carries_what_prometheus_says() -> None:
    cache = busy_cache("prom-one")
    registry = CollectorRegistry()
    own = Counter("shop_requests", "The service's own metric.", registry=registry)
    own.inc()
    registry.register(HerdlessCollector(cache))
    scraped = generate_latest(registry).decode()
    assert "shop_requests_total 1.0" in scraped  # beside the service's own metrics
    expected = samples(cache.prometheus())
    got = {s for s in samples(scraped) if s[0].startswith("herdless_")}
    assert got == expected
    names = {s[0] for s in got}
    assert {
        "herdless_hits_total",
        "herdless_loads_total",
        "herdless_load_duration_seconds_bucket",
        "herdless_lock_wait_seconds_count",
        "herdless_entries",
        "herdless_redis_commits_total",
    } <= names
    assert ("herdless_loads_total", (("namespace", "users"),), 1.0) in got


def test_several_caches_are_told_apart_by_a_label() -> None:
    pages, sessions = busy_cache("prom-pages"), Cache()
    sessions.get_or_load("sessions:abc", lambda: 1)
    registry = CollectorRegistry()
    collector = register({"pages": pages, "sessions": sessions}, registry=registry)
    assert isinstance(collector, HerdlessCollector)
    got = samples(generate_latest(registry).decode())
    assert ("herdless_loads_total", (("cache", "pages"), ("namespace", "users")), 1.0) in got
    assert ("herdless_loads_total", (("cache", "sessions"), ("namespace", "sessions")), 1.0) in got
    assert ("herdless_entries", (("cache", "sessions"),), 1.0) in got


def test_the_collector_takes_caches_only() -> None:
    with pytest.raises(TypeError, match="herdless.Cache"):
        HerdlessCollector("not a cache")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        HerdlessCollector({"x": object()})  # type: ignore[dict-item]


def test_register_defaults_to_the_global_registry() -> None:
    from prometheus_client import REGISTRY

    cache = busy_cache("prom-global")
    collector = register(cache)
    try:
        assert 'herdless_loads_total{namespace="users"} 1.0' in generate_latest(REGISTRY).decode()
    finally:
        REGISTRY.unregister(collector)
