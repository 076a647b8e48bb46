"""A cache's lifecycle (issue 33 item 5): ``close()`` (and ``with`` / ``async with``) releases
a Redis-tier cache's connections and thread at once, a closed cache raises ``CacheClosed``
for every call (as a Node cache rejects with ``HERDLESS_CLOSED``: the decision is the fleet
engine's), and 10,000 create/close cycles leave threads, file descriptors, RSS and Redis
clients flat. The leak and fork cases run in child interpreters."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from herdless import Cache, CacheClosed, HerdlessError
from herdless.testing import MemoryStore
from redis_support import RedisServer


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    s = RedisServer()
    yield s
    s.stop()


def child(code: str, *args: str, timeout: float = 300) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, (out.returncode, out.stderr[-3000:])
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# What a child holds: threads, file descriptors, RSS, and the Redis clients of the server at
# argv[1] (the measuring connection included).
MEASURE = """
    import os, socket, sys

    def clients():
        if not sys.argv[1]:
            return 0
        host, port = sys.argv[1].removeprefix("redis://").split(":")
        with socket.create_connection((host, int(port))) as s:
            s.sendall(b"*2\\r\\n$4\\r\\nINFO\\r\\n$7\\r\\nclients\\r\\n")
            buf = b""
            while b"connected_clients:" not in buf or not buf.endswith(b"\\r\\n"):
                buf += s.recv(65536)
        return int(buf.split(b"connected_clients:")[1].split(b"\\r\\n")[0])

    def measure():
        with open("/proc/self/status") as f:
            rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS")) / 1024
        return {"threads": len(os.listdir("/proc/self/task")),
                "fds": len(os.listdir("/proc/self/fd")), "rss": rss, "clients": clients()}
"""

CYCLES = MEASURE + """
    import json, time
    from herdless import Cache

    n, with_block = int(sys.argv[2]), sys.argv[3] == "with"
    options = {"redis": sys.argv[1], "redis_prefix": "cycles"} if sys.argv[1] else {}
    first, most = measure(), {"threads": 0, "fds": 0, "clients": 0}
    for i in range(n):
        if with_block:
            with Cache(**options) as cache:
                cache.get_or_load(f"k:{i}", lambda: i)
        else:
            cache = Cache(**options)
            cache.get_or_load(f"k:{i}", lambda: i)
            cache.close()
        if i % 1000 == 999:
            now = measure()
            most = {k: max(most[k], now[k]) for k in most}
    time.sleep(0.2)
    print(json.dumps({"first": first, "most": most, "last": measure()}))
"""


def assert_flat(out: dict[str, Any], rss_mb: float) -> None:
    first, most, last = out["first"], out["most"], out["last"]
    # One runtime thread (and its poller, waker and two sockets) may still be ending.
    assert last["threads"] <= first["threads"] + 1, out
    assert most["threads"] <= first["threads"] + 2, out
    assert last["fds"] <= first["fds"] + 5, out
    assert last["clients"] <= first["clients"] + 2, out
    assert most["clients"] <= first["clients"] + 4, out
    assert last["rss"] - first["rss"] < rss_mb, out


@pytest.mark.parametrize("how", ["close", "with"])
def test_10000_create_close_cycles_in_memory_stay_flat(how: str) -> None:
    out = child(CYCLES, "", "10000", how)
    print(out)
    assert_flat(out, rss_mb=20)


@pytest.mark.parametrize("how", ["close", "with"])
def test_10000_create_close_cycles_on_redis_stay_flat(server: RedisServer, how: str) -> None:
    # Each cycle starts a runtime thread and two connections (commands, subscription).
    out = child(CYCLES, server.url, "10000", how)
    print(out)
    assert_flat(out, rss_mb=30)


KEPT = MEASURE + """
    import json, time
    from herdless import Cache

    first = measure()
    kept = []
    for i in range(1000):
        cache = Cache(redis=sys.argv[1], redis_prefix="kept")
        cache.get_or_load(f"k:{i}", lambda: i)
        cache.close()
        kept.append(cache)  # alive: what is released is released by close()
    time.sleep(0.2)
    print(json.dumps({"first": first, "most": measure(), "last": measure(), "kept": len(kept)}))
