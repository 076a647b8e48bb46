"""The async calls are driven on the event loop itself: ``aget_or_load_many`` takes no
thread of the loop's executor, and ``aget``, ``aset``, ``ainvalidate``, ``abump``,
``ainvalidate_tag(s)`` await Redis on the loop, so a stopped Redis never freezes it."""

from __future__ import annotations

import asyncio
import contextvars
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from redis_support import RedisServer

from herdless import ABSENT, BatchError, Cache, LoadTimeout
from herdless.testing import MemoryStore

# The loop's default executor in these tests: its size does not depend on the machine.
EXECUTOR_SIZE = 4


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    s = RedisServer()
    yield s
    s.stop()


async def _largest_gap(work: Awaitable[Any]) -> tuple[float, Any]:
    """Runs `work` while a ticker sleeps 1 ms at a time; the largest gap between its ticks
    (how long the loop was frozen), and what `work` answered (or raised)."""
    done = asyncio.Event()
    worst = 0.0

    async def ticker() -> None:
        nonlocal worst
        last = time.monotonic()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.monotonic()
            worst = max(worst, now - last)
            last = now

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    try:
        result: Any = await work
    except Exception as exc:
        result = exc
    done.set()
    await tick
    return worst, result


def test_async_calls_never_freeze_the_loop_while_redis_is_stopped(server: RedisServer) -> None:
    # A blocking call freezes the loop for the op timeout (1 s) each; an awaited one leaves
    # the ticker's gaps as they are without it (under 20 ms on an idle machine). The bound is
    # generous for a machine shared by several busy builds (gaps of 100 ms were seen there,
    # with a plain `asyncio.sleep` too).
    bound = 0.25
    cache = Cache(redis=server.url, redis_prefix=f"stall{time.monotonic_ns()}")
    try:
        for i in range(4):
            cache.set(f"warm:{i}", i, tags=["t"])
        calls: dict[str, Callable[[], Awaitable[Any]]] = {
            "aget": lambda: cache.aget("cold:1"),
            "aset": lambda: cache.aset("warm:0", 10),
            "ainvalidate": lambda: cache.ainvalidate("warm:1"),
            "abump": lambda: cache.abump("other"),
            "ainvalidate_tag": lambda: cache.ainvalidate_tag("t"),
            "ainvalidate_tags": lambda: cache.ainvalidate_tags(["t", "u"], soft=True),
            "aget_or_load_many": lambda: cache.aget_or_load_many(
                ["cold:2", "cold:3"], _values
            ),
            "aget_or_load": lambda: cache.aget_or_load("cold:4", _one),
        }

        async def main() -> dict[str, tuple[float, Any]]:
            return {name: await _largest_gap(call()) for name, call in calls.items()}

        server.pause()
        try:
            gaps = asyncio.run(main())
        finally:
            server.resume()
        frozen = {name: round(gap, 4) for name, (gap, _) in gaps.items() if gap >= bound}
        assert not frozen, f"the loop froze (seconds): {frozen}; all: {gaps}"
        # The same answers as the sync calls give with Redis stopped.
        assert gaps["aget"][1] is None
        assert gaps["aget_or_load_many"][1] == [2, 3]
        assert gaps["aget_or_load"][1] == 4
    finally:
        cache.close()


async def _values(keys: list[str]) -> dict[str, int]:
    return {k: int(k.rsplit(":", 1)[1]) for k in keys}


async def _one() -> int:
    return 4


def _with_executor(main: Callable[[], Awaitable[Any]]) -> Any:
    async def run() -> Any:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(max_workers=EXECUTOR_SIZE))
        return await main()

    return asyncio.run(run())


