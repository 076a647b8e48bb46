"""herdless: a stampede-proof cache.

When a hot key expires under load, a naive cache-aside sends every in-flight request to the
origin at once. herdless runs one loader call per key however many callers ask (threads or
asyncio tasks), serves stale data while one refresh runs, refreshes hot keys early (XFetch),
spreads TTLs (jitter), caches absences, and bounds everything.

    from herdless import Cache

    cache = Cache(ttl=60, grace=30)
    user = cache.get_or_load("users:v1:profile:#42", lambda: db.load_user(42))

See the README for the full tour.
"""

from importlib import metadata as _metadata

from ._cache import Cache, Codec, Peek, WarmReport
from ._decorator import AsyncCachedFunction, Decorator
from ._detector import Alert, DetectorOptions, HotKey
from ._metrics import Counters, Histogram, Metrics, NamespaceMetrics
from ._native import (
    ABSENT,
    Absent,
    BoundCachedFunction,
    CachedFunction,
    FleetLock,
    KeyBuilder,
    LoadContext,
    Loaded,
    Previous,
)
from .errors import (
    BackendError,
    BatchError,
    CacheClosed,
    ConfigError,
    ConfigTypeError,
    EmptyKey,
    EmptyTag,
    HerdlessError,
    HotKeysFormatError,
    InvalidKey,
    InvalidTag,
    KeyBuildError,
    KeyTooLong,
    LoaderPanicked,
    LoadTimeout,
    LockTimeout,
    MetaTooLong,
    NoPrevious,
    TagTooLong,
    TooManyFlights,
    TooManyTags,
    UnsupportedKeyValue,
    WaitTimeout,
)

# The wheel's version (the workspace's: scripts/version), read from the installed metadata.
__version__: str = _metadata.version("herdless")

__all__ = [
    "ABSENT",
    "Absent",
    "Alert",
    "AsyncCachedFunction",
    "BackendError",
    "BatchError",
    "BoundCachedFunction",
    "Cache",
    "CacheClosed",
    "CachedFunction",
    "Codec",
    "ConfigError",
    "ConfigTypeError",
    "Counters",
    "Decorator",
    "FleetLock",
    "DetectorOptions",
    "EmptyKey",
    "EmptyTag",
    "HerdlessError",
    "Histogram",
    "HotKey",
    "HotKeysFormatError",
    "InvalidKey",
    "InvalidTag",
    "KeyBuildError",
    "KeyBuilder",
    "KeyTooLong",
    "LoadContext",
    "LockTimeout",
    "LoadTimeout",
    "Loaded",
    "LoaderPanicked",
    "MetaTooLong",
    "Metrics",
    "NamespaceMetrics",
    "NoPrevious",
    "Peek",
    "Previous",
    "TagTooLong",
    "TooManyFlights",
    "TooManyTags",
    "UnsupportedKeyValue",
    "WaitTimeout",
    "WarmReport",
]
