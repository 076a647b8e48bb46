"""The Redis tier: processes sharing a Redis make one loader call per key between them.

Two `Cache` objects on one Redis are two members of a fleet (each has its own memory tier
and its own identity in notifications); the cross-language test adds a Rust process and a
second Python process."""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import five_leaders_cancelled, run_threads
from redis_support import RedisCluster, RedisServer, command, free_port, value_key

from herdless import ABSENT, BackendError, Cache, ConfigError, ConfigTypeError

_prefixes = itertools.count()


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    s = RedisServer()
    yield s
    s.stop()


@pytest.fixture
def prefix() -> str:
    """A prefix of its own per test: tests never see each other's keys."""
    return f"t{os.getpid()}x{next(_prefixes)}"


def fleet(server: RedisServer, prefix: str, n: int = 2, **options: Any) -> list[Cache]:
    options.setdefault("jitter", 0)
    options.setdefault("beta", 0)
    return [Cache(redis=server.url, redis_prefix=prefix, **options) for _ in range(n)]


def wait_until(predicate: Any, what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


class CountingLoader:
    def __init__(self, value: Any, delay: float = 0.2) -> None:
        self.value, self.delay, self.calls = value, delay, 0
        self._lock = threading.Lock()

    def __call__(self) -> Any:
        with self._lock:
            self.calls += 1
        time.sleep(self.delay)
        return self.value


def test_two_processes_64_threads_one_loader_call(server: RedisServer, prefix: str) -> None:
    a, b = fleet(server, prefix)
    loader = CountingLoader({"name": "Ada", "tags": ["x", 1, None]})
    results: list[Any] = [None] * 64

    def call(i: int) -> None:
        results[i] = (a if i % 2 else b).get_or_load("users:v1:42", loader)

    run_threads(64, call)
    assert loader.calls == 1
    assert all(r == {"name": "Ada", "tags": ["x", 1, None]} for r in results)
    raw = command(server.port, "GET", value_key(prefix, "users:v1:42"))
    assert raw[:2] == b"hl" and raw[52:] == b'{"name":"Ada","tags":["x",1,null]}'
    ma, mb = a.metrics(), b.metrics()
    assert ma.redis is not None and mb.redis is not None
    assert ma.redis["fleet_locks_acquired"] + mb.redis["fleet_locks_acquired"] == 1
    assert a._flights_in_progress() == 0 and b._flights_in_progress() == 0


def test_asyncio_fleet_one_loader_call(server: RedisServer, prefix: str) -> None:
    a, b = fleet(server, prefix)
    calls = 0

    async def loader() -> str:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.2)
        return "shared"

    async def main() -> list[Any]:
        return await asyncio.gather(
            *(c.aget_or_load("k:async", loader) for c in (a, b) for _ in range(1000))
        )

    assert asyncio.run(main()) == ["shared"] * 2000
    assert calls == 1


def test_a_set_drops_the_other_processes_copy(server: RedisServer, prefix: str) -> None:
    a, b = fleet(server, prefix)
    assert a.get_or_load("k:1", lambda: "v1") == "v1"
    assert b.get_or_load("k:1", lambda: "never") == "v1"  # from Redis, now in b's memory
    a.set("k:1", "v2")
    wait_until(lambda: b.get("k:1") == "v2", "b to drop its copy")
    assert b.get_or_load("k:1", lambda: "never") == "v2"
    assert a.invalidate("k:1") is True
    wait_until(lambda: b.get("k:1") is None, "b to see the invalidation")
    a.set("k:2", ABSENT)
    never: Any = "never"
    assert b.get_or_load("k:2", lambda: never) is ABSENT


def test_bump_reaches_the_fleet(server: RedisServer, prefix: str) -> None:
    a, b = fleet(server, prefix)
    b.get_or_load("ns:1", lambda: 1)
    a.get_or_load("ns:1", lambda: 2)
    assert a.get("ns:1") == 1
    epoch = a.bump("ns")
    assert epoch >= 1
    wait_until(lambda: b.get("ns:1") is None, "b to see the bump")
    assert b.get_or_load("ns:1", lambda: 3) == 3
    assert a.get_or_load("ns:1", lambda: 4) == 3


