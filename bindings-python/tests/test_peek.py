"""``Cache.peek``: an entry as it is, without side effects."""

from __future__ import annotations

import time

from conftest import Counting

from herdless import ABSENT, Cache, Peek


def test_a_miss_is_none_and_a_cached_absence_is_a_peek() -> None:
    cache = Cache(jitter=0, beta=0)
    assert cache.peek("users:1") is None
    cache.set("users:1", ABSENT)
    seen = cache.peek("users:1")
    assert isinstance(seen, Peek)
    assert seen.value is ABSENT
    assert seen.state == "fresh"
    assert seen.stale_until == seen.fresh_until, "an absence has no grace"
    assert cache.peek("") is None, "a bad key is a miss"


def test_state_age_expiry_and_load_duration() -> None:
    cache = Cache(ttl=0.2, grace=30, jitter=0, beta=0)
    cache.get_or_load("users:1", Counting("ada", delay=0.05))
    first = cache.peek("users:1")
    assert first is not None
    assert first.value == "ada" and first.state == "fresh"
    assert 0.05 <= first.load_duration < 1
    assert first.stale_until - first.fresh_until == 30
    # The cache's clock is monotonic: the entry was stored at most moments ago.
    assert 0 <= time.monotonic() + 0.2 - first.fresh_until < 0.5
    time.sleep(0.25)
    later = cache.peek("users:1")
    assert later is not None
    assert later.state == "stale"
    assert later.fresh_until == first.fresh_until
    assert later.age - first.age >= 0.25


def test_peeking_counts_nothing_and_refreshes_nothing() -> None:
    cache = Cache(ttl=0.05, grace=30, jitter=0, beta=0)
    cache.set("users:1", "ada")
    time.sleep(0.1)  # stale: a read would start a refresh
    before = cache.metrics()
    for _ in range(50):
        seen = cache.peek("users:1")
        assert seen is not None and seen.state == "stale"
        assert cache.peek("users:2") is None
    assert cache.metrics().namespaces == before.namespaces
    assert cache._flights_in_progress() == 0
    assert cache.hot_keys() == []
