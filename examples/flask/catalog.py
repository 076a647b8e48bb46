"""A Flask app with Flask-Caching over herdless (``herdless.contrib.flask_caching``).

- ``/products/<id>``: a slow origin (0.3 s) behind ``@cached``, herdless's single-flight view
  cache: a herd of concurrent requests on a cold product, over every worker process sharing
  ``REDIS_URL``, makes one origin call. The origin counts its calls with the backend's
  ``inc`` (under the key's fleet lock, so workers never lose a count); ``/origin-calls``
  reads the count.
- ``/me``: answers with ``Set-Cookie``: never kept for anyone else.
- ``/greeting``: Flask-Caching's own ``@cache.cached`` over the same backend (not single
  flight: a get, the view, a set).

Run one worker: ``REDIS_URL=redis://127.0.0.1:6379/0 python catalog.py 5000``.
"""

from __future__ import annotations

import os
import sys
import time

from flask import Flask, jsonify, make_response
from flask_caching import Cache

from herdless.contrib.flask_caching import cached


def create_app(redis_url: str | None = None) -> Flask:
    app = Flask(__name__)
    app.config.update(
        CACHE_TYPE="herdless.contrib.flask_caching.HerdlessCache",
        CACHE_HERDLESS_URL=redis_url,
        CACHE_DEFAULT_TIMEOUT=60,
        CACHE_OPTIONS={"namespace": "catalog"},
    )
    cache = Cache(app)
    backend = cache.cache

    @app.get("/products/<int:product_id>")
    @cached(cache, timeout=60)
    def product(product_id: int):  # type: ignore[no-untyped-def]
        backend.inc("origin-calls")
        time.sleep(0.3)  # the slow origin
        return jsonify(id=product_id, name=f"product {product_id}", served_by=os.getpid())

    @app.get("/origin-calls")
    def origin_calls():  # type: ignore[no-untyped-def]
        return jsonify(calls=backend.get("origin-calls") or 0)

    @app.get("/me")
    @cached(cache, timeout=60)
    def me():  # type: ignore[no-untyped-def]
        backend.inc("me-calls")
        response = make_response(jsonify(pid=os.getpid()))
        response.set_cookie("session", f"user-of-{os.getpid()}-{time.time_ns()}")
        return response

    @app.get("/greeting")
    @cache.cached(timeout=60)
    def greeting():  # type: ignore[no-untyped-def]
        return jsonify(text="hello")

    return app


if __name__ == "__main__":
    port = int(sys.argv[1])
    create_app(os.environ.get("REDIS_URL")).run("127.0.0.1", port, threaded=True)
