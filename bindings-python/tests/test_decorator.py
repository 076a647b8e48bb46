"""@cache.cached for sync and async functions, with canonical keys."""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from conftest import run_threads

from herdless import ABSENT, Cache, CachedFunction, KeyBuilder, UnsupportedKeyValue


def entity(fn_name: str) -> str:
    return f"{__name__}.{fn_name}"


def test_sync_function_is_cached_per_call(cache: Cache) -> None:
    calls: list[tuple[int, str]] = []

    @cache.cached(namespace="users")
    def profile(user_id: int, lang: str = "en") -> dict[str, Any]:
        calls.append((user_id, lang))
        return {"id": user_id, "lang": lang}

    assert isinstance(profile, CachedFunction)
    a = profile(1)
    assert profile(1) == a and profile(1) is not a  # each call its own copy
    assert profile(1, "en") == a
    assert profile(user_id=1, lang="en") == a
    assert profile(1, lang="fr") == {"id": 1, "lang": "fr"}
    assert calls == [(1, "en"), (1, "fr")]
    expected = (
        KeyBuilder("users").entity(entity("test_sync_function_is_cached_per_call.<locals>.profile"))
        .param("user_id", 1).param("lang", "en").build()
    )
    assert profile.key(1) == expected
    assert expected.endswith("?lang=en&user_id=#1")


def test_wrapper_looks_like_the_function(cache: Cache) -> None:
    @cache.cached
    def documented(x: int) -> int:
        """Doubles x."""
        return 2 * x

    assert documented.__name__ == "documented"
    assert documented.__doc__ == "Doubles x."
    assert documented.__wrapped__(3) == 6
    assert inspect.signature(documented) == inspect.signature(documented.__wrapped__)
    assert "documented" in repr(documented)


def test_default_namespace_is_the_cache_s_then_the_module() -> None:
    named = Cache(namespace="app")
    plain = Cache()

    @named.cached
    def f(x: int) -> int:
        return x

    @plain.cached
    def g(x: int) -> int:
        return x

    assert f.key(1).startswith("app:v1:")
    assert g.key(1).startswith(f"{__name__}:v1:")


def test_version_and_ttl(cache: Cache) -> None:
    calls = 0

    @cache.cached(version=3, ttl=0.05, namespace="n")
    def f() -> int:
        nonlocal calls
        calls += 1
        return calls

    assert f.key().startswith("n:v3:")
    assert f() == 1 and f() == 1
    time.sleep(0.1)
    assert f() == 2


def test_invalidate_and_bump(cache: Cache) -> None:
    calls = 0

    @cache.cached(namespace="ns")
    def f(x: int) -> int:
        nonlocal calls
        calls += 1
        return x * 10 + calls

    assert f(1) == 11
    assert f.invalidate(1) is True
    assert f(1) == 12
    cache.bump("ns")
    assert f(1) == 13
    assert calls == 3


def test_negative_caching_through_the_decorator(cache: Cache) -> None:
    calls = 0

    @cache.cached
    def find(name: str) -> Any:
        nonlocal calls
        calls += 1
        return ABSENT

    assert find("nobody") is ABSENT
    assert find("nobody") is ABSENT
    assert calls == 1


def test_key_values(cache: Cache) -> None:
    @cache.cached(namespace="t")
    def f(a: Any = None, b: Any = None) -> str:
        return "x"

    assert f.key("1") != f.key(1) != f.key(1.0) != f.key(True)
    assert f.key(frozenset({3, 1})) == f.key({1, 3})
    assert f.key(None) == f.key()
    assert f.key(b=2) == f.key(None, 2)
    for bad in ([1, 2], (1, 2), {"a": 1}, object(), b"x"):
        with pytest.raises(UnsupportedKeyValue, match='argument "a"'):
            f.key(bad)
    with pytest.raises(TypeError, match="unexpected keyword"):
        f.key(c=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="multiple values"):
        f.key(1, a=1)  # type: ignore[misc]
    with pytest.raises(TypeError, match="positional"):
        f.key(1, 2, 3)  # type: ignore[call-arg]
    with pytest.raises(ValueError):
        f.key(float("nan"))


