"""Single flight from threads: one loader call, one answer or one error for everyone."""

from __future__ import annotations

import _thread
import threading
import time
from typing import Any

import pytest
from conftest import Counting, expired, run_threads

from herdless import Cache, WaitTimeout


def test_64_threads_on_one_expired_key_make_one_loader_call(cache: Cache) -> None:
    expired(cache, "hot:key")
    loader = Counting(value={"answer": 42}, delay=0.2)
    results: list[Any] = [None] * 64

    def call(i: int) -> None:
        results[i] = cache.get_or_load("hot:key", loader)

    run_threads(64, call)
    assert loader.calls == 1
    assert all(r == results[0] for r in results)  # each caller its own copy
    assert results[0] == {"answer": 42}
    c = cache.metrics().namespace("hot")
    assert c is not None
    assert c.counters.loads == 1
    assert c.counters.coalesced_waiters >= 1
    assert cache._flights_in_progress() == 0


def test_a_raising_loader_reaches_every_waiter_as_the_same_exception(cache: Cache) -> None:
    calls = 0

    class OriginDown(Exception):
        pass

    def loader() -> Any:
        nonlocal calls
        calls += 1
        time.sleep(0.2)
        raise OriginDown("db unreachable")

    caught: list[BaseException | None] = [None] * 16

    def call(i: int) -> None:
        try:
            cache.get_or_load("k:1", loader)
        except OriginDown as e:
            caught[i] = e

    run_threads(16, call)
    assert calls == 1
    assert all(isinstance(e, OriginDown) for e in caught)
    assert all(e is caught[0] for e in caught)
    assert str(caught[0]) == "db unreachable"
    # Errors are never cached: the next call loads again.
    assert cache.get_or_load("k:1", lambda: "back") == "back"
    assert cache.metrics().total.load_errors == 1


def test_waiters_see_the_loaders_frames_in_the_traceback(cache: Cache) -> None:
    started = threading.Event()

    def failing_loader_frame() -> Any:
        started.set()
        time.sleep(0.2)
        raise LookupError("nope")

    leader = threading.Thread(
        target=lambda: pytest.raises(LookupError, cache.get_or_load, "k:tb", failing_loader_frame),
        daemon=True,
    )
    leader.start()
    assert started.wait(10)
    with pytest.raises(LookupError) as info:
        cache.get_or_load("k:tb", lambda: "never")
    names = [entry.name for entry in info.traceback]
    assert "failing_loader_frame" in names
    leader.join(10)


def test_keyboard_interrupt_in_the_leader_hands_the_load_over(cache: Cache) -> None:
    calls = 0
    lock = threading.Lock()
    leading = threading.Event()

    def loader() -> str:
        nonlocal calls
        with lock:
            calls += 1
            first = calls == 1
        if first:
            leading.set()
            time.sleep(0.2)
            raise KeyboardInterrupt
        return "loaded by a waiter"

    outcomes: list[Any] = [None] * 8

    def call(i: int) -> None:
        if i != 0:
            assert leading.wait(10)  # thread 0 leads
        try:
            outcomes[i] = cache.get_or_load("k:ki", loader)
        except KeyboardInterrupt:
            outcomes[i] = "interrupted"

    run_threads(8, call)
    assert outcomes[0] == "interrupted"
    assert outcomes[1:] == ["loaded by a waiter"] * 7
    assert calls == 2
    assert cache.metrics().total.abandoned_loads == 1


def test_system_exit_in_the_leader_hands_the_load_over(cache: Cache) -> None:
    leading = threading.Event()

    def leader() -> None:
        def exit_loader() -> str:
            leading.set()
            time.sleep(0.2)
            raise SystemExit(3)

        with pytest.raises(SystemExit):
            cache.get_or_load("k:exit", exit_loader)

    t = threading.Thread(target=leader, daemon=True)
    t.start()
    assert leading.wait(10)
    assert cache.get_or_load("k:exit", lambda: "mine") == "mine"
    t.join(10)


def test_ctrl_c_interrupts_a_waiting_main_thread(cache: Cache) -> None:
    assert threading.current_thread() is threading.main_thread()
    release = threading.Event()
    leading = threading.Event()

    def slow() -> str:
        leading.set()
        release.wait(30)
        return "late"

    leader = threading.Thread(target=cache.get_or_load, args=("k:ctrl-c", slow), daemon=True)
    leader.start()
    assert leading.wait(10)
    timer = threading.Timer(0.2, _thread.interrupt_main)
    timer.start()
    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        cache.get_or_load("k:ctrl-c", lambda: "never")
    # Far less than the 5 s wait_timeout: the wait itself was interrupted.
    assert time.monotonic() - began < 4
    release.set()
    leader.join(10)
    assert cache.get("k:ctrl-c") == "late"


def test_a_waiter_gives_up_after_wait_timeout() -> None:
    cache = Cache(wait_timeout=0.1, jitter=0)
    release = threading.Event()
    leading = threading.Event()

    def slow() -> str:
        leading.set()
        release.wait(30)
        return "late"

    leader = threading.Thread(target=cache.get_or_load, args=("k:slow", slow), daemon=True)
    leader.start()
    assert leading.wait(10)
    with pytest.raises(WaitTimeout) as info:
        cache.get_or_load("k:slow", lambda: "never")
    assert isinstance(info.value, TimeoutError)
    assert info.value.waited >= 0.1
    release.set()
    leader.join(10)


def test_a_loader_calling_another_key_works(cache: Cache) -> None:
    def outer() -> str:
        return "outer+" + str(cache.get_or_load("k:inner", lambda: "inner"))

    assert cache.get_or_load("k:outer", outer) == "outer+inner"
