"""Coherence of a process that only reads (issue 28): a `Cache` on a Redis tier that has
only called `get` keeps what it read in its memory tier, and must hear of another
process's deletes, writes and bumps of it, as one that wrote does."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from redis_support import RedisServer

from herdless import Cache

_prefixes = itertools.count()


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    s = RedisServer()
    yield s
    s.stop()


def pair(server: RedisServer) -> tuple[Cache, Cache]:
    prefix = f"coh{os.getpid()}x{next(_prefixes)}"
    # A long TTL: a copy that misses a notice would be served for a minute.
    return (
        Cache(redis=server.url, redis_prefix=prefix, ttl=60, jitter=0, beta=0),
        Cache(redis=server.url, redis_prefix=prefix, ttl=60, jitter=0, beta=0),
    )


def within(predicate: Any, what: str, timeout: float = 5) -> None:
    """Polls `predicate` until it holds; fails at the deadline (a bound, not a speed)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_a_process_that_only_gets_hears_of_a_delete(server: RedisServer) -> None:
    a, b = pair(server)
    a.set("session:alice", "alice")
    assert b.get("session:alice") == "alice"  # b's only call: its copy comes from Redis
    assert b.metrics().entries == 1, "b keeps the copy it read"
    assert a.invalidate("session:alice") is True
    within(lambda: b.get("session:alice") is None, "b to drop the deleted session")


def test_a_process_that_only_gets_hears_of_a_write(server: RedisServer) -> None:
    a, b = pair(server)
    a.set("acct:1", "free")
    assert b.get("acct:1") == "free"
    a.set("acct:1", "pro")
    within(lambda: b.get("acct:1") == "pro", "b to see the new value")


def test_a_process_that_only_gets_hears_of_a_bump(server: RedisServer) -> None:
    a, b = pair(server)
    a.set("page:1", "old")
    assert b.get("page:1") == "old"
    a.bump("page")
    within(lambda: b.get("page:1") is None, "b to see the bump")


def test_caches_of_one_process_see_each_others_changes_at_once(server: RedisServer) -> None:
    # Two caches of one process over one Redis (two Django aliases, two Cache objects of one
    # program): a change through one reaches the other before the call returns, not one
    # pub/sub delivery later (before: a read right after was stale in about 1 of 5 rounds).
    a, b = pair(server)
    for i in range(200):
        a.set("cfg:flags", i)
        assert b.get("cfg:flags") == i, "a write, at once"
        a.invalidate("cfg:flags")
        assert b.get("cfg:flags") is None, "a delete, at once"
        a.set("cfg:flags", "w")
        assert b.get("cfg:flags") == "w"
        a.bump("cfg")
        assert b.get("cfg:flags") is None, "a bump, at once"
        a.set("page:1", "p", tags=["product:1"])
        assert b.get("page:1") == "p"
        a.invalidate_tag("product:1")
        assert b.get("page:1") is None, "a tag, at once"
