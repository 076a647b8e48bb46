"""Herds of asyncio waiters: N tasks ask for one key that was just dropped, the loader takes
1 ms (``asyncio.sleep(0.001)``), and the time is from the start of the round until all N
have the value. The contenders take turns round by round (rotating order, so a noisy
neighbour slows them alike); the figures are each contender's median and lowest round.

- floor: no cache; one task sleeps the 1 ms, the others return at once (the cost of
  creating and gathering N tasks plus the sleep);
- herdless ``await cache.aget_or_load(key, loader)``;
- asyncio.Lock cache-aside: a dict and one ``asyncio.Lock`` per key, checked again under the
  lock (what an asyncio service writes by hand);
- cashews (mem://) ``@cache(ttl, lock=True)``: its dogpile lock.

Run through benchmarks/run.sh: ``HERDLESS_BENCH=bench_waiters.py benchmarks/run.sh [rounds]``.
"""

from __future__ import annotations

import asyncio
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

import cashews

import herdless

LOAD_S = 0.001
KEY = "herd:key"
SIZES = (1, 100, 1000, 5000)


async def load() -> int:
    await asyncio.sleep(LOAD_S)
    return 1


class Contender:
    """``call`` is one task's request (its index given: the floor's task 0 sleeps),
    ``reset`` drops the key before a round."""

    def __init__(
        self,
        name: str,
        call: Callable[[int], Awaitable[int]],
        reset: Callable[[], Awaitable[None]],
    ) -> None:
        self.name, self.call, self.reset = name, call, reset


def contenders() -> list[Contender]:
    async def floor(i: int) -> int:
        if i == 0:
            await asyncio.sleep(LOAD_S)
        return 1

    async def nothing() -> None:
        return None

    hc: herdless.Cache[int] = herdless.Cache(ttl=3600)

    async def h_call(_: int) -> int:
        return await hc.aget_or_load(KEY, load)  # type: ignore[no-any-return]

    async def h_reset() -> None:
        hc.invalidate(KEY)

    values: dict[str, int] = {}
    locks: dict[str, asyncio.Lock] = {}

    async def lock_call(_: int) -> int:
        if KEY in values:
            return values[KEY]
        lock = locks.setdefault(KEY, asyncio.Lock())
        async with lock:
            if KEY in values:
                return values[KEY]
            v = await load()
            values[KEY] = v
            return v

    async def lock_reset() -> None:
        values.pop(KEY, None)

    cw = cashews.Cache()
    cw.setup("mem://")

    @cw(ttl="1h", lock=True)
    async def cw_load(key: str) -> int:
        return await load()

    async def cw_call(_: int) -> int:
        return await cw_load(KEY)

    async def cw_reset() -> None:
        await cw.clear()

    return [
        Contender("floor (no cache)", floor, nothing),
        Contender("herdless await aget_or_load", h_call, h_reset),
        Contender("asyncio.Lock cache-aside", lock_call, lock_reset),
        Contender("cashews (mem://) @cache(lock=True)", cw_call, cw_reset),
    ]


async def round_time(c: Contender, n: int) -> float:
    await c.reset()
    began = time.perf_counter()
    got = await asyncio.gather(*(c.call(i) for i in range(n)))
    took = time.perf_counter() - began
    assert all(v == 1 for v in got), c.name
    return took


async def main(rounds: int) -> None:
    cs = contenders()
    print(
        f"Python {platform.python_version()} ({sys.platform}), asyncio, load {LOAD_S * 1e3:.0f} ms,"
        f" {rounds} rounds per size"
    )
    print("| N | contender | median | lowest | median ratio to floor |")
    print("|---:|---|---:|---:|---:|")
    for n in SIZES:
        times: list[list[float]] = [[] for _ in cs]
        for r in range(rounds + 2):
            this = [0.0] * len(cs)
            for j in range(len(cs)):
                k = (j + r) % len(cs)
                this[k] = await round_time(cs[k], n)
            if r >= 2:  # the first rounds warm up
                for k in range(len(cs)):
                    times[k].append(this[k])
        floor = statistics.median(times[0])
        for k, c in enumerate(cs):
            med = statistics.median(times[k])
            print(
                f"| {n:,} | {c.name} | {med * 1e3:.2f} ms | {min(times[k]) * 1e3:.2f} ms |"
                f" {med / floor:.2f}x |"
            )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 15))
