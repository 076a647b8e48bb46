"""Admission (``Cache(admission=True)``, the engine's TinyLFU filter): a loop over a little
more than the capacity hits with it; a refused value still answers its caller, a refused
``set`` returns as usual, neither is kept, and ``admission_rejections`` counts them.
Counts, not timings."""

from __future__ import annotations

from typing import Any

import pytest

from herdless import Cache, ConfigTypeError


def _loop(admission: bool) -> tuple[int, int, int]:
    """Reads, loader calls and refusals of 10 rounds of a loop over 1.2x the capacity."""
    cache = Cache(capacity=1_000, ttl=3_600, jitter=0, admission=admission)
    calls = 0
    reads = 0
    for _ in range(10):
        for k in range(1_200):

            def loader(k: int = k) -> int:
                nonlocal calls
                calls += 1
                return k

            assert cache.get_or_load(f"loop:{k}", loader) == k
            reads += 1
    return reads, calls, cache.metrics().total.admission_rejections


def test_a_loop_over_more_than_the_capacity_hits_with_admission() -> None:
    reads, off_calls, off_refused = _loop(False)
    assert off_refused == 0
    reads, on_calls, on_refused = _loop(True)
    # The engine's own test (one shard) measures 0 hits off; here the keys spread over
    # several shards, so only the gap is asserted.
    assert reads - on_calls > reads // 4
    assert reads - on_calls > 2 * (reads - off_calls)
    assert on_refused > 0


def test_a_refused_value_answers_its_caller_but_is_not_kept() -> None:
    # A capacity of 1 is one shard of one entry: the victim is always "a".
    cache = Cache(capacity=1, ttl=3_600, admission=True)
    for _ in range(3):
        cache.set("a", 1)
    cache.set("b", 2)
    assert cache.get("b") is None
    assert cache.get_or_load("c", lambda: 3) == 3
    assert cache.get("c") is None
    assert cache.get("a") == 1
    m = cache.metrics()
    assert (m.entries, m.total.admission_rejections, m.total.evictions) == (1, 2, 0)


def test_admission_is_a_bool() -> None:
    Cache(admission=False)
    bad: Any = 1
    with pytest.raises(ConfigTypeError, match="`admission` must be a bool, got int"):
        Cache(admission=bad)
