"""A prefork worker child, through a real worker: the parent imported what an analysis needs and
froze it before forking (``tasks.app._warm_up``), and the child collects garbage with
``tasks.app.WORKER_GC_THRESHOLDS`` instead of Python's default (``tasks.app._after_fork``).

Real parts: a private ``redis-server`` (broker, and the log of what the task saw) and a Celery
worker subprocess (prefork, one child) whose app imports ``tasks.app``, so finagent's own
``worker_init`` and ``worker_process_init`` receivers run as in ``finagent worker``.
"""

from __future__ import annotations

import ast
import os
import textwrap
import time
import uuid
from pathlib import Path

from tasks.app import WORKER_GC_THRESHOLDS
from tests.integration.ops_support import send_probe, start_probe_worker, stop_process
from tests.support.private_services import PrivateRedis

REPO = Path(__file__).resolve().parents[2]

APP = textwrap.dedent(
    """
    import gc, os, sys
    import redis
    from celery import Celery
    from tasks.app import celery_config  # connects finagent's worker signal receivers
    from core.settings import Settings

    settings = Settings(broker_url=os.environ["GC_BROKER"])
    app = Celery("gctest", broker=settings.service.broker_url)
    conf = celery_config(settings)
    queue = os.environ["GC_QUEUE"]
    conf.update(
        task_routes={}, task_queues=None, task_default_queue=queue, task_default_exchange=queue,
        task_default_exchange_type="direct", task_default_routing_key=queue,
    )
    app.conf.update(conf)
    log = redis.Redis.from_url(os.environ["GC_LOG"])

    @app.task(name="gctest.report", acks_late=True, ignore_result=True)
    def report():
        seen = {"threshold": gc.get_threshold(), "frozen": gc.get_freeze_count(), "pid": os.getpid()}
        wanted = ("agents.quant.risk.forecast", "agents.tools.risk", "agents.tools.chart",
                  "pipeline.plans.table")
        seen["not_loaded"] = [name for name in wanted if name not in sys.modules]
        log.rpush("seen", repr(seen))
    """
)


def test_a_worker_child_starts_with_the_parents_frozen_imports_and_the_workers_gc_thresholds(
    private_redis: PrivateRedis, tmp_path: Path
) -> None:
    import redis

    queue = f"gctest-{uuid.uuid4().hex[:8]}"
    (tmp_path / "gcapp.py").write_text(APP)
    env = {
        **os.environ,
        "GC_BROKER": private_redis.url(0),
        "GC_LOG": private_redis.url(1),
        "GC_QUEUE": queue,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)]),
    }
    log = redis.Redis.from_url(private_redis.url(1))
    worker = start_probe_worker(module="gcapp", queue=queue, env=env, cwd=tmp_path)
    try:
        send_probe(call="import gcapp; gcapp.report.apply_async(); print('sent')", env=env, cwd=tmp_path)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and log.llen("seen") < 1:
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
            time.sleep(0.2)
        raw = log.lindex("seen", 0)
        assert isinstance(raw, bytes), (tmp_path / "worker.log").read_text()[-3000:]
        seen = ast.literal_eval(raw.decode())
        assert seen["pid"] != worker.pid  # it ran in a prefork child
        assert seen["threshold"] == WORKER_GC_THRESHOLDS != (700, 10, 10)
        assert seen["frozen"] > 10_000  # the parent's imports, frozen before the fork
        assert seen["not_loaded"] == []  # the tools, the risk model, the plan table: the parent's
    finally:
        stop_process(worker)
