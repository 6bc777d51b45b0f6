"""Durability under faults, against the real system: private PostgreSQL, private Redis or a
RabbitMQ vhost, ``finagent worker`` processes (prefork, 2 x 2) and ``finagent beat``.

Each test enqueues a batch (``FINAGENT_CHAOS_N``, default 25) through the product's producer,
injects one fault once a fifth of the batch is terminal, waits for every analysis to be terminal
(at most ``settle_timeout_s`` after the fault) and checks the invariants of
``tests.fault.harness.check_invariants``: every analysis terminal exactly once, >= 95 % done,
nothing left running, no duplicate tool_calls rows, every done analysis complete, no duplicate
paper orders, and (kill-child) the analyses whose stage was killed end done.

RabbitMQ runs on the shared node, which is never restarted: its broker fault is
``rabbitmqctl close_all_connections -p VHOST`` (queues and messages survive, channels and their
unacked deliveries do not). A Redis restart is ``SHUTDOWN NOSAVE`` of our own Redis (no
persistence: every queued and unacked message is lost) and a start 4 s later on the same port.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.fault.conftest import require
from tests.fault.harness import ScenarioConfig, run_scenario

N = int(os.environ.get("FINAGENT_CHAOS_N", "25"))
PG_OUTAGE_S = float(os.environ.get("FINAGENT_CHAOS_PG_OUTAGE", "25"))

SCENARIOS = [
    ("redis", "none"),
    ("redis", "redis-restart"),
    ("redis", "postgres"),
    ("redis", "kill-child"),
    ("redis", "kill-main"),
    ("rabbitmq", "close-connections"),
    ("rabbitmq", "postgres"),
    ("rabbitmq", "kill-child"),
    ("rabbitmq", "kill-main"),
]


@pytest.mark.timeout(480)
@pytest.mark.parametrize(("broker", "fault"), SCENARIOS, ids=[f"{b}-{f}" for b, f in SCENARIOS])
def test_batch_survives_fault(broker: str, fault: str, scenario_folder: Path) -> None:
    """A batch hit by ``fault`` mid-run still ends with every invariant holding."""
    require(broker)
    config = ScenarioConfig(broker=broker, fault=fault, n=N, pg_outage_s=PG_OUTAGE_S)
    result = run_scenario(config, folder=scenario_folder)
    assert result.report.enqueued == N
    assert result.report.ok, result.explain()


@pytest.mark.timeout(600)
def test_a_redis_restart_at_default_settings_is_re_driven_without_waiting_for_leases(
    scenario_folder: Path,
) -> None:
    """The product's default timings, but leases of an hour: whatever the fault left without a
    message can only finish because the sweeper re-drove it when Redis came back empty, not
    because a lease ran out (at the default 300 s the lease sweep would take up to 6 minutes)."""
    require("redis")
    config = ScenarioConfig(
        broker="redis",
        fault="redis-restart",
        n=N,
        defaults=True,
        extra_env={"FINAGENT_DURABILITY_LEASE_SECONDS": "3600"},
        settle_timeout_s=400,
    )
    result = run_scenario(config, folder=scenario_folder)
    assert result.report.ok, result.explain()
    # the restart lost messages (a fifth of the batch was done when it came), and each lost
    # analysis was re-driven once, within the hour its lease still had to run
    assert result.report.recoveries and result.report.recoveries >= 1, result.explain()
    assert result.redrive_s is not None, result.explain()


@pytest.mark.timeout(600)
def test_a_killed_workers_analyses_are_re_driven_without_waiting_for_leases(scenario_folder: Path) -> None:
    """30 analyses in flight, the product's default timings but leases and the visibility
    timeout of an hour, and one worker's main process SIGKILLed (another up): the analyses it
    held (running, prefetched) can only finish because the sweeper saw the worker stop
    heartbeating and re-drove them, not because a lease or the visibility timeout ran out.
    Every analysis ends done, none twice, no duplicate row."""
    require("redis")
    config = ScenarioConfig(
        broker="redis",
        fault="kill-main",
        n=30,
        defaults=True,
        extra_env={
            "FINAGENT_DURABILITY_LEASE_SECONDS": "3600",
            "FINAGENT_DURABILITY_BACKLOG_WAIT_SECONDS": "3600",
            "FINAGENT_DURABILITY_VISIBILITY_TIMEOUT": "3700",
        },
        settle_timeout_s=300,  # a hang detector: the re-drives come within seconds
        min_done_fraction=1.0,
    )
    result = run_scenario(config, folder=scenario_folder)
    assert result.report.ok, result.explain()
    assert result.report.done == 30, result.explain()
    # the killed worker held analyses, and each was re-driven once, long before its lease ran out
    assert result.report.recoveries and result.report.recoveries >= 1, result.explain()
    assert result.redrive_s is not None, result.explain()


#: Address space left to the worker's processes above what each has mapped once the worker is
#: ready (bytes). None: a task cannot map a new arena, library or buffer, so it fails of
#: MemoryError before it writes anything. 2 MB was tried and was not enough to starve a task:
#: a warm pool process runs a whole analysis in memory it has already mapped (2026-12-06).
ADDRESS_SPACE_HEADROOM = 0


def _vm_size(pid: int) -> int:
    """The mapped address space of process ``pid`` (VmSize of /proc/PID/status), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmSize for process {pid}")


