"""The one task factory: every Celery task of finagent is declared through :func:`declare`
(stage tasks through :func:`stage_task`, which builds on it).

``declare`` fixes what every task shares: a route in ``pipeline.celery_app.TASK_QUEUES``
(checked at import), late acks unless a task says otherwise, no argument type checking by Celery
(messages are validated by pydantic at the boundary). ``stage_task`` adds the adapter work of a
stage (:func:`run_stage`): validate the message, claim the step in the ``analyses`` row, build
the tool context and LLM session (``pipeline.stages.context``), call the plain stage function,
write the stage's checkpoint (state, status, ``tool_calls``/``llm_calls`` rows) in one
transaction fenced by the claim's lease (``pipeline.stages.store.checkpoint``; after the last
stage ``pipeline.stages.control.close_pass`` ends the pass in that same transaction), return the
new state. With late acks the message is acked only after that commit
(docs/design.md, "Durability and idempotency").

Retry policy: ``TransientStageError`` (network, rate limit after the tool's own retries) and
database ``OperationalError`` (an outage, also while claiming or writing) retry with exponential
backoff and full jitter, capped at ``task_retry_backoff_max`` (below the Redis visibility
timeout, docs/design.md, "Celery configuration"), at most ``task_max_retries`` times. Anything
else fails the chain, whose error callback marks the analysis failed. Copies of a message (a
redelivery, a re-drive by the recovery sweep) are dropped by the claim unless the step is theirs
to run; ids are deterministic and rows are written with ``ON CONFLICT DO NOTHING``, so nothing is duplicated.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import Any

from celery import Task
from celery.exceptions import Ignore
from celery.utils.time import get_exponential_backoff_interval
from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError

from agents.llm.cache import use_source
from agents.llm.config import role_models
from agents.llm.session import use_session
from agents.llm.sources import response_cache
from core.settings import Settings, get_settings
from core.stages import StageSpec, next_stage
from core.state import FinancialAgentState
from db import progress_repo, repo
from db.engine import get_engine
from db.progress_repo import ClaimOutcome
from pipeline.celery_app import TASK_QUEUES, app, progress_reporter
from pipeline.stages import control
from pipeline.stages.common import TransientStageError
from pipeline.stages.context import StageFunction, make_context, make_llm_session
from pipeline.stages.store import checkpoint
from pipeline.stages.table import advance

logger = logging.getLogger("finagent.tasks")


#: Base of the backoff after a database outage (``OperationalError``): 5, 10, 20, 40, 80 s with
#: equal jitter, so the default five retries outlast an outage of about 80 s before the chain
#: gives up (and the recovery sweep re-drives the analysis after its lease). Transient tool
#: errors keep the 2 s base of Celery's full-jitter backoff.
OUTAGE_BACKOFF_BASE = 5


def backoff_seconds(retries: int, *, outage: bool = False) -> int:
    """Countdown before retry number ``retries + 1``, capped at ``task_retry_backoff_max``.

    Transient tool errors: ``2 * 2**retries`` s with full jitter (uniform in [0, that]; Celery's
    own ``get_exponential_backoff_interval``). A database outage (``outage=True``):
    ``OUTAGE_BACKOFF_BASE * 2**retries`` s with equal jitter (half of it fixed, half random), so
    the retries span the outage instead of spending themselves in its first seconds
    (AWS Architecture Blog, "Exponential Backoff And Jitter", 2015).
    """
    settings = get_settings()
    if not outage:
        return int(
            get_exponential_backoff_interval(
                factor=2,
                retries=retries,
                maximum=settings.durability.task_retry_backoff_max,
                full_jitter=True,
            )
        )
    ceiling = min(settings.durability.task_retry_backoff_max, OUTAGE_BACKOFF_BASE * 2**retries)
    return int(ceiling / 2 + random.uniform(0, ceiling / 2))  # jitter, not cryptography


def attempt_cap(settings: Settings) -> int:
    """How many claims of one step an analysis may use: the first run, ``task_max_retries``
    Celery retries and ``max_redeliveries`` redeliveries of a message whose worker died (a
    poison message that kills its worker every time). Counted in the row (``attempt``), so it
    holds on every broker."""
    return 1 + settings.durability.task_max_retries + settings.durability.max_redeliveries


#: Brokers that flag a message delivered again (``delivery_info["redelivered"]``): RabbitMQ
#: natively (AMQP ``basic.deliver``), kombu's Redis transport when it restores an unacked
#: message (``Channel._do_restore_message``: a lost worker, the visibility timeout). Other
#: kombu transports flag it elsewhere or not at all, so there every stage claims first.
REDELIVERY_FLAGGING_SCHEMES = frozenset({"redis", "rediss", "amqp", "amqps", "pyamqp"})


def runs_unclaimed(*, task: Task, settings: Settings, state: FinancialAgentState, carried_rows: bool) -> bool:
    """Whether this run of a stage may skip the claim of its step, the claim then being part of
    its checkpoint (one ``UPDATE`` instead of two: ``db.progress_repo.complete_step`` with
    ``claimed=False``, fenced by "nobody else holds a live lease").

    True only for the FIRST delivery of the FIRST attempt (no Celery retry, no redelivery flag,
    no rows carried from an earlier attempt) of a stage without a model (no LLM configured
    for the analysis: the deterministic analysts call market-data tools and the calculator,
    which change nothing outside their own rows, and end in milliseconds). What the claim
    guarded stays guarded:

    * a copy running in parallel (a re-drive while the first is still running) writes no state:
      the checkpoint that commits second finds the row moved on, and its rows (deterministic
      ids) were written by the first;
    * the poison-message cap: the attempt counter counts claims, and every redelivery and
      retry claims first, so a message that kills its worker is stopped after at most one run
      more than the cap (``attempt_cap``);
    * the recovery sweep: the lease the previous checkpoint set covers the step's start.

    The row shows the previous checkpoint's status (the stage's own, set by that checkpoint)
    and no lease owner while such a stage runs. A model's stage keeps claim-first: it runs for
    minutes, its lease is extended by heartbeats and its owner is shown.
    """
    request = task.request
    if request.retries or carried_rows:
        return False
    if (request.delivery_info or {}).get("redelivered") is not False:
        return False
    if _broker_scheme(task) not in REDELIVERY_FLAGGING_SCHEMES:
        return False
    # the models alone, not llm_config (which reads the router file): the session builds that
    return not role_models(settings=settings, override=state.llm_model)


def _broker_scheme(task: Task) -> str:
    """The scheme of the task's app's broker URL (``redis``, ``amqp``, ...), lower case; ""
    when none is set."""
    return str(task.app.conf.broker_url or "").partition("://")[0].lower()


def _retry(
    *,
    task: Task,
    exc: BaseException,
    state: FinancialAgentState,
    stage: str,
    engine: Engine,
    rows: list[dict[str, Any]],
    llm_rows: list[dict[str, Any]],
    claimed: bool = True,
) -> BaseException:
    """The retry path of a stage: keep the attempt's rows (written now, or carried in the retry
    message when the database is down, so none is dropped), extend the lease over the
    countdown (the task's own lease; ``claimed=False``: the lease of the step waiting to
    start, which the previous checkpoint set), then ``task.retry`` (Celery's raises ``Retry``
    itself; callers write ``raise _retry(...)`` so the control flow is plain where a test
    double returns it instead). The retry's message claims its step first."""
    countdown = backoff_seconds(task.request.retries, outage=isinstance(exc, OperationalError))
    pending: dict[str, Any] = {}
    try:
        if rows:  # keep the failed attempts visible even though the stage will run again
            repo.insert_tool_calls(engine=engine, rows=rows)
        if llm_rows:  # LLM attempts cost money: they are facts even if the stage re-runs
            repo.insert_llm_calls(engine=engine, rows=llm_rows)
        progress_repo.extend_lease(
            engine=engine,
            analysis_id=state.analysis_id,
            owner=str(task.request.id) if claimed else None,
            seconds=countdown + get_settings().durability.lease_seconds,
        )
    except OperationalError:
        # The database is down: the rows travel with the retry and are written by the attempt
        # that commits (ids are deterministic, so a row written twice is inserted once).
        pending = {"pending_rows": rows, "pending_llm_rows": llm_rows}
    logger.warning(
        "stage %s of %s: %s; retry %d in %ss",
        stage,
        state.analysis_id,
        exc,
        task.request.retries + 1,
        countdown,
    )
    return task.retry(exc=exc, countdown=countdown, kwargs=pending)