def test_signatures(cache: Cache) -> None:
    @cache.cached(namespace="t")
    def f(a: int, /, b: int, *, c: int = 3, **rest: Any) -> int:
        return a + b + c

    assert f(1, 2) == 6
    assert f.key(1, b=2) == f.key(1, 2, c=3)
    assert f.key(1, 2, z="q").endswith("?a=#1&b=#2&c=#3&z=q")
    assert f.key(1, 2, **{"a b": 1}) == (
        KeyBuilder("t").entity(entity("test_signatures.<locals>.f"))
        .param("a", 1).param("b", 2).param("c", 3).param("a b", 1).build()
    )
    with pytest.raises(TypeError, match="missing"):
        f.key(1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected|missing|multiple"):
        f.key(a=1, b=2)  # type: ignore[call-arg]

    with pytest.raises(TypeError, match="varargs"):
        @cache.cached
        def g(*args: int) -> int:
            return 0

    with pytest.raises(UnsupportedKeyValue, match="default"):
        @cache.cached
        def h(x: list[int] = []) -> int:  # noqa: B006
            return 0


def test_methods_with_ignore(cache: Cache) -> None:
    class Repo:
        def __init__(self) -> None:
            self.calls = 0

        @cache.cached(ignore=("self",), namespace="repo")
        def get(self, item_id: int) -> str:
            self.calls += 1
            return f"item {item_id}"

    repo = Repo()
    assert repo.get(1) == "item 1"
    assert repo.get(1) == "item 1"
    assert repo.calls == 1
    assert Repo.get.key(Repo(), 1) == repo.get.key(1)  # self is not in the key
    assert repo.get.invalidate(1) is True
    assert repo.get(1) == "item 1" and repo.calls == 2
    with pytest.raises(TypeError, match="ignore"):
        cache.cached(ignore=("nope",))(lambda x: x)


def test_custom_key(cache: Cache) -> None:
    @cache.cached(key=lambda user_id, **_: f"users:v1:profile:#{user_id}")
    def profile(user_id: int, verbose: bool = False) -> str:
        return f"user {user_id}"

    assert profile(5) == "user 5"
    assert cache.get("users:v1:profile:#5") == "user 5"
    assert profile.key(5, verbose=True) == "users:v1:profile:#5"

    @cache.cached(key=lambda x: x)
    def bad(x: Any) -> Any:
        return x

    with pytest.raises(TypeError, match="must return a str"):
        bad(1)


def test_concurrent_calls_to_a_decorated_function_share_one_call(cache: Cache) -> None:
    calls = 0
    lock = threading.Lock()

    @cache.cached
    def slow(x: int) -> int:
        nonlocal calls
        with lock:
            calls += 1
        time.sleep(0.2)
        return x

    run_threads(32, lambda i: None if slow(7) == 7 else pytest.fail("wrong value"))
    assert calls == 1


def test_decorator_propagates_exceptions(cache: Cache) -> None:
    @cache.cached
    def boom(x: int) -> int:
        raise KeyError(x)

    with pytest.raises(KeyError):
        boom(1)


def test_async_function(cache: Cache) -> None:
    calls = 0

    @cache.cached(namespace="fx", ttl=30)
    async def rate(currency: str) -> float:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.1)
        return 1.08

    assert inspect.iscoroutinefunction(rate)
    assert rate.__name__ == "rate"

    async def main() -> list[float]:
        return await asyncio.gather(*(rate("EUR") for _ in range(200)))

    assert asyncio.run(main()) == [1.08] * 200
    assert calls == 1
    assert rate.key("EUR").startswith("fx:v1:") and rate.key("EUR").endswith("?currency=EUR")
    assert rate.invalidate("EUR") is True
    assert asyncio.run(rate("EUR")) == 1.08
    assert calls == 2


def test_async_method_and_absent(cache: Cache) -> None:
    class Api:
        @cache.cached(ignore=("self",))
        async def find(self, q: str) -> Any:
            return ABSENT

    assert asyncio.run(Api().find("x")) is ABSENT