def test_batches_take_no_thread_of_the_default_executor() -> None:
    cache = Cache()
    batches = 3 * EXECUTOR_SIZE
    finished = 0

    async def load(keys: list[str]) -> dict[str, str]:
        await asyncio.sleep(0.5)
        return {k: k for k in keys}

    async def batch(i: int) -> list[str]:
        nonlocal finished
        got = await cache.aget_or_load_many([f"b{i}:1", f"b{i}:2"], load)
        finished += 1
        return got

    async def main() -> tuple[int, int, list[list[str]]]:
        loop = asyncio.get_running_loop()
        tasks = [asyncio.create_task(batch(i)) for i in range(batches)]
        await asyncio.sleep(0.05)  # every batch is in its loader
        answer = await asyncio.wait_for(loop.run_in_executor(None, lambda: 1), 10)
        finished_then = finished
        return answer, finished_then, await asyncio.gather(*tasks)

    answer, finished_then, got = _with_executor(main)
    assert answer == 1
    # The executor answered while every batch was still in its loader.
    assert finished_then == 0
    assert got == [[f"b{i}:1", f"b{i}:2"] for i in range(batches)]


def test_batch_loaders_that_need_the_executor_all_finish() -> None:
    # Issue 33 item 8: with batches on executor threads, loaders awaiting
    # `loop.getaddrinfo` (which runs on that executor) hung for good.
    cache = Cache()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    cache.set("hit", "here")

    async def load(keys: list[str]) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        await loop.getaddrinfo("localhost", port)
        reader, writer = await asyncio.open_connection("localhost", port)
        writer.close()
        return {k: k.upper() for k in keys}

    async def main() -> tuple[list[Any], list[Any]]:
        tasks = [
            asyncio.create_task(cache.aget_or_load_many([f"n{i}:a", f"n{i}:b"], load))
            for i in range(2 * EXECUTOR_SIZE)
        ]
        await asyncio.sleep(0.01)
        # An L1 hit through a one-key batch answers meanwhile, at once (a loader that
        # must not be called).
        hit = await asyncio.wait_for(cache.aget_or_load_many(["hit"], _never), 2)
        return hit, await asyncio.wait_for(asyncio.gather(*tasks), 10)

    try:
        hit, got = _with_executor(main)
    finally:
        listener.close()
    assert hit == ["here"]
    assert got == [[f"N{i}:A", f"N{i}:B"] for i in range(2 * EXECUTOR_SIZE)]


async def _never(keys: list[str]) -> dict[str, Any]:
    raise AssertionError(f"loaded {keys}")


def test_cancelling_a_batch_cancels_its_loader_and_frees_its_keys() -> None:
    cache = Cache()
    seen: list[str] = []
    started = asyncio.Event()

    async def hang(keys: list[str]) -> dict[str, int]:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return {}

    async def main() -> list[Any]:
        task = asyncio.create_task(cache.aget_or_load_many(["c:1", "c:2"], hang))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0)  # the loader's task runs its cancellation
        # The keys are free: the next caller loads them at once (no wait for the first).
        return await asyncio.wait_for(cache.aget_or_load_many(["c:1", "c:2"], _values), 2)

    assert asyncio.run(main()) == [1, 2]
    assert seen == ["cancelled"]
    assert cache._flights_in_progress() == 0


def test_a_batch_loader_past_the_hard_timeout_is_cancelled() -> None:
    cache = Cache(hard_timeout=0.1)
    seen: list[str] = []

    async def slow(keys: list[str]) -> dict[str, int]:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return {}

    async def main() -> None:
        with pytest.raises(BatchError) as e:
            await cache.aget_or_load_many(["h:1", "h:2"], slow)
        assert set(e.value.errors) == {"h:1", "h:2"}
        assert all(isinstance(x, LoadTimeout) for x in e.value.errors.values())
        await asyncio.sleep(0.01)

    asyncio.run(main())
    assert seen == ["cancelled"]
    assert cache._flights_in_progress() == 0


