"""Private redis-server instances for the Redis tests, and a minimal RESP client to look at
(or corrupt) what herdless wrote. No Python Redis library is needed."""

from __future__ import annotations

import os
import signal
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Any

import pytest


def require_redis_server() -> str:
    """The redis-server binary; skips the test loudly without it (fails under CI=true)."""
    path = shutil.which("redis-server")
    if path is None:
        message = "redis-server is not installed: the Redis tier tests did not run"
        if os.environ.get("CI") == "true":
            pytest.fail(message + " (CI=true requires them)")
        pytest.skip(message)
    return path


def stop_process(pid: int) -> None:
    """SIGSTOP to ``pid``, returning once every thread of it is stopped. ``kill`` only queues
    the signal: the kernel stops one thread, which then stops the others, so on a busy
    machine a server's worker thread could still answer a request sent right after ``kill``
    returned."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 10
    while not _all_stopped(pid):
        assert time.monotonic() < deadline, f"process {pid} did not stop"
        time.sleep(0.001)


def _all_stopped(pid: int) -> bool:
    """Whether every thread of ``pid`` is stopped (state ``T`` in /proc/<pid>/task/*/stat)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # a thread that exited meanwhile holds nothing back
        # The state follows the command name, which is in parentheses and may hold any.
        state = stat.rpartition(")")[2].split()[:1]
        if state and state != ["T"]:
            return False
    return True


def free_port(bus: bool = False) -> int:
    """A free loopback port; with ``bus``, one whose cluster bus port (+10000) is free too."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if not bus:
            return port
        if port < 50000:
            with socket.socket() as b:
                try:
                    b.bind(("127.0.0.1", port + 10000))
                except OSError:
                    continue
            return port


class RedisServer:
    """A redis-server on a free loopback port, without persistence, stopped by its pid."""

    def __init__(self, extra: tuple[str, ...] = ()) -> None:
        self.binary = require_redis_server()
        self.port = free_port(bus=bool(extra))
        self.dir = tempfile.mkdtemp(prefix="herdless-py-redis-")
        self.extra = extra
        self._spawn()

    def _spawn(self) -> None:
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir, *self.extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while True:
            try:
                if command(self.port, "PING") == "PONG":
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError("redis-server did not start")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL (Redis down: connections refused until `restart`)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def restart(self) -> None:
        """Starts again, empty, on the same port."""
        self.kill()
        self._spawn()

    def pause(self) -> None:
        """SIGSTOP: the server hangs with its sockets open (every thread stopped on return)."""
        stop_process(self.proc.pid)

    def resume(self) -> None:
        """SIGCONT."""
        os.kill(self.proc.pid, signal.SIGCONT)

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


class RedisCluster:
    """A three-node Redis Cluster on loopback ports, made with ``redis-cli --cluster create``."""

    def __init__(self) -> None:
        extra = ("--cluster-enabled", "yes", "--cluster-node-timeout", "2000")
        self.nodes = [RedisServer(extra) for _ in range(3)]
        try:
            subprocess.run(
                ["redis-cli", "--cluster", "create",
                 *(f"127.0.0.1:{n.port}" for n in self.nodes),
                 "--cluster-replicas", "0", "--cluster-yes"],
                check=True, capture_output=True, timeout=60,
            )
            deadline = time.monotonic() + 20
            while not all(b"cluster_state:ok" in command(n.port, "CLUSTER", "INFO")
                          for n in self.nodes):
                assert time.monotonic() < deadline, "the cluster did not become ok"
                time.sleep(0.1)
        except BaseException:
            self.stop()
            raise

    @property
    def urls(self) -> list[str]:
        return [n.url for n in self.nodes]

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()


class Resp:
    """One connection, one command at a time (RESP2)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Resp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def command(self, *args: str | bytes | int) -> Any:
        out = [f"*{len(args)}\r\n".encode()]
        for a in args:
            b = a if isinstance(a, bytes) else str(a).encode()
            out.append(f"${len(b)}\r\n".encode() + b + b"\r\n")
        self.sock.sendall(b"".join(out))
        return self._reply()

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n: int) -> bytes:
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def _reply(self) -> Any:
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise RuntimeError(f"unexpected reply {line!r}")


def command(port: int, *args: str | bytes | int) -> Any:
    """One command on a connection of its own."""
    with Resp(port) as r:
        return r.command(*args)


def stem(prefix: str, namespace: str) -> str:
    """The hash-tagged stem of a namespace's Redis names (PROTOCOL.md section 1)."""
    tag = namespace.replace("%", "%25").replace("{", "%7B").replace("}", "%7D") or "%"
    return f"{prefix}:{{{tag}}}"


def value_key(prefix: str, key: str) -> str:
    """The Redis name of a herdless key's entry (PROTOCOL.md section 1)."""
    return f"{stem(prefix, key.split(':', 1)[0])}:v:{key}"


def lock_key(prefix: str, key: str) -> str:
    """The Redis name of a herdless key's lock."""
    return f"{stem(prefix, key.split(':', 1)[0])}:l:{key}"


def epoch_key(prefix: str, namespace: str) -> str:
    """The Redis name of a namespace's epoch."""
    return f"{stem(prefix, namespace)}:e"


def tag_key(prefix: str, tag: str) -> str:
    """The Redis name of an entry tag's record (PROTOCOL.md section 1)."""
    escaped = tag.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")
    return f"{prefix}:{{t:{escaped}}}:t"
