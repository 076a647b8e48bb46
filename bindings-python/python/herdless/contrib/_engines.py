"""One ``herdless.Cache`` per configuration, shared by every integration object made of it in
this process (dogpile makes a backend per region, cachelib / Flask-Caching one per app or
thread): one engine, one Redis connection and one L1 per configuration, not one per object."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from .._cache import Cache

_engines: dict[tuple[Any, ...], Cache] = {}
_engines_lock = threading.Lock()


def shared_engine(url: str | None, defaults: Mapping[str, Any], options: Mapping[str, Any]) -> Cache:
    """The cache of ``Cache(**defaults, **options)`` over the Redis tier at ``url`` (none: this
    process only; values cross Redis as bytes unless ``options`` say another codec), made once
    and made again if it was closed."""
    kwargs: dict[str, Any] = {**defaults, **options}
    if url is not None:
        kwargs.setdefault("codec", "bytes")
        kwargs["redis"] = url
    key = tuple(sorted((k, repr(v)) for k, v in kwargs.items()))
    with _engines_lock:
        cache = _engines.get(key)
        if cache is None or cache.closed:
            cache = _engines[key] = Cache(**kwargs)
        return cache
