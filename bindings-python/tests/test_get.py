"""``Cache.get``'s own calling convention (src/hit.rs): the C method made for
``herdless.Cache`` answers the common call itself and passes every other one to
``_native.Cache.get``; both must answer, count and raise alike."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

import herdless
from herdless import ABSENT, Cache, CacheClosed, _native


def fresh(**options: Any) -> Cache:
    return Cache(ttl=60, jitter=0, beta=0, **options)


def counted(cache: Cache) -> tuple[int, int]:
    total = cache.metrics().total
    return total.hits, total.misses


def test_get_is_a_method_of_the_python_class_itself() -> None:
    assert "get" in vars(Cache)
    assert type(vars(Cache)["get"]) is type(vars(_native.Cache)["get"])
    assert Cache.get.__name__ == "get" and "fresh or within grace" in (Cache.get.__doc__ or "")


def test_every_way_of_calling_answers_alike() -> None:
    cache = fresh()
    cache.set("k", "v")
    assert cache.get("k") == "v"
    assert cache.get("k", 5) == "v"
    assert cache.get(key="k") == "v"
    assert cache.get("k", default=5) == "v"
    assert cache.get("missing") is None
    assert cache.get("missing", 5) == 5
    assert cache.get("missing", default=5) == 5
    assert cache.get("missing", None) is None
    assert Cache.get(cache, "k") == "v"
    assert _native.Cache.get(cache, "k") == "v"

    class Key(str):
        pass

    assert cache.get(Key("k")) == "v"
    cache.set("absent", ABSENT)
    assert cache.get("absent", 7) == 7


def test_hits_and_misses_are_counted_once_per_call() -> None:
    cache = fresh()
    cache.set("ns:k", "v")
    for _ in range(3):
        cache.get("ns:k")
    cache.get("ns:k", 1)
    cache.get(key="ns:k")
    cache.get("ns:nothing")
    cache.get("ns:nothing", default=2)
    assert counted(cache) == (5, 2)


def test_wrong_calls_raise_as_the_native_method_does() -> None:
    cache: Any = fresh()  # the calls below are wrong on purpose
    calls: list[Callable[[], object]] = [
        lambda: cache.get(),
        lambda: cache.get(1),
        lambda: cache.get("k", 1, 2),
        lambda: cache.get("k", nope=1),
        lambda: cache.get("k", key="k"),
    ]
    for call in calls:
        with pytest.raises(TypeError):
            call()
    with pytest.raises(UnicodeEncodeError):
        cache.get("\ud800")
    with pytest.raises(TypeError):
        method: Any = vars(Cache)["get"]
        method(object(), "k")


def test_a_closed_cache_refuses_get() -> None:
    cache = fresh()
    cache.set("k", "v")
    cache.close()
    with pytest.raises(CacheClosed):
        cache.get("k")
    with pytest.raises(CacheClosed):
        cache.get("k", default=1)


def test_each_reader_gets_its_own_copy_of_a_flat_value() -> None:
    cache = fresh()
    cache.set("d", {"id": 42, "name": "x"})
    cache.set("l", [1, "two", 3.0])
    first = cache.get("d")
    first["id"] = 0
    assert cache.get("d") == {"id": 42, "name": "x"}
    assert cache.get("d") is not cache.get("d")
    items = cache.get("l")
    items.append(4)
    assert cache.get("l") == [1, "two", 3.0]
    shared = fresh(copy_values=False)
    value = {"id": 42}
    shared.set("d", value)
    assert shared.get("d") is value


def test_a_stale_value_within_grace_is_served() -> None:
    cache = Cache(ttl=0.05, grace=60, jitter=0, beta=0)
    cache.set("k", "v")
    time.sleep(0.1)
    assert cache.get("k") == "v"


def test_an_idle_entry_is_gone_for_get() -> None:
    cache = Cache(ttl=60, tti=0.05, jitter=0, beta=0)
    cache.set("k", "v")
    time.sleep(0.2)
    assert cache.get("k", "gone") == "gone"


def test_a_subclass_of_cache_keeps_get() -> None:
    class Mine(herdless.Cache):
        pass

    cache = Mine(ttl=60)
    cache.set("k", "v")
    assert cache.get("k") == "v" and cache.get("x", 1) == 1


def test_a_cache_with_a_shared_tier_answers_from_memory_then_from_the_tier() -> None:
    name = "test-get-fleet"
    writer = Cache(ttl=60, redis=f"memory://{name}")
    reader = Cache(ttl=60, redis=f"memory://{name}")
    writer.set("ns:k", "v")
    assert reader.get("ns:k") == "v"  # from the tier, kept in its memory
    assert reader.get("ns:k", 1) == "v"  # from its memory
    assert reader.get("ns:missing", 2) == 2
    assert reader.get("ns:missing") is None
    assert reader.get(key="ns:k") == "v"
    total = reader.metrics().total
    # As `_native.Cache.get` counts them: the first read missed in memory (then the tier
    # answered), two were answered from memory, two missed everywhere.
    assert (total.hits, total.misses) == (2, 3)
    reader.close()
    with pytest.raises(CacheClosed):
        reader.get("ns:k")
    writer.close()