"""


def test_closed_caches_kept_alive_hold_no_connection_thread_or_fd(server: RedisServer) -> None:
    # Before close() existed, 1,000 such caches held 2,001 Redis clients, 1,001 threads and
    # 5,006 file descriptors for as long as they were referenced.
    out = child(KEPT, server.url)
    print(out)
    assert_flat(out, rss_mb=100)


def test_a_closed_cache_raises_cache_closed_and_keeps_its_metrics() -> None:
    for options in ({}, {"redis": "memory://close-refuses"}):
        cache = Cache(**options)  # type: ignore[arg-type]

        @cache.cached(namespace="f")
        def f(x: int) -> int:
            return x

        cache.set("k:1", "v")
        assert f(1) == 1
        assert cache.get("k:1") == "v"
        assert not cache.closed
        cache.close()
        cache.close()  # idempotent
        assert cache.closed
        calls = []

        def load() -> int:
            calls.append(1)
            return 1

        refused = [
            lambda: cache.get("k:1"),
            lambda: cache.peek("k:1"),
            lambda: cache.set("k:1", "w"),
            lambda: cache.set("k:1", "w", tags=["t"]),
            lambda: cache.invalidate("k:1"),
            lambda: cache.bump("k"),
            lambda: cache.invalidate_tag("t"),
            lambda: cache.invalidate_tags(["t"], soft=True),
            lambda: cache.get_or_load("k:1", load),
            lambda: cache.get_or_load_many(["k:1", "k:2"], lambda keys: {}),
            lambda: cache.warm(["k:1"], lambda key: 1),
            lambda: cache.cached(lambda: 1),
            lambda: f(1),
            lambda: asyncio.run(cache.aget_or_load("k:1", _async_one)),
            lambda: asyncio.run(cache.aget_or_load_many(["k:1"], _async_map)),
            lambda: asyncio.run(cache.awarm(["k:1"], _async_key)),
        ]
        for call in refused:
            with pytest.raises(CacheClosed) as e:
                call()
            assert isinstance(e.value, HerdlessError) and isinstance(e.value, RuntimeError)
        assert calls == []
        assert cache.metrics().total.hits >= 1
        assert isinstance(cache.prometheus(), str)
        assert cache.alerts() == []


async def _async_one() -> int:
    return 1


async def _async_key(key: str) -> int:
    return 1


async def _async_map(keys: list[str]) -> dict[str, int]:
    return {}


def test_with_and_async_with_close_the_cache() -> None:
    with Cache() as cache:
        assert cache.get_or_load("k:1", lambda: 1) == 1
        assert isinstance(cache, Cache)
    assert cache.closed
    # The block's exception goes on, the cache closed all the same.
    with pytest.raises(KeyError), Cache(redis="memory://close-with") as other:
        raise KeyError("x")
    assert other.closed

    async def main() -> Cache:
        async with Cache(redis="memory://close-async-with") as c:
            assert await c.aget_or_load("k:1", _async_one) == 1
        return c

    assert asyncio.run(main()).closed


def test_calls_in_flight_at_close() -> None:
    # A loader running at the close: its caller (and its waiter) get its value, stored
    # nowhere. Calls waiting for a stalled tier are woken by the close with CacheClosed.
    store = MemoryStore("close-in-flight")
    cache = Cache(redis="memory://close-in-flight", wait_timeout=30)
    release = threading.Event()
    started = threading.Event()
    results: dict[str, Any] = {}

    def slow() -> str:
        started.set()
        release.wait(10)
        return "loaded"

    def call(name: str, fn: Any) -> None:
        try:
            results[name] = fn()
        except Exception as e:  # noqa: BLE001 - the test looks at what each call got
            results[name] = e

    threads = [threading.Thread(target=call, args=("running", lambda: cache.get_or_load("k:run", slow)))]
    threads[0].start()
    assert started.wait(10)
    threads.append(threading.Thread(
        target=call, args=("waiter", lambda: cache.get_or_load("k:run", lambda: "not me"))))
    store.set_fault("stall")
    threads.append(threading.Thread(target=call, args=("write", lambda: cache.set("k:set", "v"))))
    threads.append(threading.Thread(
        target=call, args=("asking", lambda: cache.get_or_load("k:ask", lambda: "late"))))
    for t in threads[1:]:
        t.start()
    time.sleep(0.2)
    cache.close()
    for name in ("write", "asking"):
        deadline = time.monotonic() + 10
        while name not in results:
            assert time.monotonic() < deadline, f"{name} was not answered after the close"
            time.sleep(0.01)
        assert isinstance(results[name], CacheClosed), results[name]
    release.set()
    for t in threads:
        t.join(10)
    store.set_fault(None)
    assert results["running"] == "loaded"
    assert results["waiter"] == "loaded"
    assert cache._flights_in_progress() == 0
    with pytest.raises(CacheClosed):
        cache.get("k:run")


def test_an_asyncio_load_waiting_for_the_tier_at_close_raises_cache_closed() -> None:
    store = MemoryStore("close-asyncio")
    cache = Cache(redis="memory://close-asyncio", wait_timeout=30)
    late: list[int] = []

    async def load() -> int:
        late.append(1)
        return 1

    async def main() -> BaseException | int:
        store.set_fault("stall")
        task = asyncio.ensure_future(cache.aget_or_load("k:ask", load))
        await asyncio.sleep(0.2)
        cache.close()
        try:
            return await asyncio.wait_for(task, 10)
        except CacheClosed as e:
            return e
        finally:
            store.set_fault(None)

    assert isinstance(asyncio.run(main()), CacheClosed)
    assert late == []


FORK = MEASURE + """
    import json, os, time
    from herdless import Cache, CacheClosed

    closed = Cache(redis=sys.argv[1], redis_prefix="fork")
    closed.set("k:1", "v")
    closed.close()
    used = Cache(redis=sys.argv[1], redis_prefix="fork")
    used.set("k:2", "v")
    before = measure()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        out = {}
        try:
            closed.get("k:1")
        except CacheClosed:
            out["closed_stays_closed"] = True
        out["clients_after_closed_use"] = measure()["clients"]
        # Not in its memory: read from Redis, connecting again, from the child.
        out["read_in_child"] = used.get("k:1")
        out["clients_child_connected"] = measure()["clients"]
        used.close()
        time.sleep(0.2)
        out["clients_child_closed"] = measure()["clients"]
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    got = json.loads(os.read(r, 65536))
    got["child_status"] = status
    got["before"] = before["clients"]
    got["parent_still_works"] = used.get("k:2")
    print(json.dumps(got))
"""


def test_fork_a_closed_cache_stays_closed_and_a_child_closes_its_own_connections(
    server: RedisServer,
) -> None:
    out = child(FORK, server.url, timeout=60)
    print(out)
    assert out["child_status"] == 0
    assert out["closed_stays_closed"]
    # The closed cache made no connection in the child (each count includes its own).
    assert out["clients_after_closed_use"] == out["before"]
    assert out["read_in_child"] == "v"
    assert out["clients_child_connected"] > out["clients_after_closed_use"]
    # The child's close released the child's connections; the parent's are untouched.
    assert out["clients_child_closed"] == out["before"]
    assert out["parent_still_works"] == "v"
