"""cachelib's own backend test classes (its sdist's ``tests/``: ``CommonTests``, ``HasTests``,
``ClearTests``, ``DeleteManyWithPrefixTests``, ``SerializerTests``) against
``herdless.contrib.cachelib.HerdlessCache``, as cachelib runs them against its RedisCache:
with cachelib's pickle serializer and with a custom one, with and without a key prefix.
``test_cachelib_suite.py`` copies this file beside cachelib's test modules and runs it with
pytest in a process of its own (in memory, then with ``HERDLESS_CACHELIB_URL`` set to a
private Redis)."""

from __future__ import annotations

import itertools
import os
from typing import Any

import pytest
from clear import ClearTests  # type: ignore[import-not-found]
from common import CommonTests  # type: ignore[import-not-found]
from delete_many_with_prefix import DeleteManyWithPrefixTests  # type: ignore[import-not-found]
from has import HasTests  # type: ignore[import-not-found]
from serializer import SerializerTests  # type: ignore[import-not-found]

from cachelib.serializers import BaseSerializer
from herdless.contrib.cachelib import HerdlessCache

URL = os.environ.get("HERDLESS_CACHELIB_URL") or None
_namespaces = itertools.count()


class SillySerializer(BaseSerializer):
    """cachelib's own test serializer (tests/test_redis_cache.py)."""

    def dumps(self, value: Any, protocol: int = 0) -> bytes:
        return repr(value).encode()

    def loads(self, bvalue: bytes) -> Any:
        return eval(bvalue.decode())


class CustomCache(HerdlessCache):
    serializer = SillySerializer()


@pytest.fixture(autouse=True, params=[HerdlessCache, CustomCache])
def cache_factory(request: Any, key_prefix: str | None) -> None:
    # A namespace per cache made: cachelib's RedisCache factory flushes the database instead.
    def _factory(self: Any, *args: Any, **kwargs: Any) -> HerdlessCache:
        kwargs.setdefault("key_prefix", key_prefix)
        namespace = f"suite{next(_namespaces)}"
        cache: HerdlessCache = request.param(*args, url=URL, namespace=namespace, **kwargs)
        return cache

    request.cls.cache_factory = _factory


class TestHerdlessCache(CommonTests, HasTests, ClearTests, DeleteManyWithPrefixTests, SerializerTests):  # type: ignore[misc]
    pass
