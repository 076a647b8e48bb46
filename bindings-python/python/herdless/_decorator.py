"""``@cache.cached(...)``: keys from the canonical key builder, for sync and async functions.

The automatic key of a call is ``{namespace}:v{version}:{module}.{qualname}?{param}={value}&...``
with every parameter of the function (bound as ``inspect.Signature.bind`` would, defaults
applied, so ``f(1)`` and ``f(1, lang="en")`` share a key when ``lang`` defaults to ``"en"``).
Values must be str, int, float, bool, None, or a set/frozenset of those; anything else (an
object, a list, whose order would be lost) raises ``UnsupportedKeyValue``: name it in
``ignore=`` (e.g. ``self``) or pass ``key=``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Collection, Coroutine, Iterable
from typing import Any, ParamSpec, Protocol, TypeVar, overload

from . import _native

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class AsyncCachedFunction(Protocol[P, R_co]):
    """An async function wrapped by ``@cache.cached(...)`` (a real ``async def``)."""

    __name__: str
    __qualname__: str

    @property
    def __wrapped__(self) -> Callable[P, Coroutine[Any, Any, R_co]]:
        """The wrapped function."""
        ...

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R_co]: ...

    def key(self, *args: P.args, **kwargs: P.kwargs) -> str:
        """The cache key of a call with these arguments."""
        ...

    def invalidate(self, *args: P.args, **kwargs: P.kwargs) -> bool:
        """Invalidates the cached result of a call with these arguments (blocks for Redis,
        when there is one: from a coroutine, await ``ainvalidate``)."""
        ...

    async def ainvalidate(self, *args: P.args, **kwargs: P.kwargs) -> bool:
        """``invalidate`` for asyncio: Redis is awaited on the event loop."""
        ...

    def __get__(self, instance: object, owner: type | None = None, /) -> Any:
        """Binds as a method, like the function it wraps."""
        ...


class Decorator(Protocol):
    """What ``cache.cached(...)`` returns: it wraps a sync or an async function."""

    # An async function also matches the second signature; the first one wins.
    @overload
    def __call__(  # type: ignore[overload-overlap]
        self, func: Callable[P, Coroutine[Any, Any, R]], /
    ) -> AsyncCachedFunction[P, R]: ...
    @overload
    def __call__(self, func: Callable[P, R], /) -> _native.CachedFunction[P, R]: ...


def make_keyer(
    func: Callable[..., Any], namespace: str, version: int, ignore: Collection[str]
) -> _native.Keyer:
    """The native keyer of ``func``'s calls."""
    sig = inspect.signature(func)
    params: list[tuple[str, int, bool, Any, bool]] = []
    var_keyword = False
    for p in sig.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            raise TypeError(
                f"@cached cannot key {func.__qualname__}(*{p.name}) automatically "
                "(positional varargs have no names): pass key="
            )
        if p.kind is p.VAR_KEYWORD:
            var_keyword = True
            continue
        has_default = p.default is not p.empty
        params.append(
            (p.name, int(p.kind), has_default, p.default if has_default else None, p.name in ignore)
        )
    unknown = set(ignore) - {name for name, *_ in params}
    if unknown:
        raise TypeError(f"@cached(ignore=...) names no parameter of {func.__qualname__}: {sorted(unknown)}")
    entity = f"{func.__module__}.{func.__qualname__}"
    return _native.Keyer(namespace, version, entity, params, var_keyword)


Tags = Iterable[str] | Callable[..., Iterable[str]]
"""``@cached(tags=...)``: the tags of every result, or a function of the call's arguments."""


def _with_tags(result: Any, tags: Tags, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``result`` as an answer carrying ``tags`` (a ``Loaded`` keeps its own tags)."""
    chosen = tags(*args, **kwargs) if callable(tags) else tags
    if isinstance(result, _native.Loaded):
        return result._or_tags(chosen)
    return _native.Loaded(result, tags=chosen)


def tagging(func: Callable[..., Any], tags: Tags) -> Callable[..., Any]:
    """``func``, its results answered with their tags: the loader a sync ``@cached``
    calls. Only loads run it; a hit never does."""

    @functools.wraps(func)
    def load(*args: Any, **kwargs: Any) -> Any:
        return _with_tags(func(*args, **kwargs), tags, args, kwargs)

    return load


def wrap_async(
    cache: _native.Cache,
    func: Callable[P, Coroutine[Any, Any, R]],
    keyer: Callable[..., str],
    ttl: float | None,
    tags: Tags | None = None,
    tti: float | None = None,
) -> AsyncCachedFunction[P, R]:
    """The async twin of the native ``CachedFunction``: a real ``async def``, so that
    frameworks inspecting it see a coroutine function."""

    def key(*args: P.args, **kwargs: P.kwargs) -> str:
        k = keyer(*args, **kwargs)
        if not isinstance(k, str):
            raise TypeError("the `key` function of @cached must return a str")
        return k

    def invalidate(*args: P.args, **kwargs: P.kwargs) -> bool:
        return bool(cache.invalidate(key(*args, **kwargs)))

    async def ainvalidate(*args: P.args, **kwargs: P.kwargs) -> bool:
        return bool(await cache.ainvalidate(key(*args, **kwargs)))

    native = isinstance(keyer, _native.Keyer)  # returns a str by construction

    @functools.wraps(func)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        k = keyer(*args, **kwargs) if native else key(*args, **kwargs)
        # The hit path: one lookup, no loader made.
        step = cache._lookup(k, ttl, tti)
        if type(step) is _native._Done:
            return step.value  # type: ignore[no-any-return]
        if tags is None:
            load: Callable[[], Coroutine[Any, Any, Any]] = functools.partial(func, *args, **kwargs)
        else:
            chosen = tags

            async def load() -> Any:
                return _with_tags(await func(*args, **kwargs), chosen, args, kwargs)

        return await step.run(load)  # type: ignore[no-any-return]

    wrapper.key = key  # type: ignore[attr-defined]
    wrapper.invalidate = invalidate  # type: ignore[attr-defined]
    wrapper.ainvalidate = ainvalidate  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]
