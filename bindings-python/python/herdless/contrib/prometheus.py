"""herdless's metrics on a ``prometheus_client`` registry, beside the service's own.

    from herdless.contrib.prometheus import register

    register(cache)                 # prometheus_client.REGISTRY, beside the service's metrics
    register({"pages": pages, "sessions": sessions}, registry=my_registry)

The collector re-reads ``cache.prometheus()`` at each scrape, so the series, their names,
help and types are exactly those of the text exposition in every language (the engine
decides them); nothing is counted twice and nothing runs between scrapes. Several caches
share one collector, each series labelled ``cache="<name>"``. ``register`` is
``registry.register(HerdlessCollector(...))``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import REGISTRY, Collector, CollectorRegistry
from prometheus_client.samples import Sample

from .._native import Cache

__all__ = ["HerdlessCollector", "register"]


class HerdlessCollector(Collector):
    """A ``prometheus_client`` collector of one cache, or of several by name (each series
    then gets the label ``cache``)."""

    def __init__(self, cache: Cache | Mapping[str, Cache], *, label: str = "cache") -> None:
        if isinstance(cache, Cache):
            self._caches: dict[str | None, Cache] = {None: cache}
        elif isinstance(cache, Mapping) and all(isinstance(c, Cache) for c in cache.values()):
            self._caches = {str(name): c for name, c in cache.items()}
        else:
            raise TypeError(
                "HerdlessCollector takes a herdless.Cache or a mapping of names to caches, "
                f"got {type(cache).__qualname__}"
            )
        self._label = label

    def collect(self) -> Iterable[Metric]:
        families: dict[str, Metric] = {}
        for name, cache in self._caches.items():
            for family in text_string_to_metric_families(cache.prometheus()):
                merged = families.setdefault(
                    family.name, Metric(family.name, family.documentation, family.type)
                )
                for s in family.samples:
                    labels = s.labels if name is None else {**s.labels, self._label: name}
                    merged.samples.append(Sample(s.name, labels, s.value, s.timestamp, s.exemplar))
        return list(families.values())


def register(
    cache: Cache | Mapping[str, Cache],
    *,
    registry: CollectorRegistry | None = None,
    label: str = "cache",
) -> HerdlessCollector:
    """Registers a :class:`HerdlessCollector` of ``cache`` (or of named caches) with
    ``registry`` (default: ``prometheus_client.REGISTRY``) and returns it (``unregister``
    it from the registry to stop)."""
    collector = HerdlessCollector(cache, label=label)
    (REGISTRY if registry is None else registry).register(collector)
    return collector
