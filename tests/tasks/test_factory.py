"""The redelivery cap of stage messages, counted in the live Redis (guide CELERY.md)."""

from __future__ import annotations

import uuid

import pytest
import redis

from tasks.factory import RedeliveryCapError, count_redelivery

URL = "redis://127.0.0.1:6379/15"


@pytest.fixture
def redis_url() -> str:
    try:
        redis.Redis.from_url(URL, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        pytest.skip(f"Redis not reachable: {exc}")
    return URL


def test_redeliveries_are_counted_and_capped(redis_url: str) -> None:
    task_id = str(uuid.uuid4())
    kw = {"task_id": task_id, "broker_url": redis_url, "cap": 2, "ttl": 60}
    assert count_redelivery(redelivered=False, **kw) == 0  # first delivery or a Celery retry
    assert count_redelivery(redelivered=True, **kw) == 1
    assert count_redelivery(redelivered=True, **kw) == 2
    with pytest.raises(RedeliveryCapError, match="redelivered 3 times"):
        count_redelivery(redelivered=True, **kw)
    assert 0 < redis.Redis.from_url(redis_url).ttl(f"finagent:redeliveries:{task_id}") <= 60


def test_nothing_is_counted_without_a_redis_broker() -> None:
    assert count_redelivery(task_id="t", redelivered=True, broker_url=None, cap=0, ttl=1) == 0
    assert count_redelivery(task_id="t", redelivered=True, broker_url="amqp://x", cap=0, ttl=1) == 0
