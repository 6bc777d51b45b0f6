"""Writing a stage's results: the ``tool_calls``/``llm_calls`` rows and the ``analyses`` row.

Only the stages (and the end of a pass, ``pipeline.stages.control``) write the state; this
module is where it reaches the database: :func:`checkpoint` after each stage (fenced by the
stage's lease, ``db.progress_repo``), :func:`finish` after the last stage when the pass ends
the analysis (the same fence, the report with it), :func:`persist` at the start of a next pass
or a failure (``db.repo.save_stage``); each one transaction, idempotent.
"""

from __future__ import annotations

from typing import Any

from core.parts import ResearchBundle
from core.settings import get_settings
from core.stages import TERMINAL_STATUSES
from core.stages import stage as stage_spec
from core.state import FinancialAgentState
from db import progress_repo, repo
from db.engine import get_engine
from pipeline.stages.review import final_json


def persist(
    *,
    state: FinancialAgentState,
    rows: list[dict[str, Any]],
    finished: bool = False,
    error: str | None = None,
    llm_rows: list[dict[str, Any]] | None = None,
) -> None:
    """Write the whole analysis row (state, status, report, signal, error) with the rows, in one
    transaction (``db.repo.save_stage``): the end of an analysis (``finished``) or the start of
    its next pass (the lease of the new pass starts now). Stage completions within a pass use
    :func:`checkpoint`.

    Raises ``sqlalchemy.exc.OperationalError`` when the database is unreachable.
    """
    settings = get_settings()
    engine = get_engine(settings.service.effective_database_url)
    report_json = final_json(state) if state.final_report else None
    rec = state.recommendation
    repo.save_stage(
        engine=engine,
        analysis_id=state.analysis_id,
        state=state.to_message(),
        status=state.status.value,
        iteration=state.iteration,
        tool_calls=rows,
        report=state.final_report,
        report_json=report_json,
        signal=rec.signal if rec else None,
        confidence=rec.confidence if rec else None,
        error=error,
        finished=finished,
        llm_calls=llm_rows or (),
        lease_seconds=settings.durability.lease_seconds,
    )


def checkpoint(
    *,
    state: FinancialAgentState,
    stage: str,
    owner: str,
    rows: list[dict[str, Any]],
    llm_rows: list[dict[str, Any]] | None = None,
    message: dict[str, Any] | None = None,
    claimed: bool = True,
) -> bool:
    """Record that ``owner`` completed ``stage`` with the resulting ``state`` (after
    ``pipeline.stages.table.advance``), and the stage's rows, in one transaction fenced by the
    stage's lease (``db.progress_repo.complete_step``).

    The stored state is the state after the stage, so the next step can be re-driven from the
    row alone when its message is lost (``pipeline.stages.recovery``). A terminal ``state``
    status (a stage that ended the analysis early) is stored as this stage's running status:
    only the end of the pass writes ``done``/``failed``, with the report, so nobody sees
    ``done`` without one.

    ``message``: ``state.to_message()`` when the caller has it already (the task returns the
    same dict as the next task's argument; the dump is not repeated). ``claimed=False``: the
    stage ran without claiming its step (``tasks.factory.runs_unclaimed``); the write is then
    fenced by "nobody else holds a live lease" instead of "``owner`` holds it".

    Returns ``False`` when ``owner`` lost the lease (the caller must not hand the state on).
    Raises ``sqlalchemy.exc.OperationalError`` when the database is unreachable.
    """
    settings = get_settings()
    status = state.status
    if status in TERMINAL_STATUSES:
        status = stage_spec(stage).status
    return progress_repo.complete_step(
        engine=get_engine(settings.service.effective_database_url),
        analysis_id=state.analysis_id,
        iteration=state.iteration,
        step=stage,
        owner=owner,
        state=message if message is not None else state.to_message(),
        status=status.value,
        lease_seconds=settings.durability.lease_seconds,
        tool_calls=rows,
        llm_calls=llm_rows or (),
        claimed=claimed,
    )


def finish(
    *,
    state: FinancialAgentState,
    stage: str,
    owner: str,
    rows: list[dict[str, Any]],
    llm_rows: list[dict[str, Any]] | None = None,
    error: str | None = None,
    claimed: bool = True,
) -> bool:
    """Record that ``owner`` completed the last ``stage`` of a pass that ENDED the analysis:
    ``state`` is the finished state (``pipeline.stages.control.conclude_pass``: done/failed,
    report written); the row, the report and the stage's rows in one transaction fenced by the
    stage's lease (``db.progress_repo.finish_step``; ``claimed`` as in :func:`checkpoint`).

    Returns ``False`` when ``owner`` lost the lease. Raises
    ``sqlalchemy.exc.OperationalError`` when the database is unreachable.
    """
    settings = get_settings()
    rec = state.recommendation
    return progress_repo.finish_step(
        engine=get_engine(settings.service.effective_database_url),
        analysis_id=state.analysis_id,
        iteration=state.iteration,
        step=stage,
        owner=owner,
        state=state.to_message(),
        status=state.status.value,
        report=state.final_report,
        report_json=final_json(state) if state.final_report else None,
        signal=rec.signal if rec else None,
        confidence=rec.confidence if rec else None,
        error=error,
        tool_calls=rows,
        llm_calls=llm_rows or (),
        claimed=claimed,
    )


def stored_research(row: dict[str, Any]) -> ResearchBundle | None:
    """The research bundle (``stock_data``) of a stored ``analyses`` row (``state`` parsed), or
    ``None`` when research has not run. Raises ``pydantic.ValidationError`` for a stored state
    whose ``stock_data`` is not a research bundle (a corrupted row)."""
    stock = (row.get("state") or {}).get("stock_data")
    return ResearchBundle.model_validate(stock) if stock else None


def chartable_history(row: dict[str, Any]) -> str | None:
    """The ``tool_call_id`` of the analysis's successful ``get_history`` call (what its chart
    draws), or ``None`` when research failed or has not run."""
    stock = stored_research(row)
    if stock is None or stock.status != "success" or not stock.history_ref:
        return None
    return stock.history_ref
