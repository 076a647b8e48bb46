"""Metrics snapshots as dataclasses, mirroring the engine's ``MetricsSnapshot``."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from . import _native

__all__ = ["Counters", "Histogram", "Metrics", "NamespaceMetrics"]


@dataclass(frozen=True, slots=True)
class Counters:
    """Counter values of one namespace (or their sum over all namespaces)."""

    hits: int = 0
    """Lookups answered by a fresh value."""
    negative_hits: int = 0
    """Lookups answered by a cached absence (negative caching)."""
    stale_served: int = 0
    """Lookups answered by a stale value within grace while one refresh runs."""
    misses: int = 0
    """Lookups with nothing servable: the caller led a load or waited for one."""
    expired_misses: int = 0
    """Misses that found the key's entry expired (past ttl + grace)."""
    cold_misses: int = 0
    """Misses that found neither an entry nor a load of the key."""
    failsafe_served: int = 0
    """Answers with stale data past grace because a load failed or timed out."""
    loads: int = 0
    """Loader calls started (origin requests)."""
    load_errors: int = 0
    """Loader calls that failed."""
    load_timeouts: int = 0
    """Loads abandoned at their hard timeout."""
    abandoned_loads: int = 0
    """Loads whose leader went away without an answer; a waiter took over."""
    coalesced_waiters: int = 0
    """Callers that waited for another caller's load (stampedes prevented)."""
    lock_acquired: int = 0
    """Loads led: the caller won the key's flight."""
    batch_loads: int = 0
    """Batch loader calls (``get_or_load_many``) that loaded keys of this namespace; each of
    their keys is also one of ``loads``."""
    lock_contended: int = 0
    """Lookups that found the key's flight already taken."""
    wait_timeouts: int = 0
    """Waiters that gave up after ``wait_timeout``."""
    early_refreshes: int = 0
    """XFetch refreshes started before expiry."""
    ahead_refreshes: int = 0
    """Refresh-ahead refreshes started at the configured share of the ttl."""
    refreshes: int = 0
    """Background refreshes started (stale-while-revalidate, XFetch and refresh-ahead)."""
    not_modified: int = 0
    """Loads answered "not modified": the previous value kept, its lifetime restarted."""
    backend_errors: int = 0
    """Errors of the shared tier (Redis)."""
    evictions: int = 0
    """Entries evicted to stay within capacity."""
    admission_rejections: int = 0
    """New keys not stored because the admission filter found them less frequent than the
    entry they would have evicted; their callers were answered all the same."""
    retired_namespaces: int = 0
    """Namespace records retired to stay within ``max_namespaces`` (their entries became
    misses; their counters are kept under ``__retired__``)."""
    events_dropped: int = 0
    """Events the listener's queue could not take (full or busy)."""

    def __add__(self, other: Counters) -> Counters:
        return Counters(
            **{
                f.name: getattr(self, f.name) + getattr(other, f.name)
                for f in dataclasses.fields(self)
            }
        )


@dataclass(frozen=True, slots=True)
class Histogram:
    """A latency histogram: ``counts[i]`` observations fell at or below ``bounds[i]`` seconds
    and above the previous bound; the last bound is infinity."""

    bounds: tuple[float, ...]
    counts: tuple[int, ...]
    sum: float
    """Sum of all observations, in seconds."""

    @property
    def count(self) -> int:
        """Number of observations."""
        return sum(self.counts)

    def quantile(self, q: float) -> float | None:
        """The ``q``-quantile (0..1), as the upper bound of the bucket it falls in; None
        when empty."""
        total = self.count
        if total == 0:
            return None
        rank = max(1, math.ceil(min(max(q, 0.0), 1.0) * total))
        seen = 0
        for bound, c in zip(self.bounds, self.counts):
            seen += c
            if seen >= rank:
                return bound
        return math.inf


@dataclass(frozen=True, slots=True)
class NamespaceMetrics:
    """Metrics of one namespace (the text of a key before its first ``:``)."""

    namespace: str
    counters: Counters
    load_duration: Histogram
    """Duration of loader calls, successful or not."""
    lock_wait: Histogram
    """Time waiters spent waiting for another caller's load."""


@dataclass(frozen=True, slots=True)
class Metrics:
    """All metrics of a cache at one moment (``Cache.metrics()``)."""

    namespaces: dict[str, NamespaceMetrics]
    """Per namespace."""
    entries: int
    """Entries held (values and cached absences)."""
    weight: int
    """Their total weight (entries)."""
    loads_in_flight: int
    """Loads running now."""
    tags: int = 0
    """Tag records held now (one per tag in use, bounded like namespaces)."""
    tag_invalidations: int = 0
    """Tags invalidated (``invalidate_tag``: their entries became misses), one per tag of
    each call."""
    tag_expirations: int = 0
    """Tags expired (``invalidate_tag(..., soft=True)``: their entries became stale), one
    per tag of each call."""
    retired_tags: int = 0
    """Tag records retired to stay within the engine's bound on tags (their entries became
    misses: a forgotten tag never brings an older entry back)."""
    redis: dict[str, int] | None = None
    """The Redis tier's counters (``l2_hits``, ``fleet_locks_acquired``, ``backend_errors``,
    ...), or None without ``redis=``."""

    @property
    def total(self) -> Counters:
        """Counters summed over all namespaces."""
        total = Counters()
        for ns in self.namespaces.values():
            total = total + ns.counters
        return total

    def namespace(self, name: str) -> NamespaceMetrics | None:
        """The metrics of one namespace, if it has any."""
        return self.namespaces.get(name)


_BOUNDS = (*_native.BUCKETS, math.inf)


def _histogram(raw: tuple[tuple[int, ...], float]) -> Histogram:
    counts, total = raw
    return Histogram(bounds=_BOUNDS, counts=tuple(counts), sum=total)


def from_native(raw: dict[str, Any]) -> Metrics:
    """Builds a :class:`Metrics` from ``_native.Cache._metrics()``."""
    namespaces = {
        name: NamespaceMetrics(
            namespace=name,
            counters=Counters(**ns["counters"]),
            load_duration=_histogram(ns["load_duration"]),
            lock_wait=_histogram(ns["lock_wait"]),
        )
        for name, ns in raw["namespaces"].items()
    }
    return Metrics(
        namespaces=namespaces,
        entries=raw["entries"],
        weight=raw["weight"],
        loads_in_flight=raw["loads_in_flight"],
        tags=raw["tags"],
        tag_invalidations=raw["tag_invalidations"],
        tag_expirations=raw["tag_expirations"],
        retired_tags=raw["retired_tags"],
        redis=raw.get("redis"),
    )
