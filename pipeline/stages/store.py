"""Writing a stage's results: the ``tool_calls``/``llm_calls`` rows and the ``analyses`` row.

Only the stages (and the end of a pass, ``pipeline.stages.control``) write the state; this
module is where it reaches the database (``db.repo.save_stage``: one transaction, idempotent).
"""

from __future__ import annotations

from typing import Any

from db import repo
from db.engine import get_engine
from pipeline.core.parts import ResearchBundle
from pipeline.core.settings import get_settings
from pipeline.core.stages import STAGES, TERMINAL_STATUSES
from pipeline.core.state import FinancialAgentState
from pipeline.stages.review import final_json


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
    (the last stage's) records that stage's running status, so nobody sees ``done`` without its
    report. The full write (default) is done at the end of a pass (``should_continue``) and by
    the chain's error callback.
    """
    engine = get_engine(get_settings().effective_database_url)
    if progress_only:
        status = state.status
        if status in TERMINAL_STATUSES:
            status = STAGES[-1].status
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