def test_errors_are_not_shared_and_the_lock_is_released(server: RedisServer, prefix: str) -> None:
    a, b = fleet(server, prefix)
    calls = 0

    def broken() -> str:
        nonlocal calls
        calls += 1
        time.sleep(0.1)
        raise ValueError("origin down")

    outcomes: list[BaseException | None] = [None] * 8

    def call(i: int) -> None:
        try:
            (a if i % 2 else b).get_or_load("k:err", broken)
        except ValueError as e:
            outcomes[i] = e

    run_threads(8, call)
    assert all(isinstance(o, ValueError) for o in outcomes)
    assert 1 <= calls <= 2  # at most one load per process: the lock is released, not held
    assert a.get_or_load("k:err", lambda: "ok") == "ok"


def test_keyboard_interrupt_in_the_fleet_leader_hands_over(server: RedisServer, prefix: str) -> None:
    a, b = fleet(server, prefix)
    interrupted = threading.Event()
    leading = threading.Event()

    def leader() -> None:
        def loader() -> str:
            leading.set()
            time.sleep(0.2)
            raise KeyboardInterrupt

        try:
            a.get_or_load("k:ki", loader)
        except KeyboardInterrupt:
            interrupted.set()

    t = threading.Thread(target=leader, daemon=True)
    t.start()
    assert leading.wait(10)
    assert b.get_or_load("k:ki", lambda: "taken over") == "taken over"
    t.join(10)
    assert interrupted.is_set()


def test_codecs(server: RedisServer, prefix: str) -> None:
    raw_a, raw_b = fleet(server, prefix, codec="bytes")
    raw_a.get_or_load("b:1", lambda: b"\x00\xffbin")
    assert raw_b.get_or_load("b:1", lambda: b"never") == b"\x00\xffbin"

    class Upper:
        def encode(self, value: Any) -> bytes:
            return str(value).upper().encode()

        def decode(self, data: bytes) -> Any:
            return data.decode()

    c1, c2 = fleet(server, prefix + "c", codec=Upper())
    c1.get_or_load("c:1", lambda: "shout")
    assert c2.get_or_load("c:1", lambda: "never") == "SHOUT"


def test_a_value_json_cannot_encode_is_served_but_not_shared(
    server: RedisServer, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    a, b = fleet(server, prefix, copy_values=False)  # the object itself, not a copy
    obj = object()
    with caplog.at_level(logging.WARNING, logger="herdless"):
        assert a.get_or_load("k:obj", lambda: obj) is obj
    assert any("cannot be encoded" in r.getMessage() for r in caplog.records)
    assert a.get_or_load("k:obj", lambda: "never") is obj  # kept in a's memory
    assert b.get_or_load("k:obj", lambda: "b's own") == "b's own"


def test_corrupt_bytes_are_a_miss(server: RedisServer, prefix: str) -> None:
    (a,) = fleet(server, prefix, n=1)
    command(server.port, "SET", value_key(prefix, "k:bad"), b"\x00garbage", "PX", 60000)
    assert a.get_or_load("k:bad", lambda: "fresh") == "fresh"
    # Readable entry bytes of another codec (here: not JSON) are a miss too.
    (other,) = fleet(server, prefix, n=1, codec="bytes")
    other.set("k:bin", b"\xff\xfe not json")
    (c,) = fleet(server, prefix, n=1)
    assert c.get_or_load("k:bin", lambda: "loaded here") == "loaded here"


def test_redis_down_serves_and_loads_locally() -> None:
    port = free_port()  # nothing listens there
    cache = Cache(redis=f"redis://127.0.0.1:{port}", jitter=0)
    loader = CountingLoader("local", delay=0.05)
    results: list[Any] = [None] * 8

    def call(i: int) -> None:
        results[i] = cache.get_or_load("k:down", loader)

    run_threads(8, call)
    assert results == ["local"] * 8
    assert loader.calls == 1  # still one load in the process
    m = cache.metrics()
    assert m.redis is not None and m.redis["backend_errors"] >= 1
    with pytest.raises(BackendError):
        cache.set("k:down", "x")
    assert "herdless_redis_backend_errors_total" in cache.prometheus()


def test_async_leader_cancelled_hands_over_in_the_fleet(server: RedisServer, prefix: str) -> None:
    a, b = fleet(server, prefix)
    calls = 0

    async def loader() -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            await asyncio.sleep(30)
        return "second"

    async def main() -> str:
        leader = asyncio.create_task(a.aget_or_load("k:cancel", loader))
        while calls == 0:  # a holds the fleet lock and runs the loader
            await asyncio.sleep(0.01)
        other = asyncio.create_task(b.aget_or_load("k:cancel", loader))
        await asyncio.sleep(0.2)
        leader.cancel()
        return await asyncio.wait_for(other, 20)

    assert asyncio.run(main()) == "second"
    assert calls == 2


def test_redis_options_are_checked() -> None:
    with pytest.raises(ConfigError, match="redis_prefix"):
        Cache(redis_prefix="a{b}")
    with pytest.raises(ConfigTypeError, match="redis_prefix"):
        Cache(redis_prefix=1)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="codec"):
        Cache(codec="pickle")
    with pytest.raises(ConfigTypeError, match="codec"):
        Cache(codec=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="lease"):
        Cache(lease=0)
    Cache(codec="bytes", redis_prefix="p", lease=2)  # checked, used only with redis=


