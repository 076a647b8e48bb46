"""Bad arguments at the call sites (the options of ``Cache(...)`` are in test_options.py):
wrong types, unhashable or huge keys, loaders that are not callables, bad per-call
durations, values the Redis codec cannot encode. Each raises Python's own exception class
(``TypeError``/``ValueError``, or herdless's subclasses of them) with a clear message, and
nothing crashes the interpreter: every case runs in a child interpreter first, so that a
crash (a Rust panic turned abort, a segfault) fails this test instead of killing pytest.

Also here: bytes planted in Redis never run code. The codecs are JSON, raw bytes or the
user's own; nothing unpickles, so a pickle payload under a key is a miss (JSON) or inert
bytes (bytes codec), and the file it would create never appears.
"""

from __future__ import annotations

import json
import os
import pickle
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis_support import RedisServer, command, value_key

from herdless import Cache

# Each case: name -> Python source of one expression or statement run against `cache`
# (in memory) or `rcache` (on Redis). The child prints, per case, the exception's class,
# its MRO's builtin bases and its message, or "ok" and the result's repr.
MEMORY_CASES: dict[str, str] = {
    "key int": "cache.get_or_load(42, lambda: 1)",
    "key None": "cache.get_or_load(None, lambda: 1)",
    "key bytes": "cache.get_or_load(b'k:1', lambda: 1)",
    "key list (unhashable)": "cache.get_or_load(['k', 1], lambda: 1)",
    "key dict (unhashable)": "cache.get_or_load({'k': 1}, lambda: 1)",
    "key set": "cache.set({'k'}, 1)",
    "key object": "cache.get(object())",
    "key empty": "cache.get_or_load('', lambda: 1)",
    "key 10 MB": "cache.get_or_load('k:' + 'x' * 10_000_000, lambda: 1)",
    "key 10 MB get": "cache.get('k:' + 'x' * 10_000_000)",
    "key 10 MB set": "cache.set('k:' + 'x' * 10_000_000, 1)",
    "key lone surrogate": "cache.get_or_load('k:\\ud800', lambda: 1)",
    "key str subclass": "cache.get_or_load(type('S', (str,), {})('k:sub'), lambda: 'v')",
    "loader int": "cache.get_or_load('k:2', 42)",
    "loader None": "cache.get_or_load('k:3', None)",
    "loader str": "cache.get_or_load('k:4', 'lambda: 1')",
    "loader needs arguments": "cache.get_or_load('k:5', lambda x, y: x)",
    "async loader not callable": "asyncio.run(cache.aget_or_load('k:6', 42))",
    "async loader returns no awaitable": "asyncio.run(cache.aget_or_load('k:7', lambda: 1))",
    "sync loader returns a coroutine": "cache.get_or_load('k:8', coro_fn)",
    "ttl negative": "cache.set('k:9', 1, ttl=-1)",
    "ttl NaN": "cache.get_or_load('k:10', lambda: 1, ttl=float('nan'))",
    "ttl inf": "cache.set('k:11', 1, ttl=float('inf'))",
    "ttl -inf": "cache.get_or_load('k:12', lambda: 1, ttl=float('-inf'))",
    "ttl 1e300": "cache.set('k:13', 1, ttl=1e300)",
    "ttl str": "cache.get_or_load('k:14', lambda: 1, ttl='5')",
    "ttl bool": "cache.set('k:15', 1, ttl=True)",
    "ttl complex": "cache.set('k:16', 1, ttl=1j)",
    "bump int": "cache.bump(3)",
    "bump None": "cache.bump(None)",
    "bump empty": "cache.bump('')",
    "bump huge": "cache.bump('n' * 10_000_000)",
    "invalidate list": "cache.invalidate(['k'])",
    "invalidate huge": "cache.invalidate('k:' + 'x' * 10_000_000)",
    "cached unsupported argument": "cache.cached(namespace='f')(lambda x: x)(object())",
    "cached unhashable argument": "cache.cached(namespace='f')(lambda x: 1)([[1], {2: 3}])",
    "warm keys not iterable": "cache.warm(42, lambda k: k)",
    "warm loader not callable": "cache.warm(['k:1'], 42)",
    "awarm loader not callable": "asyncio.run(cache.awarm(['k:1'], 42))",
}
REDIS_CASES: dict[str, str] = {
    "redis set object": "rcache.set('r:1', object())",
    "redis set NaN": "rcache.set('r:2', float('nan'))",
    "redis set cyclic": "rcache.set('r:3', cyclic)",
    "redis set bytes under json": "rcache.set('r:4', b'raw')",
    "redis bytes codec set str": "rbytes.set('r:5', 'not bytes')",
    "redis set 10 MB key": "rcache.set('r:' + 'x' * 10_000_000, 1)",
    "redis get_or_load 10 MB key": "rcache.get_or_load('r:' + 'x' * 10_000_000, lambda: 1)",
    "redis set 16 MB value": "rcache.set('r:6', 'x' * 16_000_000)",
    "redis bump int": "rcache.bump(7)",
    "redis bump huge": "rcache.bump('n' * 10_000_000)",
}

