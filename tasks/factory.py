"""The one task factory: every Celery task of finagent is declared through :func:`declare`
(stage tasks through :func:`stage_task`, which builds on it).

``declare`` fixes what every task shares: a route in ``pipeline.celery_app.TASK_QUEUES``
(checked at import), late acks unless a task says otherwise, no argument type checking by Celery
(messages are validated by pydantic at the boundary). ``stage_task`` adds the adapter work of a
stage: validate the message, build the tool context and LLM session
(``pipeline.stages.context``), call the plain stage function, write the stage's ``tool_calls``
rows and the progress of the ``analyses`` row in one transaction (``pipeline.stages.store``),
return the new state.

Retry policy: ``TransientStageError`` (network, rate limit after the tool's own retries) and
database ``OperationalError`` retry with exponential backoff and full jitter, capped at
``task_retry_backoff_max`` (well below the Redis visibility timeout, guide CELERY.md), at most
``task_max_retries`` times. Anything else fails the chain, whose error callback marks the
analysis failed. Stages are idempotent: ids are deterministic and rows are written with
``ON CONFLICT DO NOTHING``, so a redelivered message cannot duplicate anything.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from celery import Task
from celery.utils.time import get_exponential_backoff_interval
from sqlalchemy.exc import OperationalError

from agents.llm.session import use_session
from db import repo
from db.engine import get_engine
from pipeline.celery_app import TASK_QUEUES, app
from pipeline.core.settings import get_settings
from pipeline.core.stages import StageSpec
from pipeline.core.state import FinancialAgentState
from pipeline.stages.common import TransientStageError
from pipeline.stages.context import StageFunction, make_context, make_llm_session
from pipeline.stages.store import persist
from pipeline.stages.table import advance

logger = logging.getLogger("finagent.tasks")


def backoff_seconds(retries: int) -> int:
    """Countdown before retry number ``retries + 1``: 2**retries s with full jitter, capped at
    ``task_retry_backoff_max`` (Celery's own ``get_exponential_backoff_interval``)."""
    settings = get_settings()
    return int(
        get_exponential_backoff_interval(
            factor=2, retries=retries, maximum=settings.task_retry_backoff_max, full_jitter=True
        )
    )


class RedeliveryCapError(RuntimeError):
    """A stage message came back more often than ``max_redeliveries`` (a poison message that
    kills its worker): the chain fails into its error callback instead of looping."""


@lru_cache(maxsize=4)
def _redis(url: str) -> Any:
    # lazy: only a Redis broker counts redeliveries; the in-memory broker never loads redis-py
    import redis

    return redis.Redis.from_url(url, socket_timeout=5)


def count_redelivery(*, task_id: str, redelivered: bool, broker_url: str | None, cap: int, ttl: int) -> int:
    """Count one redelivery of message ``task_id`` in Redis and enforce the cap.

    Late acks mean a message whose worker died unacked comes back after the visibility timeout
    (guide CELERY.md: "cap redeliveries"). Only broker redeliveries count (Celery's own retries
    are new messages with ``redelivered`` unset). Returns the count so far (0 when not
    redelivered or the broker is not Redis, where nothing is counted).

    Raises:
        RedeliveryCapError: the count exceeds ``cap``.
    """
    if not redelivered or not broker_url or not broker_url.startswith(("redis://", "rediss://")):
        return 0
    client = _redis(broker_url)
    key = f"finagent:redeliveries:{task_id}"
    count = int(client.incr(key))
    client.expire(key, ttl)
    if count > cap:
        raise RedeliveryCapError(f"message {task_id} redelivered {count} times (cap {cap}); giving up")
    return count


def run_stage(*, task: Task, fn: StageFunction, stage: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The adapter body shared by all stage tasks (see module docstring)."""
    settings = get_settings()
    count_redelivery(
        task_id=str(task.request.id),
        redelivered=bool((task.request.delivery_info or {}).get("redelivered")),
        broker_url=settings.broker_url,
        cap=settings.max_redeliveries,
        ttl=settings.visibility_timeout * (settings.max_redeliveries + 2),
    )
    state = FinancialAgentState.from_message(payload)
    ctx = make_context(state=state, stage=stage, task_id=task.request.id, retries=task.request.retries)
    task.send_event("task-progress", analysis_id=state.analysis_id, stage=stage, iteration=state.iteration)

    def heartbeat(info: dict[str, Any]) -> None:
        task.send_event("task-progress", analysis_id=state.analysis_id, stage=stage, **info)

    llm = make_llm_session(
        state=state, stage=stage, task_id=task.request.id, retries=task.request.retries, heartbeat=heartbeat
    )
    llm_rows = llm.rows if llm is not None else []
    try:
        with use_session(llm):
            new_state = advance(fn(state=state, ctx=ctx), stage=stage)
    except (TransientStageError, OperationalError) as exc:
        engine = get_engine(ctx.settings.effective_database_url)
        if ctx.rows:  # keep the failed attempts visible even though the stage will run again
            repo.insert_tool_calls(engine=engine, rows=ctx.rows)
        if llm_rows:  # LLM attempts cost money: they are facts even if the stage re-runs
            repo.insert_llm_calls(engine=engine, rows=llm_rows)
        countdown = backoff_seconds(task.request.retries)
        logger.warning("stage %s of %s: %s; retry in %ss", stage, state.analysis_id, exc, countdown)
        raise task.retry(exc=exc, countdown=countdown) from exc
    persist(state=new_state, rows=ctx.rows, llm_rows=llm_rows, progress_only=True)
    return new_state.to_message()


def declare(*, name: str, bind: bool = False, acks_late: bool = True, **options: Any) -> Callable[..., Task]:
    """Decorator declaring the Celery task ``name`` on the app: routed by ``TASK_QUEUES``,
    ``acks_late`` (default True: every task is idempotent), ``typing=False``; ``options`` are
    passed to ``app.task`` (``max_retries``, time limits, ...).

    Raises:
        KeyError: ``name`` has no route in ``TASK_QUEUES`` (at import: a task without a queue
            would land on the default queue unnoticed).
    """
    if name not in TASK_QUEUES:
        raise KeyError(f"task {name!r} has no route in pipeline.celery_app.TASK_QUEUES")

    def decorator(fn: Callable[..., Any]) -> Task:
        task: Task = app.task(name=name, bind=bind, acks_late=acks_late, typing=False, **options)(fn)
        return task

    return decorator


def stage_task(*, spec: StageSpec, fn: StageFunction) -> Task:
    """Declare the Celery task of stage ``spec`` (``finagent.<name>`` on the stage's queue)
    running the plain stage function ``fn`` through :func:`run_stage`.

    Raises:
        KeyError: the stage's task has no route (see :func:`declare`).
    """
    settings = get_settings()
    stage = spec.name

    def body(self: Task, payload: dict[str, Any]) -> dict[str, Any]:
        return run_stage(task=self, fn=fn, stage=stage, payload=payload)

    body.__name__ = f"{stage}_task"
    body.__doc__ = f"Celery adapter of the {stage} stage: {(fn.__doc__ or '').strip().splitlines()[0]}"
    return declare(
        name=spec.task_name,
        bind=True,
        max_retries=settings.task_max_retries,
        soft_time_limit=settings.task_soft_time_limit,
        time_limit=settings.task_time_limit,
    )(body)
