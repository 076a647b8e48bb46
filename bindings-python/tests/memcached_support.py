"""Private memcached servers for the memcached tier's tests (``Cache(redis="memcached://...")``),
and raw meta commands to plant what herdless did not write. No Python memcached library is
needed."""

from __future__ import annotations

import math
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

from redis_support import free_port, stop_process


def require_memcached() -> str:
    """The memcached binary; skips the test loudly without it (fails under CI=true)."""
    path = shutil.which("memcached")
    if path is None:
        message = "memcached is not installed: the memcached tier tests did not run"
        if os.environ.get("CI") == "true":
            pytest.fail(message + " (CI=true requires them)")
        pytest.skip(message)
    return path


class Memcached:
    """A memcached on a free loopback port, killed, stopped and restarted by its pid."""

    def __init__(self) -> None:
        self.binary = require_memcached()
        self.port = free_port()
        self.url = f"memcached://127.0.0.1:{self.port}"
        self._spawn()

    def _spawn(self) -> None:
        args = [self.binary, "-l", "127.0.0.1", "-U", "0", "-p", str(self.port)]
        if os.geteuid() == 0:
            args += ["-u", "root"]  # memcached refuses root unless told which user to be
        self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("memcached did not start") from None
                time.sleep(0.02)

    @property
    def running(self) -> bool:
        """Whether the process is there (running or stopped), as opposed to killed."""
        return self.proc is not None

    def kill(self) -> None:
        """SIGKILL (memcached down: connections refused until `restart`)."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None

    stop = kill

    def restart(self) -> None:
        """Starts again, empty, on the same port."""
        self.kill()
        self._spawn()

    def pause(self) -> None:
        """SIGSTOP: connections stay open, nothing answers (every thread stopped on return)."""
        assert self.proc is not None
        stop_process(self.proc.pid)

    def resume(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)

    def raw(self, command: bytes) -> bytes:
        """Sends meta commands, answering what memcached said up to its no-op's answer."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall(command + b"mn\r\n")
            out = b""
            while not out.endswith(b"MN\r\n"):
                chunk = s.recv(65536)
                assert chunk, "memcached closed the connection"
                out += chunk
        return out

    def put(self, name: str, data: bytes, ttl_ms: int = 0) -> None:
        """Stores ``data`` under the item ``name`` (a write from outside herdless)."""
        ttl = math.ceil(ttl_ms / 1000) if ttl_ms else 0
        answer = self.raw(f"ms {name} {len(data)} T{ttl}\r\n".encode() + data + b"\r\n")
        assert answer.startswith(b"HD"), answer

    def plant_lease(self, name: str, ttl_ms: int) -> None:
        """A cold key's lease that no live process holds (a leader that died): its marker
        (PROTOCOL.md, "The memcached tier")."""
        self.put(name, b"herdless:lease:" + b"0" * 32, max(ttl_ms, 1))
