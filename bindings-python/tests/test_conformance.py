"""The Python runner of the conformance scenarios (``conformance/*.json`` at the repository
root; the format is in its README): each scenario is played on the in-memory tier and, when
it lists ``redis`` (``memcached``), on a private redis-server (memcached). Rust and Node run
the same files; a difference between the languages fails CI."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from herdless import (
    ABSENT,
    BackendError,
    BatchError,
    Cache,
    InvalidTag,
    Loaded,
    LoadContext,
    LoadTimeout,
    MetaTooLong,
    NoPrevious,
    TooManyTags,
    WaitTimeout,
)
from herdless.testing import MemoryStore

from memcached_support import Memcached
from redis_support import RedisServer, command, epoch_key, lock_key, tag_key, value_key

SCENARIOS = sorted((Path(__file__).resolve().parents[2] / "conformance").glob("*.json"))
PLAYED = SCENARIOS
_UNIQUE = itertools.count()


class _Opaque:
    """What the JSON codec cannot encode."""


def _unshareable(value: Any) -> Any:
    if isinstance(value, dict) and "$unshareable" in value:
        return {"$unshareable": True, "x": _Opaque()}
    return value


class _LoaderFailed(Exception):
    pass


def _kind(exc: BaseException) -> str:
    if isinstance(exc, BackendError):
        return "backend"
    if isinstance(exc, WaitTimeout):
        return "wait_timeout"
    if isinstance(exc, LoadTimeout):
        return "load_timeout"
    if isinstance(exc, _LoaderFailed):
        return "load"
    if isinstance(exc, NoPrevious):
        return "no_previous"
    if isinstance(exc, MetaTooLong):
        return "meta_too_long"
    if isinstance(exc, TooManyTags):
        return "too_many_tags"
    if isinstance(exc, InvalidTag):
        return "invalid_tag"
    return f"other: {exc!r}"


class Tier:
    """Where a scenario runs: a MemoryStore of its own, or a private redis-server."""

    def __init__(self, server: RedisServer | Memcached | None) -> None:
        self.server = server
        self.name = f"conformance-{os.getpid()}-{next(_UNIQUE)}"
        self.prefix = "hl" if server is None else f"c{os.getpid()}x{next(_UNIQUE)}"
        self.store = MemoryStore(self.name) if server is None else None

    def process(self, cfg: dict[str, Any]) -> Cache:
        opts: dict[str, Any] = {"jitter": 0, "beta": 0}
        for field in ("ttl", "tti", "grace", "negative_ttl", "wait_timeout", "lease",
                      "max_stale", "hard_timeout"):
            ms = cfg.get(f"{field}_ms")
            if ms is not None:
                opts[field] = ms / 1000
        if self.server is None:
            return Cache(redis=f"memory://{self.name}", **opts)
        return Cache(redis=self.server.url, redis_prefix=self.prefix, **opts)

    def fault(self, fault: str, ns: str | None = None, bus: bool = False) -> None:
        """`fault` of the whole tier, or with `ns` (memory only) of that namespace's slot
        alone (its Cluster node); `bus`: the notice connections are down (`bus_down`)."""
        if self.store is not None:
            self.store.set_fault(None if fault == "up" else fault, ns)
            return
        assert self.server is not None
        assert ns is None, "a namespace's fault is memory only (one server has one node)"
        port = self.server.port
        subscribing = ("psubscribe", "ssubscribe", "subscribe")
        if fault == "bus_down":
            # The notice connections are killed, and their resubscription refused until `up`
            # (so the gap lasts until then, however fast they reconnect).
            command(port, "ACL", "SETUSER", "default", *(f"-{c}" for c in subscribing))
            command(port, "CLIENT", "KILL", "TYPE", "pubsub")
        elif fault == "up" and bus:
            command(port, "ACL", "SETUSER", "default", *(f"+{c}" for c in subscribing))
        elif fault == "down":
            self.server.kill()
        elif fault == "stall":
            self.server.pause()
        elif fault == "up" and self.server.running:
            self.server.resume()
        elif fault == "up":
            self.server.restart()
        else:
            raise AssertionError(f"fault {fault} is not available on Redis")

    def plant(self, step: dict[str, Any]) -> None:
        op = step["op"]
        if self.store is not None:
            if op == "plant":
                self.store.plant(step["key"], step["bytes"].encode())
            elif op == "plant_epoch":
                self.store.plant_epoch(step["ns"], step["text"])
            else:
                self.store.plant_lock(step["key"], step["ms"] / 1000)
            return
        assert self.server is not None
        port = self.server.port
        if op == "plant":
            command(port, "SET", value_key(self.prefix, step["key"]), step["bytes"])
        elif op == "plant_epoch":
            command(port, "SET", epoch_key(self.prefix, step["ns"]), step["text"])
        else:
            ns = step["key"].split(":", 1)[0]
            raw = command(port, "GET", epoch_key(self.prefix, ns))
            epoch = raw.decode() if raw else "0"
            command(port, "SET", lock_key(self.prefix, step["key"]), f"{epoch}:{'0' * 32}",
                    "PX", step["ms"])

    def outside(self, step: dict[str, Any]) -> None:
        """``outside_delete`` (the value deleted by a program that is not herdless) and
        ``outside_flush`` (``FLUSHDB``)."""
        flush = step["op"] == "outside_flush"
        if self.store is not None:
            if flush:
                self.store.flush()
            else:
                self.store.delete_raw(step["key"])
            return
        assert self.server is not None
        if flush:
            command(self.server.port, "FLUSHDB")
        else:
            command(self.server.port, "DEL", value_key(self.prefix, step["key"]))

    def plant_tag(self, step: dict[str, Any]) -> None:
        """``plant_tag`` (raw ``text``, or with ``wrong_type`` a key of another Redis type, as
        a tag's record) and ``evict_tag`` (the record deleted, as eviction would)."""
        evict, wrong_type = step["op"] == "evict_tag", step.get("wrong_type", False)
        if self.store is not None:
            if evict:
                self.store.evict_tag(step["tag"])
            else:
                self.store.plant_tag(step["tag"], step.get("text"), wrong_type=wrong_type)
            return
        assert self.server is not None
        name = tag_key(self.prefix, step["tag"])
        command(self.server.port, "DEL", name)
        if wrong_type:
            command(self.server.port, "LPUSH", name, "x")
        elif not evict:
            command(self.server.port, "SET", name, step["text"])


class MemcachedTier(Tier):
    """A private memcached: faults as Redis's (``down`` kills it, ``up`` restarts it, ``stall``
    is SIGSTOP); planted state written with raw meta commands under the same item names (the
    scenarios' keys fit memcached's)."""

    def __init__(self, server: Memcached) -> None:
        super().__init__(server)
        self.memcached = server

    def fault(self, fault: str, ns: str | None = None, bus: bool = False) -> None:
        assert ns is None and not bus, "memcached has one node and no bus"
        if fault == "down":
            self.memcached.kill()
        elif fault == "stall":
            self.memcached.pause()
        elif fault == "up" and self.memcached.running:
            self.memcached.resume()
        elif fault == "up":
            self.memcached.restart()
        else:
            raise AssertionError(f"fault {fault} is not available on memcached")

    def plant(self, step: dict[str, Any]) -> None:
        op = step["op"]
        if op == "plant":
            self.memcached.put(value_key(self.prefix, step["key"]), step["bytes"].encode())
        elif op == "plant_epoch":
            self.memcached.put(epoch_key(self.prefix, step["ns"]), step["text"].encode())
        else:
            self.memcached.plant_lease(value_key(self.prefix, step["key"]), step["ms"])


def _check(name: str, step: dict[str, Any], got: Any, exc: BaseException | None,
           took: float) -> None:
    at = f"{name}: {step}"
    if "expect_error" in step:
        assert exc is not None, f"{at}: expected an error, got {got!r}"
        assert _kind(exc) == step["expect_error"], f"{at}: {exc!r}"
    else:
        assert exc is None, f"{at}: {exc!r}"
        if "expect" in step:
            want = step["expect"]
            assert (None if got is ABSENT else got) == want, f"{at}: got {got!r}"
    if "within_ms" in step:
        assert took <= step["within_ms"] / 1000, f"{at}: took {took:.3f} s"
    if "after_ms" in step:
        assert took >= step["after_ms"] / 1000, f"{at}: answered after {took:.3f} s"


def _answer(value: Any, answer: dict[str, Any] | None) -> Any:
    """The loader's answer of a step: ``value`` (None: absent) shaped by ``answer``."""
    if answer is None:
        return value
    if value is None:
        value = ABSENT
    secs = {k[: -len("_ms")]: v / 1000 for k, v in answer.items() if k.endswith("_ms")}
    if answer.get("not_modified"):
        return Loaded.not_modified(ttl=secs.get("ttl"), meta=answer.get("meta"), tags=answer.get("tags"))
    return Loaded(
        value,
        meta=answer.get("meta"),
        tags=answer.get("tags"),
        no_cache=answer.get("no_cache", False),
        **secs,
    )


def _counter(name: str, what: str, want: Any, got: int) -> None:
    if isinstance(want, str):
        assert want.startswith(">="), f"{name}: bad expectation {want}"
        assert got >= int(want[2:]), f"{name}: {what} = {got}, expected {want}"
    else:
        assert got == want, f"{name}: {what} = {got}, expected {want}"


def play(name: str, scenario: dict[str, Any], tier: Tier, mode: str = "threads") -> None:
    """Plays `scenario`; in `mode` "asyncio", every call is the asyncio one (each caller
    runs its own event loop, on its own thread as in "threads": `aget_or_load_many`,
    `aget_or_load`, `aget`, `aset`...) and loaders are async."""
    procs = [tier.process(scenario.get("cache", {})) for _ in range(scenario.get("processes", 1))]
    loads = 0
    lock = threading.Lock()
    running: dict[str, tuple[float, list[Future[tuple[Any, BaseException | None, float]]]]] = {}
    # While the bus is down: each process's `notices_lost` when it went down.
    bus: list[int] | None = None

    def progress(cache: Cache) -> tuple[int, int]:
        """How far a process has got: loads run, fleet locks asked for, tier errors."""
        t = cache.metrics().redis
        asked = 0 if t is None else t["fleet_locks_acquired"] + t["fleet_locks_contended"] + t["backend_errors"]
        return loads, asked

    def call(cache: Cache, step: dict[str, Any], seen: list[dict[str, Any]] | None = None) -> Any:
        def begin(ctx: LoadContext) -> None:
            nonlocal loads
            with lock:
                loads += 1
            if seen is not None:
                prev = ctx.previous
                seen.append({
                    "reason": ctx.reason,
                    "previous": None if prev is None else prev.value,
                    "meta": None if prev is None else prev.meta,
                })

        def answer() -> Any:
            if "fail" in step:
                raise _LoaderFailed(step["fail"])
            return _answer(_unshareable(step.get("value")), step.get("answer"))

        def loader(ctx: LoadContext) -> Any:
            begin(ctx)
            time.sleep(step.get("ms", 0) / 1000)
            return answer()

        async def aloader(ctx: LoadContext) -> Any:
            begin(ctx)
            await asyncio.sleep(step.get("ms", 0) / 1000)
            return answer()

        if "keys" not in step:
            if mode == "asyncio":
                return asyncio.run(cache.aget_or_load(step["key"], aloader))
            return cache.get_or_load(step["key"], loader)

        def batch_loader(asked: list[str]) -> dict[str, Any]:
            nonlocal loads
            with lock:
                loads += 1
            time.sleep(step.get("ms", 0) / 1000)
            if "fail" in step:
                raise _LoaderFailed(step["fail"])
            values = step.get("values", {})
            return {k: ABSENT if values[k] is None else values[k] for k in asked if k in values}

        async def abatch_loader(asked: list[str]) -> dict[str, Any]:
            nonlocal loads
            with lock:
                loads += 1
            await asyncio.sleep(step.get("ms", 0) / 1000)
            if "fail" in step:
                raise _LoaderFailed(step["fail"])
            values = step.get("values", {})
            return {k: ABSENT if values[k] is None else values[k] for k in asked if k in values}

        try:
            if mode == "asyncio":
                got = asyncio.run(cache.aget_or_load_many(step["keys"], abatch_loader))
            else:
                got = cache.get_or_load_many(step["keys"], batch_loader)
        except BatchError as e:
            # The scenario's answer to a failed batch: the first failed key's error.
            raise next(v for v in e.values if isinstance(v, BaseException)) from None
        return [None if v is ABSENT else v for v in got]

    def call_op(cache: Cache, what: str, *args: Any, **kwargs: Any) -> Any:
        """`cache.what(...)`, or in asyncio mode `await cache.awhat(...)` on a loop."""
        if mode != "asyncio":
            return getattr(cache, what)(*args, **kwargs)

        async def run() -> Any:
            return await getattr(cache, "a" + what)(*args, **kwargs)

        return asyncio.run(run())

    def timed(f: Any) -> tuple[Any, BaseException | None, float]:
        t0 = time.monotonic()
        try:
            return f(), None, time.monotonic() - t0
        except Exception as exc:
            return None, exc, time.monotonic() - t0

    def answered(cache: Cache, step: dict[str, Any]) -> tuple[Any, BaseException | None, float]:
        """A call's answer, its exception, and when it was answered."""
        try:
            return call(cache, step), None, time.monotonic()
        except Exception as exc:
            return None, exc, time.monotonic()

    with ThreadPoolExecutor(max_workers=128, thread_name_prefix="conformance") as pool:
        for step in scenario["steps"]:
            p = procs[step.get("p", 0)]
            op = step["op"]
            if op in ("get_or_load", "get_or_load_many"):
                seen: list[dict[str, Any]] = []
                _check(name, step, *timed(lambda: call(p, step, seen)))
                for field, want in step.get("expect_context", {}).items():
                    assert seen, f"{name}: {step}: no load ran"
                    assert seen[0][field] == want, f"{name}: {step}: context {field}: {seen[0]}"
            elif op in ("load", "load_many"):
                since = time.monotonic()
                before = progress(p)
                futures = [pool.submit(answered, p, step) for _ in range(step.get("callers", 1))]
                running[step["id"]] = (since, futures)
                # Let the calls reach the fleet before the next step: one of them loads, or asked
                # the fleet for a lock (a loaded machine can take longer than any fixed pause);
                # then a moment for the step's other callers.
                until = time.monotonic() + 2
                while progress(p) == before and time.monotonic() < until:
                    time.sleep(0.002)
                time.sleep(0.02)
            elif op == "await":
                since, futures = running.pop(step["id"])
                for f in futures:
                    got, exc, at = f.result()
                    _check(name, step, got, exc, at - since)
            elif op == "get":
                _check(name, step, *timed(lambda: call_op(p, "get", step["key"])))
            elif op == "set":
                _check(
                    name,
                    step,
                    *timed(lambda: call_op(p, "set", step["key"], step["value"], tags=step.get("tags"))),
                )
            elif op == "invalidate_tag":
                soft = step.get("soft", False)
                for _ in range(step.get("repeat", 1)):
                    if "tags" in step:
                        _check(name, step, *timed(lambda: call_op(p, "invalidate_tags", step["tags"], soft=soft)))
                    else:
                        _check(name, step, *timed(lambda: call_op(p, "invalidate_tag", step["tag"], soft=soft)))
            elif op == "invalidate":
                _check(name, step, *timed(lambda: call_op(p, "invalidate", step["key"])))
            elif op == "bump":
                _check(name, step, *timed(lambda: call_op(p, "bump", step["ns"])))
            elif op == "sleep":
                time.sleep(step["ms"] / 1000)
            elif op == "fault":
                drops = [p.metrics().redis["subscription_drops"] for p in procs]  # type: ignore[index]
                tier.fault(step["fault"], step.get("ns"), bus is not None)
                if step["fault"] == "bus_down":
                    # Every process saw its subscription drop before the scenario goes on.
                    _wait_for(procs, drops, "subscription_drops", "the bus drop was not seen")
                    bus = [p.metrics().redis["notices_lost"] for p in procs]  # type: ignore[index]
                if step["fault"] == "up":
                    _wait_until_reachable(procs)
                    if bus is not None:
                        # Every subscription was confirmed again (and the gap counted lost).
                        _wait_for(procs, bus, "notices_lost", "the bus was not repaired")
                        bus = None
            elif op == "resubscribe":
                assert tier.store is not None, "resubscribe is memory only"
                tier.store.restart_subscriptions()
            elif op in ("plant", "plant_epoch", "plant_lock"):
                tier.plant(step)
            elif op in ("outside_delete", "outside_flush"):
                tier.outside(step)
            elif op in ("plant_tag", "evict_tag"):
                tier.plant_tag(step)
            elif op == "expect_loads":
                assert loads == step["n"], f"{name}: loads = {loads}, expected {step['n']}"
            elif op == "expect_metrics":
                m = p.metrics()
                ns = m.namespace(step.get("ns", ""))
                for field, want in step.get("l1", {}).items():
                    got = getattr(ns.counters, field) if ns is not None else 0
                    _counter(name, field, want, got)
                for field, want in step.get("tier", {}).items():
                    assert m.redis is not None
                    _counter(name, field, want, m.redis[field])
            else:
                raise AssertionError(f"{name}: unknown op {op}")
        for _, futures in running.values():
            for f in futures:
                f.exception()


def _wait_for(procs: list[Cache], before: list[int], counter: str, what: str) -> None:
    """Waits until the tier counter `counter` of every process passed its value in `before`."""
    deadline = time.monotonic() + 10
    for p, b in zip(procs, before):
        while p.metrics().redis[counter] <= b:  # type: ignore[index]
            assert time.monotonic() < deadline, what
            time.sleep(0.005)


def _wait_until_reachable(procs: list[Cache]) -> None:
    """After the tier comes back, every process reaches it again before the scenario goes on."""
    deadline = time.monotonic() + 10
    for p in procs:
        while True:
            try:
                p.set("conformance-probe:k", None)
                break
            except BackendError:
                assert time.monotonic() < deadline, "the tier did not come back"
                time.sleep(0.05)


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())  # type: ignore[no-any-return]