def _starve(pid: int) -> list[int]:
    """Cap process ``pid`` and its children (the prefork pool) at their current address space
    plus ``ADDRESS_SPACE_HEADROOM`` with ``prlimit``; a pool process forked later inherits its
    parent's cap. Returns the pids capped. The cap is set once the worker is ready, not by a
    fixed ``prlimit --as`` before it starts: the worker's start-up peak (imports, the masking
    patterns' compilation) is above what it keeps mapped, so a fixed cap low enough to starve
    a task also stops the worker from starting (it did once the start-up grew)."""
    children = [
        int(c)
        for task in Path(f"/proc/{pid}/task").iterdir()
        for c in (task / "children").read_text().split()
    ]
    for target in [pid, *children]:
        cap = _vm_size(target) + ADDRESS_SPACE_HEADROOM
        subprocess.run(["prlimit", f"--pid={target}", f"--as={cap}"], check=True, timeout=30)
    return [pid, *children]


@pytest.mark.timeout(480)
def test_a_worker_out_of_memory_leaves_recovery_to_the_sweeper_and_health_says_so(
    scenario_folder: Path,
) -> None:
    """A lone worker under ``prlimit --as`` takes the analyses' messages and fails every task,
    the error callbacks included: nothing it runs reaches the database. The sweeper, a process
    of its own, still re-drives each analysis after its lease and fails it STALLED after its
    recoveries; ``GET /health`` reports the broken worker and a healthy sweeper.

    Sometimes the worker's main process dies too (Celery re-raises a pool process's
    ``MemoryError`` there) and leaves the messages in a queue nobody consumes: the sweeper must
    not take that for a backlog and wait forever (it did once, in CI). Sometimes only the pool
    process dies, every time: the message goes back to the queue, which a live worker consumes
    and which never drains; the sweeper must not wait for it forever either (it did once, in
    CI: ``backlog_wait_seconds``)."""
    require("redis")
    from tests.fault.harness import Stack, enqueue
    from tests.support.private_services import free_port

    config = ScenarioConfig(
        broker="redis",
        n=5,
        workers=1,
        concurrency=1,
        lease_s=15,
        sweep_s=3,
        max_recoveries=1,
        # when the pool process dies of the MemoryError, the message is put back and taken
        # again forever: a consumed queue that never drains, waited for at most this long
        extra_env={"FINAGENT_DURABILITY_BACKLOG_WAIT_SECONDS": "30"},
    )
    stack = Stack(config=config, folder=scenario_folder)
    try:
        worker = stack.start_worker()
        assert len(_starve(worker.popen.pid)) == 2  # the main process and its one pool process
        stack.start_sweeper()
        ids = enqueue(stack, config.n)
        import psycopg

        def rows() -> dict[str, tuple[str, int, str | None]]:
            with psycopg.connect(stack.pg.conninfo("finagent")) as conn:
                found = conn.execute(
                    "SELECT id, status, recoveries, error FROM analyses WHERE id = ANY(%s)", (ids,)
                ).fetchall()
            return {r[0]: (r[1], r[2], r[3]) for r in found}

        deadline = time.monotonic() + 300
        while any(status not in ("done", "failed") for status, _, _ in rows().values()):
            assert time.monotonic() < deadline, f"not all terminal: {rows()}\n{stack.log_excerpt()}"
            time.sleep(1.0)
        final = rows()
        assert {(status, recoveries) for status, recoveries, _ in final.values()} == {("failed", 1)}, final
        for _, _, error in final.values():
            assert error and error.startswith("STALLED after 1 recoveries: no progress in research"), final
        # it took the tasks and failed them: no memory to map the database driver's libraries
        worker_log = worker.log.read_text(errors="replace")
        assert "failed to map segment" in worker_log or "MemoryError" in worker_log, worker_log[-3000:]

        port = free_port()
        api = stack._spawn("api", ["serve", "--host", "127.0.0.1", "--port", str(port)], stack.env)
        health = _health(f"http://127.0.0.1:{port}/health", api)
        assert health["status"] == "unavailable", health
        if health["checks"]["worker"] == "no worker answered":
            # the pool process's MemoryError was re-raised in the worker's main process
            # (celery.worker.request.on_failure), which exited: nobody consumes the queue
            assert "worker" in health["failing"], health
        else:
            assert "consumption" in health["failing"], health
            assert health["checks"]["consumption"].startswith(
                ("the echo task failed in a worker", "no worker ran the echo task")
            ), health
        assert health["checks"]["sweeper"].startswith("ok (swept "), health
        assert "sweeper" not in health["failing"] and "stalled" not in health["failing"], health
    finally:
        stack.close()


