"""Tags: ``set(..., tags=)``, ``ctx.set_tags``, ``Loaded(tags=)``, ``@cached(tags=)`` and
``invalidate_tag(s)``: each invalidation drops exactly the entries carrying the tag, for
``get``, ``peek`` and the metrics alike; a load racing an invalidation never stores; hard by
default, ``soft=True`` serves stale within grace. In memory, on the in-process fleet
(``memory://``) and across two caches on a Redis server."""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from redis_support import RedisServer

import herdless
from herdless import (
    ABSENT,
    Cache,
    EmptyTag,
    InvalidTag,
    LoadContext,
    Loaded,
    TagTooLong,
    TooManyTags,
)

_names = itertools.count()

# The product pages of the issue: each page depends on its product, seller and category.
PAGES = {
    "page:42": ["product:42", "seller:7", "category:3"],
    "page:43": ["product:43", "seller:7", "category:4"],
    "page:44": ["product:44", "seller:8", "category:3"],
}


def memory_cache(**options: Any) -> Cache:
    return Cache(ttl=60, jitter=0, beta=0, **options)


def memory_fleet_cache(**options: Any) -> Cache:
    return Cache(redis=f"memory://tags-{os.getpid()}-{next(_names)}", ttl=60, jitter=0, beta=0, **options)


KINDS: dict[str, Callable[..., Cache]] = {"memory": memory_cache, "memory_fleet": memory_fleet_cache}


def fleet_gap() -> None:
    """Lets the clock move on between a load's start in one cache and an invalidation in
    another (two processes): for a tag the loading process did not know before its load,
    the fleet compares the tag's stamp (its server's clock) with the load's start (this
    host's), and two machines are never at the same instant. Not an assertion: every check
    waits for events."""
    time.sleep(0.02)


@pytest.fixture(params=sorted(KINDS))
def make(request: pytest.FixtureRequest) -> Callable[..., Cache]:
    """A cache factory: in memory only, or over the in-process fleet tier."""
    return KINDS[request.param]


