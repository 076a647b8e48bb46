"""asyncio herds: the waiters of a loop that wait for one load are answered together when
the first of them ends (src/driver/group.rs), bridges woken on their loop's thread are
polled in batches (src/asyncio.rs, ``_Due``); every waiter gets the one load's answer,
across loops run one after the other on one thread, on loops of two threads, and with some
waiters cancelled."""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref
from collections.abc import Awaitable, Callable

from herdless import Cache
from herdless.errors import WaitTimeout


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


# The callers of a loop that wait for one load are a herd (src/driver/group.rs): only the
# first waiter (the anchor) is polled until its call ends; each member keeps its own call,
# deadline and answer.


class Counted:
    """An async loader (``load``) that counts its calls and answers the count after
    ``delay`` seconds."""

    def __init__(self, delay: float) -> None:
        self.calls = 0
        self.delay = delay

    async def load(self) -> int:
        self.calls += 1
        await asyncio.sleep(self.delay)
        return self.calls


def test_a_herd_member_that_arrived_later_times_out_at_its_own_deadline() -> None:
    cache = Cache(wait_timeout=0.15)

    async def main() -> None:
        calls = 0

        async def load() -> str:
            nonlocal calls
            calls += 1
            await asyncio.sleep(0.6)
            return "v"

        loop = asyncio.get_running_loop()
        t0 = loop.time()

        async def settled() -> tuple[str, float]:
            try:
                await cache.aget_or_load("h:1", load)
                return "ok", loop.time() - t0
            except WaitTimeout:
                return "timeout", loop.time() - t0

        leader = asyncio.ensure_future(cache.aget_or_load("h:1", load))
        anchor = asyncio.ensure_future(settled())
        await asyncio.sleep(0.1)
        late = asyncio.ensure_future(settled())
        code, at = await anchor
        assert code == "timeout" and 0.14 <= at < 0.4, (code, at)
        code, at = await late
        assert code == "timeout" and at >= 0.24, f"the later waiter timed out at {at:.3f} s"
        assert await leader == "v" and calls == 1

    asyncio.run(main())
    total = cache.metrics().total
    assert total.wait_timeouts == 2 and total.coalesced_waiters == 2


def test_a_herd_whose_load_fails_gets_the_error_or_the_fail_safe_value() -> None:
    cache = Cache(ttl=0.04, jitter=0, beta=0, max_stale=60)
    boom = RuntimeError("boom")

    async def failing() -> str:
        await asyncio.sleep(0.05)
        raise boom

    async def main() -> None:
        got = await asyncio.gather(
            *(cache.aget_or_load("f:1", failing) for _ in range(50)), return_exceptions=True
        )
        assert all(e is boom for e in got)
        cache.set("f:2", "old")
        await asyncio.sleep(0.06)  # expired, kept for fail-safe
        served = await asyncio.gather(*(cache.aget_or_load("f:2", failing) for _ in range(50)))
        assert served == ["old"] * 50

    asyncio.run(main())


def test_when_the_first_waiter_is_cancelled_the_rest_of_its_herd_is_answered() -> None:
    cache = Cache(ttl=60)

    async def main() -> None:
        loader = Counted(0.05)
        leader = asyncio.ensure_future(cache.aget_or_load("a:1", loader.load))
        await asyncio.sleep(0)
        anchor = asyncio.ensure_future(cache.aget_or_load("a:1", loader.load))
        await asyncio.sleep(0)
        members = [asyncio.ensure_future(cache.aget_or_load("a:1", loader.load)) for _ in range(100)]
        await asyncio.sleep(0.01)
        anchor.cancel()
        assert await asyncio.gather(*members) == [1] * 100
        assert await leader == 1 and loader.calls == 1
        assert anchor.cancelled()

    asyncio.run(main())


def test_when_the_leader_is_cancelled_its_herd_takes_the_load_over() -> None:
    cache = Cache(ttl=60)

    async def main() -> None:
        loader = Counted(0.05)
        leader = asyncio.ensure_future(cache.aget_or_load("l:1", loader.load))
        await asyncio.sleep(0)
        herd = [asyncio.ensure_future(cache.aget_or_load("l:1", loader.load)) for _ in range(100)]
        await asyncio.sleep(0.01)
        leader.cancel()
        # The first waiter takes the load over; the herd gets its answer (the second call).
        assert await asyncio.gather(*herd) == [2] * 100 and loader.calls == 2

    asyncio.run(main())
    assert cache.metrics().total.abandoned_loads == 1


def test_cancelled_members_are_let_go_before_the_load_ends() -> None:
    cache = Cache(ttl=60)

    async def main() -> None:
        release = asyncio.Event()

        async def load() -> int:
            await release.wait()
            return 9

        leader = asyncio.ensure_future(cache.aget_or_load("s:1", load))
        await asyncio.sleep(0)
        # The first waiter (the herd's anchor) stays: its end would end the herd.
        anchor = asyncio.ensure_future(cache.aget_or_load("s:1", load))
        await asyncio.sleep(0)

        def own_loader() -> Callable[[], Awaitable[int]]:
            async def mine() -> int:
                return -1

            return mine

        loaders = [own_loader() for _ in range(100)]
        gone = [weakref.ref(f) for f in loaders]
        cancelled = [asyncio.ensure_future(cache.aget_or_load("s:1", f)) for f in loaders]
        del loaders
        await asyncio.sleep(0)
        for t in cancelled:
            t.cancel()
        await asyncio.gather(*cancelled, return_exceptions=True)
        del cancelled, t  # a task keeps its frame, which holds its loader
        # Later callers join the herd: its next doubling sweeps the cancelled calls out.
        live = [asyncio.ensure_future(cache.aget_or_load("s:1", load)) for _ in range(200)]
        await asyncio.sleep(0)
        gc.collect()
        assert all(r() is None for r in gone)
        release.set()
        assert await asyncio.gather(*live) == [9] * 200
        assert await leader == 9 and await anchor == 9

    asyncio.run(main())


def test_herds_on_two_loops_in_two_threads_share_one_load() -> None:
    cache = Cache(ttl=60)
    calls = 0
    started = threading.Barrier(2)

    async def load() -> int:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.1)
        return 4

    def on_its_loop(out: list[list[int]]) -> None:
        async def main() -> list[int]:
            started.wait()
            return list(await asyncio.gather(*(cache.aget_or_load("t:1", load) for _ in range(300))))

        out.append(asyncio.run(main()))

    out: list[list[int]] = []
    threads = [threading.Thread(target=on_its_loop, args=(out,)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert out == [[4] * 300] * 2 and calls == 1


def test_each_member_of_a_herd_gets_its_own_copy() -> None:
    cache = Cache(ttl=60)

    async def load() -> dict[str, list[int]]:
        await asyncio.sleep(0.01)
        return {"a": [1, 2]}

    async def main() -> list[dict[str, list[int]]]:
        return list(await asyncio.gather(*(cache.aget_or_load("c:1", load) for _ in range(50))))

    got = asyncio.run(main())
    assert all(v == {"a": [1, 2]} for v in got)
    assert len({id(v) for v in got}) == 50 and len({id(v["a"]) for v in got}) == 50
    got[3]["a"].append(3)
    assert cache.get("c:1") == {"a": [1, 2]}
