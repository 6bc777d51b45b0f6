"""Writing a step's results: the ``tool_calls``/``llm_calls`` rows and the ``analyses`` row.

Only the steps (a stage, the end of a pass: ``pipeline.steps.close``) write the state; this
module is where it reaches the database: :func:`checkpoint` writes it after each stage, moved
to the next stage's status (``FinancialAgentState.advance``), fenced by the stage's lease (after
the last stage of a pass that ended the analysis, the finished row with its reports),
:func:`hand_off` at the start of a next pass and :func:`end` for an end outside a step: each a
move of the row's ledger (``db.ledger``), one transaction, idempotent. Nothing here renders: a
finished state comes with its Markdown report written and its JSON report beside it
(``pipeline.conclude``), as plain data.
"""

from __future__ import annotations

from typing import Any

from core.settings import Settings
from core.stages import TERMINAL_STATUSES
from core.stages import stage as stage_spec
from core.state import FinancialAgentState
from db import ledger
from db.engine import get_engine
from pipeline.steps.context import PassEnd


def hand_off(*, state: FinancialAgentState, settings: Settings) -> bool:
    """Start the next pass of the analysis in its row (``db.ledger.hand_off``: the next pass's
    first state, no checkpoint, its lease starting now), unless the row moved past it. Returns
    whether it moved. Raises ``sqlalchemy.exc.OperationalError`` when the database is
    unreachable."""
    return ledger.hand_off(
        engine=get_engine(settings.service.effective_database_url),
        analysis_id=state.analysis_id,
        state=state.to_message(),
        lease_seconds=settings.durability.lease_seconds,
    )


def end(
    *, state: FinancialAgentState, report_json: dict[str, Any] | None, error: str | None, settings: Settings
) -> bool:
    """Write the finished analysis ``state`` (done or failed, its Markdown report written)
    outside a fenced step (``db.ledger.end``: the ``should_continue`` task, a failure), with its
    ``report_json`` (``pipeline.conclude.report_json_of``), signal, confidence and ``error``.
    Returns whether the row moved (``False``: it was finished otherwise already). Raises
    ``sqlalchemy.exc.OperationalError`` when the database is unreachable."""
    rec = state.recommendation
    return ledger.end(
        engine=get_engine(settings.service.effective_database_url),
        analysis_id=state.analysis_id,
        state=state.to_message(),
        status=state.status.value,
        iteration=state.iteration,
        report=state.final_report,
        report_json=report_json,
        signal=rec.signal if rec else None,
        confidence=rec.confidence if rec else None,
        error=error,
    )


def checkpoint(
    *,
    state: FinancialAgentState,
    stage: str,
    owner: str,
    rows: list[dict[str, Any]],
    llm_rows: list[dict[str, Any]] | None = None,
    message: dict[str, Any] | None = None,
    ended: PassEnd | None = None,
    claimed: bool = True,
    settings: Settings,
) -> bool:
    """Record that ``owner`` completed ``stage`` with the resulting ``state`` (after
    ``FinancialAgentState.advance``), and the stage's rows, in one transaction fenced by the
    stage's lease: the checkpoint (``db.ledger.complete``), or, when the stage ended the
    analysis (``ended``, left by the last stage of a pass: ``ended.ends``), the finished row
    with its reports (``db.ledger.finish``).

    A checkpoint stores the state after the stage, so the next step can be re-driven from the
    row alone when its message is lost (``pipeline.steps.recovery``). A terminal ``state``
    status there (a stage that ended the analysis early) is stored as this stage's running
    status: only the end of the pass writes ``done``/``failed``, with the report, so nobody sees
    ``done`` without one. A finished row stores ``state`` as finished by the stage
    (``pipeline.conclude.conclude_pass``: done/failed, its Markdown report written), the JSON
    report ``ended.report_json`` and ``ended.error``, signal and confidence beside it: given as
    data, nothing is rendered here.

    ``message``: ``state.to_message()`` when the caller has it already (the task returns the
    same dict as the next task's argument; the dump is not repeated). ``claimed=False``: the
    stage ran without claiming its step (``pipeline.steps.claim.runs_unclaimed``); the write is then
    fenced by "nobody else holds a live lease" instead of "``owner`` holds it".

    Returns ``False`` when ``owner`` lost the lease (the caller must not hand the state on).
    Raises ``sqlalchemy.exc.OperationalError`` when the database is unreachable.
    """
    step = ledger.StepEnd(
        analysis_id=state.analysis_id,
        iteration=state.iteration,
        step=stage,
        owner=owner,
        state=message if message is not None else state.to_message(),
        tool_calls=rows,
        llm_calls=llm_rows or (),
        claimed=claimed,
    )
    engine = get_engine(settings.service.effective_database_url)
    if ended is not None and ended.ends:
        rec = state.recommendation
        return ledger.finish(
            engine=engine,
            end=step,
            status=state.status.value,
            report=state.final_report,
            report_json=ended.report_json,
            signal=rec.signal if rec else None,
            confidence=rec.confidence if rec else None,
            error=ended.error,
        )
    status = stage_spec(stage).status if state.status in TERMINAL_STATUSES else state.status
    return ledger.complete(
        engine=engine, end=step, status=status.value, lease_seconds=settings.durability.lease_seconds
    )