# The optional features of the format (conformance/README.md, ``requires``) this runner plays.
SUPPORTED: frozenset[str] = frozenset({"load_context", "tags", "tti", "outside_writes"})


def _skip_unsupported(scenario: dict[str, Any]) -> None:
    missing = sorted(set(scenario.get("requires", [])) - SUPPORTED)
    if missing:
        pytest.skip(f"this runner does not support {missing} yet")


def test_the_scenarios_are_there() -> None:
    assert len(SCENARIOS) >= 10


@pytest.mark.parametrize("path", PLAYED, ids=[p.stem for p in PLAYED])
def test_scenario_on_the_memory_tier(path: Path) -> None:
    _skip_unsupported(_load(path))
    play(path.stem, _load(path), Tier(None))


@pytest.mark.parametrize(
    "path",
    [p for p in PLAYED if "redis" in _load(p).get("tiers", [])],
    ids=[p.stem for p in PLAYED if "redis" in _load(p).get("tiers", [])],
)
def test_scenario_on_redis(path: Path) -> None:
    _skip_unsupported(_load(path))
    server = RedisServer()
    try:
        play(path.stem, _load(path), Tier(server))
    finally:
        server.stop()


@pytest.mark.parametrize(
    "path",
    [p for p in PLAYED if "memcached" in _load(p).get("tiers", [])],
    ids=[p.stem for p in PLAYED if "memcached" in _load(p).get("tiers", [])],
)
def test_scenario_on_memcached(path: Path) -> None:
    _skip_unsupported(_load(path))
    server = Memcached()
    try:
        play(path.stem, _load(path), MemcachedTier(server))
    finally:
        server.stop()


