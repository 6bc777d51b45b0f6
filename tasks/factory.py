"""The one task factory: every stage task is declared through :func:`stage_task`.

It fixes name, queue, late acks, time limits and retry policy, and does the adapter work:
validate the message, build the tool context, call the plain stage function, write the stage's
``tool_calls`` rows and the progress of the ``analyses`` row in one transaction (the full state
is written by ``should_continue``: :func:`persist`), return the new state.

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
from typing import Any, Protocol

from celery import Task
from celery.utils.time import get_exponential_backoff_interval
from sqlalchemy.exc import OperationalError

from agents.llm.session import LLMSession, use_session
from agents.providers.factory import get_provider
from agents.tools.registry import ToolContext
from db import repo
from db.engine import get_engine
from pipeline.celery_app import TASK_QUEUES, app
from pipeline.core.settings import get_settings
from pipeline.core.state import FinancialAgentState, Status
from pipeline.stages.common import TransientStageError
from pipeline.stages.review import final_json

logger = logging.getLogger("finagent.tasks")


class StageFunction(Protocol):
    """A plain stage function ``(*, state, ctx) -> state``."""

    def __call__(self, *, state: FinancialAgentState, ctx: ToolContext) -> FinancialAgentState: ...


def backoff_seconds(retries: int) -> int:
    """Countdown before retry number ``retries + 1``: 2**retries s with full jitter, capped at
    ``task_retry_backoff_max`` (Celery's own ``get_exponential_backoff_interval``)."""
    settings = get_settings()
    return int(
        get_exponential_backoff_interval(
            factor=2, retries=retries, maximum=settings.task_retry_backoff_max, full_jitter=True
        )
    )


def make_context(*, state: FinancialAgentState, stage: str, task_id: str | None, retries: int) -> ToolContext:
    """The tool context of one stage run: point in time, provider, log ids, result loader."""
    settings = get_settings()
    engine = get_engine(settings.effective_database_url)
    if state.as_of is None:
        raise ValueError("state.as_of must be set before the chain starts")
    return ToolContext(
        settings=settings,
        as_of=state.as_of,
        provider=get_provider(settings=settings),
        analysis_id=state.analysis_id,
        symbol=state.stock_symbol,
        stage=stage,
        iteration=state.iteration,
        celery_task_id=task_id,
        id_seed=f"r{retries}",
        load_result=lambda ref: repo.get_tool_result(engine=engine, tool_call_id=ref),
        load_results=lambda refs: repo.get_tool_results(engine=engine, tool_call_ids=refs),
        history_checks=history_checks(state),
    )


def history_checks(state: FinancialAgentState) -> dict[str, dict[str, Any]]:
    """``{history_ref: check}`` of the research stage's ``get_history`` call (its
    ``stock_data.history_check``), so later stages rebuild those bars from the provider instead
    of reloading the ~70 KB stored result (``agents.tools.market.cited_history``)."""
    stock = state.stock_data or {}
    ref, check = stock.get("history_ref"), stock.get("history_check")
    if isinstance(ref, str) and ref and isinstance(check, dict):
        return {ref: dict(check)}
    return {}


def persist(
    *,
    state: FinancialAgentState,
    rows: list[dict[str, Any]],
    finished: bool = False,
    error: str | None = None,
    llm_rows: list[dict[str, Any]] | None = None,
    progress_only: bool = False,
) -> None:
    """Write the stage's tool-call rows, LLM-call rows and the analysis row in one transaction.

    ``progress_only`` (the write after each stage task): only ``status``, ``iteration`` and
    ``updated_at`` of the analysis row, plus the rows. What a reader needs mid-run is the
    progress (``wait_for``, ``finagent show``, ``GET /analyses/{id}``, watchlists) and the
    ``tool_calls`` rows later stages cite; the state itself travels in the Celery message (a
    redelivered message carries it too), so rewriting 2–15 KB of it after every stage bought
    nothing. A terminal status is written only by a full write, which also writes the state,
    report, signal and ``finished_at``: a progress write of a state that is already ``done``
    (the review stage's) records ``reviewing``, so nobody sees ``done`` without its report.
    The full write (default) is done by ``should_continue`` (end, or the next pass) and by the
    chain's error callback.
    """
    engine = get_engine(get_settings().effective_database_url)
    if progress_only:
        status = state.status
        if status in (Status.DONE, Status.FAILED):
            status = Status.REVIEWING
        repo.save_stage(
            engine=engine,
            analysis_id=state.analysis_id,
            state=None,
            status=status.value,
            iteration=state.iteration,
            tool_calls=rows,
            llm_calls=llm_rows or (),
        )
        return
    report_json = final_json(state) if state.final_report else None
    rec = state.recommendation or {}
    repo.save_stage(
        engine=engine,
        analysis_id=state.analysis_id,
        state=state.to_message(),
        status=state.status.value,
        iteration=state.iteration,
        tool_calls=rows,
        report=state.final_report,
        report_json=report_json,
        signal=rec.get("signal"),
        confidence=rec.get("confidence"),
        error=error,
        finished=finished,
        llm_calls=llm_rows or (),
    )


def make_llm_session(
    *, state: FinancialAgentState, stage: str, task: Task | None, retries: int
) -> LLMSession | None:
    """The stage's LLM session, or ``None`` when no model is configured (the deterministic path:
    litellm is never imported). Budget use so far comes from the analysis's ``llm_calls`` rows;
    the heartbeat sends a Celery ``task-progress`` event after every LLM and tool call (Flower)."""
    from agents.llm.config import llm_config

    settings = get_settings()
    config = llm_config(settings=settings, override=state.llm_model)
    if config is None:
        return None
    from agents.llm.session import LLMSession

    usage = repo.llm_usage(engine=get_engine(settings.effective_database_url), analysis_id=state.analysis_id)

    def heartbeat(info: dict[str, Any]) -> None:
        if task is not None:
            task.send_event("task-progress", analysis_id=state.analysis_id, stage=stage, **info)

    return LLMSession(
        config=config,
        analysis_id=state.analysis_id,
        stage=stage,
        iteration=state.iteration,
        celery_task_id=task.request.id if task is not None else None,
        id_seed=f"r{retries}",
        spent_tokens=usage["prompt_tokens"] + usage["completion_tokens"],
        spent_usd=usage["cost_usd"] or 0.0,
        prior_usage=usage,
        heartbeat=heartbeat,
    )


class RedeliveryCapError(RuntimeError):
    """A stage message came back more often than ``max_redeliveries`` (a poison message that
    kills its worker): the chain fails into its error callback instead of looping."""


@lru_cache(maxsize=4)
def _redis(url: str) -> Any:
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
    llm = make_llm_session(state=state, stage=stage, task=task, retries=task.request.retries)
    llm_rows = llm.rows if llm is not None else []
    try:
        with use_session(llm):
            new_state = fn(state=state, ctx=ctx)
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


def stage_task(*, name: str, stage: str) -> Callable[[StageFunction], Task]:
    """Declare the Celery task ``name`` running the stage function it decorates; its queue is
    ``TASK_QUEUES[name]`` (routing lives in the app configuration).

    Raises:
        KeyError: ``name`` has no route in ``TASK_QUEUES``.
    """
    settings = get_settings()
    TASK_QUEUES[name]  # fail at import for a task without a route

    def decorator(fn: StageFunction) -> Task:
        def body(self: Task, payload: dict[str, Any]) -> dict[str, Any]:
            return run_stage(task=self, fn=fn, stage=stage, payload=payload)

        body.__name__ = f"{stage}_task"
        body.__doc__ = f"Celery adapter of the {stage} stage: {(fn.__doc__ or '').strip().splitlines()[0]}"
        task: Task = app.task(
            name=name,
            bind=True,
            acks_late=True,
            max_retries=settings.task_max_retries,
            soft_time_limit=settings.task_soft_time_limit,
            time_limit=settings.task_time_limit,
            typing=False,
        )(body)
        return task

    return decorator
