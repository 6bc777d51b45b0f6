"""The Celery application (``celery -A tasks.app worker``).

Service mode: ``FINAGENT_SERVICE_BROKER_URL`` (Redis or RabbitMQ). Embedded mode (no broker URL): the
same app on kombu's in-memory transport, consumed by an in-process worker thread
(``tasks.embedded``). Configuration invariants follow docs/design.md, "Celery configuration", and are
pinned by ``tests/tasks/test_celery_app.py``.

No configured secret travels or is shown (docs/security.md, "Secrets"): importing this module
replaces kombu's ``json`` encoder by one that masks the configured secret values
(:func:`masked_json_dumps`), so every task message body (arguments: the state, the carried rows),
every event (Flower's args, results, exceptions and tracebacks) and every stored result is
masked before it leaves the process; a publish's ``argsrepr``/``kwargsrepr`` headers are masked
too, and every log record of the process (:func:`core.logs.install_log_masking`).
"""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final

from celery import Celery, Task
from celery.app.amqp import AMQP
from celery.signals import (
    after_setup_logger,
    after_setup_task_logger,
    beat_init,
    before_task_publish,
    worker_init,
    worker_process_init,
)
from kombu import Exchange, Queue
from kombu.serialization import registry
from kombu.utils import json as kombu_json

from core.logs import SecretFilter, install_log_masking
from core.masking import current_masker
from core.settings import Settings, get_settings
from core.stages import BATCH_SUFFIX, CONTROL_QUEUE, QUEUES, STAGES, TASK_PREFIX
from db.engine import dispose_engines
from tasks.worker_heartbeat import HeartbeatStep

#: The archive task (declared in ``tasks.archive``) and its beat entry (``db.archive``).
ARCHIVE_TASK = f"{TASK_PREFIX}archive.run"
ARCHIVE_ENTRY = "finagent-archive"
#: How often beat archives what finished more than ``archive_after_seconds`` ago.
ARCHIVE_TICK_SECONDS = 3600.0
#: The scorecard's scoring task (declared in ``tasks.scorecard``).
SCORECARD_TASK = f"{TASK_PREFIX}scorecard.score"

#: Which queue each task consumes from (Celery's ``task_routes``; the per-task ``queue``
#: attribute is deprecated in Celery 5.x). The stage tasks' routes come from the stage table.
TASK_QUEUES: dict[str, str] = {
    **{spec.task_name: spec.queue for spec in STAGES},
    "finagent.should_continue": CONTROL_QUEUE,
    "finagent.chain_failed": CONTROL_QUEUE,
    # watchlists: cheap bookkeeping; the analyses they fan out use the stage queues
    "finagent.watchlists.tick": CONTROL_QUEUE,
    "finagent.watchlists.start_run": CONTROL_QUEUE,
    "finagent.watchlists.finalize": CONTROL_QUEUE,
    # GET /health's consumption probe (tasks.health)
    "finagent.health.echo": CONTROL_QUEUE,
    # the scorecard (tasks.scorecard): scores recommendations whose horizons matured
    SCORECARD_TASK: CONTROL_QUEUE,
    # the archive (tasks.archive): finished analyses into one compressed row each
    ARCHIVE_TASK: CONTROL_QUEUE,
}

#: The one static beat entry: a tick that starts due watchlists (their cron lives in the
#: database, so adding a watchlist needs no beat restart).
WATCHLIST_TICK_ENTRY = "finagent-watchlists-tick"
#: The beat entry of the scorecard's scoring task (``apps.scorecard.score_pending``).
SCORECARD_ENTRY = "finagent-scorecard-score"

#: Result-backend retries on connection errors before an operation gives up: with sleeps of
#: up to 2 s, full jitter (mean ~1 s), about 5 minutes of backend outage (see celery_config).
RESULT_BACKEND_MAX_RETRIES = 300

#: AMQP heartbeat (s) the worker negotiates with RabbitMQ (see celery_config).
BROKER_HEARTBEAT_S = 10


