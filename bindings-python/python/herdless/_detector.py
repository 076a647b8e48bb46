"""The stampede detector's alerts and the hot-key tracker's keys, as dataclasses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Alert", "DetectorOptions", "HotKey"]



@dataclass(frozen=True, slots=True)
class DetectorOptions:
    """Thresholds of the stampede detector: ``Cache(detector=DetectorOptions(...))``.

    The defaults are the engine's (misses 5x their steady state, origin p99 10x its p50,
    lock waits above the rebuild time); durations are in seconds.
    ``Cache(detector=False)`` switches the detector off.
    """

    tick: float = 1.0
    """Width of one window tick; the steady state is the median of the last 64."""
    spike_factor: float = 5.0
    """Miss spike: misses in a tick above this times their steady state (>= 1)."""
    min_spike_misses: int = 20
    """Miss spike: and at least this many misses in the tick."""
    latency_factor: float = 10.0
    """Origin latency: load p99 above this times load p50 (>= 1)."""
    latency_window: float = 60.0
    """Origin latency and lock wait: the latency window."""
    min_samples: int = 20
    """Origin latency and lock wait: at least this many loads / waits in the window."""
    key_share: float = 0.5
    """A key with at least this share of a spike's misses is named, in (0, 1]."""
    hold: float = 600.0
    """How long an alert stays listed after its condition last held."""


@dataclass(frozen=True, slots=True)
class Alert:
    """One finding of the stampede detector (``Cache.alerts()``)."""

    kind: str
    """``miss_spike`` (misses above 5x their steady state), ``origin_latency`` (load p99
    above 10x p50), ``lock_wait`` (wait p99 above the rebuild time) or ``sawtooth`` (miss
    spikes repeating with a period, usually the TTL's)."""
    cause: str
    """What the misses looked like: one ``hot_key``, many expired keys (``mass_expiry``),
    keys with no entry (``miss_storm``), or ``unknown``."""
    namespace: str
    """Where: the namespace."""
    key: str | None
    """Where: the key, when one key dominates."""
    since: float
    """When it first fired, in seconds on the cache's clock (monotonic)."""
    last_seen: float
    """When its condition last held, in seconds on the cache's clock."""
    active: bool
    """Whether the condition held at the last evaluation."""
    evidence: dict[str, Any]
    """The figures (rates per second, durations in seconds, counts)."""
    cures: tuple[str, ...]
    """Likely cures, most likely first: ``single_flight``, ``xfetch``, ``grace``, ``jitter``,
    ``negative_caching``, ``origin_budget``."""
    message: str
    """The alert in one line, for humans."""

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True, slots=True)
class HotKey:
    """One key of the hot-key tracker's top-K."""

    key: str
    count: int
    """Estimated accesses (fresh hits are sampled and weighted)."""
    misses: int
    """Misses recorded while the key was tracked."""


def alert_from_native(raw: dict[str, Any]) -> Alert:
    return Alert(
        kind=raw["kind"],
        cause=raw["cause"],
        namespace=raw["namespace"],
        key=raw["key"],
        since=raw["since"],
        last_seen=raw["last_seen"],
        active=raw["active"],
        evidence=raw["evidence"],
        cures=tuple(raw["cures"]),
        message=raw["message"],
    )


def hot_key_from_native(raw: tuple[str, int, int]) -> HotKey:
    key, count, misses = raw
    return HotKey(key=key, count=count, misses=misses)
