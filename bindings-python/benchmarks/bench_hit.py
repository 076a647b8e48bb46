"""Hit-path benchmark: herdless against functools.lru_cache, cachetools, dogpile.cache and
cashews, side by side in one run. Every figure is the best of several timeit repeats, in
nanoseconds per call, on a key that is already cached (a hit).

Run through benchmarks/run.sh (it builds the wheel and installs the other libraries).
"""

from __future__ import annotations

import asyncio
import functools
import platform
import sys
import timeit
from collections.abc import Callable
from typing import Any

import cachetools
import cashews
from dogpile.cache import make_region

import herdless

ROUNDS = 9
TARGET_S = 0.05  # length of one measurement: calls per measurement are calibrated to it


def calibrate(run: Callable[[int], float]) -> int:
    """Calls per measurement so that one measurement takes about TARGET_S."""
    per_call = run(1000) / 1000
    return max(1000, min(1_000_000, int(TARGET_S / per_call)))


class Bench:
    """Cases measured in interleaved rounds (every case once per round, best round kept),
    so that a noisy neighbour slows all cases alike instead of whichever ran at the time."""

    def __init__(self) -> None:
        self.cases: list[tuple[str, str, Callable[[], float]]] = []

    def sync(self, group: str, name: str, stmt: Callable[[], Any]) -> None:
        timer = timeit.Timer(stmt)
        number = calibrate(lambda n: timer.timeit(n))
        self.cases.append((group, name, lambda: timer.timeit(number) / number * 1e9))

    def aio(self, group: str, name: str, make: Callable[[], Any]) -> None:
        async def loop(number: int) -> float:
            t0 = timeit.default_timer()
            for _ in range(number):
                await make()
            return timeit.default_timer() - t0

        number = calibrate(lambda n: asyncio.run(loop(n)))
        self.cases.append((group, name, lambda: asyncio.run(loop(number)) / number * 1e9))

    def run(self) -> list[tuple[str, str, float]]:
        best = [float("inf")] * len(self.cases)
        for _ in range(ROUNDS):
            for i, (_, _, measure) in enumerate(self.cases):
                best[i] = min(best[i], measure())
        rows = [(g, n, b) for (g, n, _), b in zip(self.cases, best)]
        for group, name, ns in rows:
            print(f"{group:<10} {name:<52} {ns:8.1f} ns", flush=True)
        return rows


