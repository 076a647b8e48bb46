"""Values across the shared tier: what the default JSON codec round-trips (what web handlers
return from a database: Decimal, datetime, date, UUID), what an unshareable value does to
the fleet, and a custom codec interrupted by Ctrl-C. On the in-memory tier (``memory://``),
which runs the same fleet engine as Redis."""

from __future__ import annotations

import asyncio
import itertools
import logging
import uuid
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest

from herdless import Cache

_N = itertools.count()


def fleet(n: int = 2, **opts: Any) -> list[Cache]:
    name = f"codec-{next(_N)}"
    return [Cache(redis=f"memory://{name}", **opts) for _ in range(n)]


def test_web_values_round_trip_between_processes() -> None:
    a, b = fleet()
    row = {
        "price": Decimal("12.30"),
        "at": datetime(2026, 12, 1, 20, 52, 54, 123456, tzinfo=timezone(timedelta(hours=1))),
        "naive": datetime(2026, 1, 2, 3, 4, 5),
        "day": date(2026, 12, 1),
        "id": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "nested": [{"total": Decimal("-0.001")}],
        "plain": {"$type": "other", "$value": "kept as a dict"},
    }
    assert a.get_or_load("rows:1", lambda: row) == row
    got: dict[str, Any] = b.get_or_load("rows:1", lambda: pytest.fail("b must read a's entry"))
    assert got == row
    assert type(got["price"]) is Decimal and got["at"].tzinfo is not None
    tier = b.metrics().redis
    assert tier is not None and tier["unshareable_values"] == 0


def test_an_unshareable_value_is_served_here_and_warned_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    a, b = fleet(copy_values=False)  # a local class: not picklable, not copied

    class Row:
        pass

    with caplog.at_level(logging.WARNING, logger="herdless"):
        for i in range(5):
            v = a.get_or_load(f"odd:{i}", Row)
            assert isinstance(v, Row)
    warnings = [r for r in caplog.records if "cannot be encoded" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
    tier = a.metrics().redis
    assert tier is not None and tier["unshareable_values"] == 5
    # Another process loads for itself, at once (the lock was handed back with a mark).
    assert b.get_or_load("odd:0", lambda: "b's own") == "b's own"


def test_a_codec_interrupted_by_ctrl_c_re_raises_it() -> None:
    class Interrupting:
        def encode(self, value: Any) -> bytes:
            return b"x"

        def decode(self, data: bytes) -> Any:
            raise KeyboardInterrupt

    name = f"codec-{next(_N)}"
    a = Cache(redis=f"memory://{name}", codec=Interrupting())
    b = Cache(redis=f"memory://{name}", codec=Interrupting())
    a.set("k:1", "v")
    with pytest.raises(KeyboardInterrupt):
        b.get("k:1")
    with pytest.raises(KeyboardInterrupt):
        b.get_or_load("k:1", lambda: "loaded")
    # The interrupted load was handed over, not failed: the next call loads normally.
    assert b._flights_in_progress() == 0


def test_a_sync_loader_returning_an_awaitable_is_refused() -> None:
    cache = Cache()

    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(TypeError, match="awaitable"):
            cache.get_or_load("k:fut", loop.create_future)
    finally:
        loop.close()
    assert cache.get("k:fut") is None
