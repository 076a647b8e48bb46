"""CPU of one herdless hit in the Python binding over Redis (``aget_or_load`` under asyncio),
and the write system calls it makes (/proc/self/io): whether a hit wakes the binding's I/O
thread, or only a miss does (BENCHMARKS.md, "Fleets: CPU per request").

    target/fleet/venv/bin/python benches/fleet/hit_cost.py [redis://127.0.0.1:6379/13]
"""

from __future__ import annotations

import asyncio
import os
import sys

from herdless import Cache


def write_syscalls() -> int:
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("syscw"))


async def main() -> None:
    url = sys.argv[1] if len(sys.argv) > 1 else "redis://127.0.0.1:6379/13"
    cache = Cache(ttl=60, redis=url, redis_prefix=f"hitcost{os.getpid()}")

    async def load() -> dict[str, object]:
        return {"id": 1, "name": "x" * 200, "price": 3.5}

    keys = [f"products:{k}" for k in range(10)]
    for key in keys:
        await cache.aget_or_load(key, load, ttl=60)
    n = 20_000
    for label, kw in (("aget_or_load(key, load, ttl=60)", {"ttl": 60}), ("aget_or_load(key, load)", {})):
        w0, t0 = write_syscalls(), os.times()
        for i in range(n):
            await cache.aget_or_load(keys[i % 10], load, **kw)
        t1, w1 = os.times(), write_syscalls()
        cpu = (t1.user + t1.system - t0.user - t0.system) / n * 1e6
        print(f"{label}: {cpu:.2f} us CPU per hit, {(w1 - w0) / n:.3f} write syscalls per hit")
    for key in keys:
        cache.invalidate(key)


asyncio.run(main())