def wait_until(predicate: Callable[[], bool], what: str) -> None:
    for _ in range(500):
        if predicate():
            return
        threading.Event().wait(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def load_pages(cache: Cache) -> None:
    """Loads every page through a context loader that tags it."""
    for key, tags in PAGES.items():

        def load(ctx: LoadContext, tags: list[str] = tags) -> str:
            ctx.set_tags(tags)
            return f"html of {ctx.key}"

        assert cache.get_or_load(key, load) == f"html of {key}"


def present(cache: Cache) -> set[str]:
    """The pages `get` answers; `peek` must agree with it."""
    seen = {k for k in PAGES if cache.get(k) is not None}
    assert {k for k in PAGES if cache.peek(k) is not None} == seen
    return seen


@pytest.mark.parametrize(
    ("tag", "dropped"),
    [
        ("product:42", {"page:42"}),
        ("seller:7", {"page:42", "page:43"}),
        ("category:3", {"page:42", "page:44"}),
        ("product:99", set()),
    ],
)
def test_each_invalidation_drops_exactly_its_pages(
    make: Callable[..., Cache], tag: str, dropped: set[str]
) -> None:
    cache = make()
    load_pages(cache)
    assert present(cache) == set(PAGES)
    cache.invalidate_tag(tag)
    assert present(cache) == set(PAGES) - dropped
    # The dropped pages load again, tagged again.
    load_pages(cache)
    assert present(cache) == set(PAGES)
    assert cache.peek("page:42") is not None
    assert cache.peek("page:42").tags == tuple(PAGES["page:42"])  # type: ignore[union-attr]


def test_set_with_tags_and_the_batch_form(make: Callable[..., Cache]) -> None:
    cache = make()
    for key, tags in PAGES.items():
        cache.set(key, key.upper(), tags=tags)
    cache.set("page:plain", "untagged")
    assert present(cache) == set(PAGES)
    cache.invalidate_tags(iter(["product:43", "seller:8"]))
    assert present(cache) == {"page:42"}
    assert cache.get("page:plain") == "untagged"
    m = cache.metrics()
    assert m.tag_invalidations == 2
    assert m.tag_expirations == 0
    assert m.tags >= 1


def test_a_set_with_tags_keeps_its_ttl_and_an_absence_can_be_tagged(cache: Cache) -> None:
    cache.set("p:0", "v", ttl=5)
    cache.set("p:1", "v", ttl=5, tags=("t:1",))
    plain, seen = cache.peek("p:0"), cache.peek("p:1")
    assert plain is not None and seen is not None and seen.tags == ("t:1",)
    assert plain.tags == ()
    assert abs(seen.fresh_until - plain.fresh_until) < 1  # the ttl of 5 s, not the cache's 60
    cache.set("p:2", ABSENT, tags=["t:1"])
    assert cache.peek("p:2") is not None
    cache.invalidate_tag("t:1")
    assert cache.peek("p:1") is None and cache.peek("p:2") is None


def test_hard_is_the_default_nothing_older_is_served_even_as_fail_safe() -> None:
    cache = memory_cache(grace=60, max_stale=600, failsafe_backoff=0.01)
    cache.set("p:1", "old", tags=["t"])
    cache.invalidate_tag("t")
    assert cache.get("p:1") is None
    assert cache.peek("p:1") is None

    def failing() -> str:
        raise RuntimeError("origin down")

    # No fail-safe copy survives a hard invalidation: the load's error reaches the caller.
    with pytest.raises(RuntimeError, match="origin down"):
        cache.get_or_load("p:1", failing)


def test_soft_serves_stale_within_grace_while_one_refresh_runs() -> None:
    cache = memory_cache(grace=60)
    cache.set("p:1", "old", tags=["t"])
    cache.invalidate_tag("t", soft=True)
    seen = cache.peek("p:1")
    assert seen is not None and seen.state == "stale" and seen.value == "old"
    assert cache.get("p:1") == "old"
    assert cache.metrics().tag_expirations == 1

    release = threading.Event()
    calls: list[str] = []
    done = threading.Event()

    def refresh(ctx: LoadContext) -> str:
        calls.append(ctx.reason)
        assert release.wait(10)
        ctx.set_tags(["t"])
        done.set()
        return "new"

    # Stale callers are answered at once with the old value; one refresh runs.
    assert cache.get_or_load("p:1", refresh) == "old"
    assert cache.get_or_load("p:1", refresh) == "old"
    release.set()
    assert done.wait(10)
    wait_until(lambda: getattr(cache.peek("p:1"), "value", None) == "new", "the refresh")
    assert calls == ["refresh"]
    assert cache.peek("p:1").state == "fresh"  # type: ignore[union-attr]


def test_soft_without_grace_keeps_the_fail_safe_copy() -> None:
    cache = memory_cache(max_stale=600, failsafe_backoff=0.01)
    cache.set("p:1", "old", tags=["t"])
    cache.invalidate_tag("t", soft=True)
    assert cache.get("p:1") is None

    def failing() -> str:
        raise RuntimeError("origin down")

    assert cache.get_or_load("p:1", failing) == "old"


def test_a_load_racing_invalidate_tag_never_stores(make: Callable[..., Cache]) -> None:
    cache = make()
    started, release = threading.Event(), threading.Event()
    answers: list[Any] = []

    def slow(ctx: LoadContext) -> str:
        started.set()
        assert release.wait(10)
        ctx.set_tags(["product:42"])
        return "older value"

    t = threading.Thread(target=lambda: answers.append(cache.get_or_load("page:42", slow)))
    t.start()
    assert started.wait(10)
    cache.invalidate_tag("product:42")
    release.set()
    t.join(10)
    assert not t.is_alive()
    # Its callers get it; nobody reads it afterwards.
    assert answers == ["older value"]
    assert cache.get("page:42") is None
    assert cache.peek("page:42") is None


def test_an_async_load_racing_invalidate_tag_never_stores(make: Callable[..., Cache]) -> None:
    cache = make()

    async def main() -> None:
        started, release = asyncio.Event(), asyncio.Event()

        async def slow() -> Any:
            started.set()
            await release.wait()
            return Loaded("older value", tags=["seller:7"])

        task = asyncio.create_task(cache.aget_or_load("page:43", slow))
        await started.wait()
        cache.invalidate_tag("seller:7")
        release.set()
        assert await task == "older value"

    asyncio.run(main())
    assert cache.get("page:43") is None
    assert cache.peek("page:43") is None


def test_a_load_that_began_after_the_invalidation_stores(cache: Cache) -> None:
    cache.invalidate_tag("product:42")
    def load() -> Any:
        return Loaded("new", tags=["product:42"])

    assert cache.get_or_load("page:42", load) == "new"
    assert cache.get("page:42") == "new"


def test_not_modified_keeps_the_tags_and_previous_shows_them() -> None:
    cache = memory_cache(grace=60)
    cache.set("p:1", "v1", ttl=0.05, tags=["a", "b"])
    wait_until(lambda: cache.peek("p:1").state == "stale", "the entry to go stale")  # type: ignore[union-attr]
    seen: list[list[str]] = []

    def revalidate(ctx: LoadContext) -> Any:
        assert ctx.previous is not None
        seen.append(ctx.previous.tags)
        return ctx.not_modified()

    assert cache.get_or_load("p:1", revalidate) == "v1"  # stale: refreshed in the background
    wait_until(lambda: cache.peek("p:1").state == "fresh", "the refresh")  # type: ignore[union-attr]
    assert seen == [["a", "b"]]
    assert cache.peek("p:1").tags == ("a", "b")  # type: ignore[union-attr]
    cache.invalidate_tag("b")
    assert cache.get("p:1") is None


def test_a_loaded_answer_sets_tags_over_the_context(cache: Cache) -> None:
    def load(ctx: LoadContext) -> Any:
        ctx.set_tags(["from:ctx"])
        return Loaded("v", tags=["from:answer"])

    cache.get_or_load("p:1", load)
    assert cache.peek("p:1").tags == ("from:answer",)  # type: ignore[union-attr]


def test_bounds_raise_typed_exceptions(cache: Cache) -> None:
    with pytest.raises(EmptyTag):
        cache.set("p:1", "v", tags=[""])
    with pytest.raises(TagTooLong) as too_long:
        cache.set("p:1", "v", tags=["x" * 129])
    assert (too_long.value.length, too_long.value.limit) == (129, 128)
    cache.set("p:1", "v", tags=["é" * 64])  # 128 bytes: the limit is in bytes
    with pytest.raises(TooManyTags) as too_many:
        cache.set("p:2", "v", tags=[f"t:{i}" for i in range(17)])
    assert (too_many.value.count, too_many.value.limit) == (17, 16)
    # Duplicates count once.
    cache.set("p:3", "v", tags=["t"] * 40 + [f"t:{i}" for i in range(15)])
    # An endless iterator is refused, not read forever.
    with pytest.raises(TooManyTags):
        cache.set("p:4", "v", tags=(f"t:{i}" for i in itertools.count()))
    for bad in ([""], ["y" * 200]):
        with pytest.raises(InvalidTag):
            cache.invalidate_tags(bad)
    with pytest.raises(EmptyTag):
        cache.invalidate_tag("")
    # A lone surrogate is no tag: InvalidTag, not a raw UnicodeEncodeError.
    with pytest.raises(InvalidTag):
        cache.set("p:5", "v", tags=["\ud800"])
    with pytest.raises(InvalidTag):
        cache.invalidate_tags(["ok", "\udfff"])
    with pytest.raises(InvalidTag):
        cache.invalidate_tag("\ud800")
    # Nothing bad was stored; every error is a ValueError.
    assert cache.get("p:2") is None and cache.get("p:4") is None and cache.get("p:5") is None
    assert issubclass(InvalidTag, ValueError) and issubclass(InvalidTag, herdless.HerdlessError)


def test_a_huge_invalidation_list_is_read_in_linear_time(cache: Cache) -> None:
    # 300,000 names, 10,000 distinct (the most one call takes), as a request could send them:
    # each repeat is dropped through a set, not by comparing it with every name kept (3e9
    # compares before).
    load_pages(cache)
    names = [f"other:{i}" for i in range(9_999)] * 30 + ["seller:7"]
    cache.invalidate_tags(iter(names))
    assert present(cache) == set(PAGES) - {"page:42", "page:43"}
    # One more distinct name is refused whole: nothing is invalidated (issue 33 item 12).
    with pytest.raises(TooManyTags, match="more than 10000 distinct"):
        cache.invalidate_tags([f"x:{i}" for i in range(10_000)] + ["product:44"])
    assert present(cache) == {"page:44"}


def test_wrong_types_raise_type_errors(cache: Cache) -> None:
    with pytest.raises(TypeError, match="not one tag"):
        cache.set("p:1", "v", tags="product:42")
    with pytest.raises(TypeError, match="tags are str"):
        cache.set("p:1", "v", tags=["ok", 42])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        cache.invalidate_tag(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not one tag"):
        cache.invalidate_tags("product:42")
    with pytest.raises(TypeError):
        Loaded("v", tags=3)  # type: ignore[arg-type]
    assert cache.get("p:1") is None


def test_a_loader_with_bad_tags_fails_its_load_and_stores_nothing(cache: Cache) -> None:
    def load(ctx: LoadContext) -> str:
        ctx.set_tags([f"t:{i}" for i in range(20)])
        return "v"

    with pytest.raises(TooManyTags):
        cache.get_or_load("p:1", load)
    assert cache.peek("p:1") is None


def test_the_decorator_tags_its_results(cache: Cache) -> None:
    calls: list[int] = []

    @cache.cached(namespace="pages", tags=lambda product_id, seller_id: [f"product:{product_id}", f"seller:{seller_id}"])
    def page(product_id: int, seller_id: int) -> str:
        calls.append(product_id)
        return f"page {product_id}"

    @cache.cached(namespace="lists", tags=["catalog"])
    def listing(category: int) -> list[int]:
        calls.append(-category)
        return [category]

    assert page(42, 7) == page(42, 7) == "page 42"
    assert page(43, 7) == "page 43"
    assert page(44, seller_id=8) == "page 44"
    assert listing(3) == listing(3) == [3]
    assert calls == [42, 43, 44, -3]
    assert cache.peek(page.key(42, 7)).tags == ("product:42", "seller:7")  # type: ignore[union-attr]
    cache.invalidate_tag("seller:7")
    assert page(42, 7) == "page 42" and page(44, seller_id=8) == "page 44"
    assert calls == [42, 43, 44, -3, 42]
    cache.invalidate_tag("catalog")
    assert listing(3) == [3]
    assert calls == [42, 43, 44, -3, 42, -3]


def test_the_decorator_keeps_a_loaded_answers_own_tags(cache: Cache) -> None:
    @cache.cached(namespace="pages", tags=["default"])
    def page(n: int) -> Any:
        return Loaded(n, tags=["own"]) if n == 1 else n

    assert page(1) == 1 and page(2) == 2
    assert cache.peek(page.key(1)).tags == ("own",)  # type: ignore[union-attr]
    assert cache.peek(page.key(2)).tags == ("default",)  # type: ignore[union-attr]


def test_the_async_decorator_tags_its_results(cache: Cache) -> None:
    calls: list[int] = []

    @cache.cached(namespace="pages", tags=lambda n: [f"product:{n}"])
    async def page(n: int) -> str:
        calls.append(n)
        return f"page {n}"

    async def main() -> None:
        assert await page(1) == "page 1"
        assert await page(1) == "page 1"
        cache.invalidate_tag("product:1")
        assert await page(1) == "page 1"

    asyncio.run(main())
    assert calls == [1, 1]


def test_the_decorator_refuses_one_str_as_tags(cache: Cache) -> None:
    with pytest.raises(TypeError, match="not one tag"):
        cache.cached(tags="product:42")


# The Redis tier: two members of one fleet.


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    s = RedisServer()
    yield s
    s.stop()


def test_redis_tags_drop_exactly_their_pages_across_two_caches(server: RedisServer) -> None:
    prefix = f"tags{os.getpid()}x{next(_names)}"
    a, b = (Cache(redis=server.url, redis_prefix=prefix, ttl=60, jitter=0, beta=0) for _ in range(2))
    load_pages(a)
    calls: list[str] = []

    def never(key: str) -> Callable[[], str]:
        def load() -> str:
            calls.append(key)
            return "loaded by b"

        return load

    # b reads a's pages from Redis (no load) and keeps them, tagged, in its memory.
    for key in PAGES:
        assert b.get_or_load(key, never(key)) == f"html of {key}"
    assert calls == []
    assert b.peek("page:43").tags == tuple(PAGES["page:43"])  # type: ignore[union-attr]

    a.invalidate_tag("seller:7")
    for cache in (a, b):

        def dropped(cache: Cache = cache) -> bool:
            return present(cache) == {"page:44"}

        wait_until(dropped, "the notification")
    assert b.get_or_load("page:42", never("page:42")) == "loaded by b"
    assert a.get("page:42") == "loaded by b"

    # Soft, without grace: past its fresh time everywhere (no older value is served).
    b.invalidate_tags(["category:3"], soft=True)
    for cache in (a, b):

        def expired(cache: Cache = cache) -> bool:
            return cache.get("page:44") is None

        wait_until(expired, "the soft invalidation")
    assert b.metrics().tag_expirations == 1


def test_redis_a_load_racing_a_tag_invalidation_in_another_process_never_stores(
    server: RedisServer,
) -> None:
    prefix = f"tags{os.getpid()}x{next(_names)}"
    a, b = (Cache(redis=server.url, redis_prefix=prefix, ttl=60, jitter=0, beta=0) for _ in range(2))
    started, release = threading.Event(), threading.Event()
    answers: list[Any] = []

    def slow(ctx: LoadContext) -> str:
        started.set()
        assert release.wait(10)
        ctx.set_tags(["product:42"])
        return "older value"

    t = threading.Thread(target=lambda: answers.append(a.get_or_load("page:42", slow)))
    t.start()
    assert started.wait(10)
    fleet_gap()
    b.invalidate_tag("product:42")
    release.set()
    t.join(10)
    assert answers == ["older value"]
    assert a.get("page:42") is None and b.get("page:42") is None