CHILD = r"""
import asyncio, sys
from herdless import Cache
cache = Cache()
url = sys.argv[2] if len(sys.argv) > 2 else None
if url:
    rcache = Cache(redis=url, redis_prefix=sys.argv[3])
    rbytes = Cache(redis=url, redis_prefix=sys.argv[3] + "b", codec="bytes")
cyclic = []
cyclic.append(cyclic)
async def coro():
    return 1
def coro_fn():
    return coro()
import json
cases = json.loads(sys.argv[1])
for name, src in cases.items():
    print("start", name, flush=True)
    try:
        r = eval(src)
        if asyncio.iscoroutine(r):
            r.close()
        print("result", name, "ok", repr(r)[:200], sep="\t", flush=True)
    except BaseException as e:
        kinds = ",".join(c.__name__ for c in type(e).__mro__)
        print("result", name, kinds, str(e).replace("\n", " ")[:300], sep="\t", flush=True)
"""


def run_cases(cases: dict[str, str], *extra: str) -> dict[str, tuple[str, str]]:
    """Runs `cases` in a child interpreter; returns name -> (exception classes, message)."""
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(cases), *extra],
        capture_output=True,
        text=True,
        timeout=120,
    )
    out: dict[str, tuple[str, str]] = {}
    last = None
    for line in proc.stdout.splitlines():
        if line.startswith("start "):
            last = line[len("start "):]
        elif line.startswith("result\t"):
            _, name, kinds, message = line.split("\t", 3)
            out[name] = (kinds, message)
    assert proc.returncode == 0, (
        f"the interpreter died (status {proc.returncode}) in case {last!r}:\n{proc.stderr[-2000:]}"
    )
    assert set(out) == set(cases), f"cases without a result: {set(cases) - set(out)}"
    return out


def expect(results: dict[str, tuple[str, str]], name: str, kind: str, message: str = "") -> None:
    kinds, text = results[name]
    assert kind in kinds.split(","), f"{name}: expected {kind}, got {kinds}: {text}"
    assert message.lower() in text.lower(), f"{name}: message {text!r} lacks {message!r}"
    assert "PanicException" not in kinds, f"{name}: a Rust panic reached Python: {text}"


@pytest.fixture(scope="module")
def memory_results() -> dict[str, tuple[str, str]]:
    return run_cases(MEMORY_CASES)


def test_keys_of_the_wrong_type_raise_type_error(memory_results: Any) -> None:
    for name in ["key int", "key None", "key bytes", "key list (unhashable)",
                 "key dict (unhashable)", "key set", "key object", "invalidate list"]:
        expect(memory_results, name, "TypeError", "str")


def test_empty_and_huge_keys_raise_value_errors(memory_results: Any) -> None:
    expect(memory_results, "key empty", "EmptyKey", "empty")
    for name in ["key 10 MB", "key 10 MB set", "invalidate huge"]:
        expect(memory_results, name, "KeyTooLong", "10000002")
        expect(memory_results, name, "ValueError")
    # `get` never raises for a key: one that could never be stored is simply not there.
    assert memory_results["key 10 MB get"] == ("ok", "None")
    expect(memory_results, "key lone surrogate", "UnicodeEncodeError", "surrogates not allowed")
    expect(memory_results, "key lone surrogate", "ValueError")
    assert memory_results["key str subclass"] == ("ok", "'v'")


def test_loaders_that_are_not_callables_raise_type_error(memory_results: Any) -> None:
    for name in ["loader int", "loader None", "loader str", "async loader not callable"]:
        expect(memory_results, name, "TypeError", "callable")
    # A callable with the wrong signature fails as it would without a cache (one required
    # parameter is not wrong: it is handed the load's context).
    expect(memory_results, "loader needs arguments", "TypeError", "argument")
    # aget_or_load awaits what the loader returns when it is awaitable, else takes it as is.
    assert memory_results["async loader returns no awaitable"] == ("ok", "1")
    # An async function given to the sync API is refused, not cached as a coroutine object.
    expect(memory_results, "sync loader returns a coroutine", "TypeError", "aget_or_load")


def test_bad_per_call_durations_raise_config_errors(memory_results: Any) -> None:
    for name in ["ttl negative", "ttl NaN", "ttl inf", "ttl -inf", "ttl 1e300"]:
        expect(memory_results, name, "ConfigError", "ttl")
        expect(memory_results, name, "ValueError")
    for name in ["ttl str", "ttl bool", "ttl complex"]:
        expect(memory_results, name, "ConfigTypeError", "ttl")
        expect(memory_results, name, "TypeError")


