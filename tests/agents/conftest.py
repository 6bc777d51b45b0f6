"""Fixtures of the Alpaca tests (client and tool): the local stand-in server and the shared
rate-limit state (:mod:`tests.agents.providers.alpaca_fake`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from agents.data.market import shared
from agents.data.market.alpaca import RATE_LIMIT_BUCKET
from tests.agents.providers.alpaca_fake import BUCKET_KEY, FakeAlpaca, rate_redis_url


@pytest.fixture
def alpaca_server() -> Iterator[FakeAlpaca]:
    """A running :class:`FakeAlpaca`, shut down after the test."""
    srv = FakeAlpaca()
    yield srv
    srv.close()


@pytest.fixture
def alpaca_redis() -> Iterator[redis.Redis]:
    """Redis db 8 with the Alpaca bucket key removed before and after."""
    client = redis.Redis.from_url(rate_redis_url(), socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        pytest.skip(f"Redis not reachable: {exc}")
    client.delete(BUCKET_KEY)
    yield client
    client.delete(BUCKET_KEY)
    client.close()


@pytest.fixture
def alpaca_local_bucket() -> Iterator[None]:
    """No in-process Alpaca bucket left over from other tests, and none left behind."""
    with shared._local_lock:
        shared._local.pop(RATE_LIMIT_BUCKET, None)
    yield
    with shared._local_lock:
        shared._local.pop(RATE_LIMIT_BUCKET, None)
