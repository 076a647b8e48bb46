"""A ``cachelib`` cache (the interface Flask-Caching and Flask's session extensions use) over
herdless: ``HerdlessCache(url="redis://...")`` shares its entries, and its locks, with every
process on that Redis.

    from herdless.contrib.cachelib import HerdlessCache

    cache = HerdlessCache(url="redis://127.0.0.1:6379/0", default_timeout=300)
    cache.set("greeting", {"text": "hi"})
    page = cache.get_or_load("page:home", render_home)   # one render for the whole fleet

cachelib's interface, as its own backends behave:

- ``get``, ``set``, ``add``, ``delete``, ``get_many``, ``set_many``, ``delete_many``,
  ``get_dict``, ``has``, ``clear``, ``inc``, ``dec``. Timeouts are seconds (an int or a
  ``timedelta``); ``None`` is ``default_timeout``; 0 never expires (50 years).
- Values cross the tier through ``self.serializer`` (cachelib's: ``pickle``; assign another,
  e.g. ``cachelib.serializers.JSONSerializer()``). As with cachelib's own Redis backend,
  whoever can write to that Redis can run code in the processes that unpickle it.
- ``add`` is one ``get_or_load``: of concurrent ``add`` calls of a missing key, in every
  process, exactly one stores its value and returns True.
- ``inc``/``dec`` run under the key's fleet lock (``Cache.lock``): atomic among the
  ``inc``/``dec`` calls of every process (a plain ``set`` meanwhile is not excluded).
- ``clear()`` bumps the namespace (O(1), fleet-wide with Redis).
- Beyond cachelib: ``get_or_load(key, loader, timeout=None)``, herdless's single flight
  (concurrent callers of a cold key, in every process sharing Redis, make one ``loader()``
  call); ``lock(key)``, the fleet lock.

Keys are ``"{namespace}:{key_prefix}{key}"`` (``namespace`` default ``"cachelib"``); one longer
than the engine's ``max_key_len`` is ``"{namespace}:#sha256:{digest}"``. Failures are the
engine's: a read of an unreachable Redis is a miss, a write raises ``herdless.BackendError``.
cachelib's own backend tests (its sdist's ``tests/``) run against this class
(``tests/test_cachelib_suite.py``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable, Mapping
from typing import Any

from cachelib import BaseCache
from cachelib.serializers import BaseSerializer

from .._cache import Cache
from .._native import FleetLock
from ._engines import shared_engine

__all__ = ["FOREVER", "HerdlessCache"]

FOREVER = 50 * 365 * 86_400
"""The ttl of ``timeout=0`` ("never expires"), in seconds."""

def _engine(url: str | None, options: Mapping[str, Any]) -> Cache:
    """One cache per configuration, shared by every ``HerdlessCache`` of it in this process."""
    return shared_engine(url, {"jitter": 0, "copy_values": False}, options)


class HerdlessCache(BaseCache):
    """cachelib's ``BaseCache`` over a ``herdless.Cache`` (see the module docs).

    ``url``: the Redis tier (``redis://``, ``redis+cluster://``, ``memory://name``); none: this
    process only. ``cache``: a ``herdless.Cache`` to use instead (its codec must carry bytes
    across Redis: ``codec="bytes"``). ``namespace`` ("cachelib"), ``key_prefix`` (a str or a
    callable answering one), ``options`` (``herdless.Cache`` keywords for the cache it makes).
    """

    serializer = BaseSerializer()
    """How values become bytes (cachelib's pickle; assign another on the instance)."""

    def __init__(
        self,
        default_timeout: int | dt.timedelta = 300,
        ignore_delete_many_errors: bool = True,
        *,
        url: str | None = None,
        cache: Cache | None = None,
        namespace: str = "cachelib",
        key_prefix: str | Callable[[], str] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(default_timeout, ignore_delete_many_errors)
        if cache is not None:
            if url is not None or options:
                raise TypeError("give either `cache` or `url`/`options`, not both")
            if not isinstance(cache, Cache):
                raise TypeError(f"`cache` must be a herdless.Cache, got {type(cache).__name__}")
            self.cache: Cache = cache
            """The herdless cache entries are stored in."""
        else:
            self.cache = _engine(url, dict(options or {}))
        self.namespace = namespace
        """The herdless namespace of the keys."""
        self.key_prefix = key_prefix or ""
        """Prepended to every key (a str, or a callable answering one)."""

    def _key(self, key: str) -> str:
        prefix = self.key_prefix() if callable(self.key_prefix) else self.key_prefix
        full = f"{self.namespace}:{prefix}{key}"
        if len(full.encode()) <= self.cache.max_key_len:
            return full
        digest = hashlib.sha256(f"{prefix}{key}".encode()).hexdigest()
        return f"{self.namespace}:#sha256:{digest}"

    def _ttl(self, timeout: int | dt.timedelta | None) -> float:
        seconds = self._normalize_timeout(timeout)
        return float(FOREVER if seconds <= 0 else seconds)

    def _dumps(self, value: Any) -> bytes:
        data = self.serializer.dumps(value)
        if not isinstance(data, bytes):
            raise TypeError(f"the serializer could not dump a {type(value).__name__}")
        return data

    def _loads(self, data: Any) -> Any:
        return None if data is None else self.serializer.loads(data)

    def get(self, key: str) -> Any:
        """The value of ``key``, or None."""
        return self._loads(self.cache.get(self._key(key)))

    def set(self, key: str, value: Any, timeout: int | dt.timedelta | None = None) -> bool:
        """Stores ``value`` (for the whole fleet); True."""
        self.cache.set(self._key(key), self._dumps(value), ttl=self._ttl(timeout))
        return True

    def add(self, key: str, value: Any, timeout: int | dt.timedelta | None = None) -> bool:
        """Stores ``value`` only if ``key`` has none; True if this call stored it."""
        data = self._dumps(value)
        stored: list[bool] = []

        def load() -> bytes:
            stored.append(True)
            return data

        self.cache.get_or_load(self._key(key), load, ttl=self._ttl(timeout))
        return bool(stored)

    def delete(self, key: str) -> bool:
        """Removes ``key`` (in the whole fleet); True if it was there."""
        return bool(self.cache.invalidate(self._key(key)))

    def delete_many(self, *keys: str) -> list[Any]:
        """Removes each key; the keys deleted (a missing key counts as deleted). A failure
        raises ``RuntimeError`` unless ``ignore_delete_many_errors``."""
        done = []
        for key in keys:
            try:
                self.delete(key)
            except Exception as e:
                if not self.ignore_delete_many_errors:
                    raise RuntimeError(f"could not delete {key!r}: {e}") from e
                continue
            done.append(key)
        return done

    def get_many(self, *keys: str) -> list[Any]:
        """The value (or None) of each key, in order."""
        return [self.get(k) for k in keys]

    def set_many(
        self, mapping: Mapping[str, Any], timeout: int | dt.timedelta | None = None
    ) -> list[Any]:
        """``set`` of each item; the keys stored."""
        for k, v in mapping.items():
            self.set(k, v, timeout)
        return list(mapping)

    def has(self, key: str) -> bool:
        """Whether ``key`` has a value."""
        return self.cache.get(self._key(key)) is not None

    def clear(self) -> bool:
        """Drops every entry of the namespace (O(1); with Redis, in the whole fleet); True."""
        self.cache.bump(self.namespace)
        return True

    def inc(self, key: str, delta: int = 1) -> int | None:
        """Adds ``delta`` to the number under ``key`` (missing: 0), under the key's fleet lock;
        the new value."""
        with self.cache.lock(self._key(key)):
            value = int(self.get(key) or 0) + delta
            self.set(key, value)
        return value

    def dec(self, key: str, delta: int = 1) -> int | None:
        """``inc(key, -delta)``."""
        return self.inc(key, -delta)

    def get_or_load(
        self, key: str, loader: Callable[[], Any], timeout: int | dt.timedelta | None = None
    ) -> Any:
        """The value of ``key``, calling ``loader()`` when it must be loaded: concurrent
        callers (threads, and processes sharing Redis) make one call. The loader's value is
        stored through ``serializer``; None is stored and served as None."""

        def load() -> bytes:
            return self._dumps(loader())

        return self._loads(self.cache.get_or_load(self._key(key), load, ttl=self._ttl(timeout)))

    def lock(self, key: str, *, timeout: float | None = None) -> FleetLock:
        """The fleet lock of ``key`` (``herdless.Cache.lock``)."""
        return self.cache.lock(self._key(key), timeout=timeout)