def test_a_batch_on_the_loop_keeps_the_batch_contract() -> None:
    cache = Cache()
    calls: list[list[str]] = []

    def sync_loader(keys: list[str]) -> dict[str, Any]:
        calls.append(keys)
        return {k: (ABSENT if k.endswith("none") else k) for k in keys}

    async def failing(keys: list[str]) -> dict[str, Any]:
        raise ValueError("origin down")

    async def main() -> None:
        assert await cache.aget_or_load_many(["s:a", "s:none", "s:a"], sync_loader) == [
            "s:a",
            ABSENT,
            "s:a",
        ]
        with pytest.raises(BatchError) as e:
            await cache.aget_or_load_many(["f:1"], failing)
        assert isinstance(e.value.errors["f:1"], ValueError)
        with pytest.raises(TypeError):
            await cache.aget_or_load_many("s:a", sync_loader)

    asyncio.run(main())
    assert calls == [["s:a", "s:none"]]


def test_async_calls_answer_as_the_sync_ones_in_memory() -> None:
    cache = Cache()

    async def main() -> None:
        assert await cache.aget("m:1") is None
        assert await cache.aget("m:1", "dflt") == "dflt"
        pending: Awaitable[Any] = cache.aset("m:1", {"v": 1}, ttl=30, tags=["red"])
        assert await pending is None
        assert await cache.aget("m:1") == {"v": 1}
        assert await cache.ainvalidate("m:1") is True
        assert await cache.ainvalidate("m:1") is False
        await cache.aset("ns:1", 1)
        epoch = await cache.abump("ns")
        assert isinstance(epoch, int) and epoch >= 1
        assert cache.get("ns:1") is None
        await cache.aset("m:2", 2, tags=["red"])
        await cache.ainvalidate_tag("red")
        assert cache.get("m:2") is None
        await cache.aset("m:3", 3, tags=["blue"])
        await cache.ainvalidate_tags(["blue", "green"], soft=True)
        with pytest.raises(TypeError):
            await cache.ainvalidate_tags("blue")
        with pytest.raises(ValueError):
            await cache.aset("m:4", ABSENT, ttl=3)

    asyncio.run(main())


def test_async_calls_work_from_any_thread_with_its_own_loop() -> None:
    cache = Cache()
    got: list[Any] = []

    def worker(i: int) -> None:
        async def main() -> None:
            await cache.aset(f"t:{i}", i)
            got.append(await cache.aget(f"t:{i}"))

        asyncio.run(main())

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == [0, 1, 2, 3]


def test_decorated_functions_invalidate_on_the_loop() -> None:
    cache = Cache()
    calls: list[int] = []

    @cache.cached(namespace="deco")
    def sync_f(x: int) -> int:
        calls.append(x)
        return x

    @cache.cached(namespace="deco")
    async def async_f(x: int) -> int:
        calls.append(-x)
        return -x

    async def main() -> None:
        assert sync_f(1) == 1 and await async_f(1) == -1
        assert await sync_f.ainvalidate(1) is True
        assert await async_f.ainvalidate(1) is True
        assert await sync_f.ainvalidate(1) is False
        assert sync_f(1) == 1 and await async_f(1) == -1

    asyncio.run(main())
    assert calls == [1, -1, 1, -1]


def test_async_loaders_run_in_the_callers_context() -> None:
    # With a shared tier the loader is called after the tier answered, from a callback of
    # the loop rather than from the caller's task: it still sees the caller's context
    # variables (a request id, a span), as a batch loader does.
    store = MemoryStore("aio-context")  # the tier, alive for the test
    cache = Cache(redis="memory://aio-context")
    request: contextvars.ContextVar[str] = contextvars.ContextVar("request")
    seen: list[str] = []

    async def load() -> str:
        seen.append(request.get("none"))
        return "v"

    async def load_many(keys: list[str]) -> dict[str, str]:
        seen.append(request.get("none"))
        return {k: "v" for k in keys}

    async def one(rid: str) -> Any:
        request.set(rid)
        return await cache.aget_or_load("k:ctx", load)

    async def many(rid: str) -> Any:
        request.set(rid)
        return await cache.aget_or_load_many(["b:ctx"], load_many)

    async def main() -> None:
        assert await asyncio.create_task(one("r1")) == "v"
        assert await asyncio.create_task(many("r2")) == ["v"]

    asyncio.run(main())
    cache.close()
    assert seen == ["r1", "r2"]
