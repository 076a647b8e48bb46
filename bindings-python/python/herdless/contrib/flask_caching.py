"""Flask-Caching over herdless: a backend for its config, and a single-flight ``cached`` view
decorator.

    from flask import Flask
    from flask_caching import Cache
    from herdless.contrib.flask_caching import cached

    app = Flask(__name__)
    app.config.update(
        CACHE_TYPE="herdless.contrib.flask_caching.HerdlessCache",
        CACHE_REDIS_URL="redis://127.0.0.1:6379/0",   # none: this process only
        CACHE_DEFAULT_TIMEOUT=60,
    )
    cache = Cache(app)

    @app.get("/products/<int:id>")
    @cached(cache, timeout=60)
    def product(id: int): ...

- ``HerdlessCache``: ``herdless.contrib.cachelib.HerdlessCache`` with Flask-Caching's
  ``factory``. Config: ``CACHE_HERDLESS_URL`` (else ``CACHE_REDIS_URL``), ``CACHE_KEY_PREFIX``,
  ``CACHE_DEFAULT_TIMEOUT``, ``CACHE_OPTIONS`` (keywords of the class: ``namespace``,
  ``options`` for ``herdless.Cache``...). Flask-Caching's own ``@cache.cached`` and
  ``@cache.memoize`` work over it as over any backend; they are not single-flight (a get,
  then the view, then a set: a herd on a cold key runs the view once per request).
- ``cached(cache, ...)``: the view runs once per key for a herd of concurrent requests, in
  every process sharing Redis (``Cache.get_or_load``); the others are answered its
  response. What may be kept for other requests is decided as herdless's HTTP layer decides
  it (``herdless_redis::http``, Rust's ``CacheLayer``), and the key is the same
  (``http:v1:GET%20{path}:{canonical query}?{header}={value}``):

  - only GET and HEAD (HEAD answered by GET's entry); a request with ``Authorization``
    always reaches the view; one with a ``Cookie`` too, unless ``cookies=True`` (its answer
    may be the user's own);
  - a response is kept only if its status is 2xx, it has no ``Set-Cookie`` (never kept,
    whatever the options), no ``Cache-Control: no-store`` / ``no-cache`` / ``private``
    (``private`` is kept with ``keep_private=True``), no zero ``max-age`` / ``s-maxage``
    (otherwise either one, ``s-maxage`` first, is its ttl), it is not streamed, its body is
    at most ``max_body`` bytes (1 MiB), and it ``Vary``-s only on headers of ``vary``
    (default ``("Accept-Encoding",)``), whose values are part of the key; ``Vary: *`` is never
    kept. A response not kept answers its own request only: the requests that waited for it
    run the view themselves. Hop-by-hop headers are not kept.
  - The key's cardinality is bounded whatever the request sends: one namespace for every
    route (``namespace``, default ``"http"``: request input never makes namespaces), the
    query in canonical order (sorted pairs) and kept as its SHA-256 past 256 bytes;
    ``query_string=False`` leaves the query out of the key altogether; only the headers of
    ``vary`` are read. The number of distinct paths and queries is still the client's
    choice: bound the memory tier with ``capacity`` and Redis with ``maxmemory``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar

import flask
from flask_caching import Cache as FlaskCache
from flask_caching.backends.base import BaseCache as FlaskBaseCache

from .._native import Loaded, http_canonical_query, http_keeps, http_request_key
from .cachelib import HerdlessCache as _CachelibCache

__all__ = ["HerdlessCache", "cached", "request_key"]

F = TypeVar("F", bound=Callable[..., Any])

_HOP_BY_HOP = frozenset(
    h.lower()
    for h in ("Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "TE",
              "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length", "Set-Cookie")
)


class HerdlessCache(_CachelibCache, FlaskBaseCache):
    """``herdless.contrib.cachelib.HerdlessCache`` as a Flask-Caching ``CACHE_TYPE``."""

    @classmethod
    def factory(
        cls, app: flask.Flask, config: Mapping[str, Any], args: list[Any], kwargs: dict[str, Any]
    ) -> HerdlessCache:
        """Flask-Caching's constructor: reads the app's ``CACHE_*`` config."""
        kwargs = dict(kwargs)
        url = config.get("CACHE_HERDLESS_URL") or config.get("CACHE_REDIS_URL")
        if url:
            kwargs.setdefault("url", url)
        if config.get("CACHE_KEY_PREFIX"):
            kwargs.setdefault("key_prefix", config["CACHE_KEY_PREFIX"])
        return cls(*args, **kwargs)


def canonical_query(query: str) -> str:
    """``query``'s pairs, decoded, sorted by name then value, and encoded again; its SHA-256
    (``sha256-<base64url>``) past 256 bytes (``herdless_redis::http::canonical_query``)."""
    return http_canonical_query(query)


def request_key(
    namespace: str, method: str, path: str, query: str, vary: Collection[tuple[str, str]] = ()
) -> str:
    """The cache key of a request, as ``herdless_redis::http::request_key`` makes it (the
    engine's own function)."""
    return http_request_key(namespace, method, path, query, list(vary))


def _keeps(
    response: flask.Response, vary: Collection[str], keep_private: bool, max_body: int
) -> tuple[bool, float | None]:
    """Whether ``response`` may answer other requests, and its own ttl if it says one: the
    engine decides on the status and headers (``herdless_redis::http::keeps``); what only
    Flask knows (a streamed body, its length) is checked here."""
    if response.is_streamed or response.direct_passthrough:
        return False, None
    keep, ttl = http_keeps(
        200 <= response.status_code < 300,
        list(response.headers.items()),
        list(vary),
        keep_private,
    )
    if not keep or len(response.get_data()) > max_body:
        return False, None
    return True, ttl


def cached(
    cache: FlaskCache | _CachelibCache,
    timeout: int | None = None,
    *,
    namespace: str = "http",
    query_string: bool = True,
    vary: Collection[str] = ("Accept-Encoding",),
    cookies: bool = False,
    keep_private: bool = False,
    max_body: int = 1 << 20,
) -> Callable[[F], F]:
    """Caches a Flask view's response with herdless's single flight (see the module docs):
    ``cache`` is a Flask-Caching ``Cache`` over ``HerdlessCache`` (or a ``HerdlessCache``);
    ``timeout`` in seconds (None: the backend's ``default_timeout``; a response's
    ``s-maxage`` / ``max-age`` wins)."""

    def decorate(view: F) -> F:
        @functools.wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            backend = cache.cache if isinstance(cache, FlaskCache) else cache
            if not isinstance(backend, _CachelibCache):
                raise TypeError("herdless's `cached` needs CACHE_TYPE HerdlessCache")
            req = flask.request
            if (
                req.method not in ("GET", "HEAD")
                or "Authorization" in req.headers
                or ("Cookie" in req.headers and not cookies)
            ):
                return view(*args, **kwargs)
            query = req.query_string.decode("latin-1") if query_string else ""
            parts = [(h.lower(), req.headers.get(h, "")) for h in vary]
            key = request_key(namespace, req.method, req.path, query, parts)
            own: list[flask.Response] = []

            def load() -> Any:
                response = flask.make_response(view(*args, **kwargs))
                keep, ttl = _keeps(response, vary, keep_private, max_body)
                own.append(response)
                if not keep:
                    return Loaded(b"", no_cache=True)
                headers = [(k, v) for k, v in response.headers.items()
                           if k.lower() not in _HOP_BY_HOP]
                data = backend._dumps((response.status_code, headers, response.get_data()))
                return Loaded(data, ttl=ttl) if ttl is not None else data

            ttl = backend._ttl(timeout)
            data = backend.cache.get_or_load(key, load, ttl=ttl)
            if own:
                return own[0]
            if not data:
                # The leader's response was its own (not kept): answer this request itself.
                return view(*args, **kwargs)
            status, headers, body = backend._loads(data)
            return flask.Response(body, status=status, headers=headers)

        return wrapper  # type: ignore[return-value]

    return decorate
