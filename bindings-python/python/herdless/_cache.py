"""``herdless.Cache``: the native cache plus the parts best written in Python (the async
methods' coroutines, the decorator, pre-warming, metrics as dataclasses)."""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, Protocol, TypeVar, cast, overload, runtime_checkable

from . import _decorator, _native
from ._native import LoadContext, warm_workers
from ._detector import Alert, HotKey, alert_from_native, hot_key_from_native
from ._metrics import Metrics, from_native
from .errors import ConfigError, ConfigTypeError

__all__ = ["Cache", "Codec", "Peek", "WarmReport"]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


@runtime_checkable
class Codec(Protocol):
    """A value codec for the Redis tier (``Cache(redis=..., codec=...)``)."""

    def encode(self, value: Any, /) -> bytes:
        """The bytes of ``value``."""
        ...

    def decode(self, data: bytes, /) -> Any:
        """The value of ``data`` (raise to treat the bytes as unreadable: a miss)."""
        ...


@dataclass(frozen=True, slots=True)
class WarmReport:
    """What ``Cache.warm`` / ``Cache.awarm`` did (or have done so far, when handed to the
    ``progress`` callback)."""

    requested: int
    """Keys asked for."""
    loaded: int
    """Keys the loader answered with a value."""
    absent: int = 0
    """Keys the loader answered ``ABSENT`` for (cached as absences)."""
    skipped: int = 0
    """Keys already fresh, or loaded by another caller meanwhile (no loader call)."""
    failed: dict[str, BaseException] = field(default_factory=dict)
    """Keys whose load failed, with the exception."""

    @property
    def done(self) -> int:
        """Keys dealt with so far."""
        return self.loaded + self.absent + self.skipped + len(self.failed)


@dataclass(frozen=True, slots=True)
class Peek:
    """An entry as ``Cache.peek`` saw it, without touching it."""

    value: Any
    """The value; ``ABSENT`` for a cached absence (the loader answered ``ABSENT``)."""
    state: Literal["fresh", "stale", "fail_safe"]
    """``fresh`` (within its TTL), ``stale`` (past it, within grace: served while one
    refresh runs) or ``fail_safe`` (past grace, kept only to answer when a load fails)."""
    age: float
    """Seconds since the entry was stored (loaded, set, or read from the Redis tier)."""
    fresh_until: float
    """When it stops being fresh, in seconds on the cache's clock (monotonic, like
    ``Alert.since``): its jittered TTL after it was stored."""
    stale_until: float
    """When it stops being served stale: ``fresh_until + grace`` (``fresh_until`` without
    grace, and for an absence), on the cache's clock."""
    load_duration: float
    """Seconds the key's last load took (what XFetch refreshes early by); kept when a ``set``
    replaces the value, 0 if the key was never loaded."""
    tags: tuple[str, ...] = ()
    """The entry's tags (``set(..., tags=...)``, ``ctx.set_tags``, ``@cached(tags=...)``)."""


class _Tally:
    """The running report of one warm-up (its keys may end on several threads)."""

    def __init__(self, requested: int, progress: Callable[[WarmReport], object] | None) -> None:
        self._lock = threading.Lock()
        self._progress = progress
        self.requested = requested
        self.loaded = self.absent = self.skipped = 0
        self.failed: dict[str, BaseException] = {}

    def report(self) -> WarmReport:
        return WarmReport(
            requested=self.requested,
            loaded=self.loaded,
            absent=self.absent,
            skipped=self.skipped,
            failed=dict(self.failed),
        )

    def record(self, key: str, called: bool, result: object, exc: BaseException | None) -> None:
        with self._lock:
            if exc is not None:
                self.failed[key] = exc
            elif not called:
                self.skipped += 1
            elif result is _native.ABSENT:
                self.absent += 1
            else:
                self.loaded += 1
            report = self.report() if self._progress is not None else None
        if self._progress is not None and report is not None:
            self._progress(report)


def _check_loader(loader: Any) -> None:
    # Raised once, rather than reported as the same failure for every key.
    if not callable(loader):
        raise TypeError(f"`loader` must be a callable of the key, got {type(loader).__qualname__}")