WORKER_SCRIPT = r"""
import json, os, socket, sys, threading, time
sys.path.insert(0, os.environ["TESTS_DIR"])
from redis_support import command
from herdless import Cache

port, prefix, key, counter, start_at = sys.argv[1:6]
cache = Cache(redis=f"redis://127.0.0.1:{port}", redis_prefix=prefix)
calls = 0
def loader():
    global calls
    calls += 1
    command(int(port), "INCR", counter)
    time.sleep(0.2)
    return f"loaded by python {os.getpid()}"
time.sleep(max(0.0, int(start_at) / 1000 - time.time()))
results = [None] * 50
def call(i):
    results[i] = cache.get_or_load(key, loader)
threads = [threading.Thread(target=call, args=(i,)) for i in range(50)]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps({"calls": calls, "results": sorted(set(results))}))
"""


def test_rust_and_python_processes_make_one_loader_call(server: RedisServer, prefix: str) -> None:
    worker = os.environ.get("HERDLESS_FLEET_WORKER")
    if not worker or not Path(worker).exists():
        message = "HERDLESS_FLEET_WORKER (the Rust fleet_worker binary) is not built: scripts/test.sh builds it"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    key, counter = "xl:v1:hot", f"{prefix}:counter"
    start_at = int(time.time() * 1000) + 1500
    rust = subprocess.Popen(
        [worker],
        env={**os.environ, "HL_URL": server.url, "HL_PREFIX": prefix, "HL_KEY": key,
             "HL_CALLERS": "50", "HL_LOADER_MS": "200", "HL_COUNTER": counter,
             "HL_START_AT_MS": str(start_at)},
        stdout=subprocess.PIPE, text=True,
    )
    python = subprocess.Popen(
        [sys.executable, "-c", WORKER_SCRIPT, str(server.port), prefix, key, counter, str(start_at)],
        env={**os.environ, "TESTS_DIR": str(Path(__file__).parent)},
        stdout=subprocess.PIPE, text=True,
    )
    (here,) = fleet(server, prefix, n=1, jitter=0.2, beta=1)
    loader = CountingLoader("loaded by this test process")
    time.sleep(max(0.0, start_at / 1000 - time.time()))
    results: list[Any] = [None] * 50

    def call(i: int) -> None:
        results[i] = here.get_or_load(key, loader)

    run_threads(50, call)
    rust_out, _ = rust.communicate(timeout=60)
    py_out, _ = python.communicate(timeout=60)
    assert rust.returncode == 0 and python.returncode == 0
    rust_line = next(line for line in rust_out.splitlines() if line.startswith("RESULT"))
    fields = dict(part.split("=", 1) for part in rust_line.split()[1:] if "=" in part)
    py_report = json.loads(py_out.strip().splitlines()[-1])
    # No INCR at all (the counter absent) when this test process was the one to load.
    total = int(command(server.port, "GET", counter) or 0) + loader.calls
    # The Rust worker counts its own calls with INCR too; the test process does not.
    assert total == 1, (fields, py_report, loader.calls)
    assert fields["ok"] == "50" and fields["err"] == "0"
    values = set(results) | set(py_report["results"])
    assert len(values) == 1, values  # every process answers the same value


