"""Stubs of the native module (hand-written; checked by ``python -m mypy.stubtest herdless``)."""

import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, Final, Generic, ParamSpec, Protocol, TypeVar, final, overload

from typing_extensions import Self, disjoint_base

from ._detector import DetectorOptions

_T = TypeVar("_T")
_P = ParamSpec("_P")
_R = TypeVar("_R")

class _Codec(Protocol):
    """A value codec for the Redis tier: ``encode(value) -> bytes``, ``decode(bytes) -> value``."""

    def encode(self, value: Any, /) -> bytes: ...
    def decode(self, data: bytes, /) -> Any: ...

__all__ = [
    "ABSENT",
    "BUCKETS",
    "COUNTERS",
    "Absent",
    "BoundCachedFunction",
    "Cache",
    "CachedFunction",
    "FleetLock",
    "KeyBuilder",
    "Keyer",
    "LoadContext",
    "Loaded",
    "MemoryStore",
    "_WakeCall",
    "_Call",
    "Previous",
    "_Bridge",
    "_Due",
    "_Done",
    "_Refresh",
    "check_namespace",
    "check_seconds",
    "http_canonical_query",
    "http_keeps",
    "http_request_key",
    "warm_workers",
    "_install_get",
]

@final
class Previous:
    """The entry a load may replace: its value, its age in seconds, its loader's metadata
    and its tags."""

    @property
    def value(self) -> Any: ...
    @property
    def age(self) -> float: ...
    @property
    def meta(self) -> str | None: ...
    @property
    def tags(self) -> list[str]:
        """Its tags (a "not modified" answer keeps them unless it sets its own)."""

@final
class Loaded:
    """A loader's answer with the entry's own lifetimes (seconds), metadata and tags."""

    def __new__(
        cls,
        value: object,
        *,
        ttl: float | None = None,
        grace: float | None = None,
        negative_ttl: float | None = None,
        tti: float | None = None,
        meta: str | None = None,
        tags: Iterable[str] | None = None,
        no_cache: bool = False,
    ) -> Self: ...
    @staticmethod
    def not_modified(
        *, ttl: float | None = None, meta: str | None = None, tags: Iterable[str] | None = None
    ) -> Loaded:
        """The previous value still holds: it is kept (with its tags, unless ``tags`` is
        given) and its lifetime restarts."""
    def _or_tags(self, tags: Iterable[str]) -> Loaded:
        """This answer with ``tags`` unless it sets its own (the decorator's ``tags=``)."""
    @property
    def is_not_modified(self) -> bool: ...

@final
class LoadContext:
    """What a loader that takes one parameter is told about its load."""

    @property
    def key(self) -> str: ...
    @property
    def reason(self) -> str:
        """"first", "refresh", "early_refresh", "refresh_ahead" or "warm"."""
    @property
    def previous(self) -> Previous | None: ...
    def set_ttl(self, seconds: float) -> None: ...
    def set_grace(self, seconds: float) -> None: ...
    def set_negative_ttl(self, seconds: float) -> None: ...
    def set_tti(self, seconds: float) -> None:
        """This entry's time-to-idle instead of the cache's: dropped once nobody has read it
        for this long, even within its ttl."""
    def set_tags(self, tags: Iterable[str]) -> None:
        """The entry's tags (replacing any set before): ``cache.invalidate_tag(tag)`` of
        one of them drops it. Checked by the engine when the loader returns."""
    @property
    def meta(self) -> str | None: ...
    @meta.setter
    def meta(self, meta: str | None) -> None: ...
    def no_cache(self) -> None: ...
    def not_modified(self) -> Loaded: ...
    def is_cancelled(self) -> bool: ...
    def wait_cancelled(self, timeout: float) -> bool: ...
    @property
    def cancelled(self) -> threading.Event: ...

def check_seconds(name: str, value: object) -> float:
    """Checks a positive duration option given in seconds."""

def check_namespace(name: str, value: object) -> str:
    """Checks a namespace option."""

def http_request_key(
    namespace: str | None,
    method: str,
    path: str,
    query: str,
    vary: list[tuple[str, str]] = ...,
) -> str:
    """The cache key of a request (``herdless_redis::http::request_key``): HEAD shares GET's
    entry, the query in canonical order (hashed past 256 bytes), ``vary`` as named parts.
    Raises ``InvalidKey`` for a key the engine refuses."""

