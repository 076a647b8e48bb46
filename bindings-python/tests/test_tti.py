"""Time-to-idle (``tti``): an entry nobody reads for its tti is dropped even within its
ttl; reads keep it; a loader or a ``set`` may give an entry its own; over Redis the shared
entry stays while any process reads it and goes once nobody does.

Real clocks with wide margins: an entry must outlive ``tti`` past its last read and be gone
by ``tti * 17/16`` in memory (``tti * 5/4`` in Redis); the waits below are several times
those bounds, and the reads that keep an entry alive come every quarter of the tti."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator

import pytest
from redis_support import RedisServer

from herdless import Cache, ConfigError, LoadContext, Loaded

TTI = 0.4


def _loads(cache: Cache, key: str, value: object) -> tuple[object, int]:
    calls: list[str] = []

    def loader() -> object:
        calls.append(key)
        return value

    return cache.get_or_load(key, loader), len(calls)


def test_an_entry_nobody_reads_is_dropped_within_its_ttl() -> None:
    cache = Cache(ttl=60, tti=TTI, jitter=0)
    cache.set("k", "v")
    assert cache.get("k") == "v"
    time.sleep(TTI * 2.5)
    assert cache.get("k") is None
    assert cache.peek("k") is None
    assert _loads(cache, "k", "v2") == ("v2", 1)


def test_reads_keep_an_entry_past_its_tti() -> None:
    cache = Cache(ttl=60, tti=TTI, jitter=0)
    assert _loads(cache, "k", "v") == ("v", 1)
    deadline = time.monotonic() + TTI * 4
    while time.monotonic() < deadline:
        time.sleep(TTI / 4)
        assert _loads(cache, "k", "other") == ("v", 0)


def test_a_loader_a_call_or_a_write_gives_an_entry_its_own_tti() -> None:
    cache = Cache(ttl=60, jitter=0)
    cache.get_or_load("short", lambda k: Loaded("s", tti=TTI))

    def with_context(ctx: LoadContext) -> str:
        ctx.set_tti(TTI)
        return "c"

    cache.get_or_load("ctx", with_context)
    cache.set("written", "w", tti=TTI)
    cache.get_or_load("per-call", lambda: "c", tti=TTI)
    cache.get_or_load("own-wins", lambda: Loaded("o", tti=60), tti=TTI)

    async def aload() -> str:
        return "a"

    asyncio.run(cache.aget_or_load("async", aload, tti=TTI))
    cache.set("plain", "p")
    time.sleep(TTI * 2.5)
    assert cache.get("own-wins") == "o", "the loader's own tti beats the call's"
    for key in ("short", "ctx", "written", "per-call", "async"):
        assert cache.get(key) is None, key
    assert cache.get("plain") == "p", "no tti: lives its ttl"


def test_a_bad_tti_is_refused() -> None:
    for bad in (0, -1, float("nan")):
        with pytest.raises((ConfigError, TypeError)):
            Cache(tti=bad)
    with pytest.raises(TypeError):
        Cache(tti="1")  # type: ignore[arg-type]
    with pytest.raises((ConfigError, TypeError)):
        Loaded("v", tti=0)
    with pytest.raises((ConfigError, TypeError)):
        Cache().set("k", "v", tti=-1)


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    s = RedisServer()
    yield s
    s.stop()


def test_over_redis_a_reader_of_its_own_copy_keeps_the_shared_entry(
    server: RedisServer,
) -> None:
    prefix = f"tti{os.getpid()}"

    def process() -> Cache:
        return Cache(ttl=60, tti=TTI, jitter=0, redis=server.url, redis_prefix=prefix)

    a, b = process(), process()
    try:
        assert _loads(a, "page:1", "v1") == ("v1", 1)
        assert b.get("page:1") == "v1"
        # `a` reads its own copy; `b` does not (its copy idles out).
        deadline = time.monotonic() + TTI * 5
        while time.monotonic() < deadline:
            time.sleep(TTI / 4)
            assert a.get("page:1") == "v1"
        assert _loads(b, "page:1", "never") == ("v1", 0), "kept in Redis by a's reads"
        tier = a.metrics().redis
        assert tier is not None and tier["idle_touches"] > 0
        # Nobody reads: gone from both tiers.
        time.sleep(TTI * 4)
        assert _loads(b, "page:1", "v2") == ("v2", 1)
    finally:
        a.close()
        b.close()


def test_a_decorated_functions_results_idle_out() -> None:
    cache = Cache(ttl=60, jitter=0, namespace="tti")
    calls: list[int] = []

    @cache.cached(tti=TTI)
    def price(product: int) -> int:
        calls.append(product)
        return product * 2

    @cache.cached(tti=TTI)
    async def aprice(product: int) -> int:
        calls.append(-product)
        return product * 3

    assert price(1) == 2 and price(1) == 2
    assert asyncio.run(aprice(1)) == 3 and asyncio.run(aprice(1)) == 3
    assert calls == [1, -1]
    time.sleep(TTI * 2.5)
    assert price(1) == 2 and asyncio.run(aprice(1)) == 3
    assert calls == [1, -1, 1, -1], "idle past the tti: called again"
    with pytest.raises((ConfigError, TypeError)):
        cache.cached(tti=-1)