def celery_config(settings: Settings) -> dict[str, Any]:
    """The Celery configuration derived from ``settings`` (pure; tested): ``{setting name: value}``
    in Celery's lower-case names, assembled from the parts below in a fixed key order
    (serialization, delivery, connection loss, events, routing, results and time, beat).
    Raises nothing beyond what reading ``settings`` raises."""
    return {
        # JSON only: pickle is unsafe (Celery security guide).
        "task_serializer": "json",
        "result_serializer": "json",
        "event_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        **_delivery_config(settings),
        **_connection_loss_config(),
        # Flower and progress: events on, STARTED state tracked.
        "worker_send_task_events": True,
        "task_send_sent_event": True,
        "task_track_started": True,
        **_routing_config(settings),
        "result_expires": 24 * 3600,  # results are also in the database; a day covers --no-wait users
        "timezone": "UTC",
        "enable_utc": True,
        "worker_hijack_root_logger": False,
        **_beat_config(settings),
    }


def _transport_options(settings: Settings) -> dict[str, Any]:
    """The broker's transport options (also the result backend's): ``visibility_timeout`` (s)
    on Redis and the in-memory transport, publisher confirms on RabbitMQ, and a 20 ms
    ``polling_interval`` (s) in embedded mode."""
    transport_options: dict[str, Any] = {"visibility_timeout": settings.durability.visibility_timeout}
    if _is_amqp(settings.service.broker_url):
        # RabbitMQ: a publish returns only once the broker has taken the message (publisher
        # confirms; kombu's pyamqp transport option), so a hand-off is never silently lost.
        transport_options = {"confirm_publish": True}
    if settings.service.mode == "embedded":
        # kombu's in-memory transport sleeps polling_interval (1 s) on empty queues, which
        # delayed the first stage by ~0.6 s on every CLI run (bench/cold_start.py); 20 ms costs
        # a few wake-ups a second only while an embedded worker runs.
        transport_options["polling_interval"] = 0.02
    return transport_options


def _delivery_config(settings: Settings) -> dict[str, Any]:
    """Acknowledgement, redelivery and time-limit settings (limits in seconds, from
    ``settings.durability``), and the transport options (:func:`_transport_options`: one dict
    object, shared by the broker and the result backend)."""
    transport_options = _transport_options(settings)
    return {
        # Late acks for idempotent stages; prefetch 1 so a long task does not hold others hostage.
        "task_acks_late": True,
        "worker_prefetch_multiplier": 1,
        # A killed child's message is requeued (celery worker/request.py on_failure: reject with
        # requeue, no failure recorded, no error callback) and redelivered with the same task id,
        # which may claim its step again. celery#9082 warns this can loop forever: the loop is
        # capped in the database (attempts per step, pipeline.steps.claim.attempt_cap → STALLED).
        "task_reject_on_worker_lost": True,
        "task_acks_on_failure_or_timeout": True,
        "worker_cancel_long_running_tasks_on_connection_loss": True,
        "task_soft_time_limit": settings.durability.task_soft_time_limit,
        "task_time_limit": settings.durability.task_time_limit,
        "broker_transport_options": transport_options,
        "result_backend_transport_options": transport_options,
        "broker_connection_retry_on_startup": True,
    }


def _connection_loss_config() -> dict[str, Any]:
    """How a worker survives a lost broker or result-backend connection: result-backend retries
    (sleeps in ms, :data:`RESULT_BACKEND_MAX_RETRIES` tries) and the AMQP heartbeat
    (:data:`BROKER_HEARTBEAT_S`, s)."""
    return {
        # Broker connection loss (e.g. Redis restarted). The worker then cancels its running
        # late-ack tasks and records each one as RETRY in the result backend (Celery's
        # Request._announce_cancelled). When the backend is the same, unreachable Redis, that
        # write raised redis ConnectionError out of the consumer's reconnect handler and the
        # worker process exited ("Unrecoverable error"; measured with bench/redis_restart.py,
        # the bug of https://github.com/celery/celery/issues/7185, fixed on Celery's main after
        # 5.6.3 by https://github.com/celery/celery/pull/10382). Retrying result-backend
        # operations on connection errors holds that write until Redis answers again
        # (https://docs.celeryq.dev/en/stable/userguide/configuration.html#result-backend-always-retry),
        # so the worker reconnects and consumes. Full-jitter backoff from 0.1 s, capped at 2 s
        # per sleep so a worker resumes within ~2 s of Redis's return; after
        # RESULT_BACKEND_MAX_RETRIES (about 5 minutes) the worker exits as before and its
        # supervisor restarts it.
        "result_backend_always_retry": True,
        "result_backend_max_retries": RESULT_BACKEND_MAX_RETRIES,
        "result_backend_base_sleep_between_retries_ms": 100,
        "result_backend_max_sleep_between_retries_ms": 2000,
        # RabbitMQ only (Redis ignores it): a connection the broker closes while the worker is
        # still reconnecting can go unnoticed ("Couldn't ack ... connection already closed",
        # no reconnect); only the AMQP heartbeat check then notices. With the default 120 s the
        # worker took ~2.5 min to consume again (bench/redis_restart.py --broker rabbitmq);
        # https://docs.celeryq.dev/en/stable/userguide/configuration.html#broker-heartbeat
        "broker_heartbeat": BROKER_HEARTBEAT_S,
    }


