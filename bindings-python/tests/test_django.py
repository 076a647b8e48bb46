"""The Django cache backend through Django's own cache API and a real test client."""

from __future__ import annotations

import asyncio
import datetime
import pickle
import threading
import time
import warnings
from typing import Any

import django  # type: ignore[import-untyped]
import pytest
from django.conf import settings  # type: ignore[import-untyped]

if not settings.configured:
    settings.configure(
        DEBUG=False,
        SECRET_KEY="test",
        ALLOWED_HOSTS=["testserver"],
        ROOT_URLCONF=__name__,
        INSTALLED_APPS=[],
        MIDDLEWARE=[],
        CACHES={
            "default": {
                "BACKEND": "herdless.contrib.django.HerdlessCache",
                "TIMEOUT": 60,
                "OPTIONS": {"grace": 30, "jitter": 0},
            },
            "pages": {
                "BACKEND": "herdless.contrib.django.HerdlessCache",
                "KEY_PREFIX": "pages",
                "TIMEOUT": 1,
                "OPTIONS": {"grace": 30, "jitter": 0, "beta": 0},
            },
        },
    )
    django.setup()

from django.core.cache import CacheKeyWarning, cache, caches  # type: ignore[import-untyped]  # noqa: E402
from django.core.exceptions import ImproperlyConfigured  # type: ignore[import-untyped]  # noqa: E402
from django.http import HttpRequest, HttpResponse, JsonResponse  # type: ignore[import-untyped]  # noqa: E402
from django.test import Client  # type: ignore[import-untyped]  # noqa: E402
from django.urls import path  # type: ignore[import-untyped]  # noqa: E402

from herdless import ABSENT, Cache  # noqa: E402
from herdless.contrib.django import HerdlessCache  # noqa: E402

CALLS = {"report": 0}


def report(request: HttpRequest, day: str) -> JsonResponse:
    def build() -> dict[str, Any]:
        CALLS["report"] += 1
        time.sleep(0.2)  # the slow aggregation
        return {"day": day, "orders": 42}

    return JsonResponse(cache.get_or_set(f"report:{day}", build, timeout=60))


urlpatterns = [path("reports/<str:day>", report)]


@pytest.fixture(autouse=True)
def clear() -> None:
    cache.clear()
    caches["pages"].clear()
    CALLS["report"] = 0


def test_the_backend_is_herdless() -> None:
    assert isinstance(caches["default"], HerdlessCache)
    assert isinstance(cache.herdless, Cache)
    # Django makes one backend object per thread: they share one engine.
    other: list[Any] = []
    t = threading.Thread(target=lambda: other.append(caches["default"]))
    t.start()
    t.join()
    assert other[0] is not caches["default"]
    assert other[0].herdless is caches["default"].herdless


