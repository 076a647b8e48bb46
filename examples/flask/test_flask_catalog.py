"""The Flask example over real HTTP: two worker processes (``catalog.py``, werkzeug's threaded
server) sharing a private redis-server. A herd of concurrent requests on a cold product, split
between the two workers, costs one origin call; a response with ``Set-Cookie`` reaches only its
own caller. Skipped loudly without redis-server (failed under CI=true)."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(port: int, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"{what} did not start") from None
            time.sleep(0.1)


@pytest.fixture
def redis_url() -> Iterator[str]:
    binary = shutil.which("redis-server")
    if binary is None:
        message = "redis-server is not installed: the Flask example's test did not run"
        if os.environ.get("CI") == "true":
            pytest.fail(message + " (CI=true requires it)")
        pytest.skip(message)
    port, scratch = free_port(), tempfile.mkdtemp(prefix="herdless-flask-")
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", scratch],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(port, proc, "redis-server")
        yield f"redis://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture
def workers(redis_url: str) -> Iterator[list[int]]:
    ports, procs = [], []
    try:
        for _ in range(2):
            port = free_port()
            proc = subprocess.Popen(
                [sys.executable, str(HERE / "catalog.py"), str(port)],
                cwd=HERE, env={**os.environ, "REDIS_URL": redis_url},
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            procs.append(proc)
            wait_for(port, proc, "the Flask worker")
            ports.append(port)
        yield ports
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
            proc.wait(10)


def get(port: int, path: str) -> tuple[int, dict[str, str], dict[str, object]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        body = json.loads(response.read())
        return response.status, dict(response.getheaders()), body
    finally:
        conn.close()


def test_a_herd_over_two_workers_costs_one_origin_call(workers: list[int]) -> None:
    answers: list[dict[str, object]] = []
    start = threading.Barrier(32)

    def ask(i: int) -> None:
        start.wait(30)
        status, _, body = get(workers[i % 2], "/products/7")
        assert status == 200
        answers.append(body)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(answers) == 32
    assert len({json.dumps(a, sort_keys=True) for a in answers}) == 1, answers
    _, _, calls = get(workers[0], "/origin-calls")
    print(f"flask herd: 32 requests over 2 workers, origin calls = {calls['calls']}")
    assert calls["calls"] == 1


def test_a_set_cookie_answer_reaches_only_its_caller(workers: list[int]) -> None:
    cookies = set()
    for i in range(4):
        status, headers, _ = get(workers[i % 2], "/me")
        assert status == 200
        cookies.add(headers["Set-Cookie"])
    assert len(cookies) == 4
    _, _, counted = get(workers[0], "/origin-calls")
    assert counted["calls"] == 0  # the products' counter: untouched here


def test_flask_caching_own_decorator_works_over_the_backend(workers: list[int]) -> None:
    for port in workers:
        assert get(port, "/greeting")[2] == {"text": "hello"}
