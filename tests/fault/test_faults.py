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

import os
from pathlib import Path

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
