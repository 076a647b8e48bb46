"""The cache's behaviour from Python: values, absences, writes, expiry policies, limits."""

from __future__ import annotations

import gc
import logging
import os
import pickle
import threading
import time
import warnings
import weakref
from typing import Any

import pytest
from conftest import Counting, expired

import herdless
from herdless import (
    ABSENT,
    Cache,
    EmptyKey,
    HerdlessError,
    InvalidKey,
    KeyTooLong,
    LoadTimeout,
    TooManyFlights,
    WaitTimeout,
)


def wait_until(predicate: Any, what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_hits_return_the_same_object() -> None:
    cache = Cache(ttl=60, jitter=0, beta=0, copy_values=False)  # the opt-out: shared
    obj = {"a": [1, 2]}
    other: Any = "other"
    assert cache.get_or_load("ns:k", lambda: obj) is obj
    assert cache.get_or_load("ns:k", lambda: other) is obj
    assert cache.get("ns:k") is obj


def test_absent_is_cached_and_distinct_from_none(cache: Cache) -> None:
    loader = Counting(value=ABSENT)
    assert cache.get_or_load("u:404", loader) is ABSENT
    assert cache.get_or_load("u:404", loader) is ABSENT
    assert loader.calls == 1
    assert cache.get("u:404") is None  # an absence reads as a miss
    assert cache.get("u:404", "dflt") == "dflt"
    none_loader = Counting(value=None)
    assert cache.get_or_load("u:none", none_loader) is None
    assert cache.get_or_load("u:none", none_loader) is None
    assert none_loader.calls == 1
    assert cache.get("u:none", "dflt") is None  # a cached None is a real value
    m = cache.metrics().namespace("u")
    assert m is not None and m.counters.negative_hits == 3  # a get() of an absence counts too


def test_absent_expires_after_negative_ttl() -> None:
    cache = Cache(negative_ttl=0.05, jitter=0)
    loader = Counting(value=ABSENT)
    cache.get_or_load("u:1", loader)
    time.sleep(0.1)
    cache.get_or_load("u:1", loader)
    assert loader.calls == 2


def test_absent_singleton() -> None:
    assert not ABSENT
    assert repr(ABSENT) == "herdless.ABSENT"
    assert pickle.loads(pickle.dumps(ABSENT)) is ABSENT
    assert isinstance(ABSENT, herdless.Absent)
    with pytest.raises(TypeError):
        herdless.Absent()


def test_set_get_invalidate(cache: Cache) -> None:
    cache.set("a:1", 1)
    assert cache.get("a:1") == 1
    cache.set("a:1", ABSENT)
    assert cache.get("a:1", "miss") == "miss"
    loaded: Any = "loaded"
    assert cache.get_or_load("a:1", lambda: loaded) is ABSENT
    assert cache.invalidate("a:1") is True
    assert cache.invalidate("a:1") is False
    assert cache.get_or_load("a:1", lambda: "loaded") == "loaded"
    with pytest.raises(herdless.ConfigError):
        cache.set("a:2", ABSENT, ttl=5)


def test_set_with_ttl_expires() -> None:
    cache = Cache(ttl=60, jitter=0)
    cache.set("a:1", "short", ttl=0.05)
    cache.set("a:2", "long")
    time.sleep(0.1)
    assert cache.get("a:1") is None
    assert cache.get("a:2") == "long"


def test_bump_invalidates_a_namespace(cache: Cache) -> None:
    cache.set("users:1", 1)
    cache.set("users:2", 2)
    cache.set("orders:1", 3)
    e1 = cache.bump("users")
    assert cache.bump("users") == e1 + 1
    assert cache.get("users:1") is None and cache.get("users:2") is None
    assert cache.get("orders:1") == 3
    with pytest.raises(herdless.ConfigError):
        cache.bump("users:v1")
    with pytest.raises(herdless.ConfigTypeError):
        cache.bump(3)  # type: ignore[arg-type]


def test_a_write_during_a_load_is_not_overwritten(cache: Cache) -> None:
    started = threading.Event()

    def slow() -> str:
        started.set()
        time.sleep(0.2)
        return "stale result"

    t = threading.Thread(target=cache.get_or_load, args=("k:race", slow), daemon=True)
    t.start()
    assert started.wait(10)
    cache.set("k:race", "newer write")
    t.join(10)
    assert cache.get("k:race") == "newer write"


def test_stale_while_revalidate_refreshes_on_a_background_thread() -> None:
    cache = Cache(ttl=0.05, grace=30, jitter=0, beta=0)
    cache.set("k:swr", "old")
    time.sleep(0.1)
    refreshed_on: list[str] = []
    release = threading.Event()

    def refresh() -> str:
        refreshed_on.append(threading.current_thread().name)
        release.wait(10)
        return "new"

    # Served stale at once, while the refresh runs elsewhere.
    assert cache.get_or_load("k:swr", refresh) == "old"
    assert cache.get_or_load("k:swr", lambda: "second refresh must not run") == "old"
    release.set()
    wait_until(lambda: cache.get("k:swr") == "new", "the refresh")
    assert refreshed_on == ["herdless-refresh"]
    m = cache.metrics().total
    assert m.stale_served >= 2 and m.refreshes == 1


def test_a_failed_background_refresh_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    cache = Cache(ttl=0.05, grace=30, jitter=0, beta=0)
    cache.set("k:swr", "old")
    time.sleep(0.1)

    def broken() -> str:
        raise RuntimeError("refresh failed")

    with caplog.at_level(logging.WARNING, logger="herdless"):
        assert cache.get_or_load("k:swr", broken) == "old"
        wait_until(lambda: cache.metrics().total.load_errors == 1, "the failed refresh")
        wait_until(lambda: caplog.records, "the log record")
    assert "background refresh of 'k:swr' failed" in caplog.records[0].getMessage()
    assert cache.get("k:swr") == "old"


def test_fail_safe_serves_the_old_value_when_the_load_fails() -> None:
    cache = Cache(ttl=0.05, max_stale=60, jitter=0, beta=0)
    cache.set("k:fs", "old")
    time.sleep(0.1)

    def broken() -> str:
        raise ConnectionError("origin down")

    assert cache.get_or_load("k:fs", broken) == "old"
    # Backed off: served without calling the origin again.
    assert cache.get_or_load("k:fs", broken) == "old"
    m = cache.metrics().total
    assert m.loads == 1 and m.failsafe_served == 2


def test_hard_timeout_frees_waiters_of_a_hung_sync_loader() -> None:
    cache = Cache(hard_timeout=0.1, wait_timeout=5, jitter=0)
    release = threading.Event()
    leading = threading.Event()
    result: list[Any] = []

    def hung() -> str:
        leading.set()
        release.wait(30)
        return "too late"

    t = threading.Thread(
        target=lambda: result.append(cache.get_or_load("k:hung", hung)), daemon=True
    )
    t.start()
    assert leading.wait(10)
    with pytest.raises(LoadTimeout) as info:
        cache.get_or_load("k:hung", lambda: "never")
    assert info.value.after == pytest.approx(0.1)
    release.set()
    t.join(10)
    assert result == ["too late"]  # the leader gets its own result...
    assert cache.get("k:hung") is None  # ...which is not stored


def test_origin_budget_bounds_concurrent_loads() -> None:
    cache = Cache(origin_budget=2, jitter=0)
    running = 0
    peak = 0
    lock = threading.Lock()

    def load() -> str:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        return "v"

    threads = [
        threading.Thread(target=cache.get_or_load, args=(f"k:{i}", load), daemon=True)
        for i in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert 1 <= peak <= 2
    assert cache.origin_budget == 2


def test_too_many_flights_is_refused() -> None:
    cache = Cache(max_flights=1, jitter=0)
    release = threading.Event()
    leading = threading.Event()

    def slow() -> str:
        leading.set()
        release.wait(30)
        return "v"

    t = threading.Thread(target=cache.get_or_load, args=("k:a", slow), daemon=True)
    t.start()
    assert leading.wait(10)
    with pytest.raises(TooManyFlights) as info:
        cache.get_or_load("k:b", lambda: "v")
    assert info.value.limit == 1
    release.set()
    t.join(10)


def test_bad_keys() -> None:
    cache = Cache(max_key_len=8)
    with pytest.raises(EmptyKey):
        cache.get_or_load("", lambda: 1)
    with pytest.raises(KeyTooLong) as info:
        cache.get_or_load("k" * 9, lambda: 1)
    assert (info.value.length, info.value.limit) == (9, 8)
    assert isinstance(info.value, InvalidKey) and isinstance(info.value, ValueError)
    with pytest.raises(KeyTooLong):
        cache.set("é" * 5, 1)  # 10 bytes in UTF-8
    with pytest.raises(TypeError):
        cache.get_or_load(42, lambda: 1)  # type: ignore[arg-type]
    assert issubclass(KeyTooLong, HerdlessError)


def test_values_are_released_after_eviction_and_invalidation() -> None:
    cache = Cache(capacity=1, jitter=0, copy_values=False)  # the cache holds `first` itself

    class Big:
        pass

    first = Big()
    ref = weakref.ref(first)
    cache.set("k:1", first)
    del first
    # Evicted by a write from another thread (no GIL held there while the engine drops it).
    def writes() -> None:
        for i in range(2, 50):
            cache.set(f"k:{i}", i)

    t = threading.Thread(target=writes)
    t.start()
    t.join(10)
    cache.get("k:2")  # any call into the module releases deferred references
    gc.collect()
    assert ref() is None
    second = Big()
    ref2 = weakref.ref(second)
    cache.set("k:x", second)
    del second
    cache.invalidate("k:x")
    gc.collect()
    assert ref2() is None


def test_xfetch_refreshes_a_hot_key_before_it_expires() -> None:
    # A slow load (delta) against a short TTL: XFetch fires long before expiry.
    cache = Cache(ttl=0.3, beta=50, jitter=0)
    loader = Counting(value="v", delay=0.05)
    cache.get_or_load("k:hot", loader)
    wait_until(
        lambda: cache.get_or_load("k:hot", loader) == "v" and loader.calls >= 2,
        "an early refresh",
    )
    assert cache.metrics().total.early_refreshes >= 1


def test_waits_stay_bounded_in_a_forked_child() -> None:
    # The engine's timer thread does not survive fork(); waiters must still time out there.
    def stalled_wait(cache: Cache) -> list[str]:
        leading, release, out = threading.Event(), threading.Event(), []

        def slow() -> int:
            leading.set()
            release.wait(30)
            return 1

        threading.Thread(target=cache.get_or_load, args=("k:1", slow), daemon=True).start()
        assert leading.wait(5)

        def waiter() -> None:
            try:
                cache.get_or_load("k:1", lambda: 2)
            except WaitTimeout:
                out.append("timeout")

        t = threading.Thread(target=waiter, daemon=True)
        t.start()
        t.join(5)
        release.set()
        return out

    assert stalled_wait(Cache(wait_timeout=0.2)) == ["timeout"]  # starts the timer thread
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
        pid = os.fork()
    if pid == 0:
        try:
            code = 0 if stalled_wait(Cache(wait_timeout=0.2)) == ["timeout"] else 1
        except BaseException:
            code = 2
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_bump_invalidates_exactly_its_namespace() -> None:
    # More namespaces than 1,024: a bump must still drop the keys of its own namespace only,
    # never those of namespaces past a table bound.
    cache = Cache(capacity=100_000)
    for i in range(2_000):
        cache.set(f"t{i}:k", i)
    cache.bump("t1500")
    assert sum(cache.get(f"t{i}:k") is not None for i in range(2_000)) == 1_999
    assert cache.bump("never-used") == 0
    small = Cache(max_namespaces=2)
    small.set("a:k", 1)
    small.set("b:k", 2)
    small.set("c:k", 3)  # retires `a`: its entry is a miss, counted
    assert small.get("a:k") is None
    assert small.metrics().total.retired_namespaces == 1