def _routing_config(settings: Settings) -> dict[str, Any]:
    """The queues (:func:`_task_queues`), the default exchange/queue (the control queue; topic
    exchanges and quorum queues on RabbitMQ with quorum queues) and :data:`TASK_QUEUES` as
    ``task_routes``."""
    return {
        # Each queue gets its own exchange and routing key; a bare Queue(name) would bind every
        # queue to the default exchange with the default key and fan one message out to all.
        "task_queues": _task_queues(settings),
        "task_default_exchange": CONTROL_QUEUE,
        "task_default_routing_key": CONTROL_QUEUE,
        "task_default_queue": CONTROL_QUEUE,
        "task_default_exchange_type": "topic" if _quorum(settings) else "direct",
        "task_default_queue_type": "quorum" if _quorum(settings) else "classic",
        "task_routes": {name: {"queue": queue} for name, queue in TASK_QUEUES.items()},
    }


def _beat_config(settings: Settings) -> dict[str, Any]:
    """Beat's scheduler (celery-redbeat; its Redis URL only when the broker is Redis, else
    ``None``; lock timeout in s) and its schedule (:func:`_beat_schedule`)."""
    return {
        # Beat: celery-redbeat keeps the schedule in Redis and holds a Redis lock, so
        # of several beat processes exactly one sends ticks (celery#2856: one beat only); the
        # others wait for the lock. The lock is extended on every beat loop (at most
        # beat_max_loop_interval s apart) and expires redbeat_lock_timeout s after a crash.
        "beat_scheduler": "redbeat.RedBeatScheduler",
        "beat_max_loop_interval": 5,
        "redbeat_redis_url": settings.service.broker_url if _is_redis(settings.service.broker_url) else None,
        "redbeat_key_prefix": "finagent:redbeat:",
        "redbeat_lock_timeout": settings.service.beat_lock_timeout,
        "beat_schedule": _beat_schedule(settings),
    }


def _beat_schedule(settings: Settings) -> dict[str, dict[str, Any]]:
    """``{entry name: {"task", "schedule" (s), "options": {"expires" (s)}}}``: the watchlist tick,
    the scorecard and, when ``archive_after_seconds`` is set, the archive."""
    return {
        WATCHLIST_TICK_ENTRY: {
            "task": "finagent.watchlists.tick",
            "schedule": float(settings.watchlists.tick_seconds),
            # a tick older than one interval is pointless: the next one does the same work
            "options": {"expires": float(settings.watchlists.tick_seconds)},
        },
        SCORECARD_ENTRY: {
            "task": SCORECARD_TASK,
            "schedule": float(settings.analysis.scorecard_seconds),
            "options": {"expires": float(settings.analysis.scorecard_seconds)},
        },
        **(
            {
                ARCHIVE_ENTRY: {
                    "task": ARCHIVE_TASK,
                    "schedule": ARCHIVE_TICK_SECONDS,
                    "options": {"expires": ARCHIVE_TICK_SECONDS},
                }
            }
            if settings.durability.archive_after_seconds
            else {}
        ),
    }


def _is_amqp(url: str | None) -> bool:
    return bool(url) and str(url).startswith(("amqp://", "amqps://", "pyamqp://"))


def _quorum(settings: Settings) -> bool:
    return _is_amqp(settings.service.broker_url) and settings.durability.rabbitmq_queue_type == "quorum"


