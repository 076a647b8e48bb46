"""One herd round for callgrind: N tasks ask for one missing key at once (the loader
sleeps 1 ms), after a warm-up round of 200. Run it for two N and divide the difference of
the totals by the difference of N: the instructions one waiter costs, everything the round
does per task included (its task, the loop's callbacks, the garbage collector).

    for n in 2000 4000; do
      PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=cg.$n python cg_herd.py CASE $n
    done      # instructions per waiter = (total(4000) - total(2000)) / 2000

CASE: ``herdless`` (``await cache.aget_or_load(key, loader)``), ``lock`` (a dict and an
``asyncio.Lock``, checked again under the lock, as ``bench_waiters.py``), ``floor`` (no
cache: one task sleeps, the others return).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable

import herdless

KEY = "herd:key"


async def load() -> int:
    await asyncio.sleep(0.001)
    return 1


async def main(name: str, n: int) -> None:
    cache: herdless.Cache = herdless.Cache(ttl=3600)
    values: dict[str, int] = {}
    locks: dict[str, asyncio.Lock] = {}

    async def herdless_call(_: int) -> int:
        return await cache.aget_or_load(KEY, load)  # type: ignore[no-any-return]

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

    async def floor(i: int) -> int:
        if i == 0:
            await asyncio.sleep(0.001)
        return 1

    calls: dict[str, Callable[[int], Awaitable[int]]] = {
        "herdless": herdless_call,
        "lock": lock_call,
        "floor": floor,
    }
    call = calls[name]
    for size in (200, n):
        cache.invalidate(KEY)
        values.clear()
        got = await asyncio.gather(*(call(i) for i in range(size)))
        assert all(v == 1 for v in got)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
