"""The asyncio driver of the fleet engine (``Cache.aget_or_load``, async decorated functions).

The engine decides; this driver only does what each step says, the asyncio way:

- ``_Done``: the answer.
- ``_Stale``: answer its value now; run its ``refresh`` step (if any) in a background task.
- ``_Wait``: await another caller's load (``_Done``), or look up again (``_Retry``: its
  leader went away; the wait keeps its deadline).
- ``_Tier``: await the shared tier (``await step.next()`` is the next step).
- ``_Load``: await the loader's coroutine, under the load's soft and hard timeouts, then
  ``loaded(value)`` / ``failed(exc)`` (the next step). The hard timeout cancels the
  coroutine; at the soft timeout, with a fail-safe value at hand, that value answers and
  the load finishes in the background. Cancellation of the task (or any other
  ``BaseException``) abandons the load: a waiter, here or in the fleet, takes it over.

Every wait is a native future polled on the event loop and woken by the engine, so any
number of waiting tasks cost the loop nothing until their answer lands.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from . import _native

T = TypeVar("T")

_log = logging.getLogger("herdless")

# Background tasks are referenced here until done: the loop keeps only weak references.
_BACKGROUND: set[asyncio.Task[Any]] = set()


def _spawn(coro: Coroutine[Any, Any, Any]) -> None:
    task = asyncio.get_running_loop().create_task(coro)
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)


class _SoftTimeout(Exception):
    def __init__(self, stale: Any) -> None:
        super().__init__()
        self.stale = stale


class _HardTimeout(Exception):
    pass


class _Answered:
    """The answer of a load whose caller took the fail-safe value at the soft timeout."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


async def aget_or_load(
    cache: _native.Cache,
    key: str,
    loader: Callable[[], Awaitable[T] | T] | Callable[[Any], Awaitable[Any]],
    ttl: float | None,
    step: Any = None,
) -> T:
    """Drives `key` to an answer; `step` is a first lookup the caller already made."""
    if step is None:
        step = cache._lookup(key, ttl)
    while True:
        if isinstance(step, _native._Wait):
            step = await step.future()
            if isinstance(step, _native._Retry):
                step = cache._lookup(key, ttl, step)
            continue
        observer = cache._load_observer
        run: _Loader = loader if observer is None else _Observed(observer, key, loader)
        return await _drive(step, run, key)  # type: ignore[no-any-return]


class _Observed:
    """A loader run through the cache's load observer (spans), which learns whether the
    load is a background refresh when it starts."""

    __slots__ = ("_call", "_key", "_observer")

    def __init__(self, observer: Callable[..., Any], key: str, call: Callable[..., Any]) -> None:
        self._observer, self._key, self._call = observer, key, call

    def start(self, background: bool) -> Any:
        return self._observer(self._key, background, self._call)


_Loader = Callable[..., Any] | _Observed


async def _drive(step: Any, loader: _Loader, key: str) -> Any:
    """Drives a step of this caller's load of `key` (or a hit) to its answer."""
    while True:
        if isinstance(step, (_native._Done, _Answered)):
            return step.value
        if isinstance(step, _native._Stale):
            if step.refresh is not None:
                _spawn(_background(step.refresh, loader, key))
            return step.value
        if isinstance(step, _native._Tier):
            # Cancelled here, the pending step is dropped: the load is handed over.
            step = await step.next()
        elif isinstance(step, _native._Load):
            step = await _run(step, loader, key)
        else:
            raise RuntimeError(f"herdless: unexpected step {step!r}")


def _with_context(load: _native._Load, loader: _Loader) -> tuple[_Loader, Any]:
    """`loader` ready to call: one that takes a context (``async def load(ctx)``) gets it
    bound, before any observer wraps it; the context is returned to read the answer."""
    call: Callable[..., Any] = loader._call if isinstance(loader, _Observed) else loader
    if call is _no_loader or not _native._takes_context(call):
        return loader, None
    ctx = load.context()
    bound: Callable[[], Any] = functools.partial(call, ctx)
    if isinstance(loader, _Observed):
        return _Observed(loader._observer, loader._key, bound), ctx
    return bound, ctx


async def _run(load: _native._Load, loader: _Loader, key: str) -> Any:
    """Runs the loader for `load`; the next step."""
    ctx = None
    try:
        loader, ctx = _with_context(load, loader)
        result = loader.start(load.background) if isinstance(loader, _Observed) else loader()
        if inspect.isawaitable(result):
            result = await _in_time(load, result, key, ctx)
    except _SoftTimeout as soft:  # raised by _in_time, which started _finish
        return _Answered(soft.stale)
    except _HardTimeout:
        return load.timed_out()
    except Exception as exc:
        return load.failed(exc)
    except BaseException:
        # Cancelled or interrupted: hand the load over.
        load.abandon()
        raise
    return load.loaded(result, ctx)


async def _in_time(
    load: _native._Load, awaitable: Awaitable[Any], key: str, ctx: Any = None
) -> Any:
    """Awaits the loader under the load's soft and hard timeouts."""
    hard = load.hard_remaining()
    has_fallback, _ = load.fallback
    soft = load.soft_remaining() if has_fallback and not load.background else None
    if soft is None and hard is None:
        return await awaitable
    task = asyncio.ensure_future(awaitable)
    handed_over = False
    try:
        if soft is not None:
            done, _ = await asyncio.wait((task,), timeout=max(soft, 0.0))
            if not done:
                # Answer with the fail-safe value now; the load goes on and is stored.
                stale = load.answer_stale()
                _spawn(_finish(load, task, key, ctx))
                handed_over = True
                raise _SoftTimeout(stale)
        hard = load.hard_remaining()
        if hard is not None:
            done, _ = await asyncio.wait((task,), timeout=max(hard, 0.0))
            if not done:
                raise _HardTimeout
        return await task
    finally:
        if not handed_over and not task.done():
            task.cancel()


async def _finish(
    load: _native._Load, task: asyncio.Future[Any], key: str, ctx: Any = None
) -> None:
    """Completes a load that outlived its soft timeout, within its hard timeout."""
    try:
        hard = load.hard_remaining()
        done, _ = await asyncio.wait((task,), timeout=None if hard is None else max(hard, 0.0))
        if not done:
            task.cancel()
            step = load.timed_out()
        else:
            step = load.loaded(task.result(), ctx)
        await _drive(step, _no_loader, key)
    except Exception as exc:
        with contextlib.suppress(Exception):  # already finished, or re-raising `exc`
            await _drive(load.failed(exc), _no_loader, key)
        _log.warning("background load of %r failed", key, exc_info=exc)
    except BaseException:
        task.cancel()
        load.abandon()
        raise


async def _background(step: Any, loader: _Loader, key: str) -> None:
    """A background refresh; its failure is logged and counted, never raised."""
    try:
        await _drive(step, loader, key)
    except Exception as exc:
        _log.warning("background refresh of %r failed", key, exc_info=exc)


def _no_loader() -> Any:
    raise RuntimeError("herdless: a finished load asked for its loader again")