# The asyncio mode: the scenarios with batches (and every other call of theirs) played with
# the asyncio calls.
ASYNC_PLAYED = [
    p for p in PLAYED if any(s["op"] in ("get_or_load_many", "load_many") for s in _load(p)["steps"])
]


@pytest.mark.parametrize("path", ASYNC_PLAYED, ids=[p.stem for p in ASYNC_PLAYED])
def test_batch_scenario_in_asyncio_on_the_memory_tier(path: Path) -> None:
    _skip_unsupported(_load(path))
    play(path.stem, _load(path), Tier(None), mode="asyncio")


@pytest.mark.parametrize(
    "path",
    [p for p in ASYNC_PLAYED if "redis" in _load(p).get("tiers", [])],
    ids=[p.stem for p in ASYNC_PLAYED if "redis" in _load(p).get("tiers", [])],
)
def test_batch_scenario_in_asyncio_on_redis(path: Path) -> None:
    _skip_unsupported(_load(path))
    server = RedisServer()
    try:
        play(path.stem, _load(path), Tier(server), mode="asyncio")
    finally:
        server.stop()


@pytest.mark.parametrize(
    "path",
    [p for p in ASYNC_PLAYED if "memcached" in _load(p).get("tiers", [])],
    ids=[p.stem for p in ASYNC_PLAYED if "memcached" in _load(p).get("tiers", [])],
)
def test_batch_scenario_in_asyncio_on_memcached(path: Path) -> None:
    _skip_unsupported(_load(path))
    server = Memcached()
    try:
        play(path.stem, _load(path), MemcachedTier(server), mode="asyncio")
    finally:
        server.stop()
