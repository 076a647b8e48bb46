"""warm / awarm: bounded concurrency, within the origin budget, failures reported."""

from __future__ import annotations

import asyncio
import threading
import time

from herdless import Cache


def test_warm_loads_missing_keys_with_bounded_concurrency() -> None:
    cache = Cache(jitter=0)
    cache.set("k:0", "already")
    running = 0
    peak = 0
    lock = threading.Lock()

    def load(key: str) -> str:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.02)
        with lock:
            running -= 1
        if key == "k:13":
            raise ValueError("bad row")
        return key.upper()

    report = cache.warm([f"k:{i}" for i in range(20)], load, concurrency=3)
    assert report.requested == 20
    assert report.loaded == 18 and report.skipped == 1  # k:0 was fresh, k:13 failed
    assert list(report.failed) == ["k:13"] and isinstance(report.failed["k:13"], ValueError)
    assert peak <= 3
    assert cache.get("k:5") == "K:5" and cache.get("k:0") == "already"


def test_warm_stays_within_the_origin_budget() -> None:
    cache = Cache(origin_budget=2, jitter=0)
    running = 0
    peak = 0
    lock = threading.Lock()

    def load(key: str) -> str:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.02)
        with lock:
            running -= 1
        return key

    report = cache.warm([f"k:{i}" for i in range(10)], load, concurrency=8)
    assert not report.failed and report.loaded == 10
    assert peak <= 2


def test_awarm() -> None:
    cache = Cache(jitter=0)
    running = 0
    peak = 0

    async def load(key: str) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        return key

    report = asyncio.run(cache.awarm([f"k:{i}" for i in range(30)], load, concurrency=4))
    assert report.loaded == 30 and not report.failed
    assert peak <= 4
    assert cache.get("k:29") == "k:29"
    assert cache.warm([], str.upper).requested == 0