def _claim_or_drop(
    *,
    task: Task,
    state: FinancialAgentState,
    stage: str,
    engine: Engine,
    rows: list[dict[str, Any]],
    llm_rows: list[dict[str, Any]],
) -> None:
    """Claim the step (``db.progress_repo.claim_step``) for this task, or end the task: a
    duplicate or late copy is dropped (``Ignore``), a step claimed more than
    :func:`attempt_cap` times fails the analysis ``STALLED`` (``Ignore``), a database outage
    retries (``Retry``, carrying ``rows``/``llm_rows``)."""
    settings = get_settings()
    owner = str(task.request.id)
    try:
        claim = progress_repo.claim_step(
            engine=engine,
            analysis_id=state.analysis_id,
            iteration=state.iteration,
            step=stage,
            owner=owner,
            lease_seconds=settings.durability.lease_seconds,
        )
    except OperationalError as exc:
        raise _retry(
            task=task, exc=exc, state=state, stage=stage, engine=engine, rows=rows, llm_rows=llm_rows
        ) from exc
    if claim.outcome is not ClaimOutcome.CLAIMED:
        logger.info(
            "stage %s of %s (task %s): %s (row: %s after %s); message dropped",
            stage,
            state.analysis_id,
            owner,
            claim.outcome.value,
            claim.status,
            claim.checkpoint,
        )
        raise Ignore()
    if claim.attempt > attempt_cap(settings):
        control.fail_analysis(
            analysis_id=state.analysis_id,
            stage=stage,
            code="STALLED",
            message=(
                f"stage {stage} was started {claim.attempt - 1} times without completing "
                f"(cap {attempt_cap(settings)}: first run, retries, redeliveries)"
            ),
            state=state,
        )
        raise Ignore()