def warm_workers(concurrency: int | None, origin_budget: int | None, keys: int) -> int:
    """How many keys a warm-up loads at once (the engine's rule): ``concurrency`` (None: the
    engine's default, 4), at least 1, never more than ``origin_budget`` nor than ``keys``."""

def _install_get(cls: type[Cache]) -> None:
    """Makes ``cls.get`` (``cls`` a subclass of ``Cache``: ``herdless.Cache``) a C method made
    for ``cls`` itself, which CPython calls directly; same arguments and answers."""

def http_canonical_query(query: str) -> str:
    """A query's pairs in canonical order (``herdless_redis::http::canonical_query``)."""

def http_keeps(
    status_kept: bool,
    headers: list[tuple[str, str]],
    vary: list[str],
    keep_private: bool = False,
) -> tuple[bool, float | None]:
    """Whether a response may answer other callers (``herdless_redis::http::keeps``):
    ``(False, None)`` if not (``Set-Cookie``, ``no-store`` / ``no-cache``, ``private`` unless
    ``keep_private``, a zero max-age, a status not kept, a ``Vary`` on a header not in
    ``vary``), ``(True, None)`` for the cache's ttl, ``(True, seconds)`` for its own
    ``s-maxage`` / ``max-age``."""

BUCKETS: Final[list[float]]
COUNTERS: Final[list[tuple[str, str]]]

@final
class Absent:
    """The type of ``ABSENT``: a loader returns it to say the thing does not exist."""

    def __bool__(self) -> bool: ...
    def __reduce__(self) -> str: ...

ABSENT: Final[Absent]

