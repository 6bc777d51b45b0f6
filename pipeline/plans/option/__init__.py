"""The option plan: sell a put (``csp``, a cash-secured put) or a call on shares held
(``covered_call``); one plan with ``right = put | call`` (docs/design.md, "Option plan"). Its rows
are in ``core.plans``, its request options and result are :mod:`pipeline.plans.option.models`,
its analysts ``agents.analysts.option_plan`` (deterministic) and ``agents.analysts.option_llm``.

What it adds to the shared pipeline (``pipeline.plans.base.Plan``):

* analysis: after the indicators and chart levels, the plan's step
  (:func:`pipeline.plans.option.step.option_plan`), also when research found no history;
* review: the record answers the analysis (a sized suggestion or a cited rejection), even
  without a signal to recommend;
* report: the verdict as the headline and the plan's section (:mod:`pipeline.plans.option.report`);
  the record's JSON under the row's ``result_field`` (``csp`` / ``covered_call``);
* ``finagent chart``: strike, breakeven or cost basis, the expiry, the ±1σ cone, events and the
  payoff at expiry (:mod:`pipeline.plans.option.chart`);
* a request for a symbol with an option chain on ``as_of`` but no price history is accepted by
  both: the chart analyst refuses it with ``NO_DATA``, citing the failed history call and the
  chain's parity spot, so the user learns why instead of a bare "unknown symbol".
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

from agents.llm.session import LLMSession
from agents.tools.registry import ToolContext
from core.plans import plan_spec
from core.settings import Settings
from core.state import FinancialAgentState
from pipeline.plans.base import Plan
from pipeline.plans.option.models import CoveredCallOptions, OptionPlanOptions


def _legacy(state: FinancialAgentState, name: str) -> dict[str, Any] | None:
    """The record an analysis of this type stored before the plans carried ``plan_result``
    (``analysis.csp`` / ``analysis.covered_call``), as JSON; ``None`` without one."""
    part = getattr(state.analysis, name, None) if state.analysis is not None else None
    dumped = part.model_dump(mode="json") if part is not None else None
    return dumped or None


def _record_of(name: str) -> Any:
    def record(state: FinancialAgentState) -> dict[str, Any] | None:
        if state.analysis_type != name:
            return _legacy(state, name)
        return state.plan_result or _legacy(state, name)

    return record


def answers_without_history(*, settings: Settings, symbol: str, as_of: date) -> bool:
    """Whether the offline option folder (``FINAGENT_OPTIONS_DIR``) holds a chain of ``symbol``
    quoted on ``as_of`` (file names and CBOE preambles only; no chain is parsed)."""
    from agents.data.options.chains import catalogue

    folder = settings.options.dir
    if folder is None or not Path(folder).is_dir():
        return False
    return any(e.symbol == symbol and e.quote_date == as_of for e in catalogue(Path(folder)))


def _plan(name: str, right: str) -> Plan:
    record = _record_of(name)

    def run(state: FinancialAgentState, ctx: ToolContext, llm: LLMSession | None) -> None:
        from pipeline.plans.option.step import option_plan  # lazy: the option tools and vollib

        option_plan(state, ctx, llm, right="put" if right == "put" else "call")

    def answered(state: FinancialAgentState) -> bool:
        return state.analysis_type == name and record(state) is not None

    def headline(state: FinancialAgentState) -> str | None:
        from pipeline.plans.option.report import headline as verdict  # lazy: it imports pipeline.report

        return verdict(record(state))

    def report_markdown(state: FinancialAgentState) -> list[str]:
        from pipeline.plans.option.report import section

        return section(record(state))

    def chart_marks(state: dict[str, Any]) -> dict[str, float]:
        from pipeline.plans.option.chart import marks

        return marks(state, name)

    def chart_overlay(state: dict[str, Any]) -> dict[str, Any]:
        from pipeline.plans.option.chart import overlay

        return overlay(state, name)

    return Plan(
        spec=plan_spec(name),
        options_model=OptionPlanOptions if right == "put" else CoveredCallOptions,
        run=run,
        answered=answered,
        headline=headline,
        result_json=record,
        report_markdown=report_markdown,
        chart_marks=chart_marks,
        chart_overlay=chart_overlay,
        answers_without_history=answers_without_history,
    )


#: The option plan's two rows: sell a put, sell a call.
PLANS: tuple[Plan, ...] = (_plan("csp", "put"), _plan("covered_call", "call"))
