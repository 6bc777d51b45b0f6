"""The option plan's step of the analysis stage (docs/design.md, "Option plan"): position (calls)
→ chart → options → research with early rejection, then events, context and size and risk
(``agents.analysts.option_plan``), after the indicators and the six-month zones.

With an LLM session (a model configured) the chart, options and research analysts are LLM agents
where their roles have a model (``agents.analysts.option_llm``), the deterministic plan their
fallback and floor. A tool failure of the plan (no chain on ``as_of``: ``NO_DATA``) is a reason of
the rejection, not an error of the analysis: the analysis completes with a cited rejection.
"""

from __future__ import annotations

from typing import Any

from agents.analysts.option_plan import OptionPlanInputs, Right, finish_plan, run_option_plan
from agents.llm.session import LLMSession
from agents.tools.catalog import run_tool
from agents.tools.envelope import ToolEnvelope
from agents.tools.registry import ToolContext
from core.parts import AnalysisResult
from core.state import FinancialAgentState
from pipeline.plans.option.models import CoveredCallOptions, OptionPlanOptions, OptionPlanResult
from pipeline.records import apply_outcome, note


def plan_options(state: FinancialAgentState, right: Right) -> OptionPlanOptions:
    """The request's options, validated (the producer validated them already; a stored state of
    an older covered call carries its cost basis as ``state.cost_basis``)."""
    raw: dict[str, Any] = dict(state.plan_options or {})
    if right == "call" and state.cost_basis is not None and "cost_basis" not in raw:
        raw["cost_basis"] = state.cost_basis
    model = CoveredCallOptions if right == "call" else OptionPlanOptions
    return model.model_validate(raw)


def plan_inputs(state: FinancialAgentState, ctx: ToolContext, right: Right) -> OptionPlanInputs:
    """The plan's inputs from the state, the settings and the request's options; a tool runner
    bound to ``ctx``. Creates ``state.analysis`` when research failed (the chart analyst then
    refuses with ``NO_DATA``)."""
    if state.analysis is None:
        state.analysis = AnalysisResult()
    analysis, stock = state.analysis, state.stock_data
    opts = plan_options(state, right)
    o = ctx.settings.options

    def run(name: str, arguments: dict[str, Any]) -> ToolEnvelope:
        return run_tool(name=name, arguments=arguments, ctx=ctx)

    assert state.as_of is not None  # every analysis has a resolved as_of (service.prepare_analysis)
    call_opts = opts if isinstance(opts, CoveredCallOptions) else None
    return OptionPlanInputs(
        symbol=state.stock_symbol,
        as_of=state.as_of,
        right=right,
        technical=analysis.technical,
        technical_ref=analysis.technical_ref,
        chart=analysis.chart.model_dump() if analysis.chart is not None else None,
        earnings=stock.earnings if stock is not None else None,
        earnings_ref=stock.earnings_ref if stock is not None else None,
        run=run,
        hv_period=o.hv_period,
        min_iv_forecast=o.min_iv_hv,
        screen=opts.screen(),
        cost_basis=call_opts.cost_basis if call_opts else None,
        shares=call_opts.shares if call_opts else None,
        account_value=opts.account_value,
        max_name_pct=opts.max_name_pct or o.max_collateral_pct,
        max_gap_loss_pct=opts.max_gap_loss_pct or o.max_gap_loss_pct,
        check_events=o.dividends_dir is not None,
    )


def option_plan(
    state: FinancialAgentState, ctx: ToolContext, llm: LLMSession | None, *, right: Right
) -> None:
    """Run the plan and store its record (an :class:`OptionPlanResult`) in ``state.plan_result``.
    ``llm``: the stage's LLM session (``None``: the deterministic analysts alone)."""
    inputs = plan_inputs(state, ctx, right)
    if llm is not None:  # a model is configured: the LLM analysts (deterministic fallback)
        from agents.analysts.option_llm import run_option_plan_llm  # lazy: the LLM machinery

        outcome = run_option_plan_llm(inputs=inputs, ctx=ctx, session=llm)
    else:
        outcome = run_option_plan(inputs)
    record = apply_outcome(state, ctx=ctx, outcome=outcome)
    if state.stock_data is None or state.stock_data.status != "success":
        _cite_research_failure(state, record)
    record = apply_outcome(state, ctx=ctx, outcome=finish_plan(inputs=inputs, record=record))
    result = OptionPlanResult.model_validate(record)
    state.plan_result = result.model_dump(mode="json")
    what = inputs.strategy.capitalize()
    if result.status == "suggested" and result.suggestion is not None:
        s = result.suggestion
        n = (result.sizing or {}).get("contracts")
        note(
            state, stage="analysis", content=f"{what}: sell {n} {s.contract} (strike {s.strike}, {s.expiry})."
        )
    else:
        first = result.reasons[0].text if result.reasons else ""
        note(state, stage="analysis", content=f"{what} rejected by the {result.rejected_by} analyst: {first}")


def _cite_research_failure(state: FinancialAgentState, record: dict[str, Any]) -> None:
    """Give the chart analyst's ``NO_DATA`` refusal the research calls that found no price
    history (their ids and one-line errors), so the refusal is cited like every other fact."""
    failed = [
        e
        for e in state.iteration_errors()
        if e.stage == "research" and e.critical and e.tool_call_id is not None
    ]
    if not failed:
        return
    for item in record.get("reasons") or []:
        if item["text"].startswith("NO_DATA"):
            item["text"] += " (" + "; ".join(f"{e.code}: {e.message}" for e in failed) + ")"
            item["source_refs"] = [*item.get("source_refs", []), *(e.tool_call_id for e in failed)]
