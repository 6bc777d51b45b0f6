"""The csp plan's step of the analysis stage (docs/design.md, "CSP plan"): chart → options →
research with early rejection, run after the indicators and chart levels (``agents.analysts.csp``).

With an LLM session (a model configured) the chart, options and research analysts are LLM agents
where their roles have a model (``agents.analysts.csp_llm``), the deterministic plan their fallback.

The analysts get plain values from the state and a tool runner bound to the stage's context;
their tool calls are recorded here (``tool_history``, ``source_refs``). A tool failure of the
plan (no chain on ``as_of``: ``NO_DATA``) is a reason of the rejection, not an error of the
analysis: the analysis completes with a cited rejection.
"""

from __future__ import annotations

from typing import Any

from agents.analysts.csp import CspInputs, run_csp_plan, size_suggestion
from agents.llm.session import LLMSession
from agents.tools.catalog import run_tool
from agents.tools.envelope import ToolEnvelope
from agents.tools.registry import ToolContext
from core.parts import AnalysisResult, CspResult
from core.state import FinancialAgentState
from pipeline.stages.common import apply_outcome, note


def option_plan_inputs(state: FinancialAgentState, ctx: ToolContext) -> dict[str, Any]:
    """The keyword arguments the option plans' inputs share (``CspInputs``,
    ``CoveredCallInputs``): symbol, as_of, the technical and chart results with their refs, the
    earnings with its ref, a tool runner bound to ``ctx`` and the IV/HV settings. Creates
    ``state.analysis`` when research failed (the chart analyst then rejects with ``NO_DATA``)."""
    if state.analysis is None:
        state.analysis = AnalysisResult()
    analysis, stock = state.analysis, state.stock_data

    def run(name: str, arguments: dict[str, Any]) -> ToolEnvelope:
        return run_tool(name=name, arguments=arguments, ctx=ctx)

    assert state.as_of is not None  # every analysis has a resolved as_of (service.prepare_analysis)
    return {
        "symbol": state.stock_symbol,
        "as_of": state.as_of,
        "technical": analysis.technical,
        "technical_ref": analysis.technical_ref,
        "chart": analysis.chart.model_dump() if analysis.chart is not None else None,
        "earnings": stock.earnings if stock is not None else None,
        "earnings_ref": stock.earnings_ref if stock is not None else None,
        "run": run,
        "hv_period": ctx.settings.options.csp_hv_period,
        "min_iv_hv": ctx.settings.options.csp_min_iv_hv,
    }


def csp_plan(state: FinancialAgentState, ctx: ToolContext, llm: LLMSession | None = None) -> None:
    """Run the plan and store its record in ``state.analysis.csp`` (a
    :class:`~core.parts.CspResult`; ``state.analysis`` is created when research failed: the
    chart analyst then rejects with ``NO_DATA``). ``llm``: the stage's LLM session (``None``:
    the deterministic analysts alone)."""
    inputs = CspInputs(**option_plan_inputs(state, ctx))
    analysis = state.analysis
    assert analysis is not None  # option_plan_inputs created it
    if llm is not None:  # a model is configured: the LLM analysts (deterministic fallback)
        from agents.analysts.csp_llm import run_csp_plan_llm  # lazy: the LLM machinery

        outcome = run_csp_plan_llm(inputs=inputs, ctx=ctx, session=llm)
    else:
        outcome = run_csp_plan(inputs)
    record = apply_outcome(state, ctx=ctx, outcome=outcome)
    if state.stock_data is None or state.stock_data.status != "success":
        _cite_research_failure(state, record)
    if record.get("status") == "suggested" and record.get("suggestion"):
        _size(state, ctx, record, inputs.run)
    result = CspResult.model_validate(record)
    analysis.csp = result
    if result.status == "suggested" and result.suggestion is not None:
        s = result.suggestion
        note(state, stage="analysis", content=f"CSP: sell {s.contract} (strike {s.strike}, {s.expiry}).")
    else:
        first = result.reasons[0].text if result.reasons else ""
        note(state, stage="analysis", content=f"CSP rejected by the {result.rejected_by} analyst: {first}")


def _size(state: FinancialAgentState, ctx: ToolContext, record: dict[str, Any], run: Any) -> None:
    """Size the suggestion that stands (deterministic or a model's) against the paper portfolio,
    add its assignment plan and, with dividend data, the events before the expiry
    (:func:`agents.analysts.csp.size_suggestion`); no contract fitting → rejected by ``sizing``."""
    scale = ((record.get("options") or {}).get("price_scale") or {}).get("factor") or 1.0
    assert state.as_of is not None
    extra = apply_outcome(
        state,
        ctx=ctx,
        outcome=size_suggestion(
            symbol=state.stock_symbol,
            as_of=state.as_of,
            suggestion=record["suggestion"],
            price_factor=float(scale),
            run=run,
            max_collateral_pct=ctx.settings.options.csp_max_collateral_pct,
            check_events=ctx.settings.options.dividends_dir is not None,
        ),
    )
    sizing, events = extra["sizing"], extra["events"]
    record["sizing"] = sizing
    if events is not None:
        record["events"] = {k: events[k] for k in ("dividend", "split", "events")}
    if sizing.get("contracts") == 0:
        record.update(status="rejected", rejected_by="sizing", reasons=sizing["reasons"])
        return
    record["reasons"] = [*record["reasons"], *sizing["reasons"], *((events or {}).get("reasons") or [])]


def _cite_research_failure(state: FinancialAgentState, record: dict[str, Any]) -> None:
    """Give the chart analyst's ``NO_DATA`` rejection the research calls that found no price
    history (their ids and one-line errors), so the rejection is cited like every other fact."""
    failed = [
        e
        for e in state.iteration_errors()
        if e.stage == "research" and e.critical and e.tool_call_id is not None
    ]
    if not failed:
        return
    for reason in record.get("reasons") or []:
        if reason["text"].startswith("NO_DATA") and not reason.get("source_refs"):
            reason["text"] += " (" + "; ".join(f"{e.code}: {e.message}" for e in failed) + ")"
            reason["source_refs"] = [e.tool_call_id for e in failed]
