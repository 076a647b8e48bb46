"""asyncio herds: waiters woken on their loop's thread are polled in batches (src/asyncio.rs,
``_Due``); every waiter gets the one load's answer, across loops run one after the other on
one thread, and with some waiters cancelled."""

from __future__ import annotations

import asyncio

from herdless import Cache


def herd(cache: Cache, key: str, n: int) -> tuple[list[int], int]:
    calls = 0

    async def load() -> int:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.01)
        return 7

    async def main() -> list[int]:
        return list(await asyncio.gather(*(cache.aget_or_load(key, load) for _ in range(n))))

    return asyncio.run(main()), calls


def test_a_herd_shares_one_load_in_loop_after_loop() -> None:
    cache = Cache(ttl=60)
    for round_ in range(3):
        values, calls = herd(cache, f"herd:{round_}", 500)
        assert values == [7] * 500 and calls == 1


def test_cancelled_waiters_leave_the_others_their_answer() -> None:
    cache = Cache(ttl=60)

    async def main() -> tuple[list[object], int]:
        calls = 0

        async def load() -> int:
            nonlocal calls
            calls += 1
            await asyncio.sleep(0.05)
            return 3

        tasks = [asyncio.ensure_future(cache.aget_or_load("herd:c", load)) for _ in range(200)]
        await asyncio.sleep(0.01)
        for t in tasks[1::2]:
            t.cancel()
        done = await asyncio.gather(*tasks, return_exceptions=True)
        return list(done), calls

    done, calls = asyncio.run(main())
    assert calls == 1
    assert all(v == 3 for v in done[0::2])
    assert all(isinstance(v, asyncio.CancelledError) for v in done[1::2])
    assert cache.get("herd:c") == 3
