"""The end of a pass as stage work: the ``should_continue`` decision and the reports it writes.

Pure functions, no I/O: :func:`conclude_pass` decides how a pass ends
(``pipeline.rules.should_continue``) and, when the pass ends the analysis, finishes the state
and writes its Markdown report; :func:`failed_state` fails a state and rewrites its report;
:func:`report_json_of` is the JSON report stored beside the Markdown one. The renderers
(``pipeline.report``) are reached only from here: the writes that make an analysis durable
(``pipeline.steps.checkpoint``, ``db.ledger``) take the finished state and its reports as
plain data. Their callers: the function of the stage table's last row
(``pipeline.stages.ending``, in the task of the last stage), the ``should_continue`` task and
the failure paths (``pipeline.steps.close``), and ``apps.replay``, which rebuilds a stored
report the same way.
"""

from __future__ import annotations

from typing import Any

from core.masking import mask_text
from core.state import FinancialAgentState, StageError, Status
from pipeline.report import final_json, report_markdown
from pipeline.rules import Decision, Verdict, next_iteration, should_continue


def conclude_pass(state: FinancialAgentState) -> tuple[Verdict, FinancialAgentState]:
    """The ``should_continue`` decision at the end of a pass, without side effects: ``(verdict,
    next)``. ``CONTINUE``: ``next`` is the state of the next pass
    (``pipeline.rules.next_iteration`` plus the verdict as a message); otherwise ``state``
    itself, finished: ``done``/``failed``, the verdict appended to its messages with the final
    status, and its Markdown report written. Raises nothing."""
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
    """``state`` failed by ``stage`` with ``code``: a ``StageError`` (message masked, then cut at
    1000 characters) appended, status ``failed``, the Markdown report rewritten; returned (the
    same object). What ``pipeline.steps.close.fail_analysis`` stores and ``apps.replay``
    rebuilds. Raises nothing."""
    # masked before the cut: a secret cut in two would no longer be recognised
    message = mask_text(message)[:1000]
    state.errors.append(StageError(stage=stage, iteration=state.iteration, code=code, message=message))
    state.status = Status.FAILED
    state.final_report = report_markdown(state, grounding=None)
    return state


def report_json_of(state: FinancialAgentState) -> dict[str, Any] | None:
    """The JSON report (``pipeline.report.final_json``) of a finished ``state`` whose Markdown
    report is written, stored with it; ``None`` when it has none. Raises nothing."""
    return final_json(state) if state.final_report else None
