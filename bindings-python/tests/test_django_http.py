"""Real Django worker processes over real HTTP (issue 28): cache-backed sessions shared by
two workers through Redis (a logout on one reaches the other), and Django's cache middleware
serving one user's page to another without her cookies. Workers: ``django_worker.py``."""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from http.cookies import SimpleCookie
from pathlib import Path

import pytest

from redis_support import RedisServer, free_port

HERE = Path(__file__).resolve().parent


class Worker:
    """A ``django_worker.py`` process on a free port, stopped by its pid."""

    def __init__(self, location: str, *flags: str) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "django_worker.py"), str(self.port), location, *flags],
            cwd=HERE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                self.get("/whoami")
                return
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.stop()
                    raise RuntimeError("the Django worker did not start") from None
                time.sleep(0.1)

    def get(self, path: str, cookies: dict[str, str] | None = None) -> tuple[str, SimpleCookie]:
        """The body and the cookies a GET of ``path`` sets, sending ``cookies``."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            headers = {}
            if cookies:
                headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            body = response.read().decode()
            assert response.status == 200, (path, response.status, body)
            jar: SimpleCookie = SimpleCookie()
            for header in response.headers.get_all("Set-Cookie") or []:
                jar.load(header)
            return body, jar
        finally:
            conn.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    server = RedisServer()
    try:
        yield server
    finally:
        server.stop()


def workers(n: int, location: str, *flags: str) -> list[Worker]:
    started: list[Worker] = []
    try:
        for _ in range(n):
            started.append(Worker(location, *flags))
    except BaseException:
        for w in started:
            w.stop()
        raise
    return started


def test_a_logout_on_one_worker_reaches_a_worker_that_only_read_the_session(
    redis: RedisServer,
) -> None:
    # Sessions saved only when changed: B never writes, it only reads the session.
    a, b = workers(2, redis.url)
    try:
        _, jar = a.get("/login?user=alice")
        session = {"sessionid": jar["sessionid"].value}
        assert a.get("/whoami", session)[0] == "you are alice"
        assert b.get("/whoami", session)[0] == "you are alice"  # B now holds a copy
        a.get("/logout", session)
        assert a.get("/whoami", session)[0] == "anonymous"
        # B has only read: it must hear of A's delete, within a short bound.
        deadline = time.monotonic() + 2.0
        while (seen := b.get("/whoami", session)[0]) != "anonymous":
            assert time.monotonic() < deadline, f"B still says {seen!r} 2 s after the logout"
            time.sleep(0.05)
    finally:
        a.stop()
        b.stop()


def check_no_cookie_reaches_another_user(worker: Worker) -> None:
    _, jar = worker.get("/login?user=alice")
    alice = {"sessionid": jar["sessionid"].value}
    page, jar = worker.get("/public", alice)
    alice["csrftoken"] = jar["csrftoken"].value
    assert jar["sessionid"].value == alice["sessionid"]  # SESSION_SAVE_EVERY_REQUEST
    for _ in range(2):
        bobs_page, bobs = worker.get("/public")  # bob: no cookie
        assert bobs_page == page, "the page was not served from the cache"
        leaked = {k: m.value for k, m in bobs.items() if m.value in alice.values()}
        assert not leaked, f"bob received alice's cookies {leaked}"
        if "sessionid" in bobs:
            assert worker.get("/whoami", {"sessionid": bobs["sessionid"].value})[0] == "anonymous"


def test_the_cache_middleware_never_serves_one_users_cookies_to_another_memory() -> None:
    (w,) = workers(1, "", "save-every-request")
    try:
        check_no_cookie_reaches_another_user(w)
    finally:
        w.stop()


def test_the_cache_middleware_never_serves_one_users_cookies_to_another_redis(
    redis: RedisServer,
) -> None:
    (w,) = workers(1, redis.url, "save-every-request")
    try:
        check_no_cookie_reaches_another_user(w)
    finally:
        w.stop()
