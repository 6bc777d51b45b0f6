"""The analysis stage adds chart levels (S/R zones, fib retracement) from the cited bars."""

from __future__ import annotations

import uuid
from datetime import date

from agents.data.market.embedded import EmbeddedProvider
from agents.tools.catalog import run_tool
from core.parts import ResearchBundle
from core.settings import Settings
from core.state import FinancialAgentState
from pipeline.stages.analysis import analysis
from pipeline.steps.context import StepContext


def test_analysis_stage_records_chart_levels_with_their_refs() -> None:
    as_of = date(2013, 3, 1)
    ctx = StepContext(settings=Settings(), as_of=as_of, provider=EmbeddedProvider(), stage="analysis")
    hist = run_tool(name="get_history", arguments={"symbol": "AAPL", "period": "1y"}, ctx=ctx)
    state = FinancialAgentState(analysis_id=str(uuid.uuid4()), stock_symbol="AAPL", as_of=as_of)
    state.stock_data = ResearchBundle(status="success", history_ref=hist.tool_call_id)
    out = analysis(state=state, ctx=ctx)
    assert out.analysis is not None
    chart = out.analysis.chart
    assert chart is not None and chart.support_resistance and chart.fib
    sr, fib = chart.support_resistance, chart.fib
    assert sr["current_price"] == 430.47 and len(sr["resistance"]) <= 3
    assert fib["swing_low"] <= 430.47 <= fib["swing_high"] and set(fib["levels"]) >= {"38.2%", "61.8%"}
    tools = [row["tool"] for row in ctx.rows]
    assert {"find_support_resistance", "calculate_fib_levels"} <= set(tools)
    assert chart.fib_ref in out.source_refs and chart.support_resistance_ref in out.source_refs