@disjoint_base
class Cache:
    def __new__(
        cls,
        *,
        ttl: float | None = None,
        tti: float | None = None,
        grace: float | None = None,
        jitter: float | None = None,
        beta: float | None = None,
        negative_ttl: float | None = None,
        wait_timeout: float | None = None,
        max_stale: float | None = None,
        failsafe_backoff: float | None = None,
        soft_timeout: float | None = None,
        hard_timeout: float | None = None,
        capacity: int | None = None,
        origin_budget: int | None = None,
        max_flights: int | None = None,
        max_batch: int | None = None,
        max_key_len: int | None = None,
        max_namespaces: int | None = None,
        namespace: str | None = None,
        redis: str | list[str] | tuple[str, ...] | None = None,
        redis_prefix: str | None = None,
        codec: str | _Codec | None = None,
        lease: float | None = None,
        detector_tick: float | None = None,
        detector: bool | DetectorOptions | None = None,
        refresh_ahead: float | None = None,
        on_event: Callable[[str, str, str | None], object] | None = None,
        copy_values: bool | None = None,
        admission: bool | None = None,
        memcached: str | list[str] | tuple[str, ...] | None = None,
    ) -> Self: ...
    @property
    def namespace(self) -> str | None:
        """The default namespace of keys made by the decorator, if one was given."""
    @property
    def jitter(self) -> float:
        """The ttl jitter fraction (``jitter``): a stored ttl is spread by up to half of it
        either way."""
    @property
    def max_key_len(self) -> int:
        """The longest accepted key, in bytes (``max_key_len``)."""
    @property
    def origin_budget(self) -> int | None:
        """The origin budget (most loader calls at once), if one was given."""
    @overload
    def get(self, key: str) -> Any: ...
    @overload
    def get(self, key: str, default: _T) -> Any | _T: ...
    def set(
        self,
        key: str,
        value: object,
        *,
        ttl: float | None = None,
        tti: float | None = None,
        tags: Iterable[str] | None = None,
    ) -> None: ...
    def invalidate(self, key: str) -> bool:
        """Removes ``key`` (with Redis: in the whole fleet); whether an entry was removed.
        Blocks the calling thread for Redis (up to the op timeout, 1 s, when it is down)."""
    def bump(self, namespace: str) -> int:
        """Invalidates every key of ``namespace`` in O(1); the new epoch."""
    def invalidate_tag(self, tag: str, *, soft: bool = False) -> None:
        """Drops every entry carrying ``tag`` in O(1) (hard); ``soft=True`` expires them
        (served stale within grace while one refresh runs)."""
    def invalidate_tags(self, tags: Iterable[str], *, soft: bool = False) -> None:
        """``invalidate_tag`` of each of ``tags`` at once (one round trip with Redis per 256
        tags); more than 10,000 distinct tags raise ``TooManyTags``, nothing invalidated."""
    @overload
    def aget(self, key: str) -> Awaitable[Any]:
        """``get`` for asyncio: reading Redis is awaited on the event loop (no thread, never
        blocking the loop); an answer from memory is ready at once."""
    @overload
    def aget(self, key: str, default: _T) -> Awaitable[Any | _T]: ...
    def aset(
        self,
        key: str,
        value: object,
        *,
        ttl: float | None = None,
        tti: float | None = None,
        tags: Iterable[str] | None = None,
    ) -> Awaitable[None]:
        """``set`` for asyncio: the write to Redis is awaited on the event loop. Arguments
        are checked (and a closed cache refused) when called, before the first await."""
    def ainvalidate(self, key: str) -> Awaitable[bool]:
        """``invalidate`` for asyncio: whether an entry was removed (Redis awaited on the
        loop)."""
    def abump(self, namespace: str) -> Awaitable[int]:
        """``bump`` for asyncio: the namespace's new epoch (Redis awaited on the loop)."""
    def ainvalidate_tag(self, tag: str, *, soft: bool = False) -> Awaitable[None]:
        """``invalidate_tag`` for asyncio (Redis awaited on the loop)."""
    def ainvalidate_tags(self, tags: Iterable[str], *, soft: bool = False) -> Awaitable[None]:
        """``invalidate_tags`` for asyncio (Redis awaited on the loop)."""
    def _aget_or_load_many(
        self,
        keys: Iterable[str],
        loader: Callable[[list[str]], Awaitable[Mapping[str, _T]] | Mapping[str, _T]],
    ) -> Awaitable[list[_T]]: ...
    def get_or_load(
        self,
        key: str,
        loader: Callable[[], _T] | Callable[[LoadContext], _T],
        *,
        ttl: float | None = None,
        tti: float | None = None,
    ) -> _T: ...
    def get_or_load_many(
        self, keys: Iterable[str], loader: Callable[[list[str]], Mapping[str, _T]]
    ) -> list[_T]: ...
    def prometheus(self) -> str: ...
    def close(self) -> None:
        """Closes the cache now: with Redis, its connections and thread are released at
        once; its entries are dropped. Later calls raise ``CacheClosed``. Idempotent."""
    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
        /,
    ) -> None: ...
    def _check_open(self) -> None: ...
    @property
    def _load_observer(self) -> Callable[[str, bool, Callable[[], Any]], Any] | None: ...
    def _set_load_observer(
        self, observer: Callable[[str, bool, Callable[[], Any]], Any] | None
    ) -> None: ...
    @overload
    def _lookup(
        self, key: str, ttl: float | None = None, tti: float | None = None, loader: None = None
    ) -> _Done | _Call: ...
    @overload
    def _lookup(
        self,
        key: str,
        ttl: float | None,
        tti: float | None,
        loader: Callable[..., Any],
    ) -> _Done | Awaitable[Any]: ...
    def _metrics(self) -> dict[str, Any]: ...
    def _peek(
        self, key: str
    ) -> tuple[Any, str, float, float, float, float, list[str]] | None: ...
    def _flights_in_progress(self) -> int: ...
    def _alerts(self) -> list[dict[str, Any]]: ...
    def _hot_keys(self, n: int) -> list[tuple[str, int, int]]: ...
    def export_hot_keys(self, n: int = 1000) -> str: ...
    def _import_hot_keys(self, json: str) -> list[tuple[str, int, int]]: ...

@final
class CachedFunction(Generic[_P, _R]):
    """A sync function wrapped by ``@cache.cached(...)``."""

    __wrapped__: Callable[_P, _R]
    def __new__(
        cls,
        cache: Cache,
        func: Callable[_P, _R],
        keyer: Callable[..., str],
        ttl: float | None = None,
        tti: float | None = None,
    ) -> Self: ...
    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R: ...
    def key(self, *args: _P.args, **kwargs: _P.kwargs) -> str:
        """The cache key of a call with these arguments."""
    def invalidate(self, *args: _P.args, **kwargs: _P.kwargs) -> bool:
        """Invalidates the cached result of a call with these arguments."""
    def ainvalidate(self, *args: _P.args, **kwargs: _P.kwargs) -> Awaitable[bool]:
        """``invalidate`` for asyncio (Redis awaited on the event loop)."""
    @overload
    def __get__(self, obj: None, owner: type | None = None, /) -> Self: ...
    @overload
    def __get__(
        self, obj: object, owner: type | None = None, /
    ) -> BoundCachedFunction[..., _R]: ...

