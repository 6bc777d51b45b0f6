"""The report's sections of the analysts run from their row of the analyst table
(``agents.analysts.table`` rows with ``analyze``; their views in ``state.analysis.views``).

An analysis without such a view gets no key and no section, so the reports of the built-in
analysts are unchanged by this module.
"""

from __future__ import annotations

from typing import Any

from agents.analysts.table import run_from_row
from core.state import FinancialAgentState
from pipeline.report_format import fmt, refs


def _stored(state: FinancialAgentState) -> dict[str, dict[str, Any]]:
    return (state.analysis.views if state.analysis is not None else None) or {}


def analyst_views_json(state: FinancialAgentState) -> dict[str, Any]:
    """``{"analyst_views": {name: {view, source_refs}}}`` in table order, or ``{}`` when no
    row-run analyst gave a view (the JSON report then has no such key)."""
    stored = _stored(state)
    views = {row.name: stored[row.name] for row in run_from_row() if row.name in stored}
    return {"analyst_views": views} if views else {}


def analyst_views_markdown(state: FinancialAgentState) -> list[str]:
    """One section per row-run analyst with a view, in table order: ``## <section> <refs>``, then
    the row's ``markdown`` lines (default: ``- key: value`` per key of the view) and a blank line."""
    stored = _stored(state)
    lines: list[str] = []
    for row in run_from_row():
        record = stored.get(row.name)
        if record is None:
            continue
        view = record["view"]
        body = row.markdown(view) if row.markdown else [f"- {k}: {fmt(v)}" for k, v in view.items()]
        lines += [f"## {row.section} {refs(record.get('source_refs'))}".rstrip(), "", *body, ""]
    return lines


__all__ = ["analyst_views_json", "analyst_views_markdown"]