def _task_queues(settings: Settings) -> list[Queue]:
    """The finagent queues, one exchange each (routing key = queue name).

    Redis and the in-memory transport: direct exchanges. RabbitMQ with
    ``rabbitmq_queue_type="quorum"`` (the default): durable, replicated quorum queues behind
    TOPIC exchanges, because Celery sends a retry's countdown through RabbitMQ's native delayed
    delivery only from topic or fanout exchanges (celery ``app/base.py`` ``send_task`` warns that
    a direct exchange "may block the worker process until the ETA arrives"; kombu
    ``transport/native_delayed_delivery``; Celery docs "Using Quorum Queues"). An existing vhost
    with the classic queues must drop them first (RabbitMQ refuses to redeclare a queue with
    another ``x-queue-type``).

    Each stage has two queues, ``<queue>`` (interactive) and ``<queue>.batch``
    (``core.stages.QUEUES``; docs/operations.md, "Interactive before batch").
    """
    if _quorum(settings):
        return [
            Queue(q, Exchange(q, type="topic"), routing_key=q, queue_arguments={"x-queue-type": "quorum"})
            for q in QUEUES
        ]
    return [Queue(q, Exchange(q, type="direct"), routing_key=q) for q in QUEUES]


def _is_redis(url: str | None) -> bool:
    return bool(url) and str(url).startswith(("redis://", "rediss://"))


def masked_json_dumps(obj: Any) -> str:
    """kombu's JSON encoder (``kombu.utils.json.dumps``) with the configured secrets masked in
    the strings of ``obj`` (``core.masking``): the text is searched once, and only a
    body holding a secret is masked and encoded again (strings change, never the JSON syntax).
    Registered as kombu's ``json`` serializer (:func:`install_masked_json`)."""
    text: str = kombu_json.dumps(obj)
    masker = current_masker()
    if masker and masker.found_in(text):
        text = kombu_json.dumps(masker.mask_tree(obj))
    return text


def install_masked_json() -> None:
    """Register :func:`masked_json_dumps` as kombu's ``json`` encoder (the decoder, the content
    type and the wire format stay kombu's: any consumer reads the messages). Task messages,
    events and results all go through it (``task_serializer``, ``event_serializer`` and
    ``result_serializer`` are ``json``). Idempotent."""
    registry.register(
        "json",
        masked_json_dumps,
        kombu_json.loads,
        content_type="application/json",
        content_encoding="utf-8",
    )


#: Where ``create_sent_event`` sits among the positional arguments Celery's ``send_task``
#: passes to ``AMQP.as_task_v2`` (task_id, name, args, kwargs, countdown, eta, group_id,
#: group_index, expires, retries, chord, callbacks, errbacks, reply_to, time_limit,
#: soft_time_limit, create_sent_event, ...: celery/app/base.py, ``send_task``).
_SENT_EVENT_ARG = 16


def is_batch_queue(queue: Any) -> bool:
    """Whether ``queue`` (a name or a kombu ``Queue``) is a stage's batch queue
    (``research.batch``, ``core.stages.BATCH_SUFFIX``)."""
    name = getattr(queue, "name", queue)
    return isinstance(name, str) and name.endswith(BATCH_SUFFIX)


class LaneAMQP(AMQP):
    """Celery's AMQP helper, except that a message to a batch stage queue is published without
    Celery's ``task-sent`` event.

    Why: on RabbitMQ (publisher confirms) every publish waits for the broker's confirm, and
    the ``task-sent`` event is a second confirmed publish on the same channel: two round trips
    per message, which made a bulk enqueue miss 2 ms per analysis (docs/benchmarks.md, "Bulk
    enqueue"). Batch work is queued in thousands and nobody watches it wait; Flower lists each
    of its tasks from the worker's ``task-received`` event on (name, short args, then
    STARTED/PROGRESS/SUCCESS), only not while it is still queued. Interactive messages keep
    ``task-sent`` (Flower shows them PENDING as soon as they are sent). ``quiet_batch = False``
    on an instance restores Celery's behaviour (bench/bulk_enqueue.py measures both)."""

    quiet_batch: bool = True

    def as_task_v2(self, *args: Any, **options: Any) -> Any:
        """``AMQP.as_task_v2`` with ``create_sent_event`` off for a batch queue's message."""
        if self.quiet_batch and is_batch_queue(options.get("queue")):
            if len(args) > _SENT_EVENT_ARG:
                args = (*args[:_SENT_EVENT_ARG], False, *args[_SENT_EVENT_ARG + 1 :])
            else:
                options["create_sent_event"] = False
        return super().as_task_v2(*args, **options)