def run_stage(
    *,
    task: Task,
    fn: StageFunction,
    stage: str,
    payload: dict[str, Any],
    pending_rows: list[dict[str, Any]] | None = None,
    pending_llm_rows: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The adapter body shared by all stage tasks (see module docstring).

    1. Claim the step in the row (``db.progress_repo.claim_step``): a duplicate or late copy of
       the message is dropped (``Ignore``: acked, the chain not continued); a step claimed more
       than :func:`attempt_cap` times fails the analysis ``STALLED``. Not on the first delivery
       of a stage without a model (:func:`runs_unclaimed`): its checkpoint claims and
       completes the step in one ``UPDATE``.
    2. Run the stage function, then write its checkpoint (state, status, rows) fenced by the
       lease, inside the retry path: ``TransientStageError`` and a database ``OperationalError``
       (an outage) retry with backoff, and the message is acked only after the commit. A
       checkpoint fenced out (another copy won) drops the message (``Ignore``).
    3. Return the new state (the next task's argument).

    ``pending_rows``/``pending_llm_rows``: rows of earlier attempts that could not be written
    (the database was down), carried by the retry message.
    """
    settings = get_settings()
    state = FinancialAgentState.from_message(payload)
    owner = str(task.request.id)
    engine = get_engine(settings.service.effective_database_url)
    rows: list[dict[str, Any]] = list(pending_rows or [])
    llm_rows: list[dict[str, Any]] = list(pending_llm_rows or [])
    carried = bool(rows or llm_rows)
    claimed = not runs_unclaimed(task=task, settings=settings, state=state, carried_rows=carried)
    if claimed:
        _claim_or_drop(task=task, state=state, stage=stage, engine=engine, rows=rows, llm_rows=llm_rows)
    ctx = make_context(state=state, stage=stage, task_id=task.request.id, retries=task.request.retries)
    progress = progress_reporter(task, state=payload, stage=stage)  # Flower: PROGRESS + summary

    def heartbeat(info: dict[str, Any]) -> None:
        progress(**info)

    llm = make_llm_session(
        state=state, stage=stage, task_id=task.request.id, retries=task.request.retries, heartbeat=heartbeat
    )
    if llm is not None:
        # a stage with a model runs for seconds to minutes: Flower shows it PROGRESS at once,
        # then each heartbeat. A quant stage ends within milliseconds, before Flower could
        # show the event (Celery's own task-started event marks it running); its publish was
        # 4 % of a worker's CPU per analysis.
        progress(step="started")
    try:
        # the response cache (FINAGENT_LLM_CACHE) answers repeated LLM requests, if enabled
        with use_session(llm), use_source(response_cache(settings) if llm is not None else None):
            new_state = advance(fn(state=state, ctx=ctx), stage=stage)
        # after the last stage the pass ends in this task (no should_continue hop):
        # control.close_pass writes the finished row in the checkpoint's own transaction
        write = checkpoint if next_stage(stage) is not None else control.close_pass
        message = new_state.to_message()  # stored by the checkpoint, returned to the chain
        kept = write(
            state=new_state,
            stage=stage,
            owner=owner,
            rows=[*rows, *ctx.rows],
            llm_rows=[*llm_rows, *(llm.rows if llm is not None else [])],
            message=message,
            claimed=claimed,
        )
    except (TransientStageError, OperationalError) as exc:
        raise _retry(
            task=task,
            exc=exc,
            state=state,
            stage=stage,
            engine=engine,
            rows=[*rows, *ctx.rows],
            llm_rows=[*llm_rows, *(llm.rows if llm is not None else [])],
            claimed=claimed,
        ) from exc
    if not kept:
        logger.warning(
            "stage %s of %s (task %s): the lease was lost while it ran, or another copy completed "
            "the step first; its rows are kept, its state is not handed on",
            stage,
            state.analysis_id,
            owner,
        )
        raise Ignore()
    return message


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

    def body(
        self: Task,
        payload: dict[str, Any],
        pending_rows: list[dict[str, Any]] | None = None,
        pending_llm_rows: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        return run_stage(
            task=self,
            fn=fn,
            stage=stage,
            payload=payload,
            pending_rows=pending_rows,
            pending_llm_rows=pending_llm_rows,
        )

    body.__name__ = f"{stage}_task"
    body.__doc__ = f"Celery adapter of the {stage} stage: {(fn.__doc__ or '').strip().splitlines()[0]}"
    return declare(
        name=spec.task_name,
        bind=True,
        # The state a stage returns travels in the chain's next message and its checkpoint in
        # the analyses row; nobody reads it from the result backend. Storing it there (and the
        # STARTED state task_track_started adds) cost two Redis writes of the whole state per
        # stage: about 7 % of a worker's CPU per analysis (bench/pipeline_throughput.py).
        # Flower still sees every state change through the task events.
        ignore_result=True,
        max_retries=settings.durability.task_max_retries,
        soft_time_limit=settings.durability.task_soft_time_limit,
        time_limit=settings.durability.task_time_limit,
    )(body)