def test_a_test_client_stampede_runs_the_view_loader_once() -> None:
    def counters() -> Any:
        ns = cache.herdless.metrics().namespace("django")
        return ns.counters if ns is not None else None

    before = counters()
    results: list[Any] = []

    def get() -> None:
        response = Client().get("/reports/2026-01-01")
        results.append((response.status_code, response.json()))

    threads = [threading.Thread(target=get) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [(200, {"day": "2026-01-01", "orders": 42})] * 16
    assert CALLS["report"] == 1
    after = counters()
    loads = after.loads - (before.loads if before else 0)
    waited = after.coalesced_waiters - (before.coalesced_waiters if before else 0)
    hits = after.hits - (before.hits if before else 0)
    assert loads == 1 and waited + hits == 15


def test_get_set_add_delete() -> None:
    assert cache.get("a") is None
    assert cache.get("a", "dflt") == "dflt"
    cache.set("a", {"x": 1})
    assert cache.get("a") == {"x": 1}
    assert cache.has_key("a")
    assert cache.add("a", "other") is False
    assert cache.get("a") == {"x": 1}
    assert cache.add("b", "new") is True
    assert cache.get("b") == "new"
    assert cache.delete("a") is True
    assert cache.delete("a") is False
    assert cache.get("a") is None
    cache.set("none", None)
    assert cache.get("none", "dflt") is None  # a cached None is a value


def test_concurrent_adds_store_one_value() -> None:
    barrier = threading.Barrier(8)
    outcomes: list[bool] = []

    def add(i: int) -> None:
        barrier.wait()
        outcomes.append(cache.add("once", i))

    threads = [threading.Thread(target=add, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count(True) == 1
    winner = [i for i, ok in zip(range(8), outcomes) if ok]
    assert cache.get("once") in range(8) and len(winner) == 1


def test_many_incr_touch_versions() -> None:
    cache.set_many({"m1": 1, "m2": 2})
    assert cache.get_many(["m1", "m2", "m3"]) == {"m1": 1, "m2": 2}
    cache.delete_many(["m1"])
    assert cache.get_many(["m1", "m2"]) == {"m2": 2}
    assert cache.incr("m2") == 3
    assert cache.decr("m2", 2) == 1
    with pytest.raises(ValueError):
        cache.incr("missing")
    assert cache.touch("m2", 100) is True
    assert cache.touch("missing") is False
    cache.set("v", "one", version=1)
    cache.set("v", "two", version=2)
    assert cache.get("v", version=1) == "one" and cache.get("v", version=2) == "two"
    assert cache.incr_version("v", version=2) == 3
    assert cache.get("v", version=3) == "two" and cache.get("v", version=2) is None
    # Django's own keys (KEY_FUNCTION), inside the alias's namespace.
    assert cache.make_key("k", version=4) == ":4:k"
    assert caches["pages"].make_key("k") == "pages:1:k"
    assert cache.make_and_validate_key("k") == "django::1:k"


def test_timeouts() -> None:
    cache.set("gone", 1, timeout=0)
    assert cache.get("gone") is None
    cache.set("gone", 1)
    cache.set("gone", 2, timeout=-1)  # expires at once: removes the old value too
    assert cache.get("gone") is None
    assert cache.add("expired", 1, timeout=0) is True
    assert cache.get("expired") is None
    cache.set("forever", 1, timeout=None)
    assert cache.get("forever") == 1
    assert cache.get_or_set("zero", lambda: 5, timeout=0) == 5
    assert cache.get("zero") is None


def test_clear_is_one_bump_per_alias() -> None:
    cache.set("x", 1)
    caches["pages"].set("x", 2)
    cache.clear()
    assert cache.get("x") is None
    assert caches["pages"].get("x") == 2


def test_get_or_set_serves_stale_while_one_refresh_runs() -> None:
    pages = caches["pages"]  # TIMEOUT 1 s, grace 30 s
    calls = []

    def build() -> str:
        calls.append(1)
        return f"v{len(calls)}"

    assert pages.get_or_set("home", build) == "v1"
    time.sleep(1.1)  # past the timeout, within grace
    assert pages.get_or_set("home", build) == "v1"  # stale, at once; one refresh runs
    deadline = time.monotonic() + 5
    while pages.get("home") != "v2" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pages.get("home") == "v2" and len(calls) == 2
    counters = pages.herdless.metrics().namespace("pages")
    assert counters is not None and counters.counters.stale_served >= 1


def test_get_or_set_caches_absent_and_values() -> None:
    assert cache.get_or_set("missing-row", lambda: ABSENT) is ABSENT
    assert cache.get_or_set("missing-row", lambda: 1) is ABSENT  # cached for negative_ttl
    assert cache.get("missing-row", "dflt") == "dflt"
    assert cache.get_or_set("plain", 7) == 7


def test_aget_or_set_awaits_an_async_loader_once() -> None:
    calls = 0

    async def load() -> str:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)
        return "async"

    async def main() -> list[Any]:
        return await asyncio.gather(*(cache.aget_or_set("async", load) for _ in range(50)))

    assert asyncio.run(main()) == ["async"] * 50
    assert calls == 1
    assert asyncio.run(cache.aget("async")) == "async"


def test_configuration_errors() -> None:
    custom = HerdlessCache("", {"KEY_FUNCTION": lambda k, p, v: f"custom-{v}-{k}"})
    custom.set("a", 1)
    assert custom.get("a") == 1 and cache.get("a") is None
    assert custom.make_and_validate_key("a") == "django:custom-1-a"
    with pytest.raises(ImproperlyConfigured, match="TIMEOUT"):
        HerdlessCache("", {"OPTIONS": {"ttl": 5}})
    backend = HerdlessCache("", {"OPTIONS": {"MAX_ENTRIES": 10, "CULL_FREQUENCY": 2}})
    for i in range(50):
        backend.set(f"k{i}", i)
    assert backend.herdless.metrics().entries <= 10


def test_django_key_warnings_still_apply() -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        cache.set("has space", 1)
        assert cache.get("has space") == 1
    assert any("memcached" in str(w.message) for w in seen)


def test_key_warnings_name_the_users_key_and_long_keys_work() -> None:
    with pytest.warns(CacheKeyWarning) as seen:
        cache.set("key with spaces", 1)
    assert str(seen[0].message) == (
        "Cache key contains characters that will cause errors if used with memcached: "
        "':1:key with spaces'"
    )
    long_key = "k" * 1100  # past the engine's max_key_len (1,024): hashed, not refused
    with pytest.warns(CacheKeyWarning, match="longer than 250"):
        cache.set(long_key, "long")
    with pytest.warns(CacheKeyWarning):
        assert cache.get(long_key) == "long"
    with pytest.warns(CacheKeyWarning):
        assert cache.get(long_key[:-1] + "j") is None


class Unpicklable:
    def __getstate__(self) -> Any:
        raise pickle.PickleError("no")


def test_values_are_pickled_as_by_djangos_own_backends() -> None:
    response = HttpResponse("hello")
    cache.set("page", response)
    response.set_cookie("sessionid", "alice")  # middleware mutating after cache.set
    assert "sessionid" not in cache.get("page").cookies
    cache.get("page").set_cookie("csrftoken", "x")
    assert "csrftoken" not in cache.get("page").cookies
    with pytest.raises(pickle.PickleError):
        cache.set("u", Unpicklable())
    with pytest.raises(pickle.PickleError):
        cache.add("u", Unpicklable())


def test_the_redis_tier_pickles_by_default() -> None:
    a = HerdlessCache("memory://django-pickle", {"KEY_PREFIX": "pk"})
    b = HerdlessCache("memory://django-pickle", {"KEY_PREFIX": "pk", "OPTIONS": {"lease": 6}})
    assert a.herdless is not b.herdless
    a.set("t", (1, b"raw", {"d": datetime.date(2026, 1, 2)}))
    assert b.get("t") == (1, b"raw", {"d": datetime.date(2026, 1, 2)})
    a.set("page", HttpResponse("hi", headers={"X-A": "1"}))
    assert b.get("page").content == b"hi"
    j = HerdlessCache("memory://django-json", {"KEY_PREFIX": "js", "OPTIONS": {"codec": "json"}})
    j.set("t", (1, 2))  # a codec of the user's choice: JSON reads a tuple back as a list
    k = HerdlessCache("memory://django-json", {"KEY_PREFIX": "js", "OPTIONS": {"codec": "json", "lease": 6}})
    assert k.get("t") == [1, 2]


def test_a_timeout_is_the_most_an_entry_lives_on_the_redis_tier() -> None:
    # The shared tier jitters each entry once, for the fleet (its L1 has no jitter): the
    # backend shrinks the timeout by the entries' jitter. It was told 0 and let entries live
    # up to 10% past their timeout (Django's test_cache_page_timeout failed 1 run in 2).
    c = HerdlessCache("memory://django-lifetime", {"KEY_PREFIX": "life"})
    assert c.herdless.jitter == 0.2
    assert Cache(redis="memory://django-lifetime", jitter=0.3).jitter == 0.3
    lives = []
    for i in range(200):
        c.set(f"k{i}", i, timeout=1)
        seen = c.herdless.peek(c.make_and_validate_key(f"k{i}"))
        assert seen is not None
        lives.append(seen.fresh_until - (time.monotonic() - seen.age))
    assert max(lives) <= 1.0 + 0.005
    assert min(lives) < 0.9, "the entries are jittered below the timeout"


def test_max_entries_bounds_the_memory_tier() -> None:
    cull = HerdlessCache("cull", {"OPTIONS": {"MAX_ENTRIES": 30, "CULL_FREQUENCY": 3}})
    for i in range(49):
        cull.set(f"c{i}", i)
    # SIEVE: one out per insert, the bound split across the engine's lock shards.
    assert 25 <= sum(cull.has_key(f"c{i}") for i in range(49)) <= 30


def test_a_fleet_alias_shares_loads_and_clears_across_processes() -> None:
    # Two engines on one shared tier (memory:// stands for a Redis): two processes' aliases.
    a = HerdlessCache("memory://django-fleet", {"KEY_PREFIX": "fleet", "OPTIONS": {"lease": 5}})
    b = HerdlessCache("memory://django-fleet", {"KEY_PREFIX": "fleet", "OPTIONS": {"lease": 6}})
    assert a.herdless is not b.herdless
    calls = []
    start = threading.Barrier(8)

    def load() -> dict[str, int]:
        calls.append(1)
        time.sleep(0.1)
        return {"n": 1}

    def get(backend: HerdlessCache) -> None:
        start.wait()
        assert backend.get_or_set("shared", load) == {"n": 1}

    threads = [threading.Thread(target=get, args=(x,)) for x in (a, b) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    a.clear()  # a bump of the namespace, seen by the other process
    assert b.get("shared") is None


def test_async_methods_take_no_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    # The backend's async methods await the engine on the loop: Django's sync_to_async
    # fallbacks (a thread of asgiref's executor each) are never used.
    import django.core.cache.backends.base as base  # type: ignore[import-untyped]

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("sync_to_async was used")

    monkeypatch.setattr(base, "sync_to_async", refused)

    async def main() -> None:
        await cache.aset("a:1", {"v": 1})
        assert await cache.aget("a:1") == {"v": 1}
        assert await cache.aadd("a:1", "other") is False
        assert await cache.aadd("a:2", "two") is True
        assert await cache.aget_many(["a:1", "a:2", "a:3"]) == {"a:1": {"v": 1}, "a:2": "two"}
        assert await cache.ahas_key("a:2") is True
        assert await cache.atouch("a:2", 30) is True
        await cache.aset_many({"n:1": 1, "n:2": 2})
        assert await cache.aincr("n:1", 5) == 6
        assert await cache.adelete("n:2") is True
        await cache.adelete_many(["a:1"])
        assert await cache.aget("a:1") is None
        assert await cache.aget_or_set("a:4", "four") == "four"
        await cache.aclear()
        assert await cache.aget("a:2") is None

    asyncio.run(main())
