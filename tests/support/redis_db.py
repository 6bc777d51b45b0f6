"""Which Redis the tests use: by default a throwaway ``redis-server`` each pytest process (each
pytest-xdist worker) starts on a free port and stops at exit, so the suite never writes to, let
alone flushes, a database of a shared server; a developer who wants the shared server on
127.0.0.1:6379 says which databases with ``FINAGENT_TEST_REDIS_DB`` (docs/testing.md)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from tests.support.private_services import PrivateRedis

#: The shared server the pinned databases are on (``FINAGENT_TEST_REDIS_DB``).
SHARED_HOST, SHARED_PORT = "127.0.0.1", 6379
_server: PrivateRedis | None = None


def redis_url_for_tests(environ: Mapping[str, str] | None = None) -> str:
    """The Redis URL of this pytest process's tests: ``redis://127.0.0.1:6379/<N+K>`` when
    ``FINAGENT_TEST_REDIS_DB`` pins databases of the shared server (:func:`redis_db_for_process`),
    else database 0 of this process's own server (:func:`private_test_redis`, started on first
    use). Raises ``RuntimeError`` when neither is possible (no ``redis-server`` on PATH)."""
    env = os.environ if environ is None else environ
    if env.get("FINAGENT_TEST_REDIS_DB") is not None:
        return f"redis://{SHARED_HOST}:{SHARED_PORT}/{redis_db_for_process(env)}"
    return private_test_redis().url(0)


def private_test_redis() -> PrivateRedis:
    """This process's throwaway ``redis-server`` (no persistence, a free port, a temporary
    folder), started on the first call, stopped at exit and, on Linux, with this process
    whatever ends it. Raises ``RuntimeError`` without ``redis-server`` on PATH."""
    global _server
    if _server is None:
        if shutil.which("redis-server") is None:
            raise RuntimeError(
                "redis-server is not on PATH: install it (the tests start their own), or set "
                "FINAGENT_TEST_REDIS_DB=N to use databases N.. of the server on 127.0.0.1:6379"
            )
        folder = Path(tempfile.mkdtemp(prefix="finagent-test-redis-"))
        server = PrivateRedis(folder=folder, die_with_parent=True)
        server.start()
        atexit.register(shutil.rmtree, folder, True)
        atexit.register(server.close)
        _server = server
    return _server


def redis_db_for_process(
    environ: Mapping[str, str] | None = None, pid: int | None = None, ppid: int | None = None
) -> int:
    """The database number of the shared server a pytest process uses when the developer pins
    databases with ``FINAGENT_TEST_REDIS_DB`` (0-15; Redis' default 16 databases); without it the
    tests use a server of their own (:func:`redis_url_for_tests`) and this number is not used. Each
    pytest-xdist worker (``PYTEST_XDIST_WORKER`` = ``gw0``, ``gw1``, ...) takes its own, because
    every ``service`` fixture flushes the database and the workers run in parallel:

    - ``FINAGENT_TEST_REDIS_DB=N`` pins it (parallel local runs in several worktrees never share
      one): worker ``gwK`` uses ``N + K``, a run without xdist uses ``N``;
    - otherwise ``10 + (run % 6 + K) % 6``, where ``run`` is the pid of the process that started
      the workers (the pytest process itself without xdist), so the workers of one run differ.

    Raises ``ValueError`` when a pinned ``N + K`` falls outside 0-15."""
    env = os.environ if environ is None else environ
    worker = env.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    pinned = env.get("FINAGENT_TEST_REDIS_DB")
    if pinned is not None:
        db = int(pinned) + index
        if not 0 <= db <= 15:
            raise ValueError(
                f"FINAGENT_TEST_REDIS_DB={pinned} with xdist worker {worker} gives Redis database {db}, "
                "outside 0-15: pin a lower number or run fewer workers (-n)"
            )
        return db
    own = pid if pid is not None else os.getpid()
    parent = ppid if ppid is not None else os.getppid()
    run = parent if worker else own
    return 10 + (run % 6 + index) % 6
