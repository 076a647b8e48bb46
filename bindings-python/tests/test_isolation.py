"""Value isolation (``copy_values``): a value stored or read is the caller's own, as with
Django's LocMemCache; mutating it never changes what another caller reads (issue 28)."""

from __future__ import annotations

import asyncio
import pickle
import threading
import time
from typing import Any

import pytest

from herdless import ABSENT, Cache, ConfigTypeError


def fresh(**options: Any) -> Cache:
    return Cache(ttl=60, jitter=0, beta=0, **options)


def test_a_value_mutated_after_set_is_not_the_cached_one() -> None:
    cache = fresh()
    account = {"plan": "free"}
    cache.set("acct", account)
    account["plan"] = "pro"
    assert cache.get("acct") == {"plan": "free"}


def test_a_value_read_back_is_each_readers_own() -> None:
    cache = fresh()
    cache.set("acct", {"plan": "free", "seats": [1]})
    first = cache.get("acct")
    first["plan"] = "pro"
    first["seats"].append(2)
    assert cache.get("acct") == {"plan": "free", "seats": [1]}
    assert cache.get("acct") is not cache.get("acct")
    peeked = cache.peek("acct")
    assert peeked is not None
    peeked.value["plan"] = "x"
    assert cache.get("acct") == {"plan": "free", "seats": [1]}


def test_get_or_load_answers_are_copies_for_the_loader_its_waiters_and_later_readers() -> None:
    cache = fresh()
    started = threading.Event()

    def load() -> dict[str, Any]:
        started.set()
        time.sleep(0.2)
        return {"user": "alice", "cookies": []}

    answers: list[dict[str, Any]] = []
    lock = threading.Lock()

    def call() -> None:
        value = cache.get_or_load("session", load)
        with lock:
            answers.append(value)
        value["cookies"].append("sessionid=alice")  # a middleware mutating its response

    leader = threading.Thread(target=call)
    leader.start()
    started.wait(5)
    waiters = [threading.Thread(target=call) for _ in range(3)]
    for t in waiters:
        t.start()
    for t in [leader, *waiters]:
        t.join(10)
    assert len(answers) == 4
    assert len({id(a) for a in answers}) == 4
    assert cache.get_or_load("session", load) == {"user": "alice", "cookies": []}


def test_batch_answers_and_the_decorator_are_copies() -> None:
    cache = fresh()
    def load(keys: list[str]) -> dict[str, dict[str, Any]]:
        return {k: {"k": k, "l": []} for k in keys}

    first = cache.get_or_load_many(["a", "b"], load)
    first[0]["l"].append(1)
    again: list[Any] = cache.get_or_load_many(["a", "b"], lambda keys: {})
    assert again == [{"k": "a", "l": []}, {"k": "b", "l": []}]

    @cache.cached
    def profile(user: str) -> dict[str, Any]:
        return {"user": user, "roles": ["reader"]}

    profile("alice")["roles"].append("admin")
    assert profile("alice") == {"user": "alice", "roles": ["reader"]}


def test_async_answers_and_warm_are_copies() -> None:
    cache = fresh()

    async def load() -> list[int]:
        return [1]

    async def run() -> None:
        (await cache.aget_or_load("x", load)).append(2)
        assert await cache.aget_or_load("x", load) == [1]

    asyncio.run(run())
    shared: dict[str, list[int]] = {"w": []}
    cache.warm(["w"], lambda k: shared)
    shared["w"].append(1)
    assert cache.get("w") == {"w": []}


def test_immutable_values_are_shared_uncopied() -> None:
    cache = fresh()
    text = "x" * 1000
    frozen = (1, "a", (2.5, b"b"), frozenset({3}), None, True)
    cache.set("s", text)
    cache.set("t", frozen)
    assert cache.get("s") is text
    assert cache.get("t") is frozen
    cache.set("absent", ABSENT)
    loaded: Any = cache.get_or_load("absent", lambda: "loaded")
    assert loaded is ABSENT
    # A tuple holding a list is mutable through the list: copied.
    holder = (1, [2])
    cache.set("h", holder)
    holder[1].append(3)
    assert cache.get("h") == (1, [2])


def test_copy_values_false_shares_the_callers_object() -> None:
    cache = fresh(copy_values=False)
    value = {"plan": "free"}
    cache.set("acct", value)
    assert cache.get("acct") is value
    with pytest.raises(ConfigTypeError, match="copy_values"):
        Cache(copy_values="yes")  # type: ignore[arg-type]


class Unpicklable:
    def __getstate__(self) -> Any:
        raise pickle.PickleError("no")


def test_an_unpicklable_value_raises_the_picklers_error() -> None:
    cache = fresh()
    with pytest.raises(pickle.PickleError):
        cache.set("u", Unpicklable())
    with pytest.raises(pickle.PickleError):
        cache.get_or_load("u", Unpicklable)
    assert cache.get("u") is None
    assert cache._flights_in_progress() == 0
    fresh(copy_values=False).set("u", Unpicklable())  # the opt-out keeps the object


def test_a_value_read_from_the_shared_tier_is_isolated_too() -> None:
    a = Cache(ttl=60, redis="memory://isolation", codec="json")
    b = Cache(ttl=60, redis="memory://isolation", codec="json")
    a.set("acct", {"plan": "free"})
    seen = b.get("acct")
    assert seen == {"plan": "free"}
    seen["plan"] = "pro"
    assert b.get("acct") == {"plan": "free"}


def test_every_shape_of_value_is_copied_whatever_its_depth_or_kind() -> None:
    import collections

    cache = fresh()
    cyclic: list[Any] = [1]
    cyclic.append(cyclic)
    deep: list[Any] = []
    node = deep
    for _ in range(200):  # deeper than the tree copy goes: pickled instead
        node.append([])
        node = node[0]
    wide = list(range(20_000))  # more nodes than the tree copy takes: pickled instead
    values: dict[str, Any] = {
        "tree": {"rows": [{"id": 1, "tags": ("a", ["b"])}], (1, "k"): None},
        "subclass": collections.OrderedDict(a=[1]),
        "set": {1, 2},
        "bytearray": bytearray(b"ab"),
        "cyclic": cyclic,
        "deep": deep,
        "wide": wide,
    }
    for name, value in values.items():
        cache.set(name, value)
        got = cache.get(name)
        assert got is not value and type(got) is type(value), name
    cache.get("tree")["rows"][0]["tags"][1].append("c")
    assert cache.get("tree")["rows"][0]["tags"] == ("a", ["b"])
    got = cache.get("cyclic")
    assert got[1] is got  # pickled: the cycle is kept
    values["subclass"]["a"].append(2)
    assert cache.get("subclass") == {"a": [1]}
    wide.append(1)
    assert len(cache.get("wide")) == 20_000
