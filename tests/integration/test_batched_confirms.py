"""``tasks.app.batched_confirms`` against the shared RabbitMQ (a private vhost of
the test, deleted at the end): a batch's publishes are all confirmed before the block
returns, a message the broker refuses raises as a per-message confirm would, and a channel
without publisher confirms (Redis) is left alone. The connections are the Celery app's
(``app.connection_for_write`` to the test's broker), as the app's producers use them."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from amqp.exceptions import MessageNacked  # type: ignore[import-untyped]

from tasks.app import app, batched_confirms
from tests.support.private_services import PrivateRedis


def _ctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture
def vhost_url() -> Iterator[str]:
    """A private vhost on the shared RabbitMQ; skips when rabbitmqctl or the broker is absent."""
    if shutil.which("rabbitmqctl") is None:
        pytest.skip("rabbitmqctl not installed")
    vhost = f"finagent_test_confirms_{uuid.uuid4().hex[:8]}"
    try:
        _ctl("add_vhost", vhost)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"RabbitMQ does not answer: {exc.stderr!r}")
    try:
        _ctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
        yield f"amqp://guest:guest@127.0.0.1:5672/{vhost}"
    finally:
        _ctl("delete_vhost", vhost)


def _declare(conn: Any, name: str, **arguments: object) -> None:
    """Queue ``name`` behind a direct exchange of the same name (routing key: the name), as the
    app's own queues are declared (``tasks.app``), with the queue ``arguments``."""
    channel = conn.default_channel
    channel.exchange_declare(exchange=name, type="direct")
    channel.queue_declare(queue=name, arguments=arguments or None)
    channel.queue_bind(queue=name, exchange=name, routing_key=name)


def _depth(conn: Any, name: str) -> int:
    """Messages ready in queue ``name`` (a passive declare)."""
    return int(conn.default_channel.queue_declare(queue=name, passive=True).message_count)


def _confirming(url: str) -> Any:
    """The app's connection to ``url`` with publisher confirms, as on a RabbitMQ broker."""
    return app.connection_for_write(url, transport_options={"confirm_publish": True})


def test_every_message_of_a_batch_is_in_the_queue_when_the_block_returns(vhost_url: str) -> None:
    with _confirming(vhost_url) as conn:
        producer = conn.Producer()
        _declare(conn, "confirmed")
        # when 250 messages are published in one batch
        with batched_confirms(producer):
            for i in range(250):
                producer.publish({"i": i}, exchange="confirmed", routing_key="confirmed")
        # then the broker holds all of them, and later publishes are confirmed one by one again
        assert _depth(conn, "confirmed") == 250
        assert producer.channel.basic_publish == producer.channel.basic_publish_confirm
        producer.publish({"i": 250}, exchange="confirmed", routing_key="confirmed")
        assert _depth(conn, "confirmed") == 251


def test_a_message_the_broker_refuses_raises_at_the_end_of_the_batch(vhost_url: str) -> None:
    # given a queue that refuses publishes past 5 messages
    with _confirming(vhost_url) as conn:
        producer = conn.Producer()
        _declare(conn, "capped", **{"x-max-length": 5, "x-overflow": "reject-publish"})

        def publish_batch() -> None:
            with batched_confirms(producer):
                for i in range(12):
                    producer.publish({"i": i}, exchange="capped", routing_key="capped")

        # when a batch of 12 is published, then the batch raises as a confirmed publish would
        with pytest.raises(MessageNacked):
            publish_batch()
        assert _depth(conn, "capped") == 5


def test_a_channel_without_confirms_is_left_alone(tmp_path: Path) -> None:
    server = PrivateRedis(folder=tmp_path)
    server.start()
    try:
        with app.connection_for_write(server.url(0)) as conn:
            producer = conn.Producer()
            _declare(conn, "plain")
            publish = producer.channel.basic_publish
            with batched_confirms(producer):
                assert producer.channel.basic_publish == publish
                producer.publish({"i": 1}, exchange="plain", routing_key="plain")
            assert conn.default_channel.client.llen("plain") == 1
    finally:
        server.shutdown_nosave()