def main() -> None:
    bench = Bench()

    key = "bench:v1:item:#42"
    value = {"id": 42}

    # --- lookups of one key ------------------------------------------------------------
    @functools.lru_cache(maxsize=1024)
    def lru(item_id: int) -> dict[str, int]:
        return value

    lru(42)
    bench.sync("get", "functools.lru_cache hit: f(42)", (lambda: lru(42)))

    hc = herdless.Cache(ttl=3600)
    hc.set(key, value)
    get = hc.get
    bench.sync("get", "herdless Cache.get(key) hit", (lambda: get(key)))
    loader = lambda: value  # noqa: E731
    gol = hc.get_or_load
    bench.sync("get", "herdless Cache.get_or_load(key, loader) hit", (lambda: gol(key, loader)))
    # The value is a dict: herdless hands each caller its own copy by default (copy_values),
    # the others share one object; shared too, for the like-for-like figure.
    try:
        shared = herdless.Cache(ttl=3600, copy_values=False)  # type: ignore[call-arg]
    except TypeError:  # a build before copy_values shares every value
        shared = None
    if shared is not None:
        shared.set(key, value)
        sget = shared.get
        bench.sync("get", "herdless Cache.get(key) hit, copy_values=False", (lambda: sget(key)))

    ttl = cachetools.TTLCache(maxsize=1024, ttl=3600)
    ttl[key] = value
    bench.sync("get", "cachetools TTLCache[key] hit", (lambda: ttl[key]))

    region = make_region().configure("dogpile.cache.memory", expiration_time=3600)
    region.set(key, value)
    rget = region.get
    bench.sync("get", "dogpile.cache memory region.get(key) hit", (lambda: rget(key)))

    # --- decorated functions -------------------------------------------------------------
    @hc.cached(ttl=3600)
    def h_fn(item_id: int) -> dict[str, int]:
        return value

    h_fn(42)
    bench.sync("decorator", "herdless @cache.cached hit: f(42)", (lambda: h_fn(42)))
    if shared is not None:

        @shared.cached(ttl=3600)
        def s_fn(item_id: int) -> dict[str, int]:
            return value

        s_fn(42)
        bench.sync(
            "decorator", "herdless @cache.cached hit, copy_values=False", (lambda: s_fn(42))
        )

    @cachetools.cached(cachetools.TTLCache(maxsize=1024, ttl=3600))
    def ct_fn(item_id: int) -> dict[str, int]:
        return value

    ct_fn(42)
    bench.sync("decorator", "cachetools @cached(TTLCache) hit: f(42)", (lambda: ct_fn(42)))

    @region.cache_on_arguments()
    def dp_fn(item_id: int) -> dict[str, int]:
        return value

    dp_fn(42)
    bench.sync("decorator", "dogpile.cache @region.cache_on_arguments hit", (lambda: dp_fn(42)))


    # --- asyncio --------------------------------------------------------------------------
    async def aload() -> dict[str, int]:
        return value

    aget = hc.aget_or_load
    bench.aio("asyncio", "herdless await aget_or_load(key, loader) hit", (lambda: aget(key, aload)))

    @hc.cached(ttl=3600)
    async def h_afn(item_id: int) -> dict[str, int]:
        return value

    asyncio.run(h_afn(42))
    bench.aio("asyncio", "herdless @cache.cached async hit: await f(42)", (lambda: h_afn(42)))

    cw = cashews.Cache()
    cw.setup("mem://")

    @cw(ttl="1h")
    async def cw_fn(item_id: int) -> dict[str, int]:
        return value

    async def warm_cashews() -> None:
        await cw.set(key, value, expire=3600)
        await cw_fn(42)

    asyncio.run(warm_cashews())
    bench.aio("asyncio", "cashews (mem://) await cache.get(key) hit", (lambda: cw.get(key)))
    bench.aio("asyncio", "cashews (mem://) @cache decorator hit: await f(42)", (lambda: cw_fn(42)))

    # --- goals ---------------------------------------------------------------------------
    rows = bench.run()
    by = {name: ns for _, name, ns in rows}
    lru_ns = by["functools.lru_cache hit: f(42)"]
    get_ns = by["herdless Cache.get(key) hit"]
    dec_ns = by["herdless @cache.cached hit: f(42)"]
    ct_ns = by["cachetools @cached(TTLCache) hit: f(42)"]
    print()
    print(f"best of {ROUNDS} interleaved rounds of ~{TARGET_S * 1000:.0f} ms per case")
    print(f"python {platform.python_version()} on {platform.machine()}, {sys.platform}")
    print(f"goal 1: Cache.get hit <= 2x lru_cache hit: {get_ns / lru_ns:.2f}x "
          f"-> {'met' if get_ns <= 2 * lru_ns else 'MISSED'}")
    print(f"goal 2: decorator hit >= 6x faster than cachetools @cached: {ct_ns / dec_ns:.2f}x "
          f"-> {'met' if ct_ns >= 6 * dec_ns else 'MISSED'}")
    # lru_cache and cachetools share the cached dict; herdless copies it by default.
    s_get = by.get("herdless Cache.get(key) hit, copy_values=False")
    s_dec = by.get("herdless @cache.cached hit, copy_values=False")
    if s_get is not None and s_dec is not None:
        print(f"like for like (copy_values=False, a shared dict): goal 1 {s_get / lru_ns:.2f}x "
              f"-> {'met' if s_get <= 2 * lru_ns else 'MISSED'}, goal 2 {ct_ns / s_dec:.2f}x "
              f"-> {'met' if ct_ns >= 6 * s_dec else 'MISSED'}")


if __name__ == "__main__":
    main()
