"""The end of a pass and the end of a failed chain: the two writes that finish an analysis.

* :func:`close_pass` ends a pass inside the task of its last stage (no extra hop): the finished
  row in the stage's checkpoint transaction, or the checkpoint and :func:`end_of_pass`'s hand-off.
* :func:`end_of_pass` applies the ``should_continue`` rule (``pipeline.rules``): finish the
  analysis with its report, or enqueue the next pass at most once per (analysis_id, iteration)
  (the database claim ``analysis_iterations``).
* :func:`fail_chain` is the chain's error callback: the analysis is failed with the failing
  stage and error (its code kept), reported from the state the failed task received.
* :func:`fail_analysis` is the one way to fail an analysis (also used by the attempt cap of a
  stage and by the recovery sweep's ``STALLED``).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError as DatabaseOperationalError

from core.masking import mask_text
from core.settings import Settings
from core.stages import TASK_PREFIX, TERMINAL_STATUSES
from core.state import FinancialAgentState, StageError, Status
from db import ledger, repo
from db.engine import get_engine
from pipeline import taskqueue
from pipeline.report import report_markdown
from pipeline.rules import Decision, Verdict, next_iteration, should_continue
from pipeline.steps.backoff import TransientStageError, outage_retry
from pipeline.steps.checkpoint import checkpoint, end, finish, hand_off

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


def conclude_pass(state: FinancialAgentState) -> tuple[Verdict, FinancialAgentState]:
    """The ``should_continue`` decision at the end of a pass, without side effects (``end_of_pass`` and
    ``apps.replay`` share it): ``(verdict, next)``. ``CONTINUE``: ``next`` is the state of
    the next pass (``pipeline.rules.next_iteration`` plus the verdict as a message); otherwise
    ``state`` itself, finished: ``done``/``failed``, the verdict appended to its messages with
    the final status, and its Markdown report written. Raises nothing."""
    verdict = should_continue(state)
    if verdict.decision is Decision.CONTINUE:
        nxt = next_iteration(state)
        nxt.messages.append({"role": "assistant", "name": "should_continue", "content": verdict.reason})
        return verdict, nxt
    state.status = Status.DONE if verdict.decision is Decision.END_DONE else Status.FAILED
    # "status" marks the verdict that ended the analysis (pipeline.report.stop_reason)
    state.messages.append(
        {
            "role": "assistant",
            "name": "should_continue",
            "content": verdict.reason,
            "status": state.status.value,
        }
    )
    grounding = state.analysis.grounding if state.analysis else None
    state.final_report = report_markdown(state, grounding=grounding)
    return verdict, state


def failed_state(*, state: FinancialAgentState, stage: str, code: str, message: str) -> FinancialAgentState:
    """``state`` failed by ``stage`` with ``code``: a ``StageError`` (message cut at 1000
    characters) appended, status ``failed``, the Markdown report rewritten; returned (the same
    object). What :func:`fail_analysis` stores and ``apps.replay`` rebuilds. Raises nothing."""
    # masked before the cut: a secret cut in two would no longer be recognised
    message = mask_text(message)[:1000]
    state.errors.append(StageError(stage=stage, iteration=state.iteration, code=code, message=message))
    state.status = Status.FAILED
    state.final_report = report_markdown(state, grounding=None)
    return state


def chain_failure(*, task_name: str, exc: BaseException) -> tuple[str, str, str]:
    """``(stage, code, message)`` with which :func:`fail_chain` fails an analysis whose task
    ``task_name`` raised ``exc`` for good (``apps.replay`` rebuilds the same failure)."""
    return (
        task_name.removeprefix(TASK_PREFIX),
        error_code(exc),
        f"{task_name} failed: {type(exc).__name__}: {exc}",
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
        end(state=state, error=None if state.status is Status.DONE else verdict.reason, settings=settings)
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


def close_pass(
    *,
    state: FinancialAgentState,
    stage: str,
    owner: str,
    rows: list[dict[str, Any]],
    llm_rows: list[dict[str, Any]],
    message: dict[str, Any] | None = None,
    claimed: bool = True,
    settings: Settings,
) -> bool:
    """The end of a pass inside the task of its LAST stage (no ``should_continue`` hop):
    ``state`` is the state after that stage. Returns whether ``owner`` still held the lease.

    * The pass ends the analysis (the common case): the finished state, its report and the
      stage's rows are written in ONE transaction fenced by the stage's lease
      (``pipeline.steps.checkpoint.finish``) — one Celery hop and one commit fewer than a separate
      ``should_continue`` task, with the same guarantees (a redelivered copy finds the row
      finished and is dropped by its claim).
    * Another pass follows: the stage's checkpoint as any stage's, then :func:`end_of_pass` in
      this task (claim of the next pass, its row, its chain). If that hand-off meets an
      infrastructure error, the row keeps the checkpoint and the recovery sweep re-drives
      ``should_continue`` after the lease, as for a lost message.

    The decision is taken on the state as the next task would have received it (a JSON round
    trip), so it is the same as ``should_continue``'s and ``apps.replay``'s: ``message`` is
    ``state.to_message()`` when the caller has it (not modified here). Raises
    ``sqlalchemy.exc.OperationalError`` when the first write meets an outage (the stage retries).
    ``claimed``: whether the stage claimed its step (``pipeline.steps.checkpoint.checkpoint``).
    """
    message = message if message is not None else state.to_message()
    verdict, concluded = conclude_pass(FinancialAgentState.as_received(message))
    if verdict.decision is not Decision.CONTINUE:
        return finish(
            state=concluded,
            stage=stage,
            owner=owner,
            rows=rows,
            llm_rows=llm_rows,
            error=None if concluded.status is Status.DONE else verdict.reason,
            claimed=claimed,
            settings=settings,
        )
    if not checkpoint(
        state=state,
        stage=stage,
        owner=owner,
        rows=rows,
        llm_rows=llm_rows,
        message=message,
        claimed=claimed,
        settings=settings,
    ):
        return False
    try:
        end_of_pass(payload=message, celery_task_id=owner, settings=settings)
    except infrastructure_errors() as exc:
        logger.warning(
            "analysis %s: hand-off to pass %d failed (%s: %s); left to the recovery sweep",
            state.analysis_id,
            state.iteration + 2,
            type(exc).__name__,
            exc,
        )
    return True


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
    end(state=state, error=state.errors[-1].reason()[:1000], settings=settings)
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
