"""The end of a pass outside its last stage's write, and the end of a failed chain.

* :func:`hand_on` sends the ``should_continue`` task after the checkpoint of a last stage whose
  pass does NOT end the analysis (rare: one hop on that path only); a pass that ends it is
  finished by the last stage's own write (``pipeline.steps.run``, ``pipeline.stages.ending``).
* :func:`end_of_pass` is that task's work: applies the ``should_continue`` rule
  (``pipeline.conclude.conclude_pass``) and finishes the analysis with its report, or enqueues
  the next pass at most once per (analysis_id, iteration) (the database claim
  ``analysis_iterations``). The recovery sweep re-drives it from a last stage's checkpoint.
* :func:`fail_chain` is the chain's error callback: the analysis is failed with the failing
  stage and error (its code kept), reported from the state the failed task received.
* :func:`fail_analysis` is the one way to fail an analysis (also used by the attempt cap of a
  stage and by the recovery sweep's ``STALLED``).

The reports are written by ``pipeline.conclude`` and handed to the writes
(``pipeline.steps.checkpoint``) as plain data.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError as DatabaseOperationalError

from core.settings import Settings
from core.stages import END_OF_PASS, TASK_PREFIX, TERMINAL_STATUSES
from core.state import FinancialAgentState, Status
from db import ledger, repo
from db.engine import get_engine
from pipeline import taskqueue
from pipeline.conclude import conclude_pass, failed_state, report_json_of
from pipeline.rules import Decision
from pipeline.steps.backoff import TransientStageError, outage_retry
from pipeline.steps.checkpoint import end, hand_off

logger = logging.getLogger("finagent.tasks")


def _finish_lost_hand_off(
    *, engine: Engine, analysis_id: str, iteration: int, celery_task_id: str | None, settings: Settings
) -> bool:
    """Whether this delivery, which lost the claim of pass ``iteration + 1``, should finish
    the hand-off itself: the row is still unfinished in pass ``iteration`` (the next pass was
    claimed but never written) *and* the claimant is known not to be at work on it.

    Known when the claimant is this very message (a broker redelivery or a Celery retry keeps
    the task id: its earlier run died or failed to publish), when the recovery sweep took the
    row for a re-drive after the claim (``updated_at`` moved past the claim without the
    claimant's write: only the sweep's take does that between a review checkpoint and the
    hand-off), or when the claim is older than the hard task time limit (no live task outlives
    ``durability.task_time_limit``). Anything else is a concurrent duplicate delivery whose
    claimant is, at most, between its claim and its write: publishing here too would start a
    second copy of the next pass. Should that claimant die after all, the sweep re-drives
    the pass once its lease runs out, and that re-drive finishes the hand-off.
    """
    seen = ledger.pass_claim(engine=engine, analysis_id=analysis_id, iteration=iteration + 1)
    if seen is None or seen.iteration != iteration or seen.status in TERMINAL_STATUSES:
        return False
    if celery_task_id is not None and seen.claimant == celery_task_id:
        return True
    limit = timedelta(seconds=settings.durability.task_time_limit)
    return seen.updated_at > seen.claimed_at or datetime.now(UTC) - seen.claimed_at > limit


def chain_failure(*, task_name: str, exc: BaseException) -> tuple[str, str, str]:
    """``(stage, code, message)`` with which :func:`fail_chain` fails an analysis whose task
    ``task_name`` raised ``exc`` for good (``apps.replay`` rebuilds the same failure)."""
    return (
        task_name.removeprefix(TASK_PREFIX),
        error_code(exc),
        f"{task_name} failed: {type(exc).__name__}: {exc}",
    )


def hand_on(*, state: FinancialAgentState) -> None:
    """Send the ``should_continue`` task for ``state``, the state after the last stage of a pass
    that does not end the analysis (its checkpoint committed): that task hands off to the next
    pass (:func:`end_of_pass`). A publish the broker refuses is logged and left to the recovery
    sweep, which re-drives ``should_continue`` from the row's checkpoint once its lease runs out
    (as for a lost message). Raises ``pipeline.taskqueue.NoTaskQueue`` when no task queue is
    installed in this process."""
    try:
        taskqueue.get().chain(state, start=END_OF_PASS).apply_async()
    except infrastructure_errors() as exc:
        logger.warning(
            "analysis %s: hand-off to pass %d failed (%s: %s); left to the recovery sweep",
            state.analysis_id,
            state.iteration + 2,
            type(exc).__name__,
            exc,
        )


def end_of_pass(*, payload: dict[str, Any], celery_task_id: str | None, settings: Settings) -> dict[str, Any]:
    """Finish the analysis of ``payload`` (a state message) or re-enqueue its next pass.

    A duplicate delivery of the same message cannot enqueue a pass twice: the claim of
    ``(analysis_id, iteration + 1)`` succeeds once. Returns ``{decision, reason, analysis_id,
    iteration}``. Raises ``pydantic.ValidationError`` for a message that is not a state.
    """
    state = FinancialAgentState.from_message(payload)
    verdict, nxt = conclude_pass(state)
    engine = get_engine(settings.service.effective_database_url)
    if verdict.decision is Decision.CONTINUE:
        claimed = ledger.claim_pass(
            engine=engine,
            analysis_id=state.analysis_id,
            iteration=nxt.iteration,
            celery_task_id=celery_task_id,
        )
        # The claim and the row write are two transactions: a claimant that died between them
        # (or whose publish failed) leaves the row in this pass. A redelivery or retry of the
        # same message, or the recovery sweep's re-drive past the claimant's time limit, then
        # finishes the hand-off; a concurrent duplicate does not (_finish_lost_hand_off).
        if claimed or _finish_lost_hand_off(
            engine=engine,
            analysis_id=state.analysis_id,
            iteration=state.iteration,
            celery_task_id=celery_task_id,
            settings=settings,
        ):
            hand_off(state=nxt, settings=settings)
            taskqueue.get().chain(nxt).apply_async()
            logger.info(
                "analysis %s: re-enqueued as pass %d (%s)",
                state.analysis_id,
                nxt.iteration + 1,
                verdict.reason,
            )
        else:
            logger.info(
                "analysis %s: pass %d already enqueued; duplicate ignored",
                state.analysis_id,
                nxt.iteration + 1,
            )
    else:
        end(
            state=state,
            report_json=report_json_of(state),
            error=None if state.status is Status.DONE else verdict.reason,
            settings=settings,
        )
    return {
        "decision": verdict.decision.value,
        "reason": verdict.reason,
        "analysis_id": state.analysis_id,
        "iteration": state.iteration,
    }


def should_continue_step(
    *, payload: dict[str, Any], celery_task_id: str | None, retries: int, settings: Settings
) -> dict[str, Any]:
    """:func:`end_of_pass` as the step of the ``should_continue`` task (the hand-off the recovery
    sweep re-drives): a database outage becomes a :class:`~pipeline.steps.backoff.RetryStep`
    with the outage countdown (:func:`~pipeline.steps.backoff.outage_retry`; ``retries``: the
    delivery's retries so far), which the task base turns into Celery's retry, as a stage's.
    The end of a pass is idempotent (the claim of the next pass and the no-regress rule of the
    row), so a retry repeats it safely; past the retries the recovery sweep re-drives it from the
    row's checkpoint. Returns what :func:`end_of_pass` returns.

    Raises:
        RetryStep: the database was unreachable.
    """
    try:
        return end_of_pass(payload=payload, celery_task_id=celery_task_id, settings=settings)
    except DatabaseOperationalError as exc:
        raise outage_retry(exc=exc, retries=retries, settings=settings) from exc


def _failed_task_state(args: list[Any], *, analysis_id: str) -> FinancialAgentState | None:
    """The state the failed task was given (its message argument), or ``None``.

    The failed task's argument is the state its step received: the state after the last stage
    that succeeded, which is what the failure report should show (the stored state says the
    same after a checkpoint, and is the fallback when the argument is not a state).
    """
    payload = args[0] if args else None
    if not isinstance(payload, dict) or payload.get("analysis_id") != analysis_id:
        return None
    try:
        return FinancialAgentState.from_message(payload)
    except ValueError:  # pydantic's ValidationError included: fall back to the stored state
        logger.warning("analysis %s: the failed task's argument is not a state", analysis_id)
        return None


def fail_analysis(
    *,
    analysis_id: str,
    stage: str,
    code: str,
    message: str,
    state: FinancialAgentState | None = None,
    settings: Settings,
) -> bool:
    """Finish an unfinished analysis as ``failed``: append a ``StageError(stage, code, message)``
        to ``state`` (default: the stored state), build the report and write it in full with
        ``error = "<code>: <message>"`` (≤ 1000 chars; just ``message`` when it starts with the code,
    as ``STALLED after 3 recoveries: …``). An analysis already ``done``/``failed`` (or
        gone) is left alone. Returns ``True`` when this call failed it.

        Raises ``sqlalchemy.exc.OperationalError`` when the database is unreachable (the caller
        retries, or the recovery sweep finds the analysis later: its lease runs out).
    """
    engine = get_engine(settings.service.effective_database_url)
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    if row is None or row["status"] in TERMINAL_STATUSES:
        return False
    state = failed_state(
        state=state or FinancialAgentState.from_message(row["state"]), stage=stage, code=code, message=message
    )
    error = state.errors[-1].reason()[:1000]
    end(state=state, report_json=report_json_of(state), error=error, settings=settings)
    return True


def error_code(exc: BaseException) -> str:
    """The error code a failed stage reports: a ``TransientStageError``'s own code (the tool's,
    e.g. ``RATE_LIMITED`` after the retries ran out; it survives Celery's JSON result backend,
    see ``TransientStageError``), else ``STAGE_FAILED``."""
    return exc.code if isinstance(exc, TransientStageError) else "STAGE_FAILED"


#: Errors of the infrastructure raised by the database and Redis clients themselves (redis-py's
#: own errors can surface raw); :func:`infrastructure_errors` adds the task queue's.
_CLIENT_ERRORS: tuple[type[BaseException], ...] = (
    DatabaseOperationalError,
    RedisConnectionError,
    RedisTimeoutError,
)


def infrastructure_errors() -> tuple[type[BaseException], ...]:
    """Errors of the infrastructure, not of the analysis: the broker or the database
    unreachable (the task queue wraps broker connection errors in its own, kombu's
    ``OperationalError``, e.g. when the next step of a chain is published while Redis
    restarts), plus :data:`_CLIENT_ERRORS`.

    Raises:
        pipeline.taskqueue.NoTaskQueue: no task queue is installed in this process.
    """
    return (*taskqueue.get().connection_errors(), *_CLIENT_ERRORS)


def fail_chain(
    *, analysis_id: str, task_name: str, exc: BaseException, task_args: list[Any], settings: Settings
) -> None:
    """Mark the analysis failed after task ``task_name`` raised ``exc`` for good (a
    non-retryable error, or retries exhausted), unless it already finished. The report is built
    from the state the failed task received (``task_args[0]``), else the stored state; the
    error code is :func:`error_code` of ``exc`` and the message ``"<task> failed: <ExcType>:
    <message>"``.

    An infrastructure error (:func:`infrastructure_errors`: the broker or the database away for
    longer than the retries) does not fail the analysis: its row keeps the last checkpoint and
    its lease runs out, so the recovery sweep re-drives it once the outage is over, up to
    ``max_recoveries`` times (docs/design.md, "Durability and idempotency").
    """
    if isinstance(exc, infrastructure_errors()):
        logger.warning(
            "analysis %s: %s failed on the infrastructure (%s: %s); left to the recovery sweep",
            analysis_id,
            task_name,
            type(exc).__name__,
            exc,
        )
        return
    stage, code, message = chain_failure(task_name=task_name, exc=exc)
    fail_analysis(
        analysis_id=analysis_id,
        stage=stage,
        code=code,
        message=message,
        state=_failed_task_state(task_args, analysis_id=analysis_id),
        settings=settings,
    )
