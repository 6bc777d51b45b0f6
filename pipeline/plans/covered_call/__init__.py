"""The covered_call plan (``core.plans``): sell calls on shares held, position → chart →
options → research (``agents.analysts.covered_call``); docs/options.md, "Covered calls"."""

from __future__ import annotations

from typing import Any

from agents.llm.session import LLMSession
from agents.tools.registry import ToolContext
from core.parts import CoveredCallResult
from core.plans import plan_spec
from core.state import FinancialAgentState
from pipeline.plan_hooks import Plan

#: Label of the chart mark (the PNG's legend).
STRIKE_MARK = "call strike"
BASIS_MARK = "cost basis"


def run(state: FinancialAgentState, ctx: ToolContext, llm: LLMSession | None) -> None:
    """The plan's step of the analysis stage (:func:`pipeline.plans.covered_call.step.covered_call_plan`);
    deterministic (no LLM analysts for this plan yet)."""
    from pipeline.plans.covered_call.step import covered_call_plan  # lazy: the option tools

    covered_call_plan(state, ctx)


def _record(state: FinancialAgentState) -> CoveredCallResult | None:
    cc = state.analysis.covered_call if state.analysis else None
    return cc if cc is not None and cc.model_dump() else None


def answered(state: FinancialAgentState) -> bool:
    """Answered by the plan's record, suggestion or cited rejection."""
    return state.analysis_type == "covered_call" and _record(state) is not None


def headline(state: FinancialAgentState) -> str | None:
    """The options verdict: ``**Covered call: sell N <contract>**`` with strike, expiry, DTE,
    net premium and weekly ROC on the shares, or ``**No covered call**: rejected by ...``."""
    cc = _record(state)
    if cc is None:
        return None
    if cc.status == "rejected":
        return f"**No covered call**: rejected by the {cc.rejected_by} analyst (see Covered call)."
    s = cc.suggestion
    if cc.status != "suggested" or s is None:
        return None
    from pipeline.report import _fmt  # lazy: pipeline.report reads the plan table

    extra = s.model_extra or {}
    n = (cc.position or {}).get("contracts", 1)
    line = (
        f"**Covered call: sell {n} {s.contract}**: strike {_fmt(s.strike)}, expiry {s.expiry} ({s.dte} DTE)"
    )
    if extra.get("net_premium") is not None and extra.get("net_weekly_roc") is not None:
        line += (
            f", {extra['net_premium']} USD a contract after fees at {extra.get('fill')} "
            f"({float(extra['net_weekly_roc']) * 100:.2f} % a week on the shares)"
        )
    research = cc.research or {}
    if research.get("recommendation") == "not_evaluated":
        line += "; earnings not evaluated"
    if research.get("dividend") == "flagged":
        line += "; ex-dividend inside the DTE"
    elif research.get("dividend") == "not_evaluated":
        line += "; ex-dividend dates not evaluated"
    return line + " (see Covered call)."


def result_json(state: FinancialAgentState) -> dict[str, Any] | None:
    """The record as the plan wrote it, or ``None``."""
    cc = state.analysis.covered_call if state.analysis else None
    return None if cc is None else cc.model_dump(mode="json")


def report_markdown(state: FinancialAgentState) -> list[str]:
    """The "Covered call" section (:func:`pipeline.plans.covered_call.report.section`)."""
    from pipeline.plans.covered_call.report import section  # lazy: it imports pipeline.report

    return section(result_json(state) or None)


def chart_marks(state: dict[str, Any]) -> dict[str, float]:
    """``{"call strike": .., "cost basis": ..}`` of a suggestion in a stored state (bars' units);
    ``{}`` otherwise."""
    raw = (state.get("analysis") or {}).get("covered_call")
    if not raw:
        return {}
    cc = CoveredCallResult.model_validate(raw)
    s = cc.suggestion
    if cc.status != "suggested" or s is None:
        return {}
    factor = cc.price_factor()
    marks = {STRIKE_MARK: round(float(s.strike) / factor, 4)}
    basis = (cc.position or {}).get("cost_basis")
    if basis:
        marks[BASIS_MARK] = round(float(basis) / factor, 4)
    return marks


PLANS: dict[str, Plan] = {
    "covered_call": Plan(
        spec=plan_spec("covered_call"),
        run=run,
        answered=answered,
        headline=headline,
        result_json=result_json,
        report_markdown=report_markdown,
        chart_marks=chart_marks,
    )
}
