"""``herdless.contrib.dogpile``: dogpile.cache's own backend fixtures (they ship in its
wheel: ``dogpile.testing.fixtures``) against the ``"herdless"`` backend, in memory and over a
private Redis; and a herd of two real processes' threads on one cold key over Redis, whose
creator runs once (``dogpile_worker.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

import pytest
from dogpile.testing.fixtures import (
    _GenericBackendTestSuite,
    _GenericMutexTestSuite,
    _GenericSerializerTestSuite,
)

import herdless.contrib.dogpile  # noqa: F401  (registers the backend name "herdless")
from herdless import FleetLock
from herdless.contrib.dogpile import HerdlessBackend
from redis_support import RedisServer, Resp

HERE = Path(__file__).resolve().parent


class _OverRedis:
    """Runs a fixture class over a private redis-server of its own (skipped loudly without
    redis-server, failed under CI=true)."""

    server: RedisServer
    config_args: dict[str, Any]

    @classmethod
    def setup_class(cls) -> None:
        cls.server = RedisServer()
        cls.config_args = {"arguments": {"url": cls.server.url, "namespace": cls.__name__}}
        super().setup_class()  # type: ignore[misc]

    @classmethod
    def teardown_class(cls) -> None:
        cls.server.stop()


class TestMemoryBackend(_GenericBackendTestSuite):
    backend = "herdless"
    config_args = {"arguments": {"namespace": "dogpile-mem"}}


class TestMemoryMutex(_GenericMutexTestSuite):
    backend = "herdless"
    config_args = {"arguments": {"namespace": "dogpile-mem-mutex"}}


class TestMemorySerializer(_GenericSerializerTestSuite, _GenericBackendTestSuite):
    backend = "herdless"
    config_args = {"arguments": {"namespace": "dogpile-mem-ser"}}


class TestRedisBackend(_OverRedis, _GenericBackendTestSuite):
    backend = "herdless"


class TestRedisMutex(_OverRedis, _GenericMutexTestSuite):
    backend = "herdless"


class TestRedisSerializer(_OverRedis, _GenericSerializerTestSuite, _GenericBackendTestSuite):
    backend = "herdless"


def test_mutex_is_the_fleet_lock_across_backends_of_one_redis() -> None:
    """Two backends over one Redis (two caches, as two processes would have): one's mutex
    excludes the other's, and its release frees it for the other."""
    server = RedisServer()
    try:
        a = HerdlessBackend({"url": server.url, "options": {"redis_prefix": "a1"}})
        b = HerdlessBackend({"url": server.url, "options": {"redis_prefix": "a1", "lease": 4}})
        assert a.cache is not b.cache
        held = a.get_mutex("k")
        assert held is not None and held.acquire()
        other = b.get_mutex("k")
        assert other is not None
        assert other.locked() and not other.acquire(False)
        assert not cast(FleetLock, other).acquire(True, 0.2)
        held.release()
        assert other.acquire(False)
        assert not held.acquire(False)
        other.release()
        assert HerdlessBackend({"url": server.url, "distributed_lock": False}).get_mutex("k") is None
    finally:
        server.stop()


def test_arguments_are_checked() -> None:
    HerdlessBackend({"colour": "red"})  # ignored, as dogpile's own backends do
    with pytest.raises(TypeError, match="herdless.Cache"):
        HerdlessBackend({"cache": object()})
    long_key = "x" * 5000
    backend = HerdlessBackend({"namespace": "long"})
    backend.set_serialized(long_key, b"v")
    assert backend.get_serialized(long_key) == b"v"


def test_two_processes_regenerate_a_cold_key_once() -> None:
    """Two worker processes, 16 threads each, over one Redis, all asking a region for one
    cold key at the same moment: the creator (slow, counted in Redis) runs once, and every
    caller gets its value."""
    server = RedisServer()
    try:
        start_at = time.time() + 3
        workers = [
            subprocess.Popen(
                [sys.executable, str(HERE / "dogpile_worker.py"), server.url, str(start_at), "16"],
                cwd=HERE,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        outputs = [w.communicate(timeout=90)[0] for w in workers]
        assert all(w.returncode == 0 for w in workers), outputs
        answers = [line for out in outputs for line in out.splitlines() if line.startswith("value=")]
        assert len(answers) == 32, outputs
        assert len(set(answers)) == 1, answers
        with Resp(server.port) as r:
            calls = int(r.command("GET", "creator-calls"))
        print(f"dogpile herd: 2 processes x 16 threads, creator calls = {calls}")
        assert calls == 1
    finally:
        server.stop()
