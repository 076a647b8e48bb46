"""A Django cache backend: ``django.core.cache`` with single-flight and stale-while-revalidate.

    CACHES = {
        "default": {
            "BACKEND": "herdless.contrib.django.HerdlessCache",
            "LOCATION": "",                   # in memory (a name: a store of its own, as
                                              # LocMemCache's); "redis://host:6379/0": a fleet
            "TIMEOUT": 300,                   # the most an entry lives
            "KEY_PREFIX": "shop",             # the herdless namespace of this alias
            "OPTIONS": {"grace": 60},         # any herdless.Cache keyword
        }
    }

``cache.get_or_set(key, loader, timeout)`` is ``Cache.get_or_load``: concurrent callers of a
cold key (threads, processes with ``redis://``) make one ``loader()`` call, and with
``grace`` a value past its timeout is served at once while one refresh runs.
``await cache.aget_or_set(key, async_loader)`` awaits an async loader the same way.

How Django's API maps onto the engine:

- Keys are Django's own (``make_key``: ``KEY_FUNCTION``, ``":{version}:{key}"`` by
  default), so key warnings name them as every Django backend does, inside one herdless
  namespace per alias, ``KEY_PREFIX or 'django'``: its metrics are the alias's and
  ``clear()`` is ``bump(namespace)``, O(1), fleet-wide with Redis. The engine's key is
  ``"{namespace}:{django key}"``; one longer than the engine's ``max_key_len`` (1,024 bytes
  unless ``OPTIONS`` says otherwise) is ``"{namespace}:#sha256:{hex digest of the Django
  key}"``, so a long key warns (memcached's 250) and works, as with Django's other backends.
- Values are copied, as every Django backend does: in memory (``copy_values``: pickled as by
  LocMemCache, plain dicts and lists copied node by node; a response mutated after the cache
  middleware stored it, or a value mutated after ``get``, never changes what another request
  reads) and across Redis, pickled: ``OPTIONS["codec"]``, default ``"pickle"`` (Django's
  ``PickleSerializer``: ``pickle.dumps(value, pickle.HIGHEST_PROTOCOL)``), or any
  ``herdless.Cache`` codec, e.g. ``"json"`` to share values with Node and Rust processes. An unpicklable value raises the pickler's error
  (``pickle.PickleError``...) from ``set``/``add``. As with django-redis and Django's own
  Redis backend, whoever can write to that Redis can run code in the processes reading it.
- ``timeout``: a number of seconds is the longest the entry lives: its ttl is spread by
  ``jitter`` (0.2 unless ``OPTIONS`` says otherwise) below the timeout, never past it
  (``timeout / (1 + jitter / 2)`` before the spread, so entries written together expire
  over the last ``jitter`` share of it); ``None`` never expires (50 years), 0 or less
  expires at once (the key is removed).
- ``get``, ``set``, ``add``, ``delete``, ``get_many``, ``set_many``, ``delete_many``,
  ``has_key``, ``get_or_set``, ``clear``, ``incr_version`` and their ``a``-twins behave as
  Django documents. ``add`` is one ``get_or_load``: of concurrent ``add`` calls of a missing
  key exactly one stores its value and returns True.
- ``incr``/``decr`` and ``touch`` are a read then a write, as in Django's ``BaseCache``: not
  atomic. The engine has no atomic read-modify-write, and a counter would not be cached
  data anyway; keep counters in the database or in Redis itself.
- ``MAX_ENTRIES`` is herdless's ``capacity`` of the memory tier (unset: the engine's
  10,000, where LocMemCache's default is 300): at most that many entries are held, and
  past it SIEVE evicts one entry per insert, one not read since the eviction hand last
  passed. The bound is split across the engine's lock shards, each full on its own, so a
  full cache holds up to ``MAX_ENTRIES``, fewer as its keys hash (49 inserts into 30: 25
  to 30 on a 2-CPU machine, 30 in a third of 300 trials). ``CULL_FREQUENCY`` is not
  emulated, by choice: Django's LocMem/file/database backends drop a ``1/CULL_FREQUENCY``
  share of a full cache at once (0: all of it; 29 or 19 left after 49 inserts into 30).
  Those keys then miss together, the herd this backend exists to prevent, and an exact
  cull would need a count and a sweep across every lock shard on the engine's insert
  path. Django documents both options for those three backends only; its Redis and
  memcached backends ignore them. With ``redis://`` the Redis tier is not bounded by
  ``MAX_ENTRIES`` (as Django's own Redis backend, bound it with Redis's ``maxmemory``).
- ``clear()`` bumps the alias's namespace (``KEY_PREFIX or "django"``): aliases over one
  Redis database with the same ``KEY_PREFIX`` (none: ``"django"``) are cleared together,
  as Django's own Redis backend flushes the whole database.

Django makes one backend object per thread; every object of an alias shares one
``herdless.Cache`` (``.herdless``: register it with the Prometheus collector or
OpenTelemetry). Aliases that are engines of their own (another ``TIMEOUT`` or ``OPTIONS``)
over the same Redis, database and ``KEY_PREFIX`` see each other's ``set``, ``delete`` and
``clear()`` before the call returns (PROTOCOL.md section 4, "In one process"); other
processes, within one pub/sub delivery.

Django's own cache tests run against this backend (``tests/test_django_suite.py``); every
difference from LocMemCache is listed in the binding's README ("Django").
"""

