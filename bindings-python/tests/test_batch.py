"""Batch loads: ``get_or_load_many`` / ``aget_or_load_many``. One loader call for the keys
nobody has, each key single-flight with every other caller (threads, other batches, other
processes over the shared tier), answers in the order of the keys, failures per key."""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from redis_support import RedisServer

from herdless import ABSENT, BatchError, Cache

_names = itertools.count()


def value_of(key: str) -> int:
    return int(key.rsplit(":", 1)[1]) * 10


class BatchLoader:
    """Answers every key it is asked for with its value; records each call's keys."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.calls: list[list[str]] = []
        self._lock = threading.Lock()

    def __call__(self, keys: list[str]) -> dict[str, int]:
        with self._lock:
            self.calls.append(list(keys))
        time.sleep(self.delay)
        return {k: value_of(k) for k in keys}

    def loads(self) -> Counter[str]:
        return Counter(k for call in self.calls for k in call)


def test_one_loader_call_for_the_misses_in_the_order_of_the_keys() -> None:
    cache = Cache()
    cache.set("p:1", 1)
    loader = BatchLoader()
    got = cache.get_or_load_many(["p:2", "p:1", "p:3", "p:2"], loader)
    assert got == [20, 1, 30, 20]
    assert loader.calls == [["p:2", "p:3"]], "the hit is not asked for, duplicates once"
    assert cache.metrics().total.batch_loads == 1


def test_absent_and_omitted_keys_are_cached_absences() -> None:
    cache = Cache()
    answers: dict[str, object] = {"a:1": 1, "a:2": ABSENT}
    got: list[object] = cache.get_or_load_many(["a:1", "a:2", "a:3"], lambda keys: answers)
    assert got == [1, ABSENT, ABSENT]
    loader = BatchLoader()
    again: list[object] = cache.get_or_load_many(["a:2", "a:3"], loader)
    assert again == [ABSENT, ABSENT]
    assert loader.calls == [], "absences are hits until negative_ttl"


def test_a_failing_loader_raises_batch_error_with_each_keys_answer() -> None:
    cache = Cache()
    cache.set("f:1", 1)

    def down(keys: list[str]) -> dict[str, int]:
        raise ConnectionError("database down")

    with pytest.raises(BatchError) as caught:
        cache.get_or_load_many(["f:1", "f:2", "f:3"], down)
    e = caught.value
    assert set(e.errors) == {"f:2", "f:3"}
    assert all(isinstance(x, ConnectionError) for x in e.errors.values())
    assert e.values[0] == 1 and e.values[1] is e.errors["f:2"]
    # Nothing was cached: the next batch loads them.
    assert cache.get_or_load_many(["f:2", "f:3"], BatchLoader()) == [20, 30]


def test_twenty_threads_of_fifty_keys_load_every_key_once() -> None:
    cache = Cache(ttl=600)
    loader = BatchLoader(delay=0.05)
    start = threading.Barrier(20)
    results: dict[int, list[int]] = {}

    def caller(c: int) -> None:
        keys = [f"p:{(c * 5 + j) % 100}" for j in range(50)]
        start.wait()
        results[c] = cache.get_or_load_many(keys, loader)

    threads = [threading.Thread(target=caller, args=(c,)) for c in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c, got in results.items():
        assert got == [value_of(f"p:{(c * 5 + j) % 100}") for j in range(50)]
    loads = loader.loads()
    assert len(loads) == 100 and set(loads.values()) == {1}, loads
    assert len(loader.calls) <= 20


def test_max_batch_splits_the_misses() -> None:
    cache = Cache(max_batch=10)
    loader = BatchLoader()
    got = cache.get_or_load_many([f"m:{n}" for n in range(25)], loader)
    assert got == [n * 10 for n in range(25)]
    assert [len(c) for c in loader.calls] == [10, 10, 5]


def test_bad_arguments_are_refused() -> None:
    cache = Cache()
    with pytest.raises(TypeError):
        cache.get_or_load_many("p:1", BatchLoader())
    with pytest.raises(BatchError) as caught:
        cache.get_or_load_many(["p:1", ""], BatchLoader())
    assert list(caught.value.errors) == [""]
    assert caught.value.values[0] == 10


def test_asyncio_batch_with_an_async_loader() -> None:
    cache = Cache()
    calls: list[list[str]] = []

    async def load(keys: list[str]) -> dict[str, int]:
        calls.append(keys)
        await asyncio.sleep(0.01)
        return {k: value_of(k) for k in keys}

    async def main() -> list[list[int]]:
        return list(
            await asyncio.gather(
                cache.aget_or_load_many(["q:1", "q:2"], load),
                cache.aget_or_load_many(["q:2", "q:3"], load),
            )
        )

    assert asyncio.run(main()) == [[10, 20], [20, 30]]
    assert Counter(k for c in calls for k in c) == {"q:1": 1, "q:2": 1, "q:3": 1}


def test_on_a_memory_tier_the_other_process_reads_the_batch() -> None:
    name = f"memory://batch-{os.getpid()}-{next(_names)}"
    a, b = Cache(redis=name), Cache(redis=name)
    la, lb = BatchLoader(), BatchLoader()
    assert a.get_or_load_many(["s:1", "s:2"], la) == [10, 20]
    assert b.get_or_load_many(["s:1", "s:2", "s:3"], lb) == [10, 20, 30]
    assert lb.calls == [["s:3"]]
    tier = a.metrics().redis
    assert tier is not None and tier["batch_round_trips"] == 1


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    s = RedisServer()
    yield s
    s.stop()


def test_two_processes_on_redis_share_a_batch(server: RedisServer) -> None:
    prefix = f"b{os.getpid()}x{next(_names)}"
    a, b = (Cache(redis=server.url, redis_prefix=prefix, jitter=0) for _ in range(2))
    loader = BatchLoader(delay=0.1)
    keys = [f"r:{n}" for n in range(30)]
    out: dict[str, list[int]] = {}
    ta = threading.Thread(target=lambda: out.__setitem__("a", a.get_or_load_many(keys, loader)))
    tb = threading.Thread(target=lambda: out.__setitem__("b", b.get_or_load_many(keys, loader)))
    ta.start()
    tb.start()
    ta.join()
    tb.join()
    want = [value_of(k) for k in keys]
    assert out == {"a": want, "b": want}
    assert set(loader.loads().values()) == {1}, "each key loaded once in the fleet"


@pytest.mark.parametrize("tier", [None, "memory://"])
def test_a_batch_loaders_loaded_answers_keep_their_own_ttl_and_tags(tier: str | None) -> None:
    from herdless import Loaded

    options: dict[str, object] = {"ttl": 600.0}
    if tier:
        options.update(redis=tier, redis_prefix=f"loaded-{next(_names)}")
    cache = Cache(**options)  # type: ignore[arg-type]
    calls: list[list[str]] = []

    def load(keys: list[str]) -> dict[str, object]:
        calls.append(keys)
        return {
            "p:1": Loaded("short", ttl=0.2),
            "p:2": Loaded("tagged", tags=["item:2"]),
            "p:3": "plain",
            "p:4": Loaded("once", no_cache=True),
        }

    keys = ["p:1", "p:2", "p:3", "p:4"]
    assert cache.get_or_load_many(keys, load) == ["short", "tagged", "plain", "once"]
    assert cache.get("p:4") is None, "no_cache: answered, not stored"
    cache.invalidate_tag("item:2")
    assert cache.get("p:2") is None, "the tag of a batch answer is kept"
    assert cache.get("p:3") == "plain"
    time.sleep(0.3)
    assert cache.get("p:1") is None, "the ttl of a batch answer is kept"
    assert cache.get("p:3") == "plain"
