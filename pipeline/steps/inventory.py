"""What the broker holds: the analysis and task ids of every finagent message in it, ready in a
queue or delivered to a worker and not yet acknowledged (the recovery sweep's evidence that an
analysis's message was lost, ``pipeline.steps.recovery.redrive_lost``).

Redis (kombu's Redis transport): a queue is a list per priority step (kombu
``Channel._q_for_pri``), and a message a worker has taken stays in the ``unacked`` hash until it
is acknowledged (with ``acks_late``, after the task returned and its chain published the next
step) or its visibility timeout returns it to the queue. One ``MULTI``/``EXEC`` reads every list
and the hash at a single instant, so a message moving from a queue to the hash (a worker taking
it) or from the hash to the next step's queue (a step ending) is seen in one place or the
other. What the snapshot cannot see: a message between the worker's ``BRPOP`` and its write to
the hash (one round trip), which is why the sweep looks twice, some seconds apart.

RabbitMQ: a message can be read only by consuming it; its delivered, unacknowledged messages are
visible to the management API as a count, not by content. There is no inventory
(:func:`broker_inventory` returns ``None``), and nothing needs one: RabbitMQ keeps queued
messages (durable queues, persistent messages) and requeues a lost consumer's unacknowledged
ones, so a broker restart loses none.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pipeline import taskqueue

logger = logging.getLogger("finagent.recovery")

#: Beyond this many messages (queues and unacked together) the inventory is not read: a broker
#: that lost its messages holds few, and a backlog this deep is no evidence of a loss (the
#: lease decides, ``pipeline.steps.recovery.sweep``). Each message is a 6-10 KB state.
MAX_INVENTORY_MESSAGES: Final = 20_000


@dataclass(frozen=True)
class BrokerInventory:
    """The ids found in the broker's finagent queues and unacknowledged deliveries.

    Attributes:
        analysis_ids: analyses some message is for (a stage or ``should_continue`` task's state
            argument, a ``chain_failed`` error callback's ``analysis_id``).
        task_ids: the Celery task id of every message (a retry or a redelivery keeps its id).
        messages: how many messages were read.
    """

    analysis_ids: frozenset[str]
    task_ids: frozenset[str]
    messages: int

    def holds(self, row: Mapping[str, Any]) -> bool:
        """Whether the broker holds a message for the ``analyses`` row ``row``: one for its
        analysis, or the message of the task that holds its lease (``lease_owner``)."""
        owner = row.get("lease_owner")
        return row["id"] in self.analysis_ids or (owner is not None and owner in self.task_ids)


def message_ids(raw: bytes | str) -> tuple[str | None, str | None]:
    """``(task id, analysis id)`` of one message as kombu's Redis transport stores it: the
    JSON envelope (``headers``, ``properties``, ``body``) of a queued message, or the
    ``[envelope, exchange, routing_key]`` value of an unacknowledged one. The body is Celery's
    protocol 2 ``[args, kwargs, embed]`` (base64 when ``properties.body_encoding`` says so).
    Either id is ``None`` when the message does not carry it; a message that is no JSON at all
    gives ``(None, None)``."""
    try:
        envelope = json.loads(raw)
        if isinstance(envelope, list) and envelope:
            envelope = envelope[0]
        if not isinstance(envelope, dict):
            return None, None
        headers = envelope.get("headers") or {}
        task_id = headers.get("id") if isinstance(headers, dict) else None
        body = envelope.get("body")
        properties = envelope.get("properties") or {}
        if isinstance(body, str) and properties.get("body_encoding") == "base64":
            body = base64.b64decode(body)
        payload = json.loads(body) if isinstance(body, str | bytes) else body
    except (ValueError, TypeError, binascii.Error):
        return None, None
    analysis_id = None
    if isinstance(payload, list) and len(payload) >= 2:
        args, kwargs = payload[0], payload[1]
        if isinstance(args, list) and args and isinstance(args[0], dict):
            analysis_id = args[0].get("analysis_id")
        if analysis_id is None and isinstance(kwargs, dict):
            analysis_id = kwargs.get("analysis_id")
    return (
        str(task_id) if task_id is not None else None,
        str(analysis_id) if analysis_id is not None else None,
    )


def _collect(raws: Iterable[bytes | str]) -> BrokerInventory:
    analyses: set[str] = set()
    tasks: set[str] = set()
    count = 0
    for raw in raws:
        count += 1
        task_id, analysis_id = message_ids(raw)
        if task_id:
            tasks.add(task_id)
        if analysis_id:
            analyses.add(analysis_id)
    return BrokerInventory(frozenset(analyses), frozenset(tasks), count)


def redis_inventory(channel: Any, queues: Iterable[str]) -> BrokerInventory | None:
    """The inventory of ``queues`` read through ``channel`` (a kombu Redis ``Channel``: its
    client, key separator, priority steps and ``unacked`` key are the transport's own), in one
    ``MULTI``/``EXEC``. ``None`` when more than :data:`MAX_INVENTORY_MESSAGES` are queued or
    unacked. Raises ``redis.RedisError`` when Redis does not answer."""
    keys = sorted({channel._q_for_pri(queue, pri) for queue in queues for pri in channel.priority_steps})
    client = channel.client
    with client.pipeline(transaction=True) as pipe:
        for key in keys:
            pipe.llen(key)
        pipe.hlen(channel.unacked_key)
        total = sum(int(n) for n in pipe.execute())
    if total > MAX_INVENTORY_MESSAGES:
        logger.warning(
            "broker inventory: %d messages queued or unacked (> %d): not read", total, MAX_INVENTORY_MESSAGES
        )
        return None
    with client.pipeline(transaction=True) as pipe:
        for key in keys:
            pipe.lrange(key, 0, -1)
        pipe.hvals(channel.unacked_key)
        results = pipe.execute()
    return _collect(raw for batch in results for raw in batch)


def broker_inventory(queues: Iterable[str]) -> BrokerInventory | None:
    """The inventory of ``queues`` on the configured broker (see the module docstring):
    Redis: :func:`redis_inventory`; any other transport (RabbitMQ, the in-memory one): ``None``,
    no inventory. Raises the transport's connection errors when the broker is unreachable."""
    with taskqueue.get().redis_channel() as channel:
        return None if channel is None else redis_inventory(channel, queues)


@dataclass(frozen=True)
class Deliveries:
    """What the broker holds, with each unacknowledged delivery by its tag (the orphan sweep's
    evidence, ``pipeline.steps.recovery.redrive_orphaned``).

    Attributes:
        queued_analyses / queued_tasks: ids of the messages ready in the queues.
        unacked: delivery tag → ``(task id, analysis id)`` of each message delivered to some
            worker and not acknowledged (kombu's ``unacked`` hash; which worker holds it is
            not recorded there: the workers' heartbeats say).
    """

    queued_analyses: frozenset[str]
    queued_tasks: frozenset[str]
    unacked: Mapping[str, tuple[str | None, str | None]]


def redis_deliveries(channel: Any, queues: Iterable[str]) -> Deliveries | None:
    """The :class:`Deliveries` of ``queues`` through ``channel`` (a kombu Redis ``Channel``),
    in one ``MULTI``/``EXEC``; ``None`` past :data:`MAX_INVENTORY_MESSAGES`. Raises
    ``redis.RedisError`` when Redis does not answer."""
    keys = sorted({channel._q_for_pri(queue, pri) for queue in queues for pri in channel.priority_steps})
    client = channel.client
    with client.pipeline(transaction=True) as pipe:
        for key in keys:
            pipe.llen(key)
        pipe.hlen(channel.unacked_key)
        total = sum(int(n) for n in pipe.execute())
    if total > MAX_INVENTORY_MESSAGES:
        logger.warning("broker deliveries: %d messages (> %d): not read", total, MAX_INVENTORY_MESSAGES)
        return None
    with client.pipeline(transaction=True) as pipe:
        for key in keys:
            pipe.lrange(key, 0, -1)
        pipe.hgetall(channel.unacked_key)
        *lists, unacked = pipe.execute()
    queued = [message_ids(raw) for batch in lists for raw in batch]
    return Deliveries(
        queued_analyses=frozenset(a for _, a in queued if a),
        queued_tasks=frozenset(t for t, _ in queued if t),
        unacked={
            (tag.decode() if isinstance(tag, bytes) else str(tag)): message_ids(raw)
            for tag, raw in unacked.items()
        },
    )


def drop_unacked(channel: Any, tags: Iterable[str]) -> int:
    """Remove the unacknowledged deliveries ``tags`` from kombu's ``unacked`` hash and its
    index (what an acknowledgement does), so the visibility timeout does not bring back the
    messages of a dead worker whose analyses were re-driven. A live worker's later ack of one
    finds nothing to remove (harmless). Returns how many were removed."""
    tags = list(tags)
    if not tags:
        return 0
    with channel.client.pipeline(transaction=True) as pipe:
        pipe.hdel(channel.unacked_key, *tags)
        pipe.zrem(channel.unacked_index_key, *tags)
        removed, _ = pipe.execute()
    return int(removed)


def broker_deliveries(queues: Iterable[str]) -> Deliveries | None:
    """:func:`redis_deliveries` on the configured broker; ``None`` on any other transport
    (RabbitMQ requeues a dead consumer's deliveries itself, when its connection closes)."""
    with taskqueue.get().redis_channel() as channel:
        return None if channel is None else redis_deliveries(channel, queues)


def drop_broker_unacked(tags: Iterable[str]) -> int:
    """:func:`drop_unacked` on the configured (Redis) broker."""
    with taskqueue.get().redis_channel() as channel:
        return 0 if channel is None else drop_unacked(channel, tags)
