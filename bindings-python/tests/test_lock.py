"""``Cache.lock``: the engine's lock on a key from Python threads and processes (lease,
extension, release by token and the failure policy are the engine's: PROTOCOL.md, "Locks
held outside a load"; redis/tests/lock.rs checks them in Rust)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from herdless import BackendError, Cache, CacheClosed, FleetLock, LockTimeout
from redis_support import RedisServer


def test_a_lock_excludes_threads_and_answers_like_threading_lock() -> None:
    cache = Cache()
    inside, most, done = [0], [0], []
    guard = threading.Lock()

    def work() -> None:
        for _ in range(10):
            with cache.lock("jobs:one"):
                with guard:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                time.sleep(0.001)
                with guard:
                    inside[0] -= 1
            done.append(1)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert most == [1] and len(done) == 60
    lock = cache.lock("jobs:one")
    with pytest.raises(RuntimeError):
        lock.release()
    with pytest.raises(ValueError):
        lock.acquire(False, 1)
    assert isinstance(lock, FleetLock) and lock.key == "jobs:one" and "not held" in repr(lock)
    cache.close()
    with pytest.raises(CacheClosed):
        lock.acquire()


def test_with_raises_lock_timeout() -> None:
    cache = Cache()
    with cache.lock("k"):
        with pytest.raises(LockTimeout) as info:
            with cache.lock("k", timeout=0.05):
                pass
        assert isinstance(info.value, TimeoutError) and info.value.waited == 0.05


def test_processes_over_redis_exclude_each_other_and_a_killed_holder_frees_at_lease() -> None:
    server = RedisServer()
    try:
        here = Cache(redis=server.url, lease=1)
        # Another process takes the lock and is killed while holding it.
        code = (
            "import sys, time, herdless\n"
            f"c = herdless.Cache(redis={server.url!r}, lease=1)\n"
            "l = c.lock('jobs:k'); assert l.acquire(); print('held', flush=True)\n"
            "time.sleep(60)\n"
        )
        holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        lock = here.lock("jobs:k")
        time.sleep(2.5)  # more than two leases: the live holder extends it
        assert lock.locked() and not lock.acquire(False)
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
        holder.stdout.close()
        assert lock.acquire(timeout=30), "free once the dead holder's lease ran out"
        # A set of the key breaks it: lost, and its release says so.
        here.set("jobs:k", "written")
        deadline = time.monotonic() + 10
        while not lock.lost and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lock.lost and lock.release() is False
        # Redis down: a lock is an error, never a lock that looks held.
        server.kill()
        with pytest.raises(BackendError):
            here.lock("jobs:other").acquire(timeout=1)
    finally:
        server.stop()