@final
class BoundCachedFunction(Generic[_P, _R]):
    """A ``CachedFunction`` bound to an instance: ``obj.method``."""

    @property
    def __func__(self) -> CachedFunction[..., _R]:
        """The cached function."""
    @property
    def __self__(self) -> object:
        """The instance it is bound to."""
    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R: ...
    def key(self, *args: _P.args, **kwargs: _P.kwargs) -> str:
        """The cache key of a call with these arguments."""
    def invalidate(self, *args: _P.args, **kwargs: _P.kwargs) -> bool:
        """Invalidates the cached result of a call with these arguments."""
    def ainvalidate(self, *args: _P.args, **kwargs: _P.kwargs) -> Awaitable[bool]:
        """``invalidate`` for asyncio (Redis awaited on the event loop)."""

@final
class KeyBuilder:
    """Builds canonical keys: ``{namespace}:v{version}:{entity}[:{id}][?{name}={value}&...]``."""

    def __new__(cls, namespace: str) -> Self: ...
    def version(self, version: int) -> KeyBuilder: ...
    def entity(self, entity: str) -> KeyBuilder: ...
    def id(self, value: object) -> KeyBuilder: ...
    def param(self, name: str, value: object) -> KeyBuilder: ...
    def build(self) -> str: ...

@final
class Keyer:
    def __new__(
        cls,
        namespace: str,
        version: int,
        entity: str,
        params: list[tuple[str, int, bool, Any, bool]],
        var_keyword: bool,
    ) -> Self: ...
    def __call__(self, *args: Any, **kwargs: Any) -> str: ...

@final
class _Done:
    @property
    def value(self) -> Any: ...

@final
class _Call:
    def run(self, loader: Callable[..., Any]) -> Awaitable[Any]: ...

@final
class _Bridge:
    def __call__(self, future: object = None) -> None: ...

@final
class _Due:
    def __call__(self, *args: Any, **kwargs: Any) -> None: ...

@final
class FleetLock:
    """A lock on one key of a cache (``Cache.lock``). With Redis it is the fleet's: the very
    lock a load of the key takes, so it excludes every process sharing Redis, and a load of
    the key anywhere waits for it. Taken for one ``lease`` and extended in the background
    while held; a holder that dies frees it within one lease. Without Redis it excludes the
    callers of this cache. Not reentrant; any thread may release it (as ``threading.Lock``).
    A ``set``, ``invalidate`` or namespace ``bump`` of the key breaks it (``lost``)."""

    def __new__(cls, cache: Cache, key: str, *, timeout: float | None = None) -> Self: ...
    @property
    def key(self) -> str:
        """The key."""
    @property
    def lost(self) -> bool:
        """Whether the lock this object holds was found lost (ran out, or broken by a write
        of its key): another caller may hold it now."""
    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Takes the lock: at once or not at all with ``blocking=False``; else waits for its
        holder at most ``timeout`` seconds (default: the lock's own ``timeout``; ``None`` or
        -1: no limit). True once held. Raises ``BackendError`` when Redis cannot be reached
        (never answers True for a lock it could not take), ``CacheClosed`` once closed."""
    def release(self) -> bool:
        """Gives the lock back, waking its waiters in every process. True if it was still
        held; False if it had been lost meanwhile. RuntimeError if this object does not hold
        it; ``BackendError`` if Redis cannot be reached (it then runs out within one lease)."""
    def locked(self) -> bool:
        """Whether the lock is held, by this object or by anyone (asked of the tier: a free
        lock is taken and given back at once)."""
    def owned(self) -> bool:
        """Whether this object holds the lock (and did not find it lost)."""
    def __enter__(self) -> Self:
        """``acquire()``; raises ``LockTimeout`` if the lock's ``timeout`` passed first."""
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> None:
        """``release()``."""

@final
class MemoryStore:
    def __new__(cls, name: str) -> Self: ...
    def set_fault(self, fault: str | None, namespace: str | None = None) -> None: ...
    def restart_subscriptions(self) -> None: ...
    def restart(self) -> None: ...
    def plant(self, key: str, data: bytes) -> None: ...
    def delete_raw(self, key: str) -> None: ...
    def flush(self) -> None: ...
    def plant_epoch(self, namespace: str, text: str) -> None: ...
    def plant_lock(self, key: str, seconds: float) -> None: ...
    def plant_tag(self, tag: str, text: str | None = None, wrong_type: bool = False) -> None: ...
    def evict_tag(self, tag: str) -> None: ...

@final
class _Refresh:
    def __call__(self, *args: Any, **kwargs: Any) -> None: ...

@final
class _WakeCall:
    def __call__(self, task: object, /) -> None: ...
