"""Integration fixtures: live Redis and Postgres, real worker processes, CLI subprocesses.

Never eager: every chain here runs in a separate ``finagent worker`` process (prefork) that
consumes a private Redis database; producers are ``finagent`` CLI subprocesses.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.conftest import REPO_ROOT
from tests.support.private_services import PrivateRedis
from tests.support.redis_db import redis_url_for_tests

#: A worker answers its first ping ~3 s after its start here with bytecode (imports, then the
#: warm-up of ``tasks.app``: scipy and one indicator run), 8-12 s without or on a loaded machine.
WORKER_START_TIMEOUT_S = 90
FINAGENT = str(Path(sys.executable).with_name("finagent"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test of this folder ``integration`` (a ``pytestmark`` in a conftest applies to
    nothing: pytest reads it from test modules only), so ``-m "not integration"`` skips them."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def redis_url() -> str:
    """This process's Redis database, flushed: database 0 of a ``redis-server`` the process
    started for its tests, or the shared server's database ``FINAGENT_TEST_REDIS_DB`` pins
    (``tests.support.redis_db``); skips (fails in CI) when neither is possible."""
    try:
        url = redis_url_for_tests()
        client = redis.Redis.from_url(url, socket_connect_timeout=2)
        client.ping()
    except (RuntimeError, redis.RedisError) as exc:
        reason = f"no Redis for the tests: {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    client.flushdb()  # ours, or the one the developer pinned for the tests
    return url


@dataclass
class Service:
    """The environment of one service-mode setup and helpers to run the CLI in it."""

    env: dict[str, str]
    tmp: Path
    logs: list[Path] = field(default_factory=list)

    def cli(
        self, *args: str, timeout: float = 120, extra_env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run ``finagent ARGS`` to completion; returns the process (stdout/stderr as text)."""
        return subprocess.run(
            [FINAGENT, *args],
            env={**self.env, **(extra_env or {})},
            cwd=self.tmp,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def analyze_json(self, *args: str) -> dict[str, Any]:
        """``finagent analyze ARGS --json``; asserts exit 0 and exactly one JSON object on stdout."""
        proc = self.cli("analyze", *args, "--json")
        assert proc.returncode == 0, proc.stderr[-3000:]
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        assert len(lines) == 1, proc.stdout
        return json.loads(lines[0])


def _base_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env.update(
        PYTHONPATH=str(REPO_ROOT),
        FINAGENT_SERVICE_STATE_DIR=str(tmp / "state"),
        FINAGENT_TEST_FAULT_DIR=str(tmp / "faults"),
        FINAGENT_DATA_TOOL_BACKOFF_BASE="0.05",  # the schedule is unit-tested; keep the suite fast
        FINAGENT_SERVICE_WAIT_TIMEOUT="120",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
    )
    return env


@pytest.fixture
def service(redis_url: str, make_pg_database: Callable[..., str], tmp_path: Path) -> Iterator[Service]:
    """Service-mode environment: private Redis db (flushed), a fresh migrated Postgres database.

    At teardown this process closes its pooled connections (to every database it read): the
    PostgreSQL server is shared, and a session's worth of idle pools (one per test's database)
    took connections other test runs needed ("sorry, too many clients already")."""
    from db.engine import dispose_engines

    redis.Redis.from_url(redis_url).flushdb()
    db_url = make_pg_database(migrated=True)
    env = _base_env(tmp_path)
    env.update(FINAGENT_SERVICE_BROKER_URL=redis_url, FINAGENT_SERVICE_DATABASE_URL=db_url)
    yield Service(env=env, tmp=tmp_path)
    dispose_engines(close=True)


def _ping(env: dict[str, str], hostname: str, *, timeout: float = 1.0) -> bool:
    """Whether the worker ``hostname`` answers Celery's control ping on the broker of ``env``
    (``FINAGENT_SERVICE_BROKER_URL``) within ``timeout`` seconds; ``False`` when the broker
    cannot be reached either.

    Asked from this process through a bare Celery app on that broker (the worker's own ping
    handler answers; asking needs nothing of finagent's app), and done as soon as the one reply
    is in (``limit=1``). A ``python -c`` process importing ``tasks.app`` per poll cost ~2 s of
    CPU each, ~6 s per worker start on 2 cores, while the worker itself was starting."""
    from celery import Celery  # in the function: only tasks/ imports Celery at module level

    app = Celery(broker=env["FINAGENT_SERVICE_BROKER_URL"], set_as_current=False)
    try:
        return bool(app.control.ping(destination=[hostname], timeout=timeout, limit=1))
    except Exception:  # the broker is down or restarting: not answering
        return False
    finally:
        app.close()


@pytest.fixture
def start_worker(service: Service) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Factory: start ``finagent worker`` (prefork, 2 processes) with extra env and optionally
    only ``queues`` (comma-separated); waits until it answers a ping. Every worker is stopped
    (TERM, then KILL) at teardown."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(queues: str | None = None, **extra_env: str) -> subprocess.Popen[bytes]:
        hostname = f"test-{uuid.uuid4().hex[:8]}@localhost"
        only = ["-Q", queues] if queues else []
        log = service.tmp / f"worker-{len(procs)}.log"
        service.logs.append(log)
        env = {**service.env, **extra_env}
        with log.open("wb") as fh:
            proc = subprocess.Popen(
                [FINAGENT, "worker", "--concurrency", "2", "--loglevel", "INFO", "-n", hostname, *only],
                env=env,
                cwd=service.tmp,
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        procs.append(proc)
        deadline = time.monotonic() + WORKER_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"worker exited with {proc.returncode}: {log.read_text()[-3000:]}")
            if _ping(env, hostname, timeout=0.5):  # the ping's wait is the poll interval
                return proc
        raise RuntimeError(
            f"worker did not answer a ping in {WORKER_START_TIMEOUT_S}s: {log.read_text()[-3000:]}"
        )

    yield start
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    """A private Redis (``tests.support.private_services``), stopped after the test; skips when
    ``redis-server`` is not installed."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server not installed: the test runs its own Redis")
    server = PrivateRedis(folder=tmp_path / "redis")
    server.start()
    try:
        yield server
    finally:
        server.close()