@pytest.mark.timeout(300)
def test_messages_in_a_queue_no_worker_consumes_are_not_a_backlog_to_wait_for(
    scenario_folder: Path,
) -> None:
    """No worker at all, messages queued: the sweeper asks the workers (none answer), re-drives
    each analysis after its lease and fails it STALLED after its recoveries instead of
    extending its lease behind a queue that never drains."""
    require("redis")
    from tests.fault.harness import Stack, enqueue

    config = ScenarioConfig(broker="redis", n=3, workers=0, lease_s=10, sweep_s=2, max_recoveries=1)
    stack = Stack(config=config, folder=scenario_folder)
    try:
        stack.start_sweeper()
        ids = enqueue(stack, config.n)
        import psycopg

        def rows() -> dict[str, tuple[str, int, str | None]]:
            with psycopg.connect(stack.pg.conninfo("finagent")) as conn:
                found = conn.execute(
                    "SELECT id, status, recoveries, error FROM analyses WHERE id = ANY(%s)", (ids,)
                ).fetchall()
            return {r[0]: (r[1], r[2], r[3]) for r in found}

        deadline = time.monotonic() + 200
        while any(status != "failed" for status, _, _ in rows().values()):
            assert time.monotonic() < deadline, f"not all failed: {rows()}\n{stack.log_excerpt()}"
            time.sleep(1.0)
        for status, recoveries, error in rows().values():
            assert (status, recoveries) == ("failed", 1), rows()
            assert error and error.startswith("STALLED after 1 recoveries: no progress in research"), rows()
        sweeper_log = (scenario_folder / "sweeper.log").read_text(errors="replace")
        assert "no worker consumes it; not waiting" in sweeper_log, sweeper_log[-3000:]
    finally:
        stack.close()


def _health(url: str, api: Any) -> dict[str, Any]:
    """``GET url`` once the gateway answers (any status), as JSON."""
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(url, timeout=30) as resp:
                return dict(json.loads(resp.read()))
        except urllib.error.HTTPError as exc:
            return dict(json.loads(exc.read()))
        except OSError:
            assert api.alive() and time.monotonic() < deadline, (
                f"the gateway did not answer: {api.log.read_text()[-2000:]}"
            )
            time.sleep(0.5)