def test_bad_namespaces_and_other_calls(memory_results: Any) -> None:
    expect(memory_results, "bump int", "ConfigTypeError", "namespace")
    expect(memory_results, "bump None", "TypeError", "namespace")
    expect(memory_results, "bump empty", "ValueError", "namespace")
    # A namespace longer than any key holds no key: nothing is bumped, nothing is kept.
    assert memory_results["bump huge"] == ("ok", "0")
    expect(memory_results, "cached unsupported argument", "UnsupportedKeyValue")
    expect(memory_results, "cached unsupported argument", "TypeError", "cannot be part of a cache key")
    expect(memory_results, "cached unhashable argument", "UnsupportedKeyValue", "list")
    expect(memory_results, "warm keys not iterable", "TypeError", "iterable")
    expect(memory_results, "warm loader not callable", "TypeError", "`loader` must be a callable")
    expect(memory_results, "awarm loader not callable", "TypeError", "`loader` must be a callable")


# ---- Redis -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    s = RedisServer()
    yield s
    s.stop()


def test_values_the_codec_cannot_encode_raise_the_codecs_own_error(server: RedisServer) -> None:
    prefix = f"bad{os.getpid()}"
    r = run_cases(REDIS_CASES, server.url, prefix)
    expect(r, "redis set object", "TypeError", "JSON serializable")
    expect(r, "redis set NaN", "ValueError", "out of range float")
    expect(r, "redis set cyclic", "ValueError", "circular")
    expect(r, "redis set bytes under json", "TypeError", "bytes")
    expect(r, "redis bytes codec set str", "TypeError", "bytes codec")
    for name in ["redis set 10 MB key", "redis get_or_load 10 MB key"]:
        expect(r, name, "KeyTooLong")
    # Over the Redis tier's entry limit (8 MiB): refused before Redis, with the reason.
    expect(r, "redis set 16 MB value", "BackendError", "max_entry_bytes")
    expect(r, "redis bump int", "TypeError")
    assert r["redis bump huge"] == ("ok", "0")
    assert command(server.port, "DBSIZE") == 0, "a refused write or bump reached Redis"
    # Nothing of the refused writes reached Redis.
    for key in ["r:1", "r:2", "r:3", "r:4", "r:6"]:
        assert command(server.port, "EXISTS", value_key(prefix, key)) == 0, key


def entry_bytes(value: bytes, fresh_for_ms: int = 60_000) -> bytes:
    """A well-formed entry (PROTOCOL.md): magic, format 1, has-value flag, times, version 1,
    epoch 0, then the value bytes."""
    now = int(time.time() * 1000)
    until = now + fresh_for_ms
    return b"hl" + bytes([1, 1]) + struct.pack(">6Q", until, until, until + 60_000, 0, 1, 0) + value


class _Plant:
    """Unpickling this calls os.mkdir(path): proof of code execution if the dir appears."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.mkdir, (self.path,))


def test_a_pickle_payload_in_redis_never_runs(server: RedisServer, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_Plant(str(marker)))
    prefix = f"pk{os.getpid()}"
    json_cache = Cache(redis=server.url, redis_prefix=prefix, jitter=0, beta=0)
    bytes_cache = Cache(redis=server.url, redis_prefix=prefix, jitter=0, beta=0, codec="bytes")
    # Raw pickle bytes where an entry should be, and a valid entry whose value is a pickle.
    command(server.port, "SET", value_key(prefix, "p:raw"), payload, "PX", 60_000)
    command(server.port, "SET", value_key(prefix, "p:entry"), entry_bytes(payload), "PX", 60_000)
    command(server.port, "SET", value_key(prefix, "p:bin"), entry_bytes(payload), "PX", 60_000)
    # JSON: neither is JSON, so both are a miss and the loader runs here.
    assert json_cache.get_or_load("p:raw", lambda: "loaded") == "loaded"
    assert json_cache.get_or_load("p:entry", lambda: "loaded") == "loaded"
    # Bytes: the entry is served as the inert bytes it is.
    assert bytes_cache.get_or_load("p:bin", lambda: b"never") == payload
    # A value that only looks like a serialised object is data, never behaviour.
    trick = json.dumps({"__reduce__": ["os.mkdir", [str(marker)]], "py/object": "os.system"})
    command(server.port, "SET", value_key(prefix, "p:json"), entry_bytes(trick.encode()), "PX", 60_000)
    assert json_cache.get_or_load("p:json", lambda: "never") == json.loads(trick)
    assert not marker.exists(), "bytes read from Redis ran code"
    # And the payload is live: unpickling it here does create the marker.
    pickle.loads(payload)
    assert marker.exists()


def test_the_package_never_imports_pickle_for_its_codecs() -> None:
    code = (
        "import sys, herdless\n"
        "c = herdless.Cache(redis='redis://127.0.0.1:1', codec='json')\n"
        "print('pickle' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == "False", "herdless imported pickle"

