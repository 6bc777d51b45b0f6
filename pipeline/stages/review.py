"""Review stage (seed 001 step 5): grounding check and the final report."""

from __future__ import annotations

from typing import Any

from agents.tools.registry import ToolContext
from pipeline.grounding import extract_numbers, unverified_numbers
from pipeline.report import report_json, report_markdown
from pipeline.stages.common import note
from pipeline.state import FinancialAgentState, StageError, Status


def _statements(rec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*rec.get("rationale", []), *rec.get("risk_flags", [])]


def check_grounding(*, state: FinancialAgentState, ctx: ToolContext) -> dict[str, Any]:
    """Check every rationale and risk-flag statement against the tool outputs it cites.

    A statement is grounded when each ``source_ref`` is a successful tool call of this analysis
    (in ``state.source_refs``) and every number it prints matches a value of those outputs
    (``pipeline.grounding``). Returns ``{numbers_checked, unverified: [...], unknown_refs: [...]}``.
    """
    rec = state.recommendation or {}
    checked = 0
    unverified: list[str] = []
    unknown: list[str] = []
    cache: dict[str, dict[str, Any] | None] = {}
    for item in _statements(rec):
        refs = [r for r in item.get("source_refs", []) if r]
        sources = []
        for ref in refs:
            if ref not in state.source_refs:
                unknown.append(ref)
                continue
            if ref not in cache:
                cache[ref] = ctx.result_data(ref)
            sources.append(cache[ref])
        text = item.get("text", "")
        checked += len(extract_numbers(text))
        unverified += [f"{n} ({text[:60]})" for n in unverified_numbers(text, sources)]
    return {"numbers_checked": checked, "unverified": unverified, "unknown_refs": sorted(set(unknown))}


def review(*, state: FinancialAgentState, ctx: ToolContext) -> FinancialAgentState:
    """Write ``state.final_report`` (Markdown) and mark the run ``done`` when a recommendation
    exists; otherwise keep ``reviewing`` so ``should_continue`` can re-run or end it.

    Ungrounded numbers or citations are recorded as a non-critical error and listed in the report
    as unverified (never presented as facts).
    """
    grounding = check_grounding(state=state, ctx=ctx)
    if grounding["unverified"] or grounding["unknown_refs"]:
        state.errors.append(
            StageError(
                stage="review",
                iteration=state.iteration,
                code="UNGROUNDED",
                message=(
                    f"{len(grounding['unverified'])} unverified numbers, "
                    f"unknown refs {grounding['unknown_refs']}"
                ),
                critical=False,
            )
        )
    if state.recommendation:
        state.status = Status.DONE
    state.final_report = report_markdown(state, grounding=grounding)
    state.analysis = {**(state.analysis or {}), "grounding": grounding}
    note(state, stage="review", content=f"Report written; {grounding['numbers_checked']} numbers checked.")
    return state


def final_json(state: FinancialAgentState) -> dict[str, Any]:
    """The ``--json`` object of a reviewed state (grounding taken from ``state.analysis``)."""
    return report_json(state, grounding=(state.analysis or {}).get("grounding"))
