"""A ``dogpile.cache`` backend whose mutex is herdless's fleet lock: a region's
``get_or_create`` regenerates a cold key once for every process sharing Redis.

    from dogpile.cache import make_region
    import herdless.contrib.dogpile  # registers the backend name "herdless"

    region = make_region().configure(
        "herdless",
        expiration_time=300,                      # dogpile's own freshness, as ever
        arguments={"url": "redis://127.0.0.1:6379/0"},   # no url: this process only
    )

    @region.cache_on_arguments()
    def product(id: int) -> dict: ...

dogpile decides who regenerates with the backend's mutex (``get_mutex(key)``): the first
caller takes it and runs the creator, the others wait for it and then read the new value.
With most backends that mutex is a ``threading.Lock`` of one process, so every process of a
fleet regenerates a cold key once. Here it is ``Cache.lock(key)``, the lock herdless's own
loads take (PROTOCOL.md, "Locks held outside a load"): one process of the fleet regenerates,
leased and extended while it does, freed within one lease if that process dies.

Arguments (``arguments={...}``):

- ``cache``: a ``herdless.Cache`` to store into. Its codec must carry bytes across Redis
  (``Cache(redis=..., codec="bytes")``); dogpile serializes values itself (``pickle`` by
  default, or the region's ``serializer``). Or let the backend make one:
- ``url``: the Redis tier (``redis://``, ``redis+cluster://``, ``memory://name``); none:
  in this process only (values and locks shared by this process's backends of the same
  arguments).
- ``expiration_time``: how long herdless keeps an entry, in seconds (default: 50 years,
  dogpile expires values itself; a shorter one bounds memory, and a value gone from
  herdless makes callers wait for the creator instead of being served the old value).
- ``lock_timeout``: how long a mutex waits for its holder (default: no limit; a dead
  holder's lock runs out within one lease).
- ``distributed_lock`` (True): False gives dogpile no mutex (it then uses a lock of its
  own per process).
- ``namespace`` ("dogpile"): the herdless namespace of the keys (``"{namespace}:{key}"``,
  a key longer than the engine's ``max_key_len`` is ``"{namespace}:#sha256:{digest}"``);
  ``bump(namespace)`` invalidates every value of the backend at once.
- ``options``: any other ``herdless.Cache`` keyword for the cache it makes (``lease``,
  ``capacity``, ``redis_prefix``...).

Writes: ``set`` is ``Cache.set`` (for the whole fleet: other processes drop their copies);
``delete`` is ``Cache.invalidate``. A set of a key breaks a lock held on it (as it breaks a
load's); dogpile writes while it holds the lock, so the lock's release then answers False.
Failures are the engine's: a read of an unreachable Redis is a miss, a write or a lock
raises ``herdless.BackendError``.

dogpile's own backend fixtures (``dogpile.testing.fixtures``) run against this backend, in
memory and over Redis (``tests/test_dogpile.py``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from dogpile.cache import register_backend
from dogpile.cache.api import NO_VALUE, BytesBackend, CacheMutex, SerializedReturnType

from .._cache import Cache
from .._native import FleetLock
from ._engines import shared_engine

__all__ = ["FOREVER", "HerdlessBackend"]

FOREVER = 50 * 365 * 86_400.0
"""How long an entry is kept unless ``expiration_time`` says otherwise, in seconds."""

def _engine(url: str | None, ttl: float, options: Mapping[str, Any]) -> Cache:
    """One cache per configuration, shared by every backend of it in this process."""
    return shared_engine(url, {"ttl": ttl, "jitter": 0, "beta": 0, "copy_values": False}, options)


class HerdlessBackend(BytesBackend):
    """The ``"herdless"`` dogpile backend (see the module docs for its arguments)."""

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        args = dict(arguments)
        ttl = args.pop("expiration_time", None)
        ttl = FOREVER if ttl is None else float(ttl)
        cache = args.pop("cache", None)
        url = args.pop("url", None)
        options = dict(args.pop("options", None) or {})
        self.namespace: str = args.pop("namespace", "dogpile")
        """The herdless namespace of this backend's keys."""
        self.lock_timeout: float | None = args.pop("lock_timeout", None)
        """How long a mutex waits for its holder (None: no limit)."""
        self.distributed_lock: bool = bool(args.pop("distributed_lock", True))
        """Whether ``get_mutex`` gives the fleet lock (else dogpile's own)."""
        # Other arguments are ignored, as dogpile's own backends ignore them (its fixtures
        # pass some: the arguments dictionary is shared with the region's configuration).
        if cache is not None:
            if url is not None or options:
                raise TypeError("give either `cache` or `url`/`options`, not both")
            if not isinstance(cache, Cache):
                raise TypeError(f"`cache` must be a herdless.Cache, got {type(cache).__name__}")
            self.ttl: float | None = None if "expiration_time" not in arguments else ttl
            """The lifetime of stored entries (None: the cache's own ttl)."""
            self.cache: Cache = cache
            """The herdless cache values are stored in."""
        else:
            self.ttl = ttl
            self.cache = _engine(url, ttl, options)

    def _key(self, key: str) -> str:
        full = f"{self.namespace}:{key}"
        if len(full.encode()) <= self.cache.max_key_len:
            return full
        digest = hashlib.sha256(str(key).encode()).hexdigest()
        return f"{self.namespace}:#sha256:{digest}"

    def get_serialized(self, key: str) -> SerializedReturnType:
        """The bytes stored under ``key``, or ``NO_VALUE``."""
        value = self.cache.get(self._key(key))
        return NO_VALUE if value is None else cast(bytes, value)

    def get_serialized_multi(self, keys: Iterable[str]) -> Sequence[SerializedReturnType]:
        """``get_serialized`` of each key, in order."""
        return [self.get_serialized(k) for k in keys]

    def set_serialized(self, key: str, value: bytes) -> None:
        """Stores ``value`` for the whole fleet (other processes drop their copies)."""
        self.cache.set(self._key(key), value, ttl=self.ttl)

    def set_serialized_multi(self, mapping: Mapping[str, bytes]) -> None:
        """``set_serialized`` of each item."""
        for k, v in mapping.items():
            self.set_serialized(k, v)

    def delete(self, key: str) -> None:
        """Removes ``key`` (in the whole fleet)."""
        self.cache.invalidate(self._key(key))

    def delete_multi(self, keys: Iterable[str]) -> None:
        """``delete`` of each key."""
        for k in keys:
            self.delete(k)

    def get_mutex(self, key: str) -> CacheMutex | None:
        """The fleet lock of ``key`` (``Cache.lock``): dogpile's ``acquire(wait)``,
        ``release()`` and ``locked()`` are its own. None with ``distributed_lock=False``."""
        if not self.distributed_lock:
            return None
        lock: FleetLock = self.cache.lock(self._key(key), timeout=self.lock_timeout)
        return cast(CacheMutex, lock)  # CacheMutex is a protocol (its __subclasshook__)


register_backend("herdless", "herdless.contrib.dogpile", "HerdlessBackend")  # type: ignore[no-untyped-call]