from __future__ import annotations

import hashlib
import inspect
import pickle
import threading
from collections.abc import Callable
from typing import Any

from django.core.cache.backends.base import (  # type: ignore[import-untyped]
    DEFAULT_TIMEOUT,
    BaseCache,
)
from django.core.exceptions import ImproperlyConfigured  # type: ignore[import-untyped]

from .. import _native
from .._cache import Cache

__all__ = ["FOREVER", "HerdlessCache", "PickleCodec"]

FOREVER = 50 * 365 * 86_400.0
"""The ttl of ``timeout=None`` ("never expires"), in seconds."""

class PickleCodec:
    """Django's ``PickleSerializer`` as a ``herdless`` codec: the Redis tier's default here."""

    def __init__(self, protocol: int | None = None) -> None:
        self.protocol = pickle.HIGHEST_PROTOCOL if protocol is None else protocol

    def encode(self, value: Any, /) -> bytes:
        """``pickle.dumps(value, protocol)``."""
        return pickle.dumps(value, self.protocol)

    def decode(self, data: bytes, /) -> Any:
        """``pickle.loads(data)``."""
        return pickle.loads(data)


_PICKLE = PickleCodec()

_MISSING = object()
_EXPIRED = object()

# One engine per alias configuration, shared by the backend objects of every thread.
_engines: dict[tuple[str, ...], Cache] = {}
_engines_lock = threading.Lock()


def _engine(location: str, namespace: str, ttl: float, options: dict[str, Any]) -> Cache:
    ident = (location, namespace, repr(ttl), repr(sorted(options.items(), key=repr)))
    with _engines_lock:
        cache = _engines.get(ident)
        if cache is None:
            # A LOCATION that is no URL names a memory store, as LocMemCache's does.
            redis = location if "://" in location else None
            cache = Cache(ttl=ttl, redis=redis, **options)
            _engines[ident] = cache
        return cache


