"""Single flight from asyncio tasks: the leader awaits its coroutine, waiters await futures."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pytest
from conftest import expired, five_leaders_cancelled

from herdless import ABSENT, Cache, LoadTimeout, WaitTimeout


def test_5000_tasks_on_one_expired_key_make_one_loader_call(cache: Cache) -> None:
    expired(cache, "hot:key")
    calls = 0
    value = {"answer": 42}
    ticks = 0
    ticks_during_load = 0

    async def loader() -> dict[str, int]:
        # Ends only once another task has run five times during the load, while every
        # caller waits: the loop is never blocked, whatever the machine's speed.
        nonlocal calls, ticks_during_load
        calls += 1
        first = ticks
        deadline = time.monotonic() + 30
        while ticks < first + 5 and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        ticks_during_load = ticks - first
        return value

    async def main() -> tuple[list[Any], int]:
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        tick_task = asyncio.create_task(ticker())
        results = await asyncio.gather(
            *(cache.aget_or_load("hot:key", loader) for _ in range(5000))
        )
        stop.set()
        await tick_task
        return results, ticks

    results, _ = asyncio.run(main())
    assert calls == 1
    assert len(results) == 5000 and all(r == value for r in results)  # each its own copy
    assert ticks_during_load >= 5
    m = cache.metrics().namespace("hot")
    assert m is not None and m.counters.loads == 1 and m.counters.coalesced_waiters == 4999
    assert cache._flights_in_progress() == 0


def test_a_raising_async_loader_reaches_every_waiter(cache: Cache) -> None:
    calls = 0

    async def loader() -> str:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.1)
        raise PermissionError("denied")

    async def main() -> list[BaseException | str]:
        return await asyncio.gather(
            *(cache.aget_or_load("k:err", loader) for _ in range(500)), return_exceptions=True
        )

    outcomes = asyncio.run(main())
    assert calls == 1
    assert all(isinstance(o, PermissionError) for o in outcomes)
    assert all(o is outcomes[0] for o in outcomes)


def test_cancelling_the_leader_hands_the_load_to_a_waiter(cache: Cache) -> None:
    calls = 0

    async def loader() -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            await asyncio.sleep(30)  # the leader will be cancelled here
        return "loaded by a waiter"

    async def main() -> tuple[list[Any], bool]:
        leader = asyncio.create_task(cache.aget_or_load("k:cancel", loader))
        await asyncio.sleep(0.05)
        waiters = [asyncio.create_task(cache.aget_or_load("k:cancel", loader)) for _ in range(100)]
        await asyncio.sleep(0.05)
        leader.cancel()
        results = await asyncio.wait_for(asyncio.gather(*waiters), timeout=30)
        try:
            await leader
        except asyncio.CancelledError:
            return results, True
        return results, False

    results, cancelled = asyncio.run(main())
    assert cancelled
    assert results == ["loaded by a waiter"] * 100
    assert calls == 2
    assert cache.metrics().total.abandoned_loads == 1


def test_cancelling_a_waiter_leaves_the_load_alone(cache: Cache) -> None:
    async def loader() -> str:
        await asyncio.sleep(0.1)
        return "v"

    async def main() -> str:
        leader = asyncio.create_task(cache.aget_or_load("k:w", loader))
        await asyncio.sleep(0.01)
        waiter = asyncio.create_task(cache.aget_or_load("k:w", loader))
        await asyncio.sleep(0.01)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        return await leader

    assert asyncio.run(main()) == "v"


def test_async_and_threads_share_one_flight(cache: Cache) -> None:
    calls = 0

    async def loader() -> str:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.2)
        return "shared"

    thread_results: list[Any] = []

    def in_thread() -> None:
        thread_results.append(cache.get_or_load("k:mix", lambda: "thread loader"))

    async def main() -> str:
        task = asyncio.create_task(cache.aget_or_load("k:mix", loader))
        await asyncio.sleep(0.05)
        threads = [threading.Thread(target=in_thread, daemon=True) for _ in range(8)]
        for t in threads:
            t.start()
        result = await task
        for t in threads:
            await asyncio.to_thread(t.join, 10)
        return result

    assert asyncio.run(main()) == "shared"
    assert thread_results == ["shared"] * 8 and calls == 1


def test_negative_caching_and_sync_loaders(cache: Cache) -> None:
    async def main() -> None:
        async def absent() -> Any:
            return ABSENT

        assert await cache.aget_or_load("k:none", absent) is ABSENT
        assert await cache.aget_or_load("k:none", absent) is ABSENT
        # A sync loader is accepted too (it runs on the loop).
        assert await cache.aget_or_load("k:sync", lambda: 7) == 7  # type: ignore[arg-type]

    asyncio.run(main())
    assert cache.metrics().total.negative_hits == 1


def test_hard_timeout_cancels_an_async_loader() -> None:
    cache = Cache(hard_timeout=0.1, jitter=0)
    cancelled = False

    async def hung() -> str:
        nonlocal cancelled
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled = True
            raise
        return "never"

    async def main() -> None:
        with pytest.raises(LoadTimeout):
            await cache.aget_or_load("k:hung", hung)

    asyncio.run(main())
    assert cancelled
    assert cache._flights_in_progress() == 0


def test_soft_timeout_answers_stale_and_stores_the_late_result() -> None:
    cache = Cache(ttl=60, max_stale=60, soft_timeout=0.05, hard_timeout=10, jitter=0, beta=0)
    cache.set("k:soft", "old", ttl=0.05)
    time.sleep(0.1)

    async def slow() -> str:
        await asyncio.sleep(0.3)
        return "new"

    async def main() -> str:
        value = await cache.aget_or_load("k:soft", slow)
        await asyncio.sleep(0.5)  # the load finishes in the background
        return str(value)

    assert asyncio.run(main()) == "old"
    assert cache.get("k:soft") == "new"


def test_stale_while_revalidate_refreshes_in_a_background_task() -> None:
    cache = Cache(ttl=0.05, grace=30, jitter=0, beta=0)
    cache.set("k:swr", "old")
    time.sleep(0.1)

    async def refresh() -> str:
        await asyncio.sleep(0.05)
        return "new"

    async def main() -> tuple[Any, Any]:
        first = await cache.aget_or_load("k:swr", refresh)
        await asyncio.sleep(0.3)
        return first, await cache.aget_or_load("k:swr", refresh)

    assert asyncio.run(main()) == ("old", "new")


def test_failed_async_refresh_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    cache = Cache(ttl=0.05, grace=30, jitter=0, beta=0)
    cache.set("k:swr", "old")
    time.sleep(0.1)

    async def broken() -> str:
        raise RuntimeError("nope")

    async def main() -> Any:
        value = await cache.aget_or_load("k:swr", broken)
        await asyncio.sleep(0.1)
        return value

    with caplog.at_level(logging.WARNING, logger="herdless"):
        assert asyncio.run(main()) == "old"
    assert any("background refresh of 'k:swr' failed" in r.getMessage() for r in caplog.records)


def test_async_waiter_times_out() -> None:
    cache = Cache(wait_timeout=0.1, jitter=0)

    async def slow() -> str:
        await asyncio.sleep(1)
        return "late"

    async def main() -> None:
        leader = asyncio.create_task(cache.aget_or_load("k:slow", slow))
        await asyncio.sleep(0.02)
        with pytest.raises(WaitTimeout):
            await cache.aget_or_load("k:slow", slow)
        assert await leader == "late"

    asyncio.run(main())


def test_origin_budget_with_async_leaders() -> None:
    cache = Cache(origin_budget=1, jitter=0)
    running = 0
    peak = 0

    async def load() -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.02)
        running -= 1
        return "v"

    async def main() -> list[str]:
        return await asyncio.gather(*(cache.aget_or_load(f"k:{i}", load) for i in range(6)))

    assert asyncio.run(main()) == ["v"] * 6
    assert peak == 1


def test_wait_timeout_counts_from_the_first_arrival_across_hand_overs() -> None:
    five_leaders_cancelled([Cache(wait_timeout=1.0, jitter=0)])
