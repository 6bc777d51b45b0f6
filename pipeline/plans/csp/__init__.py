"""The csp plan: a cash-secured put (docs/design.md, "Cash-secured puts"). Its row is in
``core.plans``, its result part is :class:`core.parts.CspResult` (``state.analysis.csp``), its
analysts are ``agents.analysts.csp`` (deterministic) and ``agents.analysts.csp_llm``.

What it adds to the shared pipeline (``pipeline.plans.Plan``):

* analysis: after the indicators and chart levels, chart → options → research with early
  rejection (:func:`pipeline.plans.csp.step.csp_plan`), also when research found no history;
* review: the record answers the analysis (a suggestion or a cited rejection: any analyst's
  reject ends the analysis with its reason), even without a signal to recommend;
* report: the options verdict as the headline (a suggestion or "No cash-secured put") and the
  "Cash-secured put" section (:mod:`pipeline.plans.csp.report`); the record's JSON under ``csp``;
* ``finagent chart``: the suggested strike and breakeven, in the bars' units;
* a request for a symbol with an option chain on ``as_of`` but no price history is accepted:
  the chart analyst rejects it with ``NO_DATA`` and cites the failed history call, so the user
  learns why instead of getting a bare "unknown symbol".
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

from agents.llm.session import LLMSession
from agents.tools.registry import ToolContext
from core.parts import CspResult
from core.plans import plan_spec
from core.settings import Settings
from core.state import FinancialAgentState
from pipeline.plan_hooks import Plan

#: Labels of the chart marks (the PNG's legend).
STRIKE_MARK = "CSP strike"
BREAKEVEN_MARK = "breakeven"


def run(state: FinancialAgentState, ctx: ToolContext, llm: LLMSession | None) -> None:
    """The plan's step of the analysis stage (:func:`pipeline.plans.csp.step.csp_plan`)."""
    from pipeline.plans.csp.step import csp_plan  # lazy: the option tools and vollib

    csp_plan(state, ctx, llm)


def answered(state: FinancialAgentState) -> bool:
    """A csp analysis is answered by its plan's record, suggestion or cited rejection
    (docs/design.md, "CSP plan": any analyst's reject ends the analysis with its reason)."""
    return state.analysis_type == "csp" and state.analysis is not None and _has_record(state.analysis.csp)


def _has_record(csp: CspResult | None) -> bool:
    return csp is not None and bool(csp.model_dump())


def headline(state: FinancialAgentState) -> str | None:
    """The options verdict, the answer of a csp analysis (the stock scorer's signal is context):
    ``**No cash-secured put**: rejected by the <analyst> analyst`` for a rejected record;
    ``**Cash-secured put: sell 1 <contract>**`` with strike, expiry, DTE and the net premium and
    weekly ROC at the fill (when the record has them) for a suggestion; the earnings check is
    named when it was not evaluated."""
    csp = state.analysis.csp if state.analysis else None
    if csp is None or not _has_record(csp):
        return None
    if csp.status == "rejected":
        return f"**No cash-secured put**: rejected by the {csp.rejected_by} analyst (see Cash-secured put)."
    s = csp.suggestion
    if csp.status != "suggested" or s is None:
        return None
    from pipeline.report import _fmt  # lazy: pipeline.report reads the plan table

    extra = s.model_extra or {}
    n = (csp.sizing or {}).get("contracts") or 1
    line = (
        f"**Cash-secured put: sell {n} {s.contract}**: strike {_fmt(s.strike)}, "
        f"expiry {s.expiry} ({s.dte} DTE)"
    )
    if extra.get("net_premium") is not None and extra.get("net_weekly_roc") is not None:
        line += (
            f", {extra['net_premium']} USD a contract after fees at {extra.get('fill')} "
            f"({float(extra['net_weekly_roc']) * 100:.2f} % a week on the collateral)"
        )
    if (csp.research or {}).get("recommendation") == "not_evaluated":
        line += "; earnings not evaluated"
    return line + " (see Cash-secured put)."


def result_json(state: FinancialAgentState) -> dict[str, Any] | None:
    """The record as the plan wrote it (key for key, in its order), or ``None``."""
    csp = state.analysis.csp if state.analysis else None
    return None if csp is None else csp.model_dump(mode="json")


def report_markdown(state: FinancialAgentState) -> list[str]:
    """The "Cash-secured put" section (:func:`pipeline.plans.csp.report.section`)."""
    from pipeline.plans.csp.report import section  # lazy: it imports pipeline.report

    csp = result_json(state)
    return section(csp or None)


def chart_marks(state: dict[str, Any]) -> dict[str, float]:
    """``{"CSP strike": .., "breakeven": ..}`` of a suggestion in a stored state, USD in the bars'
    units (divided by the options view's price factor: the chain may quote pre-split strikes);
    ``{}`` for a rejection or a state without a record."""
    raw = (state.get("analysis") or {}).get("csp")
    if not raw:
        return {}
    csp = CspResult.model_validate(raw)
    s = csp.suggestion
    if csp.status != "suggested" or s is None or s.breakeven is None:
        return {}
    factor = csp.price_factor()
    return {
        STRIKE_MARK: round(float(s.strike) / factor, 4),
        BREAKEVEN_MARK: round(float(s.breakeven) / factor, 4),
    }


def answers_without_history(*, settings: Settings, symbol: str, as_of: date) -> bool:
    """Whether the offline option folder (``FINAGENT_OPTIONS_DIR``) holds a chain of ``symbol``
    quoted on ``as_of`` (file names and CBOE preambles only; no chain is parsed)."""
    from agents.data.options.chains import catalogue

    folder = settings.options.options_dir
    if folder is None or not Path(folder).is_dir():
        return False
    return any(e.symbol == symbol and e.quote_date == as_of for e in catalogue(Path(folder)))


PLANS: dict[str, Plan] = {
    "csp": Plan(
        spec=plan_spec("csp"),
        run=run,
        answered=answered,
        headline=headline,
        result_json=result_json,
        report_markdown=report_markdown,
        chart_marks=chart_marks,
        answers_without_history=answers_without_history,
    )
}