class HerdlessCache(BaseCache):  # type: ignore[misc]
    """``django.core.cache`` over a ``herdless.Cache`` (see the module docs)."""

    def __init__(self, location: str, params: dict[str, Any]) -> None:
        super().__init__(params)
        options = dict(params.get("OPTIONS") or {})
        if "MAX_ENTRIES" in options:
            options.setdefault("capacity", options.pop("MAX_ENTRIES"))
        options.pop("CULL_FREQUENCY", None)
        for name in ("ttl", "redis"):
            if name in options:
                where = "TIMEOUT" if name == "ttl" else "LOCATION"
                raise ImproperlyConfigured(f"HerdlessCache: set {where}, not OPTIONS[{name!r}]")
        self._namespace = _native.check_namespace("KEY_PREFIX", self.key_prefix or "django")
        ttl = FOREVER if self.default_timeout is None else float(self.default_timeout)
        if ttl <= 0:
            raise ImproperlyConfigured("HerdlessCache: TIMEOUT must be positive, or None")
        if options.get("codec", "pickle") == "pickle":
            options["codec"] = _PICKLE
        self._cache = _engine(location, self._namespace, ttl, options)
        self._max_key_len = self._cache.max_key_len
        # The engine spreads a ttl by up to jitter / 2 either way: Django's timeout is the most.
        self._shrink = 1.0 + self._cache.jitter / 2

    @property
    def herdless(self) -> Cache:
        """The ``herdless.Cache`` behind this alias (metrics, alerts, instrumentation)."""
        return self._cache

    def make_and_validate_key(self, key: Any, version: int | None = None) -> str:
        """The engine's key of Django's ``make_key(key, version)``, which is validated
        (Django's key warnings name it): see the module docs."""
        django_key = super().make_and_validate_key(key, version=version)
        k = f"{self._namespace}:{django_key}"
        # A Django key beginning with '#' is hashed too: no key can read as another's digest.
        long = len(k) * 4 > self._max_key_len and len(k.encode()) > self._max_key_len
        if long or django_key.startswith("#"):
            digest = hashlib.sha256(django_key.encode()).hexdigest()
            return f"{self._namespace}:#sha256:{digest}"
        return k

    def _ttl(self, timeout: Any) -> Any:
        """The engine's ttl of a Django timeout (the most it lives), or ``_EXPIRED``."""
        if timeout is DEFAULT_TIMEOUT:
            timeout = self.default_timeout
        if timeout is None:
            return FOREVER
        if timeout <= 0:
            return _EXPIRED
        return float(timeout) / self._shrink

    def get(self, key: Any, default: Any = None, version: int | None = None) -> Any:
        return self._cache.get(self.make_and_validate_key(key, version=version), default)

    def set(
        self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> None:
        k = self.make_and_validate_key(key, version=version)
        ttl = self._ttl(timeout)
        if ttl is _EXPIRED:
            self._cache.invalidate(k)
        else:
            self._cache.set(k, value, ttl=ttl)

    def add(
        self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> bool:
        k = self.make_and_validate_key(key, version=version)
        ttl = self._ttl(timeout)
        if self._cache.get(k, _MISSING) is not _MISSING:
            return False
        if ttl is _EXPIRED:
            return True  # stored and expired at once, as Django's own backends do
        # One get_or_load: of concurrent adds, only the leader's loader runs. A loader run on
        # another thread is a background refresh of a value that went stale meanwhile: the
        # key had expired, so storing the value is what add does, but this call did not.
        caller = threading.get_ident()
        added = False

        def load() -> Any:
            nonlocal added
            added = added or threading.get_ident() == caller
            return value

        self._cache.get_or_load(k, load, ttl=ttl)
        return added

    def get_or_set(
        self,
        key: Any,
        default: Any,
        timeout: Any = DEFAULT_TIMEOUT,
        version: int | None = None,
    ) -> Any:
        k = self.make_and_validate_key(key, version=version)
        ttl = self._ttl(timeout)
        load: Callable[[], Any] = default if callable(default) else (lambda: default)
        if ttl is _EXPIRED:
            value = self._cache.get(k, _MISSING)
            return load() if value is _MISSING else value
        return self._cache.get_or_load(k, load, ttl=ttl)

    async def aget_or_set(
        self,
        key: Any,
        default: Any,
        timeout: Any = DEFAULT_TIMEOUT,
        version: int | None = None,
    ) -> Any:
        k = self.make_and_validate_key(key, version=version)
        ttl = self._ttl(timeout)

        async def load() -> Any:
            value = default() if callable(default) else default
            return await value if inspect.isawaitable(value) else value

        if ttl is _EXPIRED:
            value = await self._cache.aget(k, _MISSING)
            return await load() if value is _MISSING else value
        return await self._cache.aget_or_load(k, load, ttl=ttl)

    # The async methods await the engine's native async calls (Redis is awaited on the
    # event loop: no thread of asgiref's executor is taken, and a stopped Redis never freezes
    # the loop). Django's other async methods (aget_many, ahas_key, aset_many,
    # adelete_many, aincr, adecr, aincr_version...) are written over these.

    async def aget(self, key: Any, default: Any = None, version: int | None = None) -> Any:
        return await self._cache.aget(self.make_and_validate_key(key, version=version), default)

    async def aset(
        self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> None:
        k = self.make_and_validate_key(key, version=version)
        ttl = self._ttl(timeout)
        if ttl is _EXPIRED:
            await self._cache.ainvalidate(k)
        else:
            await self._cache.aset(k, value, ttl=ttl)

    async def aadd(
        self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> bool:
        k = self.make_and_validate_key(key, version=version)
        ttl = self._ttl(timeout)
        if await self._cache.aget(k, _MISSING) is not _MISSING:
            return False
        if ttl is _EXPIRED:
            return True
        # As `add`: only the leader's loader runs. A loader runs in a task of its own, so
        # its reason tells this call's load ("first": nothing servable was cached) from a
        # background refresh of a value that went stale meanwhile.
        added = False

        async def load(ctx: _native.LoadContext) -> Any:
            nonlocal added
            added = added or ctx.reason == "first"
            return value

        await self._cache.aget_or_load(k, load, ttl=ttl)
        return added

    async def atouch(
        self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> bool:
        k = self.make_and_validate_key(key, version=version)
        value = await self._cache.aget(k, _MISSING)
        if value is _MISSING:
            return False
        ttl = self._ttl(timeout)
        if ttl is _EXPIRED:
            await self._cache.ainvalidate(k)
        else:
            await self._cache.aset(k, value, ttl=ttl)
        return True

    async def adelete(self, key: Any, version: int | None = None) -> bool:
        return await self._cache.ainvalidate(self.make_and_validate_key(key, version=version))

    async def aclear(self) -> None:
        await self._cache.abump(self._namespace)

    def touch(self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        k = self.make_and_validate_key(key, version=version)
        value = self._cache.get(k, _MISSING)
        if value is _MISSING:
            return False
        ttl = self._ttl(timeout)
        if ttl is _EXPIRED:
            self._cache.invalidate(k)
        else:
            self._cache.set(k, value, ttl=ttl)
        return True

    def delete(self, key: Any, version: int | None = None) -> bool:
        return self._cache.invalidate(self.make_and_validate_key(key, version=version))

    def clear(self) -> None:
        self._cache.bump(self._namespace)
