"""Shared helpers: counting loaders and a cache whose keys expire on demand."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from herdless import Cache, WaitTimeout


class Counting:
    """A sync loader that counts its calls (thread-safe) and takes `delay` seconds."""

    def __init__(self, value: Any = "v", delay: float = 0.0) -> None:
        self.value = value
        self.delay = delay
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self) -> Any:
        with self._lock:
            self.calls += 1
        if self.delay:
            time.sleep(self.delay)
        return self.value


def expired(cache: Cache, key: str, ttl: float = 0.05) -> None:
    """Stores `key` with a short TTL and waits until it has expired."""
    cache.set(key, "old", ttl=ttl)
    deadline = time.monotonic() + 5
    while cache.get(key) is not None:
        assert time.monotonic() < deadline, "the entry never expired"
        time.sleep(0.01)


def run_threads(n: int, target: Callable[[int], None]) -> None:
    """Runs `target(i)` on `n` threads started together; fails if any hangs."""
    barrier = threading.Barrier(n)

    def run(i: int) -> None:
        barrier.wait(timeout=30)
        target(i)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive(), "a thread hung"


@pytest.fixture
def cache() -> Cache:
    """A deterministic cache: no jitter, no XFetch."""
    return Cache(ttl=60, jitter=0, beta=0)


def five_leaders_cancelled(caches: Sequence[Cache], wait_timeout: float = 1.0) -> None:
    """Ten callers of one key, then five leaders cancelled 0.9 s apart, two callers arriving
    at each hand-over (callers take the caches in turn): every caller not cancelled must get
    ``WaitTimeout`` ``wait_timeout`` after its own arrival, never after the last hand-over.
    Each cache needs ``wait_timeout=wait_timeout``."""
    slack = 0.4  # a busy machine; a per-hand-over deadline answered 0.9 s late at least
    leading: list[int | None] = [None]
    answers: dict[int, tuple[str, float]] = {}

    async def caller(i: int) -> None:
        async def loader() -> str:
            leading[0] = i
            await asyncio.sleep(30)
            return "never"

        loop = asyncio.get_running_loop()
        arrived = loop.time()
        try:
            await caches[i % len(caches)].aget_or_load("report:1", loader)
            outcome = "value"
        except WaitTimeout:
            outcome = "wait_timeout"
        answers[i] = (outcome, loop.time() - arrived)

    async def main() -> tuple[list[int], int | None, int]:
        loop = asyncio.get_running_loop()
        tasks: list[asyncio.Task[None]] = []

        def arrive(n: int) -> None:
            for _ in range(n):
                tasks.append(asyncio.create_task(caller(len(tasks))))

        started = loop.time()
        arrive(10)
        cancelled = []
        for round in range(1, 6):
            await asyncio.sleep(started + 0.9 * round - loop.time())
            leader = leading[0]
            assert leader is not None, f"nobody leads at hand-over {round}"
            leading[0] = None
            tasks[leader].cancel()
            cancelled.append(leader)
            arrive(2)
        await asyncio.sleep(wait_timeout + slack)
        last = leading[0]
        if last is not None:
            tasks[last].cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return cancelled, last, len(tasks)

    cancelled, last, n = asyncio.run(main())
    for i in range(n):
        if i in cancelled or i == last:
            continue
        outcome, waited = answers[i]
        assert outcome == "wait_timeout", f"caller {i}: {outcome} after {waited:.3f} s"
        assert wait_timeout - 0.01 <= waited <= wait_timeout + slack, (
            f"caller {i} was answered {waited:.3f} s after it arrived"
        )