#: Seconds :func:`batched_confirms` waits for the broker's confirms of one batch.
BATCH_CONFIRM_TIMEOUT_S: Final = 30.0


@contextmanager
def batched_confirms(producer: Any) -> Iterator[None]:
    """Within the block, publishes on ``producer``'s channel wait for the broker's confirms
    once, at the end of the block, instead of once per message; a no-op unless the channel
    is py-amqp's in confirm mode (RabbitMQ with ``confirm_publish``).

    How: the first publish waits for its own confirm, which gives its delivery tag ``t0``
    (a channel in confirm mode numbers its publishes 1, 2, …, and every earlier publish on
    it was confirmed before it returned); the others are sent without waiting; on exit the
    channel reads confirms until every tag ``t0 .. t0+n-1`` is acknowledged (singly or by a
    ``multiple`` ack). A message the broker refuses (``basic.nack``) raises
    ``amqp.exceptions.MessageNacked`` as a confirmed publish does, and no confirm within
    :data:`BATCH_CONFIRM_TIMEOUT_S` raises the socket's timeout: either way the caller learns
    the batch was not all taken, after the rows were written (the recovery sweep re-drives
    an analysis whose message was lost). Not on exit through an exception: then nothing is
    awaited."""
    from amqp import spec  # type: ignore[import-untyped]
    from amqp.exceptions import MessageNacked  # type: ignore[import-untyped]

    channel = getattr(producer, "channel", None)
    confirming = getattr(channel, "basic_publish_confirm", None)
    if channel is None or confirming is None or channel.basic_publish != confirming:
        yield
        return
    if not channel._confirm_selected:
        channel._confirm_selected = True
        channel.confirm_select()
    tags: dict[str, Any] = {"first": None, "count": 0, "upto": 0, "single": set(), "nack": False}

    def on_ack(delivery_tag: int, multiple: bool) -> None:
        if multiple:
            tags["upto"] = max(tags["upto"], delivery_tag)
        else:
            tags["single"].add(delivery_tag)

    def on_nack(delivery_tag: int, multiple: bool) -> None:
        tags["nack"] = True

    def first_confirmed(method: Any, *args: Any) -> None:
        if method == spec.Basic.Nack:
            raise MessageNacked()
        tags["first"] = args[0]

    def publish(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("confirm_timeout", None)
        ret = channel._basic_publish(*args, **kwargs)
        tags["count"] += 1
        if tags["count"] == 1:
            channel.wait(
                [spec.Basic.Ack, spec.Basic.Nack], callback=first_confirmed, timeout=BATCH_CONFIRM_TIMEOUT_S
            )
        return ret

    channel.events["basic_ack"].add(on_ack)
    channel.events["basic_nack"].add(on_nack)
    channel.basic_publish = publish
    try:
        yield
        if tags["count"] > 1:
            first, last = tags["first"], tags["first"] + tags["count"] - 1
            while not tags["nack"] and not all(
                t <= tags["upto"] or t in tags["single"] for t in range(first + 1, last + 1)
            ):
                channel.connection.drain_events(timeout=BATCH_CONFIRM_TIMEOUT_S)
            if tags["nack"]:
                raise MessageNacked()
    finally:
        channel.basic_publish = confirming
        channel.events["basic_ack"].discard(on_ack)
        channel.events["basic_nack"].discard(on_nack)


def send_chains(signatures: Sequence[Any]) -> None:
    """Send analysis chains (a bulk enqueue's batch) through one producer, one after the other:
    on RabbitMQ their publisher confirms awaited once for the whole batch
    (:func:`batched_confirms`); on Redis its ``LPUSH``es sent in one pipeline, one round trip
    (kombu's ``Producer.batch``, a no-op on transports without batching).

    Raises what publishing raises (``kombu`` / ``amqp`` errors, ``MessageNacked``; on Redis
    ``kombu.exceptions.BatchPublishError`` when the pipeline failed: delivery uncertain). Either
    way the rows are written first, so an analysis whose message did not arrive is re-driven
    by the recovery sweep when its lease runs out."""
    if not signatures:
        return
    with app.producer_or_acquire() as producer, batched_confirms(producer), producer.batch():
        # a chain's apply_async does not pass a producer on (celery canvas ``_chain.run``):
        # each would acquire another pooled producer, whose publishes this batch would not see
        token = _HELD_PRODUCER.set(producer)
        try:
            # one chain after the other, not a ``group``: a group waits on every chain's result
            # (``AsyncResult.then``), which on the Redis result backend SUBSCRIBEs to each
            # task's result channel and UNSUBSCRIBEs when the results are dropped, about ten
            # pub/sub commands per chain that nobody reads (stage results are ignored)
            for signature in signatures:
                signature.apply_async()
        finally:
            _HELD_PRODUCER.reset(token)


#: The producer :func:`send_chains` holds: every publish of this context uses it.
_HELD_PRODUCER: ContextVar[Any] = ContextVar("finagent_held_producer", default=None)


class FinagentCelery(Celery):
    """Celery, except that within :func:`send_chains` every publish without an explicit
    producer takes the one it holds instead of acquiring one from the pool."""

    def producer_or_acquire(self, producer: Any = None) -> Any:
        """Celery's ``producer_or_acquire``; the held producer (if any) when none is given."""
        held = _HELD_PRODUCER.get()
        return super().producer_or_acquire(producer if producer is not None or held is None else held)


def create_app(settings: Settings | None = None) -> Celery:
    """Build the Celery app for ``settings`` (default: the process settings); secrets are
    masked in its messages and in the process's logs from then on (module docstring)."""
    install_masked_json()
    install_log_masking()
    settings = settings or get_settings()
    app = FinagentCelery(
        "finagent",
        broker=settings.service.broker_url or "memory://",
        backend=settings.service.effective_result_backend,
        include=["tasks.stages", "tasks.watchlists", "tasks.health", "tasks.scorecard", "tasks.archive"],
        amqp=LaneAMQP,
    )
    app.conf.update(celery_config(settings))
    # every worker's main process beats (the tasks it holds) for the sweeper's dead-worker watch
    app.steps["worker"].add(HeartbeatStep)
    return app


app = create_app()


# --- Flower: short task arguments, visible stage progress, quiet housekeeping -----------------

#: Tasks whose first argument is the analysis state (``FinancialAgentState.to_message()``).
STATE_TASKS: frozenset[str] = frozenset([*(spec.task_name for spec in STAGES), "finagent.should_continue"])

#: Housekeeping tasks sent every minute or so (beat's watchlist tick). They send no task events
#: (``send_events=False`` where they are declared, and no ``task-sent`` from beat), so they do
#: not bury the stage tasks in Flower's task list; their effects are logged and in the database.
#: (The recovery sweep is no task: the sweeper process runs it, ``apps.sweeper``.)
QUIET_TASKS: frozenset[str] = frozenset(["finagent.watchlists.tick"])

#: The custom state a stage task shows in Flower while it runs (Celery's convention for custom
#: states, e.g. ``PROGRESS`` in the "Custom states" section of the tasks guide).
PROGRESS_STATE = "PROGRESS"

#: Longest argument summary (characters): an analysis id (36) plus symbol, date and pass fit.
ARGSREPR_MAX = 200


def state_argsrepr(message: Mapping[str, Any]) -> str:
    """A short ``argsrepr`` of a state message for Flower: analysis id, symbol, ``as_of`` and the
    pass (1-based: ``iteration + 1``), whatever the state's size (6-10 KB at later stages, which
    Celery's ``saferepr`` cut at 1024 characters, before the symbol of a review task).

    >>> state_argsrepr({"analysis_id": "a1", "stock_symbol": "AAPL", "as_of": "2012-06-29", "iteration": 0})
    '(analysis=a1 AAPL as_of=2012-06-29 pass=1)'
    """
    iteration = message.get("iteration")
    pass_no = iteration + 1 if isinstance(iteration, int) else "?"
    text = (
        f"(analysis={message.get('analysis_id')} {message.get('stock_symbol')} "
        f"as_of={message.get('as_of') or 'latest'} pass={pass_no})"
    )
    return text[:ARGSREPR_MAX]


def _kwargsrepr(kwargs: Mapping[str, Any]) -> str:
    """Keyword arguments with lists shown by their length (a retry carries the rows its attempt
    could not write: ``pending_rows``)."""
    parts = [f"{k}=<{len(v)} rows>" if isinstance(v, list) else f"{k}={v!r}" for k, v in kwargs.items()]
    return ("{" + ", ".join(parts) + "}")[:ARGSREPR_MAX]


@before_task_publish.connect
def _short_argsrepr(
    sender: str | None = None, body: Any = None, headers: dict[str, Any] | None = None, **_: Any
) -> None:
    """Every publish of a state task (chain steps, retries, re-drives, the next pass) carries a
    short ``argsrepr``/``kwargsrepr`` header: Flower shows the ``task-received`` event's
    args, which the worker takes from these headers (celery ``worker/strategy.py``).
    ``tasks.chain.build_chain`` also sets them as options, so the ``task-sent`` event (built
    before this signal) is short too."""
    if headers is not None:
        _mask_reprs(headers)
    if sender not in STATE_TASKS or headers is None or not isinstance(body, tuple | list) or not body:
        return
    args = body[0]
    if args and isinstance(args[0], Mapping) and "analysis_id" in args[0]:
        headers["argsrepr"] = state_argsrepr(args[0])
    if len(body) > 1 and isinstance(body[1], Mapping):
        headers["kwargsrepr"] = _kwargsrepr(body[1])


def _mask_reprs(headers: dict[str, Any]) -> None:
    """Mask the configured secrets in a message's ``argsrepr``/``kwargsrepr`` headers (Celery's
    ``saferepr`` of the arguments, shown by Flower and the worker's log; the body itself is
    masked by :func:`masked_json_dumps`), in place."""
    masker = current_masker()
    if not masker:
        return
    for key in ("argsrepr", "kwargsrepr"):
        value = headers.get(key)
        if isinstance(value, str):
            headers[key] = masker.mask_text(value)


@after_setup_logger.connect
@after_setup_task_logger.connect
def _mask_celery_logs(logger: logging.Logger | None = None, **_: Any) -> None:
    """Celery's worker and task loggers: a :class:`core.logs.SecretFilter` on each of
    their handlers, besides the record factory every record passes (belt and braces: a handler
    Celery adds later still gets masked records from the factory)."""
    for handler in logger.handlers if logger is not None else ():
        if not any(isinstance(f, SecretFilter) for f in handler.filters):
            handler.addFilter(SecretFilter())


def progress_reporter(task: Task, *, state: Mapping[str, Any], stage: str) -> Callable[..., None]:
    """A function ``report(**info)`` that shows a running stage's progress in Flower: a
    ``task-progress`` event carrying the analysis id, symbol, ``as_of``, pass, stage and ``info``
    (e.g. the LLM call count), plus ``result``: a one-line summary. Flower's event state turns
    the custom event into the task's state ``PROGRESS`` (celery ``events/state.py``
    ``Task.event``: an unknown event type becomes the upper-cased state) and shows ``result`` in
    its task list, task page and ``/api/tasks`` until ``task-succeeded``/``task-failed``
    replaces it (Flower displays only the built-in task fields, flower#1130).

    Call it in the task's thread: it captures the task id and hostname there, because
    ``task.request`` is thread-local and the LLM agents report from another thread (where
    ``task.send_event`` sent events with ``uuid=None``, which Flower never matched to a task).

    Not ``update_state``: that writes the result backend, which with
    ``result_backend_always_retry`` blocks for minutes while Redis is down (and RabbitMQ runs
    without one), while an event is fire-and-forget. A lost event never fails a stage.
    """
    task_id, hostname = task.request.id, getattr(task.request, "hostname", None)
    owner_thread = threading.get_ident()
    base = {
        "analysis_id": state.get("analysis_id"),
        "symbol": state.get("stock_symbol"),
        "as_of": state.get("as_of"),
        "pass": (state.get("iteration") or 0) + 1,
        "stage": stage,
    }
    who = state_argsrepr(state)

    def report(**info: Any) -> None:
        detail = ", ".join(f"{k}={v}" for k, v in info.items())
        summary = f"{stage} running{': ' + detail if detail else ''} {who}"
        fields = {"result": summary[: ARGSREPR_MAX * 2], **base, **info}
        try:
            if threading.get_ident() == owner_thread:  # task.request is this task's: Celery's API
                task.send_event("task-progress", **fields)
                return
            with task.app.events.default_dispatcher(hostname=hostname) as dispatcher:
                dispatcher.send(
                    "task-progress",
                    uuid=task_id,
                    retry=True,
                    retry_policy=task.app.conf.task_publish_retry_policy,
                    **fields,
                )
        except Exception:  # progress is best effort
            logging.getLogger("finagent.tasks").warning("progress event of %s not sent", stage, exc_info=True)

    return report


@beat_init.connect
def _beat_sends_no_sent_events(sender: Any = None, **_: Any) -> None:
    """Beat only sends housekeeping (:data:`QUIET_TASKS`): no ``task-sent`` events from it, so
    Flower's list is not flooded with ticks that never report anything else."""
    app.conf.task_send_sent_event = False


@worker_init.connect
def _warm_up(sender: Any = None, **_: Any) -> None:
    """A service worker's main process, before the pool forks: load what every stage uses
    (the indicators, with scipy's compiled filter for their EMA recursions,
    ``agents.quant.ta_kernels``, and run them once; the built-in tools, the risk model and the
    plan table), so no child pays the imports or the first call; then freeze the imported
    objects for the garbage collector.

    Not for the CLI's in-process worker (``tasks.embedded``, ``warm_up = False``): it runs one
    analysis, which pays its own first call, and the warm-up (a CSV read, a computation, a full
    collection) and scipy's import (~0.4 s) would only add to it."""
    if not getattr(sender, "warm_up", True):
        return
    # lazy: scipy and the indicators take a second to import; only a worker needs them, not the
    # producers, beat or Flower that import this app (cold start, docs/benchmarks.md)
    import scipy.signal  # type: ignore[import-untyped]  # noqa: F401  # the compiled EMA filter

    from agents.quant import risk  # noqa: F401  # agents.tools.risk imports it at its first call
    from agents.quant.indicators import warm_up
    from agents.tools.catalog import load_builtin_tools
    from pipeline.plan_hooks import plan_for

    warm_up()
    # What a child imported at its first analysis otherwise (the tool modules the catalog loads
    # by name, the risk model, the plan table): ~0.2 s of CPU in every new child, 1.2 % of a
    # child's in the throughput bench (py-spy, bench/pipeline_throughput.py); imported here, once,
    # and frozen below with the rest.
    load_builtin_tools()
    plan_for(None)
    # Everything imported so far (pandas, scipy, SQLAlchemy, the task modules, ...) lives as
    # long as the process: move it out of the garbage collector's sight before the pool forks
    # (gc.freeze, Python docs: "call gc.freeze() right before fork()"). A child's full
    # collection then walks only its own objects: 5 of them cost a child 0.41 s per 300
    # analyses, ~80 ms each, 5 % of its CPU (gc.callbacks, bench/pipeline_throughput.py);
    # and the children share the parent's pages instead of copying them on first collection.
    gc.collect()
    gc.freeze()


#: The garbage collector's thresholds in a prefork child (``gc.set_threshold``; Python's default
#: is ``(700, 10, 10)``). An analysis leaves ~3,500 more container objects than it frees while it
#: runs (the state, rows, frames), most of them alive when the youngest generation is collected,
#: so at 700 a child ran ~5 young and every ~20 analyses a full collection (~30 ms each, its own
#: objects since the parent froze its own). At 10,000 the young collections cost about as much in
#: total, but the older generations are reached 14× less often: the collector's share of a
#: child's CPU went from 2.6 % to 1.3 % (gc.callbacks, bench/pipeline_throughput.py). Garbage
#: cycles wait a little longer to be freed: at most ~10,000 objects, a few MB.
WORKER_GC_THRESHOLDS: Final = (10_000, 10, 10)


@worker_process_init.connect
def _after_fork(**_: Any) -> None:
    """Prefork children: drop database engines inherited from the parent
    (docs/design.md, "Celery configuration") and collect garbage less often
    (:data:`WORKER_GC_THRESHOLDS`)."""
    dispose_engines()
    gc.set_threshold(*WORKER_GC_THRESHOLDS)
