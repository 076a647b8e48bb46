"""The decorator's hit against cachetools, timed in CPU time: for a machine too loaded for
bench_hit.py's wall-clock best-of-9 (a process descheduled inside a 50 ms measurement is
charged for it). Cases are interleaved round by round (41 rounds of 20,000 calls each);
each case's median and best per-call CPU time (`time.process_time_ns`) are printed.

Run with the benchmark venv's python (benchmarks/run.sh installs it), e.g.
`HERDLESS_BENCH=bench_decorator_cpu.py bindings-python/benchmarks/run.sh`.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable
from typing import Any

import cachetools

import herdless

ROUNDS = 41
CALLS = 20_000


def measure(stmt: Callable[[], Any]) -> float:
    """CPU nanoseconds per call of `stmt`, over CALLS calls."""
    t0 = time.process_time_ns()
    for _ in range(CALLS):
        stmt()
    return (time.process_time_ns() - t0) / CALLS


def main() -> None:
    value = {"id": 42}

    @functools.lru_cache(maxsize=1024)
    def lru(item_id: int) -> dict[str, int]:
        return value

    hc = herdless.Cache(ttl=3600)
    key = "bench:v1:item:#42"
    hc.set(key, value)
    get = hc.get

    @hc.cached(ttl=3600)
    def h_fn(item_id: int) -> dict[str, int]:
        return value

    @cachetools.cached(cachetools.TTLCache(maxsize=1024, ttl=3600))
    def ct_fn(item_id: int) -> dict[str, int]:
        return value

    cases: dict[str, Callable[[], Any]] = {
        "functools.lru_cache hit: f(42)": lambda: lru(42),
        "herdless Cache.get(key) hit": lambda: get(key),
        "herdless @cache.cached hit: f(42)": lambda: h_fn(42),
        "cachetools @cached(TTLCache) hit: f(42)": lambda: ct_fn(42),
    }
    for stmt in cases.values():
        stmt()
        measure(stmt)
    runs: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(ROUNDS):
        for name, stmt in cases.items():
            runs[name].append(measure(stmt))
    med = {name: statistics.median(r) for name, r in runs.items()}
    for name, r in runs.items():
        print(f"{name:<42} median {med[name]:7.1f} ns  best {min(r):7.1f} ns (CPU time)")
    dec = med["herdless @cache.cached hit: f(42)"]
    ct = med["cachetools @cached(TTLCache) hit: f(42)"]
    ratios = sorted(
        c / d
        for c, d in zip(runs["cachetools @cached(TTLCache) hit: f(42)"],
                        runs["herdless @cache.cached hit: f(42)"])
    )
    q1, q3 = ratios[len(ratios) // 4], ratios[3 * len(ratios) // 4]
    print(f"decorator hit vs cachetools @cached: {ct / dec:.2f}x faster (medians; per-round "
          f"quartiles {q1:.2f}x-{q3:.2f}x) -> {'met' if ct >= 6 * dec else 'MISSED'} (goal 6x)")


if __name__ == "__main__":
    main()
