"""Analysis stage (the second of a pass): technical indicators computed in code from the cited bars."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from agents.analysts.table import AnalystRow, of_stage
from core.parts import AnalysisResult, ChartLevels
from core.plans import plan_spec
from core.state import FinancialAgentState
from pipeline.plan_hooks import plan_for
from pipeline.stages.common import apply_outcome, call_tool, note
from pipeline.steps.context import StepContext


def analysis(*, state: FinancialAgentState, ctx: StepContext) -> FinancialAgentState:
    """Run the analysts of this stage in the analyst table's order (``agents.analysts.table``:
    the risk analyst, :func:`risk_analyst`, then the technical one, :func:`technical_analyst`,
    then any row with an ``analyze`` function, :func:`row_analyst`), then the step of the
    analysis's plan (``pipeline.plan_hooks.plan_for(state.analysis_type).run``; nothing for the
    composite views), also when research failed (a plan may answer with a cited rejection)."""
    for row in of_stage("analysis"):
        runner = ANALYST_RUNNERS.get(row.name)
        if runner is not None:
            runner(state=state, ctx=ctx)
        else:
            row_analyst(row, state=state, ctx=ctx)
    plan_for(state.analysis_type).run(state, ctx, ctx.llm)
    return state


def risk_analyst(*, state: FinancialAgentState, ctx: StepContext) -> None:
    """The risk forecast of the symbol as of ``state.as_of`` (``risk_forecast``: its bars up to
    ``as_of`` and the earnings calendar as known then, horizons 1, 5, 20, 60 sessions) into
    ``state.analysis.risk`` (``agents.analysts.risk.risk_view``, citing the call) and
    ``risk_ref``. Not critical: a failure is recorded in ``state.errors`` and the analysis goes
    on without a risk section. Nothing when research failed."""
    from agents.analysts.risk import risk_view

    stock = state.stock_data
    if stock is None or stock.status != "success":
        return
    env = call_tool(
        state=state, ctx=ctx, name="risk_forecast", arguments={"symbol": state.stock_symbol}, critical=False
    )
    if env.ok and env.data:
        if state.analysis is None:
            state.analysis = AnalysisResult()
        state.analysis.risk = risk_view(env.data, ref=env.tool_call_id)
        state.analysis.risk_ref = env.tool_call_id
        note(state, stage="analysis", content=f"Risk forecast {env.data['model']['version']}.")


def row_analyst(row: AnalystRow, *, state: FinancialAgentState, ctx: StepContext) -> None:
    """Run an analyst from its row alone: each of ``row.inputs`` called with the analysis's
    symbol (non-critical: a failed call is recorded in ``state.errors`` and the analyst gives no
    view), their data handed to ``row.analyze`` as ``{tool: data}``, its view stored in
    ``state.analysis.views[row.name]`` as ``{view, source_refs}`` (the calls' ids, in input
    order). Nothing when research failed or ``analyze`` returns ``None``."""
    assert row.analyze is not None
    stock = state.stock_data
    if stock is None or stock.status != "success":
        return
    inputs: dict[str, Any] = {}
    refs: list[str] = []
    for tool in row.inputs:
        env = call_tool(
            state=state, ctx=ctx, name=tool, arguments={"symbol": state.stock_symbol}, critical=False
        )
        if not env.ok:
            return
        inputs[tool] = env.data
        refs.append(env.tool_call_id)
    view = row.analyze(inputs)
    if view is None:
        return
    result = state.analysis or AnalysisResult()
    result.views = {**(result.views or {}), row.name: {"view": view, "source_refs": refs}}
    state.analysis = result
    note(state, stage="analysis", content=f"Analyst {row.name}: a view from {', '.join(row.inputs)}.")


def technical_analyst(*, state: FinancialAgentState, ctx: StepContext) -> None:
    """Run ``technical_indicators`` on the research stage's ``history_ref``.

    Sets ``technical: <tool data>, technical_ref: id, chart: {...}`` on ``state.analysis``
    (:class:`~core.parts.AnalysisResult`, made when the risk analyst did not make it; chart
    levels: :func:`_chart_levels`), or leaves them unset when research failed or the tool errs
    (the error is in ``state.errors``); the step then moves the status on. With an
    LLM session (``ctx.llm``: a model configured) it also runs the technical, fundamental and sentiment
    analysts into ``state.analysis.agents`` (``agents.analysts.llm_agents.run_analysts``; their
    tool calls and failures are recorded in the state here). A risk view already made is kept.
    """
    stock = state.stock_data
    if stock is not None and stock.status == "success":
        assert stock.history_ref is not None  # a successful research cites its history
        env = call_tool(
            state=state,
            ctx=ctx,
            name="technical_indicators",
            arguments={"symbol": state.stock_symbol, "history_ref": stock.history_ref},
        )
        if env.ok and env.data:
            result = state.analysis or AnalysisResult()
            result.technical, result.technical_ref = env.data, env.tool_call_id
            state.analysis = result
            _chart_levels(state=state, ctx=ctx, history_ref=stock.history_ref)
            note(
                state, stage="analysis", content=f"Indicators computed from {env.data.get('bars_used')} bars."
            )
            session = ctx.llm
            if session is not None:  # a model is configured: the LLM analysts
                from agents.analysts.llm_agents import run_analysts

                outcome = run_analysts(
                    ctx=ctx,
                    session=session,
                    symbol=state.stock_symbol,
                    as_of=state.as_of,
                    user_query=state.user_query,
                    # the analysts take plain values (agents never see the state's types)
                    stock_data=stock.model_dump(),
                    analysis=result.model_dump(),
                )
                result.agents = apply_outcome(state, ctx=ctx, outcome=outcome)
                sources = {k: v["source"] for k, v in result.agents.items()}
                note(state, stage="analysis", content=f"Analysts: {sources}.")


def _chart_levels(*, state: FinancialAgentState, ctx: StepContext, history_ref: str) -> None:
    """Support/resistance (the plan's ``level_method``: levels, or zones on its ``level_window``)
    and the Fibonacci retracement of the window (docs/design.md, "Chart tools") from the same
    cited bars into ``state.analysis.chart`` (``{support_resistance, fib, *_ref}``).

    Non-critical: a failure is recorded in ``state.errors`` and the stage goes on. The tools take
    ~1 ms each; ``render_chart`` is not run here (0.2–0.35 s warm, ~0.7 s with the first
    matplotlib import of a process).
    """
    assert state.analysis is not None
    chart = ChartLevels()
    spec = plan_spec(state.analysis_type)
    levels: dict[str, Any] = {"num_levels": 3}
    if spec.level_method == "zones":  # the plan's zones, on its one stated window
        levels = {"num_levels": 5, "method": "zones", "period": spec.level_window or "6mo"}
    for key, name, extra in (
        ("support_resistance", "find_support_resistance", levels),
        ("fib", "calculate_fib_levels", {}),
    ):
        env = call_tool(
            state=state,
            ctx=ctx,
            name=name,
            arguments={"symbol": state.stock_symbol, "history_ref": history_ref, **extra},
            critical=False,
        )
        if env.ok and env.data:
            setattr(chart, key, env.data)
            setattr(chart, f"{key}_ref", env.tool_call_id)
    if chart.model_fields_set:
        state.analysis.chart = chart


#: The function of each analyst the analysis stage runs by its own code (rows of
#: ``agents.analysts.table`` with stage ``analysis`` and no ``analyze``), called in the table's order.
ANALYST_RUNNERS: Final[dict[str, Callable[..., None]]] = {
    "risk": risk_analyst,
    "technical": technical_analyst,
}

if set(ANALYST_RUNNERS) != {row.name for row in of_stage("analysis") if row.analyze is None}:
    raise RuntimeError(
        "every analysis-stage row of agents.analysts.table needs exactly one runner, or an analyze function"
    )
