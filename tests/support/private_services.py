"""Private services for tests that restart them: a free TCP port, and a ``redis-server`` of
the test's own on it without persistence (the shared Redis on 6379 is never stopped or flushed
by a fault test; docs/design.md, "Testing rules")."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    """A TCP port nobody listens on right now (the kernel's choice for port 0)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """In the child before ``exec``: SIGTERM it when the parent process dies (Linux
    ``prctl(PR_SET_PDEATHSIG)``; elsewhere nothing: the parent's exit handler stops it)."""
    import ctypes
    import signal
    import sys

    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


class PrivateRedis:
    """A redis-server of our own without persistence; ``shutdown_nosave`` + ``start`` is a
    restart that loses every key (queues, unacked messages, results, redbeat's lock)."""

    def __init__(self, *, folder: Path, port: int | None = None, die_with_parent: bool = False) -> None:
        """Remember where to run; nothing runs yet. ``die_with_parent``: on Linux the server
        gets SIGTERM when this process ends, however it ends (``prctl(PR_SET_PDEATHSIG)``), so
        a killed test run leaves no server behind."""
        self.folder = folder
        self.die_with_parent = die_with_parent
        self.port = port or free_port()
        self.logfile = folder / f"redis-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self, db: int = 0) -> str:
        """``redis://127.0.0.1:PORT/db``."""
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self, *, timeout: float = 15) -> None:
        """Start redis-server on the port and wait for PING. Raises ``RuntimeError``."""
        import redis

        self.folder.mkdir(parents=True, exist_ok=True)
        with self.logfile.open("ab") as fh:
            self.proc = subprocess.Popen(
                ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", str(self.folder), "--protected-mode", "no"],
                stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=_die_with_parent if self.die_with_parent else None,
            )  # fmt: skip
        client = redis.Redis(port=self.port, socket_connect_timeout=1)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"redis-server exited {self.proc.returncode}: {self.logfile.read_text()[-2000:]}"
                )
            with contextlib.suppress(redis.RedisError):
                if client.ping():
                    return
            time.sleep(0.1)
        raise RuntimeError(f"redis-server on {self.port} did not answer PING in {timeout}s")

    def shutdown_nosave(self) -> None:
        """``SHUTDOWN NOSAVE`` (nothing is written: every message is lost) and wait for exit."""
        import redis

        with contextlib.suppress(redis.RedisError):
            redis.Redis(port=self.port, socket_connect_timeout=1).shutdown(nosave=True)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)

    def close(self) -> None:
        """Stop it if it runs."""
        if self.proc is not None and self.proc.poll() is None:
            self.shutdown_nosave()