class Cache(_native.Cache):
    """A stampede-proof cache of Python objects, in memory (or over Redis with ``redis=``).

    Keyword options (all optional; durations in seconds, int or float):

    - ``ttl`` (60): how long a loaded value is fresh, before jitter.
    - ``tti`` (off): time-to-idle: an entry nobody reads for this long is dropped even
      within its ``ttl`` (neither served stale nor kept for fail-safe). In memory it lives
      ``tti`` to ``tti * 17/16`` past its last read; over Redis the shared entry stays while
      any process reads it (each tells Redis once per quarter of the ``tti``). Per call:
      ``get_or_load(..., tti=...)``, ``aget_or_load(..., tti=...)``, ``set(..., tti=...)``;
      per loader answer: ``Loaded(value, tti=...)`` or ``ctx.set_tti(...)`` (which win).
    - ``grace`` (0): how long past ``ttl`` a value is still served, stale, while one
      background refresh runs (stale-while-revalidate).
    - ``jitter`` (0.2): every stored TTL becomes ``ttl * (1 + jitter * (u - 0.5))``; in [0, 1).
    - ``beta`` (1.0): XFetch early refresh (0 disables; larger refreshes earlier).
    - ``negative_ttl`` (10): how long a cached absence (``ABSENT``) lasts.
    - ``wait_timeout`` (5): how long a caller waits for another caller's load before it takes
      stale data or raises ``WaitTimeout``; also bounds the wait for the origin budget.
    - ``max_stale`` (off): fail-safe: keep values this long past ``ttl`` and serve them when a
      load fails or times out. Must be at least ``grace``.
    - ``failsafe_backoff`` (5): after a failed load, serve the stale value this long before
      trying again.
    - ``soft_timeout`` (off): waiters holding a fail-safe value take it after this long.
    - ``hard_timeout`` (off): the load is given up with ``LoadTimeout`` (an async loader is
      cancelled; a sync one cannot be interrupted, its late result is discarded). Counted
      from the loader's start: a load that first waited for ``origin_budget`` gets it whole.
    - ``capacity`` (10,000): entries held (values and absences), SIEVE eviction.
    - ``admission`` (False): ``True`` puts a TinyLFU admission filter in front of SIEVE,
      for loops and scans (a loop over 1.2x the capacity: 0% of hits without it, 80-82%
      with it; BENCHMARKS.md, goal 6): a full cache keeps a new key only if it was stored
      (or found read by the eviction hand) more often than the entry it would evict. A
      refused value still answers its caller and its waiters, and a refused ``set`` returns
      as usual, but neither is kept;
      ``admission_rejections`` counts them. Adapts more slowly when the popular keys move.
    - ``origin_budget`` (unlimited): at most this many loader calls at once, all keys together.
    - ``max_flights`` (100,000): at most this many keys loading at once.
    - ``max_batch`` (1,000): at most this many keys per loader call of
      ``get_or_load_many``; a batch with more misses makes several calls.
    - ``max_key_len`` (1,024): longest accepted key, in bytes.
    - ``max_namespaces`` (4,096): namespaces tracked for epochs and metrics; past it, the
      least recently used one is retired (its entries become misses, counted in
      ``retired_namespaces``). A bump always invalidates exactly its own namespace.
    - ``namespace``: default namespace of the keys the decorator builds.
    - ``redis``: a ``redis://`` URL (or ``unix://``) adds the Redis tier:
      processes sharing it (Python, Rust, Node) make one loader call per key between them;
      memory stays the first tier. A Redis Cluster is a list of node URLs or
      ``"redis+cluster://host:port,host:port"``; ``"memory://name"`` is a fleet inside this
      process (tests: ``herdless.testing.MemoryStore(name)`` injects faults);
      ``"memcached://host:port"`` (comma-separated servers) puts the fleet on memcached
      instead: one loader call per key too, but no copy is kept in this process's memory
      (memcached tells nobody of changes, so every read asks it) and entry tags are refused
      (PROTOCOL.md section 9). In memory only otherwise. A cache created before ``os.fork()`` connects again in the child by itself.
      When Redis fails: loads are served in this process (not shared), ``get`` misses,
      and ``set``/``invalidate``/``bump`` raise ``BackendError`` (after dropping this
      process's copy); each failure is counted in ``backend_errors``.
    - ``memcached``: ``"host:port"`` (servers separated by commas) or a list of them: the
      memcached tier, the same as ``redis="memcached://host:port"`` (above); not with
      ``redis``.
    - ``redis_prefix`` ("hl"): prefix of every Redis key; fleets that must not share data
      use different prefixes.
    - ``codec`` ("json"): how values cross Redis: ``"json"`` (readable by every language;
      ``Decimal``, ``datetime``, ``date`` and ``UUID`` round-trip as
      ``{"$type": ..., "$value": ...}`` objects), ``"bytes"`` (values are bytes), or an
      object with ``encode(value) -> bytes`` and ``decode(bytes) -> value``. Never pickle
      by default: bytes read from Redis must not be able to run code. A value the codec
      cannot encode is served in its process only (logged once per namespace).
    - ``lease`` (5): the fleet lock's lease, extended while the loader runs; a crashed
      leader blocks its key for at most this long.
    - ``detector_tick`` (1): width of one window tick of the stampede detector
      (``alerts()``); its steady state is the median of the last 64 ticks.
    - ``detector`` (on): ``False`` switches the stampede detector off (``alerts()`` is then
      always empty); a ``DetectorOptions`` sets its thresholds.
    - ``refresh_ahead`` (off): once an entry has lived this share of its ttl (in (0, 1),
      e.g. 0.8), the next read refreshes it in the background, once: a fixed schedule
      beside XFetch's random early refresh.
    - ``on_event``: ``fn(kind, key, error)`` told of evictions (``"evict"``), expiries
      without a refresh (``"expire"``), failed loads (``"load_error"``, with the error's
      text) and fail-safe activations (``"failsafe"``); called off the engine's locks, never
      on the hit path; a queue of 1,024 events that the engine never waits on (events
      past it are dropped and counted in ``events_dropped``).

    - ``copy_values`` (True): values are isolated from their callers, as Django's
      LocMemCache does: a mutable value is pickled when it is stored and each caller (of
      ``get``, ``get_or_load`` (the loading caller, its waiters and later readers), the
      batch, the decorator, ``warm``, ``peek``) gets a new object, so mutating a value after
      ``set``, or a value read back, never changes what anyone else reads. A value that
      cannot be pickled raises the pickler's error (``pickle.PicklingError``,
      ``TypeError``...). Immutable values (``None``, ``bool``, ``int``, ``float``,
      ``complex``, ``str``, ``bytes``, and tuples and frozensets of those, 4 levels deep)
      are shared, uncopied. ``False`` shares every object as it is (faster for large
      values; only when nobody mutates a value after storing or reading it).

    A bad value raises ``ConfigError`` (a ``ValueError``); a wrong type ``ConfigTypeError``
    (also a ``TypeError``).

    ``close()`` (or the end of a ``with`` / ``async with`` block) releases the Redis tier's
    connections and thread at once and drops the entries; every later call raises
    ``CacheClosed`` (README, "Lifecycle").
    """

    __slots__ = ()

    async def __aenter__(self) -> Cache:
        """``async with Cache(...) as cache:`` closes the cache when the block ends."""
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Closes the cache (``close()``, which never blocks)."""
        self.close()

    async def aget_or_load(
        self,
        key: str,
        loader: Callable[[], Awaitable[T]] | Callable[[LoadContext], Awaitable[T]],
        *,
        ttl: float | None = None,
        tti: float | None = None,
    ) -> T:
        """The value of ``key``, awaiting ``loader()`` when it must be loaded; concurrent
        callers of one key (tasks of any event loop, threads) share one call.

        ``loader`` is an async callable (a coroutine function or a lambda returning a
        coroutine); it may return ``ABSENT``. Its exception reaches every waiter. Cancelling
        the task that runs it cancels the loader and hands the load to a waiter.

        A loader that takes one positional parameter (``async def load(ctx)``) is handed a
        ``LoadContext``: the key, the reason, the previous value (``ctx.previous.value``,
        ``.age``, ``.meta``), ``ctx.set_ttl(seconds)`` and friends, ``ctx.meta = etag``; it
        may ``return ctx.not_modified()`` or a ``Loaded(value, ttl=..., meta=...)``.
        """
        step = self._lookup(key, ttl, tti, loader)
        if type(step) is _native._Done:
            return step.value  # type: ignore[no-any-return]  # the hit path: no extra coroutine
        return await step  # type: ignore[no-any-return]

    def get_or_load_many(
        self, keys: Iterable[str], loader: Callable[[list[str]], Mapping[str, T]]
    ) -> list[T]:
        """The values of ``keys``, in their order (duplicates allowed), loading the keys
        nobody has with ONE call of ``loader(missing_keys)``; each key stays single-flight
        with every other caller (``get_or_load`` callers, other batches, other processes
        over Redis): a key someone else is loading is waited for, not loaded twice.

        ``loader`` gets the list of keys it must load and answers a mapping (a ``dict``) of
        key to value; ``ABSENT`` or a key left out of the mapping is an absence (cached for
        ``negative_ttl``, answered as ``ABSENT``); a ``Loaded(value, ttl=..., tags=...,
        meta=..., no_cache=...)`` gives that key its own lifetime, tags and metadata, as a
        single load's answer does. Over ``max_batch`` misses, it is called
        once per ``max_batch`` keys. If it raises, every key it was asked for fails with
        that exception (nothing is cached). Stale keys are served and refreshed together in
        the background; one loader call takes one unit of ``origin_budget``.

        When every key is answered, returns the list of values. When some keys failed,
        raises ``BatchError`` with ``errors`` (key -> exception) and ``values`` (every
        answer, the exception in place of a failed key's value).
        """
        if isinstance(keys, str):
            raise TypeError("`keys` is a list of keys, not one key: use get_or_load for one")
        return super().get_or_load_many(list(keys), loader)

    async def aget_or_load_many(
        self,
        keys: Iterable[str],
        loader: Callable[[list[str]], Awaitable[Mapping[str, T]] | Mapping[str, T]],
    ) -> list[T]:
        """``get_or_load_many`` for asyncio, driven on this event loop like
        ``aget_or_load`` (no thread, no executor): ``loader`` may be async (its coroutine runs
        as a task of this loop) or sync. Each key's timeouts, the origin budget and
        ``max_batch`` apply as for ``get_or_load_many``; a loader call past its keys'
        ``hard_timeout`` is cancelled. Cancelling the awaiting task cancels its loader call
        (the loader sees ``CancelledError``) and hands its keys to their other callers.
        """
        if isinstance(keys, str):
            raise TypeError("`keys` is a list of keys, not one key: use aget_or_load for one")
        return await self._aget_or_load_many(list(keys), loader)

    @overload
    def cached(
        self,
        func: None = None,
        /,
        *,
        ttl: float | None = None,
        tti: float | None = None,
        key: Callable[..., str] | None = None,
        namespace: str | None = None,
        version: int = 1,
        ignore: Collection[str] = (),
        tags: Iterable[str] | Callable[..., Iterable[str]] | None = None,
    ) -> _decorator.Decorator: ...
    @overload
    def cached(self, func: F, /) -> Any: ...
    def cached(
        self,
        func: Callable[..., Any] | None = None,
        /,
        *,
        ttl: float | None = None,
        tti: float | None = None,
        key: Callable[..., str] | None = None,
        namespace: str | None = None,
        version: int = 1,
        ignore: Collection[str] = (),
        tags: Iterable[str] | Callable[..., Iterable[str]] | None = None,
    ) -> Any:
        """Caches a sync or async function's results, one key per distinct call.

        - ``ttl``: seconds the results stay fresh (default: the cache's ``ttl``).
        - ``tti``: seconds a result nobody asks for is kept (time-to-idle; default: the
          cache's ``tti``); a function that returns ``Loaded(..., tti=...)`` keeps its own.
        - ``key``: a function of the call's arguments returning the key (a str, e.g. from
          ``KeyBuilder``); by default the key is built from the arguments (see below).
        - ``namespace``: the key's namespace (default: the cache's ``namespace``, else the
          function's module); ``cache.bump(namespace)`` invalidates all of its keys.
        - ``version``: the key's schema version; bump it when the result's shape changes.
        - ``ignore``: parameter names left out of the key (e.g. ``("self",)``, a client).
        - ``tags``: the tags of each result (``cache.invalidate_tag(tag)`` drops it): a list
          of str, or a function of the call's arguments (the function's own, ``self``
          included) returning them, e.g. ``tags=lambda product_id: [f"product:{product_id}"]``.
          Called only when a result is loaded; a function that returns ``Loaded(...,
          tags=...)`` keeps its own tags.

        The default key is ``{namespace}:v{version}:{module}.{qualname}?{param}={value}&...``
        with every parameter (defaults applied). Argument values must be str, int, float,
        bool, None or a (frozen)set of those; anything else raises ``UnsupportedKeyValue``.
        A function may return ``ABSENT`` to cache "not found" for ``negative_ttl``; callers
        get ``ABSENT`` back either way. The wrapper has ``.key(*args, **kwargs)`` and
        ``.invalidate(*args, **kwargs)``.
        """
        self._check_open()
        if isinstance(version, bool) or not isinstance(version, int):
            raise ConfigTypeError(f"`version` must be an int, got {type(version).__qualname__}")
        if not 0 <= version < 2**32:
            raise ConfigError(f"`version` must be in [0, 2**32), got {version}")
        if isinstance(ignore, str):
            raise ConfigTypeError("`ignore` must be a collection of parameter names, not a str")
        if key is not None and not callable(key):
            raise ConfigTypeError("`key` must be a callable returning the key (a str)")
        if ttl is not None:
            _native.check_seconds("ttl", ttl)
        if tti is not None:
            _native.check_seconds("tti", tti)
        if namespace is not None:
            _native.check_namespace("namespace", namespace)
        if isinstance(tags, str):
            raise ConfigTypeError("`tags` is a list of tags (or a function returning one), not one tag")
        if tags is not None and not callable(tags):
            tags = tuple(tags)

        def decorate(fn: Callable[..., Any]) -> Any:
            if not callable(fn):
                raise TypeError(f"@cached decorates a function, got {type(fn).__qualname__}")
            keyer: Callable[..., str]
            if key is not None:
                keyer = key
            else:
                ns = namespace or self.namespace or fn.__module__
                keyer = _decorator.make_keyer(fn, ns, version, frozenset(ignore))
            if _is_async(fn):
                return _decorator.wrap_async(self, fn, keyer, ttl, tags, tti)
            load = fn if tags is None else _decorator.tagging(fn, tags)
            wrapper = _native.CachedFunction(self, load, keyer, ttl, tti)
            functools.update_wrapper(wrapper, fn)
            return wrapper

        return decorate if func is None else decorate(func)

    def warm(
        self,
        keys: Iterable[str],
        loader: Callable[[str], Any],
        *,
        concurrency: int | None = None,
        ttl: float | None = None,
        progress: Callable[[WarmReport], object] | None = None,
    ) -> WarmReport:
        """Loads ``keys`` that are not fresh yet with ``loader(key)``, at most ``concurrency``
        at once (default: the engine's, 4; never more than the origin budget), e.g. before traffic arrives after a
        restart (``cache.warm(cache.import_hot_keys(saved), load)``). Failures are reported,
        not raised; ``progress(report_so_far)`` is called after each key."""
        self._check_open()
        _check_loader(loader)
        keys = list(keys)
        workers = self._warm_concurrency(concurrency, len(keys))
        tally = _Tally(len(keys), progress)

        def one(k: str) -> None:
            called = False

            def load() -> Any:
                nonlocal called
                called = True
                return loader(k)

            try:
                result = self.get_or_load(k, load, ttl=ttl)
            except Exception as exc:
                tally.record(k, called, None, exc)
            else:
                tally.record(k, called, result, None)

        if keys:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="herdless-warm") as pool:
                list(pool.map(one, keys))
        return tally.report()

    async def awarm(
        self,
        keys: Iterable[str],
        loader: Callable[[str], Awaitable[Any]],
        *,
        concurrency: int | None = None,
        ttl: float | None = None,
        progress: Callable[[WarmReport], object] | None = None,
    ) -> WarmReport:
        """``warm`` for an async ``loader(key)``, as tasks of the running event loop."""
        self._check_open()
        _check_loader(loader)
        keys = list(keys)
        limit = asyncio.Semaphore(self._warm_concurrency(concurrency, len(keys)))
        tally = _Tally(len(keys), progress)

        async def one(k: str) -> None:
            called = False

            async def load() -> Any:
                nonlocal called
                called = True
                return await loader(k)

            async with limit:
                try:
                    result = await self.aget_or_load(k, load, ttl=ttl)
                except Exception as exc:
                    tally.record(k, called, None, exc)
                else:
                    tally.record(k, called, result, None)

        await asyncio.gather(*(one(k) for k in keys))
        return tally.report()

    def _warm_concurrency(self, concurrency: int | None, n: int) -> int:
        if concurrency is not None:
            if isinstance(concurrency, bool) or not isinstance(concurrency, int):
                raise ConfigTypeError(
                    f"`concurrency` must be an int, got {type(concurrency).__qualname__}"
                )
            if concurrency < 1:
                raise ConfigError(f"`concurrency` must be at least 1, got {concurrency}")
        return warm_workers(concurrency, self.origin_budget, n)

    def peek(self, key: str) -> Peek | None:
        """``key``'s entry in this process's memory as it is, without side effects: nothing
        is counted, sampled, refreshed or loaded, and the Redis tier is not asked. ``None``
        when there is none (a miss, an expired entry, a bumped namespace); a cached absence is
        a ``Peek`` whose ``value`` is ``ABSENT``."""
        seen = self._peek(key)
        if seen is None:
            return None
        value, state, age, fresh_until, stale_until, load_duration, tags = seen
        return Peek(
            value,
            cast(Literal["fresh", "stale", "fail_safe"], state),
            age,
            fresh_until,
            stale_until,
            load_duration,
            tuple(tags),
        )

    def lock(self, key: str, *, timeout: float | None = None) -> _native.FleetLock:
        """A lock on ``key`` (not taken yet: ``acquire()`` it, or use it in a ``with``
        block). With Redis it is the fleet's, the very lock a load of ``key`` takes:
        processes sharing Redis exclude each other, a load of ``key`` anywhere waits for it,
        and a holder that dies frees it within one ``lease`` (extended in the background
        while held). Without Redis it excludes this cache's callers. ``timeout``: how long
        ``acquire()`` and ``with`` wait by default (``None``: no limit). See ``FleetLock``."""
        return _native.FleetLock(self, key, timeout=timeout)

    def metrics(self) -> Metrics:
        """Counters, histograms and sizes at this moment, per namespace."""
        return from_native(self._metrics())

    def alerts(self) -> list[Alert]:
        """The stampede detector's findings, oldest first: what (``kind``, ``cause``), where
        (``namespace``, ``key``), since when, the evidence and the likely ``cures``. Alerts
        stay listed for 10 minutes after their condition last held (``active`` says whether
        it holds now)."""
        return [alert_from_native(a) for a in self._alerts()]

    def hot_keys(self, n: int = 100) -> list[HotKey]:
        """The ``n`` most accessed keys, most first (counts are sampled estimates)."""
        return [hot_key_from_native(k) for k in self._hot_keys(n)]

    def import_hot_keys(self, json: str) -> list[str]:
        """Reads what ``export_hot_keys`` wrote (e.g. by the previous instance) into this
        cache's tracker and returns the keys, hottest first, ready for ``warm``. Raises
        ``HotKeysFormatError`` on anything else."""
        return [k for k, _count, _misses in self._import_hot_keys(json)]


# `get` made a C method of this very class: CPython calls it directly, without pyo3's
# method machinery (bindings-python/src/hit.rs).
_native._install_get(Cache)


def _is_async(fn: Callable[..., Any]) -> bool:
    """A coroutine function, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(type(fn), "__call__", None)
    )
