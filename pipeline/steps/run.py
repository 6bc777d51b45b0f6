"""One step of an analysis, from its message to the next one: :func:`run_step`.

claim (``pipeline.steps.claim``) → context (``pipeline.steps.context``) → the plain stage
function (``pipeline/stages``; the last stage's also ends the pass, ``pipeline.stages.ending``)
→ checkpoint (``pipeline.steps.checkpoint``; when the pass ended the analysis, the finished row
with its reports; when another pass follows, the checkpoint and then the ``should_continue``
task, ``pipeline.steps.close.hand_on``) → the new state, which the chain
hands to the next step. A retryable error on the way is a retry
(``pipeline.steps.backoff``); a copy of the message that is not the step's to run is dropped
(``pipeline.steps.delivery.DropMessage``). Nothing here knows Celery: the stage task
(``tasks.base.StageTask``) reads the :class:`~pipeline.steps.delivery.Delivery` from Celery's
request and turns the two exceptions back into ``Ignore`` and ``retry``. With late acks the
message is acked only after the checkpoint's commit (docs/design.md, "Durability and
idempotency").
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from core.settings import Settings
from core.state import FinancialAgentState, StageMark
from pipeline.steps.backoff import RETRYABLE_ERRORS, retry_step
from pipeline.steps.checkpoint import checkpoint
from pipeline.steps.claim import Claim, claim_step, refuse
from pipeline.steps.close import hand_on
from pipeline.steps.context import StageFunction, StepContext, open_context
from pipeline.steps.delivery import Delivery, DropMessage

logger = logging.getLogger("finagent.tasks")


def run_step(
    payload: dict[str, Any],
    *,
    stage: str,
    fn: StageFunction,
    delivery: Delivery,
    progress: Callable[..., None] | None = None,
    settings: Settings,
) -> dict[str, Any]:
    """Run stage ``stage`` (its function ``fn``) on the state message ``payload`` once, as the
    ``delivery`` of its message; return the new state as a message (the next step's argument).

    1. Claim the step (``claim.claim_step``; on the first delivery of a stage without a model
       the checkpoint claims instead, ``claim.runs_unclaimed``).
    2. Open the step's context (tools, LLM session, response cache, budgets) and run ``fn``.
    3. Move the state to the next stage's status and write the checkpoint (state, status,
       rows) fenced by the lease; when the last stage ended the analysis the finished row and
       its reports instead, in that same transaction (``checkpoint.checkpoint``); when it left
       another pass to follow, the ``should_continue`` task after the checkpoint
       (``close.hand_on``).

    The main line comes first; what does not run (a copy, a capped step: ``claim.refuse``) and
    what runs again (a retryable error anywhere on it: ``backoff.retry_step``) after it.
    ``progress(**info)`` shows the step's progress (Flower): called with ``step="started"`` when
    the stage opens its LLM session, then after every LLM and tool call of that session
    (``context.make_llm_session``).

    Raises:
        DropMessage: a duplicate, late or capped copy, or a checkpoint fenced out (the lease
            was lost, or another copy completed the step).
        RetryStep: a ``TransientStageError`` or a database outage.
        Exception: anything else the stage raises fails the chain.
    """
    state = FinancialAgentState.from_message(payload)
    claim: Claim | None = None
    ctx: StepContext | None = None
    kept, message = False, payload
    try:
        claim = claim_step(delivery=delivery, state=state, stage=stage, settings=settings)
        if claim.runs:
            ctx = open_context(
                state=state,
                stage=stage,
                delivery=delivery,
                heartbeat=(lambda info: progress(**info)) if progress is not None else None,
                settings=settings,
            )
            kept, message = _run_and_checkpoint(
                state=state,
                stage=stage,
                fn=fn,
                ctx=ctx,
                claim=claim,
                delivery=delivery,
                settings=settings,
            )
    except RETRYABLE_ERRORS as exc:
        raise retry_step(
            delivery=delivery,
            exc=exc,
            state=state,
            stage=stage,
            rows=[*delivery.pending_rows, *(ctx.rows if ctx is not None else [])],
            llm_rows=[*delivery.pending_llm_rows, *(ctx.llm_rows if ctx is not None else [])],
            claimed=claim is None or claim.claimed,  # a claim that failed was claiming
            settings=settings,
        ) from exc
    assert claim is not None  # the try set it, or raised
    if not claim.runs:
        raise refuse(claim=claim, delivery=delivery, state=state, stage=stage, settings=settings)
    if not kept:
        logger.warning(
            "stage %s of %s (task %s): the lease was lost while it ran, or another copy completed "
            "the step first; its rows are kept, its state is not handed on",
            stage,
            state.analysis_id,
            delivery.task_id,
        )
        raise DropMessage("fenced out")
    return message


def _run_and_checkpoint(
    *,
    state: FinancialAgentState,
    stage: str,
    fn: StageFunction,
    ctx: StepContext,
    claim: Claim,
    delivery: Delivery,
    settings: Settings,
) -> tuple[bool, dict[str, Any]]:
    """Steps 2 (the stage function, in the opened ``ctx``) and 3 (the checkpoint, or the
    finished row when the last stage ended the analysis) of :func:`run_step`, for a ``claim``
    that runs.

    Returns ``(kept, message)``: whether the fenced write took the state (``False``: the lease
    was lost or another copy completed the step first), and the new state as a message.

    Raises what ``fn`` and ``checkpoint.checkpoint`` raise (the caller
    turns a retryable error into a retry, reading the rows ``ctx`` collected so far).
    """
    started = datetime.now(UTC)
    new_state = fn(state=state, ctx=ctx)
    new_state.advance(stage=stage)
    # when it ran, for the console's stepper: stored with the state by the checkpoint
    new_state.stage_marks.append(
        StageMark(stage=stage, iteration=state.iteration, started_at=started, finished_at=datetime.now(UTC))
    )
    message = new_state.to_message()  # stored by the checkpoint, returned to the chain
    # the rows of earlier attempts the database could not take, then this attempt's
    rows = [*delivery.pending_rows, *ctx.rows]
    llm_rows = [*delivery.pending_llm_rows, *ctx.llm_rows]
    ended = ctx.pass_end  # left by the last stage of a pass only (pipeline.stages.ending)
    # when the pass ended the analysis (the common case), the finished row and its reports in
    # the checkpoint's one transaction, in this task (no extra hop)
    kept = checkpoint(
        state=new_state,
        stage=stage,
        owner=delivery.task_id,
        rows=rows,
        llm_rows=llm_rows,
        message=message,
        ended=ended,
        claimed=claim.claimed,
        settings=settings,
    )
    if kept and ended is not None and not ended.ends:
        hand_on(state=new_state)  # another pass follows: should_continue hands off to it
    return kept, message