def test_async_callable_object(cache: Cache) -> None:
    class Fetch:
        async def __call__(self, x: int) -> int:
            return x + 1

    wrapped = cache.cached(key=lambda x: f"k:{x}")(Fetch())
    assert asyncio.run(wrapped(1)) == 2


def test_a_cached_function_calling_another(cache: Cache) -> None:
    @cache.cached(namespace="inner")
    def inner(x: int) -> str:
        return f"inner {x}"

    @cache.cached(namespace="outer")
    def outer(x: int, label: str = "l") -> str:
        return inner(x + 1) + f" outer {x} {label}"

    assert outer(1) == "inner 2 outer 1 l"
    assert cache.get(inner.key(2)) == "inner 2"
    assert cache.get(outer.key(1)) == "inner 2 outer 1 l"
    assert outer.key(1).startswith("outer:v1:") and inner.key(2).startswith("inner:v1:")


def test_calls_store_under_their_key_at_every_length(cache: Cache) -> None:
    # A call writes its key into a reusable buffer: the value is stored and found under the
    # key `key()` gives, at lengths from short to the longest key allowed (the buffer grows,
    # and past 4096 bytes of capacity is not kept), and with characters the key escapes.
    calls: list[str] = []

    @cache.cached(namespace="long")
    def f(a: str, n: int = 0) -> str:
        calls.append(a)
        return a.upper()

    base = len(f.key("", 7))
    args = ["x" * (total - base) for total in (base, 255, 256, 257, 1024)] + ["é&" * 60]
    assert [len(f.key(a, 7)) for a in args[1:5]] == [255, 256, 257, 1024]
    for arg in args:
        assert f(arg, 7) == arg.upper()
        assert f(arg, 7) == arg.upper()
        assert cache.get(f.key(arg, 7)) == arg.upper()
    assert calls == args


def test_every_calling_convention_gives_the_same_answers(cache: Cache) -> None:
    # A decorated function is called by the interpreter's fast convention (an argument
    # array: `f(1)`, `f(1, b=2)`, `f()`) or with a tuple and a dict (`f(*args, **kw)`,
    # `functools.partial`, `map`, a bound method): every one keys and answers the same,
    # errors included, on the first call and the later ones.
    calls: list[tuple[Any, Any]] = []

    @cache.cached(namespace="conv")
    def f(a: Any = 0, b: Any = "x") -> tuple[Any, Any]:
        calls.append((a, b))
        return (a, b)

    assert f() == (0, "x")
    assert f() == (0, "x")
    assert f(1) == (1, "x")
    assert f(1) == f(*(1,)) == f(a=1) == f(**{"a": 1}) == f(1, "x") == f(1, b="x")
    assert functools.partial(f, 1)() == (1, "x")
    assert list(map(f, [1, 2, 1])) == [(1, "x"), (2, "x"), (1, "x")]
    assert f(2, b="y") == f(*(2,), **{"b": "y"}) == (2, "y")
    assert calls == [(0, "x"), (1, "x"), (2, "x"), (2, "y")]
    assert cache.get(f.key(2, b="y")) == (2, "y")
    loose: Any = f  # the calls below are wrong on purpose
    wrong: list[tuple[type[Exception], str, list[Callable[[], object]]]] = [
        (TypeError, "positional", [lambda: loose(1, 2, 3), lambda: loose(*(1, 2, 3))]),
        (TypeError, "unexpected keyword", [lambda: loose(c=1), lambda: loose(**{"c": 1})]),
        (TypeError, "multiple values", [lambda: loose(1, a=1), lambda: loose(*(1,), **{"a": 1})]),
        (UnsupportedKeyValue, 'argument "a"', [lambda: loose([1]), lambda: loose(*([1],))]),
    ]
    for error, message, calls_of_it in wrong:
        for call in calls_of_it:
            with pytest.raises(error, match=message):
                call()
    assert len(calls) == 4

    @cache.cached(namespace="conv")
    def fails(a: int) -> int:
        raise LookupError(a)

    failing: list[Callable[[], object]] = [lambda: fails(1), lambda: fails(*(1,)), lambda: fails(a=1)]
    for call in failing:
        with pytest.raises(LookupError):
            call()
