"""What ``pipeline.steps.claim.runs_unclaimed`` relies on, on the real broker: a message redelivered
after its worker child died says so (``delivery_info["redelivered"]``), and its first
delivery does not. A quant stage's first delivery skips the step claim; a redelivery must
claim, or a message that kills its worker would never be counted by the poison cap.

Real parts, on both brokers finagent runs on: a private ``redis-server`` (the broker, or the
log of what the task saw; the shared one is not flushed) and the local RabbitMQ (a queue of the
test's own, deleted after it), a Celery worker subprocess with finagent's own configuration
(``tasks.app.celery_config``: late acks, ``task_reject_on_worker_lost``), and a task
that SIGKILLs its own prefork child on its first delivery.
"""

from __future__ import annotations

import os
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from tasks.app import app
from tests.integration.ops_support import send_probe, start_probe_worker, stop_process
from tests.support.private_services import PrivateRedis

REPO = Path(__file__).resolve().parents[2]

APP = textwrap.dedent(
    """
    import os, signal
    import redis
    from celery import Celery
    from tasks.app import celery_config
    from core.settings import Settings

    settings = Settings(broker_url=os.environ["FLAG_BROKER"])
    app = Celery("flagtest", broker=settings.service.broker_url)
    conf = celery_config(settings)
    queue = os.environ["FLAG_QUEUE"]  # a queue and direct exchange of the test's own
    conf.update(
        task_routes={}, task_queues=None, task_default_queue=queue, task_default_exchange=queue,
        task_default_exchange_type="direct", task_default_routing_key=queue,
    )
    app.conf.update(conf)
    log = redis.Redis.from_url(os.environ["FLAG_LOG"])

    @app.task(name="flagtest.record", bind=True, acks_late=True, ignore_result=True)
    def record(self):
        redelivered = (self.request.delivery_info or {}).get("redelivered")
        log.rpush("flags", repr(redelivered))
        if log.llen("flags") == 1:  # the first delivery kills its child, mid-task
            os.kill(os.getpid(), signal.SIGKILL)
        return redelivered
    """
)


RABBITMQ = "amqp://guest:guest@127.0.0.1:5672//"


def _rabbitmq_answers() -> bool:
    try:
        with app.connection_for_write(RABBITMQ, connect_timeout=3) as conn:
            conn.ensure_connection(max_retries=1)
        return True
    except Exception:
        return False


@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_a_message_redelivered_after_its_child_died_is_flagged_and_its_first_delivery_is_not(
    broker: str, private_redis: PrivateRedis, tmp_path: Path
) -> None:
    import redis

    if broker == "rabbitmq" and not _rabbitmq_answers():
        pytest.skip(f"RabbitMQ does not answer at {RABBITMQ}")
    queue = f"flagtest-{uuid.uuid4().hex[:8]}"
    (tmp_path / "flagapp.py").write_text(APP)
    env = {
        **os.environ,
        "FLAG_BROKER": private_redis.url(0) if broker == "redis" else RABBITMQ,
        "FLAG_LOG": private_redis.url(1),
        "FLAG_QUEUE": queue,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)]),
    }
    log = redis.Redis.from_url(private_redis.url(1))
    worker = start_probe_worker(module="flagapp", queue=queue, env=env, cwd=tmp_path)
    try:
        send_probe(call="import flagapp; flagapp.record.apply_async(); print('sent')", env=env, cwd=tmp_path)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and log.llen("flags") < 2:
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
            time.sleep(0.2)
        flags = [f.decode() for f in log.lrange("flags", 0, -1)]
        # the first delivery is not flagged; the copy restored after the child's death is
        assert flags[:2] == ["False", "True"], (tmp_path / "worker.log").read_text()[-3000:]
    finally:
        stop_process(worker)
        if broker == "rabbitmq":
            with app.connection_for_write(RABBITMQ) as conn:  # the shared broker keeps nothing of ours
                conn.default_channel.queue_delete(queue)
                conn.default_channel.exchange_delete(queue)
