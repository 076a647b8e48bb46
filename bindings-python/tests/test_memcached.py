"""The memcached tier (``Cache(redis="memcached://host:port")``): a private memcached on a free
port, real worker processes beside this one. Skipped loudly without memcached (failed under
CI=true)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from herdless import Cache
from memcached_support import Memcached

from conftest import Counting, run_threads


@pytest.fixture
def memcached() -> Iterator[Memcached]:
    server = Memcached()
    yield server
    server.stop()


WORKER = r"""
import json, sys, threading, time
from herdless import Cache

url, key, start_at, then = sys.argv[1:5]
cache = Cache(redis=url, ttl=60)
calls = 0
def loader():
    global calls
    calls += 1
    time.sleep(0.3)
    return "loaded"
time.sleep(max(0.0, int(start_at) / 1000 - time.time()))
results = [None] * 20
def call(i):
    results[i] = cache.get_or_load(key, loader)
threads = [threading.Thread(target=call, args=(i,)) for i in range(20)]
for t in threads: t.start()
for t in threads: t.join()
time.sleep(max(0.0, int(then) / 1000 - time.time()))
print(json.dumps({"calls": calls, "results": sorted(set(results)), "after": cache.get(key)}))
"""


def test_three_processes_make_one_loader_call_and_see_a_delete_at_once(
    memcached: Memcached,
) -> None:
    key = "users:v1:42"
    start_at = int(time.time() * 1000) + 1500
    then = start_at + 2500
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, memcached.url, key, str(start_at), str(then)],
            stdout=subprocess.PIPE, text=True,
        )
        for _ in range(2)
    ]
    here = Cache(redis=memcached.url, ttl=60)
    loader = Counting("loaded", delay=0.3)
    time.sleep(max(0.0, start_at / 1000 - time.time()))
    results: list[object] = [None] * 20

    def call(i: int) -> None:
        results[i] = here.get_or_load(key, loader)

    run_threads(20, call)
    # Deleted here before the workers read again: no copy of theirs outlives it.
    time.sleep(max(0.0, (then - 1000) / 1000 - time.time()))
    assert here.invalidate(key)
    reports = []
    for w in workers:
        out, _ = w.communicate(timeout=60)
        assert w.returncode == 0
        reports.append(json.loads(out.strip().splitlines()[-1]))
    assert loader.calls + sum(r["calls"] for r in reports) == 1, reports
    assert set(results) == {"loaded"} and all(r["results"] == ["loaded"] for r in reports)
    assert [r["after"] for r in reports] == [None, None]


def test_no_copy_is_kept_and_writes_reach_the_next_read(memcached: Memcached) -> None:
    a, b = Cache(redis=memcached.url), Cache(redis=memcached.url)
    a.set("k", {"id": 1})
    assert b.get("k") == {"id": 1}
    b.set("k", {"id": 2})
    assert a.get("k") == {"id": 2}
    a.bump("k")
    assert b.get("k") is None
    assert a.metrics().total.hits == 0  # every read asked memcached


def test_an_asyncio_herd_makes_one_loader_call(memcached: Memcached) -> None:
    cache = Cache(redis=memcached.url)
    calls = 0

    async def loader() -> str:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.2)
        return "v"

    async def main() -> list[object]:
        return await asyncio.gather(*(cache.aget_or_load("hot", loader) for _ in range(200)))

    assert set(asyncio.run(main())) == {"v"}
    assert calls == 1


def test_tags_are_refused_and_a_stopped_server_still_serves_loads(memcached: Memcached) -> None:
    cache = Cache(redis=memcached.url)
    with pytest.raises(Exception, match="tags"):
        cache.set("t", "v", tags=["a"])
    memcached.stop()
    loader = Counting("local")
    assert cache.get_or_load("x", loader) == "local"
    with pytest.raises(Exception):
        cache.set("x", "w")


def test_a_memcached_address_is_checked() -> None:
    for bad in ["memcached://", "memcached://nohostport"]:
        with pytest.raises(ValueError, match="memcached"):
            Cache(redis=bad)
    with pytest.raises(ValueError, match="not both"):
        Cache(redis="redis://127.0.0.1:6379", memcached="127.0.0.1:11211")
    with pytest.raises(TypeError, match="memcached"):
        Cache(memcached=11211)  # type: ignore[arg-type]


def test_the_memcached_option_names_the_same_tier(memcached: Memcached) -> None:
    host_port = memcached.url.removeprefix("memcached://")
    a, b = Cache(memcached=host_port), Cache(memcached=[host_port])
    a.set("k", "v")
    assert b.get("k") == "v"
    assert Cache(redis=memcached.url).get("k") == "v"
