"""Batch benchmark (issue 18): one request of 100 keys of which 10 are misses, answered by
herdless ``get_or_load_many`` (one loader call for the 10 misses), by 100 herdless
``get_or_load`` calls (10 loader calls), and by a cachetools ``TTLCache`` read in a loop with
cache-aside on its misses (10 loader calls). Trivial loaders: this is each cache's own cost
per request. The 10 missing keys are dropped (untimed) before each request. Cases are
interleaved per round, best round kept; microseconds per request.

Run: ``HERDLESS_BENCH=bench_batch.py bindings-python/benchmarks/run.sh``.
"""

from __future__ import annotations

import platform
import sys
import time
from collections.abc import Callable

import cachetools

import herdless

KEYS = [f"product:{i}" for i in range(100)]
MISSES = KEYS[::10]  # 10 keys, spread over the request
ROUNDS = 15
REQUESTS = 200  # per measurement


def load_many(keys: list[str]) -> dict[str, str]:
    return {k: k for k in keys}


def herdless_many(cache: herdless.Cache) -> Callable[[], object]:
    return lambda: cache.get_or_load_many(KEYS, load_many)


def herdless_singles(cache: herdless.Cache) -> Callable[[], object]:
    def request() -> list[object]:
        return [cache.get_or_load(k, lambda k=k: k) for k in KEYS]

    return request


def cachetools_loop(cache: cachetools.TTLCache[str, str]) -> Callable[[], object]:
    def request() -> list[str]:
        out = []
        for k in KEYS:
            v = cache.get(k)
            if v is None:
                v = k  # the origin
                cache[k] = v
            out.append(v)
        return out

    return request


def measure(request: Callable[[], object], drop: Callable[[], None]) -> float:
    total = 0.0
    for _ in range(REQUESTS):
        drop()
        t0 = time.perf_counter()
        request()
        total += time.perf_counter() - t0
    return total / REQUESTS * 1e6


def main() -> None:
    h1, h2 = herdless.Cache(ttl=600), herdless.Cache(ttl=600)
    tc: cachetools.TTLCache[str, str] = cachetools.TTLCache(maxsize=10_000, ttl=600)
    for k in KEYS:
        h1.set(k, k)
        h2.set(k, k)
        tc[k] = k

    def drop_h(c: herdless.Cache) -> Callable[[], None]:
        def drop() -> None:
            for k in MISSES:
                c.invalidate(k)

        return drop

    def drop_tc() -> None:
        for k in MISSES:
            tc.pop(k, None)

    cases = [
        ("herdless get_or_load_many (1 loader call)", herdless_many(h1), drop_h(h1)),
        ("herdless get_or_load x 100 (10 loader calls)", herdless_singles(h2), drop_h(h2)),
        ("cachetools TTLCache loop (10 origin calls)", cachetools_loop(tc), drop_tc),
    ]
    best = [float("inf")] * len(cases)
    for _ in range(ROUNDS):
        for i, (_, request, drop) in enumerate(cases):
            best[i] = min(best[i], measure(request, drop))
    print(f"python {sys.version.split()[0]} on {platform.machine()}, best of {ROUNDS} rounds")
    for (name, _, _), us in zip(cases, best):
        print(f"  {name:<48} {us:8.1f} us per 100-key request  ({us / best[0]:.2f}x the batch)")


if __name__ == "__main__":
    main()
