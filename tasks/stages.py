"""The Celery tasks: thin adapters over ``pipeline.stages`` plus ``should_continue`` and the
chain's error callback. ``build_chain`` composes research → analysis → recommendation →
review → should_continue.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Task, chain
from celery.canvas import Signature

from db import repo
from db.engine import get_engine
from pipeline.celery_app import app
from pipeline.core.settings import get_settings
from pipeline.core.state import FinancialAgentState, StageError, Status
from pipeline.report import report_markdown
from pipeline.rules import Decision, next_iteration, should_continue
from pipeline.stages.analysis import analysis as analysis_stage
from pipeline.stages.recommendation import recommendation as recommendation_stage
from pipeline.stages.research import research as research_stage
from pipeline.stages.review import review as review_stage
from tasks.factory import persist, stage_task

logger = logging.getLogger("finagent.tasks")

research = stage_task(name="finagent.research", stage="research")(research_stage)
analysis = stage_task(name="finagent.analysis", stage="analysis")(analysis_stage)
recommendation = stage_task(name="finagent.recommendation", stage="recommendation")(recommendation_stage)
review = stage_task(name="finagent.review", stage="review")(review_stage)


@app.task(name="finagent.should_continue", bind=True, acks_late=True, typing=False)
def should_continue_task(self: Task, payload: dict[str, Any]) -> dict[str, Any]:
    """Apply ``pipeline.rules.should_continue``: finish the analysis, or re-enqueue the chain
    with ``iteration + 1``, at most once per (analysis_id, iteration) (database guard).

    Returns ``{decision, reason, analysis_id, iteration}``.
    """
    state = FinancialAgentState.from_message(payload)
    verdict = should_continue(state)
    engine = get_engine(get_settings().effective_database_url)
    if verdict.decision is Decision.CONTINUE:
        nxt = next_iteration(state)
        nxt.messages.append({"role": "assistant", "name": "should_continue", "content": verdict.reason})
        if repo.claim_iteration(
            engine=engine,
            analysis_id=state.analysis_id,
            iteration=nxt.iteration,
            celery_task_id=self.request.id,
        ):
            persist(state=nxt, rows=[])
            build_chain(nxt).apply_async()
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
        state.status = Status.DONE if verdict.decision is Decision.END_DONE else Status.FAILED
        state.messages.append({"role": "assistant", "name": "should_continue", "content": verdict.reason})
        grounding = (state.analysis or {}).get("grounding")
        state.final_report = report_markdown(state, grounding=grounding)
        persist(
            state=state,
            rows=[],
            finished=True,
            error=None if state.status is Status.DONE else verdict.reason,
        )
    return {
        "decision": verdict.decision.value,
        "reason": verdict.reason,
        "analysis_id": state.analysis_id,
        "iteration": state.iteration,
    }


def _failed_task_state(request: Any, *, analysis_id: str) -> FinancialAgentState | None:
    """The state the failed task was given (its message argument), or ``None``.

    Stage tasks write only progress to the ``analyses`` row (``tasks.factory.persist``), so the
    stored state is the one of the pass's start; the failed task's own argument is the state
    after the last stage that succeeded, which is what the failure report should show.
    """
    args: list[Any] = list(getattr(request, "args", None) or [])
    payload = args[0] if args else None
    if not isinstance(payload, dict) or payload.get("analysis_id") != analysis_id:
        return None
    try:
        return FinancialAgentState.from_message(payload)
    except ValueError:  # pydantic's ValidationError included: fall back to the stored state
        logger.warning("analysis %s: the failed task's argument is not a state", analysis_id)
        return None


@app.task(name="finagent.chain_failed", typing=False)
def chain_failed(request: Any, exc: BaseException, traceback: Any, analysis_id: str) -> None:
    """Error callback of a chain: mark the analysis failed with the failing stage and error
    (unless it already finished). Runs when a stage raised a non-retryable error or ran out of
    retries. The report is built from the state the failed task received (else the stored
    state), and written in full."""
    engine = get_engine(get_settings().effective_database_url)
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    if row is None or row["status"] in (Status.DONE.value, Status.FAILED.value):
        return
    state = _failed_task_state(request, analysis_id=analysis_id) or FinancialAgentState.from_message(
        row["state"]
    )
    task_name = getattr(request, "task", "a stage")
    message = f"{task_name} failed: {type(exc).__name__}: {exc}"
    state.errors.append(
        StageError(
            stage=str(task_name).removeprefix("finagent."),
            iteration=state.iteration,
            code="STAGE_FAILED",
            message=message[:1000],
        )
    )
    state.status = Status.FAILED
    state.final_report = report_markdown(state, grounding=None)
    persist(state=state, rows=[], finished=True, error=message[:1000])


def build_chain(state: FinancialAgentState) -> Signature:
    """The chain of one pass for ``state``, with the error callback attached to every task."""
    sig = chain(
        research.s(state.to_message()),
        analysis.s(),
        recommendation.s(),
        review.s(),
        should_continue_task.s(),
    )
    sig.on_error(chain_failed.s(analysis_id=state.analysis_id))
    return sig
