"""A worker survives a restart of its Redis broker (no persistence) with late-ack tasks in flight,
and consumes again afterwards.

Before the fix the worker cancelled its running late-ack task on the connection loss, wrote RETRY
to the (same, unreachable) Redis result backend, and exited with ``Unrecoverable error``
(https://github.com/celery/celery/issues/7185; bench/redis_restart.py measures it repeatedly).
Everything here is private: a ``redis-server`` on a free port, a fresh Postgres database, one
``finagent worker`` subprocess; all stopped in ``finally``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import redis

from tests.conftest import REPO_ROOT
from tests.integration.conftest import FINAGENT
from tests.integration.ops_support import stop_process
from tests.support.private_services import PrivateRedis

REDIS_DOWN_S = 4.0  # the operator's observation: Redis started again 4 s after the shutdown
CONSUME_TIMEOUT_S = 30.0
READY_TIMEOUT_S = 120.0
IN_FLIGHT_TIMEOUT_S = 120.0
SLOW_PROVIDER = "tests.integration.test_broker_restart:slow_provider"
SLOW_BARS_S = 30.0  # each market-data request of the worker: research is surely running at the shutdown


def slow_provider() -> Any:
    """``FINAGENT_DATA_PROVIDER`` factory for the worker: the embedded provider with every
    ``bars`` request delayed ``SLOW_BARS_S`` s, so a research stage is in flight at the restart."""
    from agents.data.market.embedded import EmbeddedProvider

    class _Slow(EmbeddedProvider):
        def bars(self, *, symbol: str, start: date | None, end: date) -> Any:
            time.sleep(SLOW_BARS_S)
            return super().bars(symbol=symbol, start=start, end=end)

    return _Slow()


def _wait(check: Callable[[], bool], *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.1)


# A fresh interpreter per probe: an AsyncResult collected after its Redis has stopped reconnects
# in __del__ for ~40 s, which would stall whatever this pytest process runs next. The app is the
# project's (tasks.app), bound to the broker named by the environment when it is imported; on
# Redis its result backend is the broker, as the worker's.
_ECHO = """
import json, os, sys
url, queue, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
os.environ["FINAGENT_SERVICE_BROKER_URL"] = url
os.environ.pop("FINAGENT_SERVICE_RESULT_BACKEND", None)
from tasks.app import app
result = app.send_task("finagent.health.echo", queue=queue, expires=timeout)
print(json.dumps(result.get(timeout=timeout)), flush=True)
os._exit(0)
"""


_ACTIVE = """
import json, os, sys
url, hostname = sys.argv[1], sys.argv[2]
os.environ["FINAGENT_SERVICE_BROKER_URL"] = url
from tasks.app import app
active = app.control.inspect(destination=[hostname], timeout=2.0).active() or {}
print(json.dumps([t.get("name") for t in active.get(hostname, [])]), flush=True)
"""


def _running(broker_url: str, hostname: str, task: str) -> bool:
    """Whether worker ``hostname`` runs a ``task`` in a pool process now (``inspect active``)."""
    proc = subprocess.run(
        [sys.executable, "-c", _ACTIVE, broker_url, hostname],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    lines = proc.stdout.strip().splitlines()
    return proc.returncode == 0 and bool(lines) and task in json.loads(lines[-1])


def _echo_round_trip(broker_url: str, queue: str, timeout: float) -> dict[str, str] | None:
    """Send ``finagent.health.echo`` to ``queue`` and return its result, or None when no worker
    ran it within ``timeout`` s."""
    proc = subprocess.run(
        [sys.executable, "-c", _ECHO, broker_url, queue, str(timeout)],
        capture_output=True, text=True, timeout=timeout + 60, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        return None
    value: dict[str, str] = json.loads(proc.stdout)
    return value


def test_worker_survives_a_redis_restart_with_late_ack_tasks_in_flight(
    private_redis: PrivateRedis, make_pg_database: Callable[..., str], tmp_path: Path
) -> None:
    db_url = make_pg_database(migrated=True)
    broker_url = f"redis://127.0.0.1:{private_redis.port}/0"
    probe_queue = f"restart_probe_{uuid.uuid4().hex[:6]}"
    hostname = f"restart-{uuid.uuid4().hex[:8]}@localhost"
    producer_env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    producer_env.update(
        PYTHONPATH=str(REPO_ROOT),
        FINAGENT_SERVICE_BROKER_URL=broker_url,
        FINAGENT_SERVICE_DATABASE_URL=db_url,
        FINAGENT_SERVICE_STATE_DIR=str(tmp_path / "state"),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
    )
    worker_env = {
        **producer_env,
        "FINAGENT_DATA_PROVIDER": "tests.integration.test_broker_restart:slow_provider",
    }
    log = tmp_path / "worker.log"
    queues = "research,analysis,recommendation,review,control," + probe_queue
    with log.open("wb") as fh:
        worker = subprocess.Popen(
            [FINAGENT, "worker", "--concurrency", "2", "--loglevel", "INFO", "-Q", queues, "-n", hostname],
            env=worker_env,
            cwd=tmp_path,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def text() -> str:
        return log.read_text(errors="replace")

    try:
        _wait(
            lambda: " ready." in text() or worker.poll() is not None, timeout=READY_TIMEOUT_S, what="worker"
        )
        assert worker.poll() is None, text()[-3000:]
        for _ in range(2):  # one late-ack research stage per pool process
            proc = subprocess.run(
                [FINAGENT, "analyze", "AAPL", "--as-of", "2012-06-29", "--no-wait"],
                env=producer_env, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr[-3000:]
        # a research stage running in a pool process (inspect's "active"), not only received: the
        # connection loss cancels running late-ack tasks, which is the path under test
        _wait(
            lambda: _running(broker_url, hostname, "finagent.research"),
            timeout=IN_FLIGHT_TIMEOUT_S,
            what="a research stage running",
        )

        private_redis.shutdown_nosave()
        time.sleep(REDIS_DOWN_S)
        private_redis.start()

        echoed = _echo_round_trip(broker_url, probe_queue, CONSUME_TIMEOUT_S)

        log_text = text()
        # the path under test ran: a late-ack task was in flight and was cancelled
        assert "cannot be acknowledged after a connection loss" in log_text, log_text[-5000:]
        assert "Unrecoverable error" not in log_text, log_text[-5000:]
        assert worker.poll() is None, f"worker exited with {worker.returncode}: {log_text[-5000:]}"
        assert echoed is not None, f"no echo consumed in {CONSUME_TIMEOUT_S}s: {log_text[-5000:]}"
        assert echoed["hostname"] == hostname
    finally:
        stop_process(worker)


def test_finagent_beat_starts_beat_again_after_a_redis_restart(
    private_redis: PrivateRedis, tmp_path: Path
) -> None:
    """celery beat itself exits when Redis restarts (redbeat's tick raises ConnectionError);
    ``finagent beat`` starts it again in-process, and the beat entries are sent again."""
    broker_url = f"redis://127.0.0.1:{private_redis.port}/0"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env.update(
        PYTHONPATH=str(REPO_ROOT),
        FINAGENT_SERVICE_BROKER_URL=broker_url,
        FINAGENT_SERVICE_DATABASE_URL=f"sqlite:///{tmp_path / 'beat.sqlite3'}",
        FINAGENT_SERVICE_STATE_DIR=str(tmp_path / "state"),
        FINAGENT_WATCHLISTS_TICK_SECONDS="1",  # the watchlist tick entry: one a second to watch
    )
    log = tmp_path / "beat.log"
    with log.open("wb") as fh:
        beat = subprocess.Popen(
            [FINAGENT, "beat", "--loglevel", "INFO"],
            env=env,
            cwd=tmp_path,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def sends() -> int:
        return log.read_text(errors="replace").count("Sending due task finagent-watchlists-tick")

    try:
        _wait(lambda: sends() >= 2 or beat.poll() is not None, timeout=READY_TIMEOUT_S, what="beat ticks")
        assert beat.poll() is None, log.read_text(errors="replace")[-3000:]
        private_redis.shutdown_nosave()
        _wait(lambda: "beat stopped (" in log.read_text(errors="replace"), timeout=30, what="beat to fail")
        time.sleep(REDIS_DOWN_S)
        private_redis.start()
        before = sends()
        _wait(lambda: sends() >= before + 2, timeout=60, what="beat ticks after the restart")
        assert beat.poll() is None
        assert redis.Redis(port=private_redis.port).llen("control") > 0  # the ticks reached the new Redis
        beat.send_signal(signal.SIGTERM)  # a clean stop ends the restart loop
        assert beat.wait(timeout=30) == 0
    finally:
        if beat.poll() is None:
            os.killpg(beat.pid, signal.SIGKILL)
            beat.wait(timeout=10)
