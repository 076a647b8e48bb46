"""The exceptions of herdless: one hierarchy under :class:`HerdlessError`.

Errors raised by *your loader* are not wrapped: every caller of a failed load (the one that
ran the loader and each one that waited for it) raises the very exception object the loader
raised, so ``except ValueError`` works exactly as without a cache.

The classes that also describe a builtin category inherit from that builtin too, so
``except ValueError`` / ``except TimeoutError`` keep working for code that does not know
herdless.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BackendError",
    "BatchError",
    "CacheClosed",
    "ConfigError",
    "ConfigTypeError",
    "EmptyKey",
    "EmptyTag",
    "HerdlessError",
    "InvalidKey",
    "InvalidTag",
    "KeyBuildError",
    "KeyTooLong",
    "LoadTimeout",
    "LockTimeout",
    "LoaderPanicked",
    "HotKeysFormatError",
    "MetaTooLong",
    "NoPrevious",
    "TagTooLong",
    "TooManyFlights",
    "TooManyTags",
    "UnsupportedKeyValue",
    "WaitTimeout",
]


class HerdlessError(Exception):
    """Base class of every exception raised by herdless itself."""


class ConfigError(HerdlessError, ValueError):
    """An option has a bad value (out of range, or contradicting another option)."""


class ConfigTypeError(ConfigError, TypeError):
    """An option has the wrong type (e.g. ``ttl="60"``)."""


class InvalidKey(HerdlessError, ValueError):
    """A key cannot be used or built."""


class EmptyKey(InvalidKey):
    """The key is the empty string."""


class KeyTooLong(InvalidKey):
    """The key is longer than ``max_key_len`` bytes (UTF-8)."""

    length: int
    """Length of the key, in bytes."""
    limit: int
    """The configured ``max_key_len``."""

    def __init__(self, message: str, *, length: int, limit: int) -> None:
        super().__init__(message)
        self.length = length
        self.limit = limit


class InvalidTag(HerdlessError, ValueError):
    """A tag cannot be used (``set(tags=...)``, ``ctx.set_tags``, ``invalidate_tag``)."""


class EmptyTag(InvalidTag):
    """A tag is the empty string."""


class TagTooLong(InvalidTag):
    """A tag is longer than 128 bytes (UTF-8)."""

    length: int
    """Length of the tag, in bytes."""
    limit: int
    """The longest tag, in bytes."""

    def __init__(self, message: str, *, length: int, limit: int) -> None:
        super().__init__(message)
        self.length = length
        self.limit = limit


class TooManyTags(InvalidTag):
    """An entry was given more distinct tags than the engine's per-entry cap (16)."""

    count: int
    """Its distinct tags."""
    limit: int
    """The most an entry may carry."""

    def __init__(self, message: str, *, count: int, limit: int) -> None:
        super().__init__(message)
        self.count = count
        self.limit = limit


class HotKeysFormatError(HerdlessError, ValueError):
    """A hot-key export (``import_hot_keys``) is not the JSON ``export_hot_keys`` writes."""


class KeyBuildError(InvalidKey):
    """A canonical key cannot be built (empty entity, NaN, duplicate parameter, ...)."""


class UnsupportedKeyValue(InvalidKey, TypeError):
    """A value cannot be part of a key (only str, int, float, bool, None and sets of them)."""


class WaitTimeout(HerdlessError, TimeoutError):
    """A caller waited ``wait_timeout`` for another caller's load and had no stale value."""

    waited: float
    """How long it waited, in seconds."""

    def __init__(self, message: str, *, waited: float) -> None:
        super().__init__(message)
        self.waited = waited


class LoadTimeout(HerdlessError, TimeoutError):
    """The loader ran past ``hard_timeout``; its result, if any, is discarded."""

    after: float
    """The hard timeout that was exceeded, in seconds."""

    def __init__(self, message: str, *, after: float) -> None:
        super().__init__(message)
        self.after = after


class LockTimeout(HerdlessError, TimeoutError):
    """``with cache.lock(key, timeout=...)`` waited ``timeout`` seconds and the lock was still
    held by another caller (``FleetLock.acquire`` answers False instead)."""

    waited: float
    """How long it waited, in seconds."""

    def __init__(self, message: str, *, waited: float) -> None:
        super().__init__(message)
        self.waited = waited


class NoPrevious(HerdlessError):
    """A loader answered "not modified" but there was no previous value to keep."""


class MetaTooLong(HerdlessError, ValueError):
    """A loader's metadata (``ctx.meta``, ``Loaded(meta=...)``) is longer than 256 bytes."""


class LoaderPanicked(HerdlessError):
    """The load ended abnormally inside the engine (a Rust panic); the next call loads again."""


class TooManyFlights(HerdlessError):
    """Too many different keys are loading at once (``max_flights``): request refused."""

    limit: int
    """The configured ``max_flights``."""

    def __init__(self, message: str, *, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


class BackendError(HerdlessError):
    """The shared tier (Redis) failed and nothing could be served from memory."""


class CacheClosed(HerdlessError, RuntimeError):
    """The cache was closed (``close()``, the end of its ``with`` / ``async with`` block): it
    answers no more calls, and a call in flight that still needed its Redis tier, or had
    not started its loader yet, raises this too."""


class BatchError(HerdlessError):
    """Some keys of a batch (``get_or_load_many``) failed; the others were answered.

    ``errors`` maps each failed key to its own exception (the loader's exception itself
    when the loader failed, ``WaitTimeout``, ``LoadTimeout``, ...); ``values`` is the whole
    answer in the order of the keys, with the exception in place of each failed key's value.
    """

    errors: dict[str, BaseException]
    """Each failed key's exception."""
    values: list[Any]
    """Every key's answer, in order: its value, ``ABSENT``, or its exception."""

    def __init__(
        self, message: str, *, errors: dict[str, BaseException], values: list[Any]
    ) -> None:
        super().__init__(message)
        self.errors = errors
        self.values = values
