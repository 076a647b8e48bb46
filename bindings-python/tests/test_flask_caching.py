"""``herdless.contrib.flask_caching``: the backend from Flask-Caching's config, and what the
single-flight ``cached`` view decorator keeps for other requests (Flask's test client, in
memory). Two real worker processes over Redis: ``examples/flask/test_flask_catalog.py``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask, Response, jsonify, make_response
from flask_caching import Cache

from herdless.contrib.cachelib import HerdlessCache as CachelibCache
from herdless.contrib.flask_caching import HerdlessCache, cached, canonical_query, request_key


def app_with(view: Callable[[], Any], **options: Any) -> tuple[Flask, list[int]]:
    """An app whose ``/v`` runs ``view`` behind ``cached`` (a namespace of its own)."""
    app = Flask(__name__)
    app.config.update(CACHE_TYPE="herdless.contrib.flask_caching.HerdlessCache",
                      CACHE_OPTIONS={"namespace": f"t{time.time_ns()}"})
    cache = Cache(app)
    calls: list[int] = []

    @app.get("/v")
    @cached(cache, timeout=60, namespace=f"http{time.time_ns()}", **options)
    def v() -> Any:
        calls.append(1)
        return view()

    return app, calls


def test_the_backend_comes_from_flask_caching_config() -> None:
    app = Flask(__name__)
    app.config.update(CACHE_TYPE="herdless.contrib.flask_caching.HerdlessCache",
                      CACHE_KEY_PREFIX="p:", CACHE_DEFAULT_TIMEOUT=30)
    cache = Cache(app)
    assert isinstance(cache.cache, HerdlessCache) and isinstance(cache.cache, CachelibCache)
    assert cache.cache.default_timeout == 30 and cache.cache.key_prefix == "p:"
    with app.app_context():
        cache.set("a", [1, 2])
        assert cache.get("a") == [1, 2]
        assert cache.cache.get_or_load("b", lambda: {"x": 1}) == {"x": 1}


def test_request_keys_are_rusts() -> None:
    # The example of herdless_redis::http::request_key's docs.
    a = request_key("http", "GET", "/search", "q=cache&page=2")
    assert a == request_key("http", "HEAD", "/search", "page=2&q=cache")
    assert a == "http:v1:GET%20/search:page%3D2%26q%3Dcache"
    assert canonical_query("z=" + "y" * 400).startswith("sha256-")


def test_a_herd_runs_the_view_once() -> None:
    def slow() -> Response:
        time.sleep(0.3)
        return jsonify(ok=True)

    app, calls = app_with(slow)
    answers: list[int] = []
    start = threading.Barrier(12)

    def ask() -> None:
        start.wait(10)
        answers.append(app.test_client().get("/v").status_code)

    threads = [threading.Thread(target=ask) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert answers == [200] * 12 and len(calls) == 1


def private(headers: dict[str, str]) -> Callable[[], Response]:
    def view() -> Response:
        response = make_response(jsonify(n=time.time_ns()))
        response.headers.update(headers)
        return response

    return view


@pytest.mark.parametrize(
    "headers",
    [{"Set-Cookie": "s=1"}, {"Cache-Control": "private"}, {"Cache-Control": "no-store"},
     {"Cache-Control": "max-age=0"}, {"Vary": "Cookie"}, {"Vary": "*"}],
)
def test_what_is_never_kept_for_others(headers: dict[str, str]) -> None:
    app, calls = app_with(private(headers))
    client = app.test_client()
    assert client.get("/v").json != client.get("/v").json
    assert len(calls) == 2


def test_what_is_kept_and_what_passes_through() -> None:
    app, calls = app_with(private({"Vary": "Accept-Encoding", "Cache-Control": "max-age=30"}))
    client = app.test_client()
    first = client.get("/v")
    assert client.get("/v").json == first.json and len(calls) == 1
    assert first.headers["Vary"] == "Accept-Encoding"
    client.get("/v", headers={"Accept-Encoding": "br"})  # another variant
    assert len(calls) == 2
    client.get("/v", headers={"Authorization": "Bearer x"})
    client.set_cookie("s", "1")
    client.get("/v")
    assert len(calls) == 4
    app, calls = app_with(private({"Cache-Control": "private"}), keep_private=True, cookies=True)
    client = app.test_client()
    client.set_cookie("s", "1")
    client.get("/v")
    client.get("/v")
    assert len(calls) == 1
