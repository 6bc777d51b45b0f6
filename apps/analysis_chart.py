"""The chart of a stored analysis (``finagent chart ID``, the gateway's chart routes) and the
gateway's one-time chart warm-up: matplotlib, mplfinance and every tool, which the other
commands never load."""

from __future__ import annotations

import io
from datetime import date
from typing import Any

from agents.data.routing import get_provider
from agents.tools.catalog import load_builtin_tools, run_tool
from agents.tools.envelope import ToolEnvelope
from agents.tools.registry import ToolContext
from core.settings import Settings
from db import repo
from db.engine import get_engine
from pipeline.plan_hooks import plan_for
from pipeline.stages.research import chartable_history


def warm_up_charts() -> None:
    """Pay a process's one-time chart costs ahead of the first request: register the builtin
    tools (their imports: SQLAlchemy models, exchange calendars, ...: ~2.4 s here) and import
    matplotlib (Agg) and mplfinance (~0.7 s), and draw once (fonts, math text). Measured by
    ``bench/chart_first_render.py`` (docs/benchmarks.md). The HTTP gateway runs this in a
    background thread at start-up. Raises what the imports raise (a broken install)."""
    load_builtin_tools()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import mplfinance  # type: ignore[import-untyped]  # noqa: F401

    # one small figure with text and a math-text label (the volume axis's "1e7" offset is math
    # text, whose pyparsing grammar is built on first use: ~0.45 s) through the PNG writer, so
    # the fonts, the math-text parser and the Agg renderer are ready; nothing is written to disk
    fig = plt.figure(figsize=(2, 1))
    try:
        fig.text(0.1, 0.5, r"warm-up $\times10^{7}$")
        fig.savefig(io.BytesIO(), format="png")
    finally:
        plt.close(fig)


def chart_arguments(row: dict[str, Any]) -> dict[str, Any]:
    """The ``render_chart`` arguments of the analysis ``row`` (a full ``analyses`` row, state
    parsed): its cited history, both trendlines, the plan's level method (zones on the plan's
    window), the plan's marks (e.g. a put's strike and breakeven) and its overlay (an option
    plan's expiry, cone, events and payoff). The PNG and the web console's interactive chart
    (``apps.chart_data``) draw from the same arguments. Raises ``KeyError`` when the
    analysis has no successful price history."""
    state = row.get("state") or {}
    history_ref = chartable_history(row)
    if history_ref is None:
        raise KeyError(f"analysis {row['id']} has no price history to chart (status {row['status']})")
    arguments: dict[str, Any] = {
        "symbol": row["symbol"],
        "history_ref": history_ref,
        "trendlines": ["support", "resistance"],
    }
    plan = plan_for(state.get("analysis_type"))
    if plan.spec.level_method == "zones":  # the plan's zones on its one window (default 6 months)
        arguments.update(levels="zones", period=plan.spec.level_window or "6mo")
    marks = plan.chart_marks(state)
    if marks:
        arguments["marks"] = marks
    arguments.update(plan.chart_overlay(state))  # an option plan: expiry, cone, events, payoff
    return arguments


def render_analysis_chart(*, analysis_id: str, settings: Settings) -> ToolEnvelope:
    """Render the chart of a finished analysis on demand (``finagent chart ID``).

    Runs ``render_chart`` on the bars of the analysis's cited ``get_history`` call (loaded from
    its ``tool_calls`` row), annotated with support/resistance, Fibonacci levels and
    trendlines, at the analysis's ``as_of``; the call is logged under the analysis (stage
    ``chart``). Kept off the pipeline's hot path: a render costs 0.15–0.45 s warm, ~1 s cold.

    Raises:
        KeyError: no such analysis, or it has no successful price history to draw.
    """
    engine = get_engine(settings.service.effective_database_url)
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    if row is None:
        raise KeyError(f"no analysis {analysis_id}")
    state = row["state"] or {}
    arguments = chart_arguments(row)  # KeyError without price history
    ctx = ToolContext(
        settings=settings,
        as_of=date.fromisoformat(str(state["as_of"])),
        provider=get_provider(settings=settings),
        analysis_id=analysis_id,
        symbol=row["symbol"],
        stage="chart",
        iteration=int(state.get("iteration") or 0),
        load_result=lambda ref: repo.get_tool_result(
            engine=engine, tool_call_id=ref, analysis_id=analysis_id
        ),
    )
    envelope = run_tool(name="render_chart", arguments=arguments, ctx=ctx)
    repo.insert_tool_calls(engine=engine, rows=ctx.rows)
    return envelope
