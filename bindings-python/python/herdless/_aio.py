"""The asyncio driver of the engine's state machine (``Cache.aget_or_load``).

``Cache._lookup`` answers one step at a time:

- a hit: return the value. If the engine chose this caller to refresh the key
  (stale-while-revalidate or XFetch), the loader runs in a background asyncio task on the
  running loop; the caller does not wait for it.
- a lead: with the Redis tier, ask the fleet first (``lead.fleet()``): another process's
  entry may answer, else this process loads for the fleet and publishes the entry (or alone,
  when Redis fails). Await the loader's coroutine here, then complete the load. The hard timeout
  cancels the coroutine; at the soft timeout, with a fail-safe value at hand, that value
  answers and the load finishes in the background. Cancellation of this task (or any other
  ``BaseException``) abandons the load, and one waiter takes it over.
- a wait: await the leader's answer (a native future resolved from a tokio thread, so any
  number of waiting tasks cost the event loop nothing until the answer lands), or look up
  again when the leader went away.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from . import _native

T = TypeVar("T")

HIT, _LEAD = 0, 1
_VALUE = 0
_ADOPTED = 0

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


async def aget_or_load(
    cache: _native.Cache,
    key: str,
    loader: Callable[[], Awaitable[T] | T],
    ttl: float | None,
    step: tuple[Any, ...] | None = None,
) -> T:
    """Drives `key` to an answer; `step` is a first lookup the caller already made."""
    retry: _native._Retry | None = None
    while True:
        if step is None:
            step = cache._lookup(key, ttl, retry)
        kind = step[0]
        if kind == HIT:
            if len(step) == 3:
                _spawn(_refresh(step[2], loader))
            return step[1]  # type: ignore[no-any-return]
        if kind == _LEAD:
            return await _lead(step[1], loader)  # type: ignore[no-any-return]
        outcome, value = await step[1].future()
        if outcome == _VALUE:
            return value  # type: ignore[no-any-return]
        # The leader went away without an answer: look up again (one caller will lead),
        # with the wait still counted from this caller's first arrival.
        retry = value
        step = None


async def _lead(lead: _native._Lead, loader: Callable[[], Any]) -> Any:
    try:
        if lead.shared:
            kind, value = await lead.fleet()
            if kind == _ADOPTED:
                return value
        if not lead.try_begin():
            began, value = await lead.begin()
            if not began:
                return value
        return await _run(lead, loader)
    except BaseException:
        # Cancelled, interrupted, or failed before the loader ran: hand the load over.
        # (A no-op when the load was already finished.)
        lead.abandon()
        raise


async def _run(lead: _native._Lead, loader: Callable[[], Any]) -> Any:
    try:
        result = loader()
        if inspect.isawaitable(result):
            result = await _in_time(lead, result)
    except _SoftTimeout as soft:
        return soft.stale
    except _HardTimeout:
        return lead.timeout()
    except Exception as exc:
        return lead.fail(exc)
    return await _complete(lead, result)


async def _complete(lead: _native._Lead, result: Any) -> Any:
    """Completes the load: published to the fleet when this process loads for it."""
    if lead.leased:
        return await lead.publish(result)
    return lead.complete(result)


async def _in_time(lead: _native._Lead, awaitable: Awaitable[Any]) -> Any:
    """Awaits the loader under the load's soft and hard timeouts."""
    hard = lead.hard_remaining()
    has_fallback, stale = lead.fallback
    soft = lead.soft_remaining() if has_fallback else None
    if soft is None and hard is None:
        return await awaitable
    task = asyncio.ensure_future(awaitable)
    handed_over = False
    try:
        if soft is not None:
            done, _ = await asyncio.wait((task,), timeout=max(soft, 0.0))
            if not done:
                # Answer with the fail-safe value now; the load goes on and is stored.
                _spawn(_finish(lead, task))
                handed_over = True
                raise _SoftTimeout(stale)
        hard = lead.hard_remaining()
        if hard is not None:
            done, _ = await asyncio.wait((task,), timeout=max(hard, 0.0))
            if not done:
                raise _HardTimeout
        return await task
    finally:
        if not handed_over and not task.done():
            task.cancel()


async def _finish(lead: _native._Lead, task: asyncio.Future[Any]) -> None:
    """Completes a load that outlived its soft timeout, within its hard timeout."""
    try:
        hard = lead.hard_remaining()
        done, _ = await asyncio.wait((task,), timeout=None if hard is None else max(hard, 0.0))
        if not done:
            task.cancel()
            lead.timeout()
            return
        await _complete(lead, task.result())
    except Exception as exc:
        _settle_failure(lead, exc)
    except BaseException:
        task.cancel()
        lead.abandon()
        raise


async def _refresh(lead: _native._Lead, loader: Callable[[], Any]) -> None:
    """A background refresh; its failure is logged and counted, never raised."""
    key = lead.key
    try:
        if lead.shared:
            kind, _ = await lead.fleet()
            if kind == _ADOPTED:
                return
        await _run(lead, loader)
    except Exception as exc:
        _log.warning("background refresh of %r failed", key, exc_info=exc)
    except BaseException:
        lead.abandon()
        raise


def _settle_failure(lead: _native._Lead, exc: Exception) -> None:
    key: str | None = None
    with contextlib.suppress(RuntimeError):  # already finished, e.g. by the timeout
        key = lead.key
    with contextlib.suppress(Exception):  # `fail` re-raises `exc` when no stale value answers
        lead.fail(exc)
    _log.warning("background load of %r failed", key, exc_info=exc)