def test_a_redis_cache_made_before_fork_connects_again_in_the_child(
    server: RedisServer, prefix: str
) -> None:
    # gunicorn --preload, a Cache created at import: the child's first use connects from
    # the child (the parent's connection threads are not there) and shares with the fleet.
    (cache,) = fleet(server, prefix, n=1)
    cache.get_or_load("k:fork", lambda: "parent")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
        pid = os.fork()
    if pid == 0:  # the child: report through the exit code, never return into pytest
        code = 1
        try:
            signal.alarm(20)  # a hang fails the test instead of the runner
            cache.set("k:fork", "child")
            loaded = cache.get_or_load("k:fork2", lambda: "from child")
            errors = cache.metrics().total.backend_errors
            code = 0 if loaded == "from child" and errors == 0 else 2
        except BaseException:
            code = 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    (other,) = fleet(server, prefix, n=1)
    assert other.get("k:fork") == "child"
    assert other.get("k:fork2") == "from child"
    # The parent's copy was dropped by the child's write (a notice like any other process's).
    wait_until(lambda: cache.get("k:fork") == "child", "the child's write to reach the parent")


def test_dropping_a_redis_cache_releases_its_values(server: RedisServer, prefix: str) -> None:
    class Value:
        pass

    class Codec:
        def encode(self, value: Any) -> bytes:
            return b"v"

        def decode(self, data: bytes) -> Any:
            return Value()

    (cache,) = fleet(server, prefix, n=1, codec=Codec(), copy_values=False)
    value = Value()
    ref = weakref.ref(value)
    cache.get_or_load("k:drop", lambda: value)
    del value, cache
    deadline = time.monotonic() + 10
    while ref() is not None:
        assert time.monotonic() < deadline, "the value outlived its cache"
        Cache().get("x")  # any call into the module releases deferred references
        gc.collect()
        time.sleep(0.02)


def test_a_redis_cluster_is_one_fleet() -> None:
    # A list of nodes, or one redis+cluster:// address: either reaches the whole cluster.
    cluster = RedisCluster()
    try:
        hosts = ",".join(u.removeprefix("redis://") for u in cluster.urls)
        caches = [Cache(redis=cluster.urls, jitter=0, beta=0),
                  Cache(redis=f"redis+cluster://{hosts}", jitter=0, beta=0)]
        calls = 0

        def load() -> str:
            nonlocal calls
            calls += 1
            time.sleep(0.2)
            return "shared"

        keys = [f"ns{i}:item" for i in range(12)]  # namespaces spread over the slots
        for key in keys:
            done: list[str] = []
            threads = [threading.Thread(target=lambda c=c: done.append(c.get_or_load(key, load)))
                       for c in caches for _ in range(3)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert done == ["shared"] * 6
        assert calls == len(keys), "one loader call per key across the two processes"
        caches[0].set("ns1:item", "updated")
        wait_until(lambda: caches[1].get("ns1:item") == "updated", "the write to reach b")
        caches[1].bump("ns2")
        # The bump reaches the other process's copies through its notification.
        wait_until(lambda: caches[0].get("ns2:item") is None, "the bump to reach a")
        assert caches[0].get_or_load("ns2:item", lambda: "after bump") == "after bump"
        assert all((c.metrics().redis or {}).get("backend_errors") == 0 for c in caches)
    finally:
        cluster.stop()


def test_wait_timeout_counts_from_the_first_arrival_across_fleet_hand_overs(
    server: RedisServer, prefix: str
) -> None:
    # Callers in two processes: each hand-over also hands the fleet lock over.
    five_leaders_cancelled(fleet(server, prefix, wait_timeout=1.0))
