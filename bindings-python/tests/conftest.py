"""Shared helpers: counting loaders and a cache whose keys expire on demand."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from herdless import Cache


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
