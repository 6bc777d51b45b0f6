"""Direct tool use (``finagent tool``): run one registered tool outside an analysis.

The call goes through the same ``run_tool`` as the pipeline: same validation, envelope, retries,
JSON log line and ``tool_calls`` row (with ``analysis_id`` NULL and stage ``direct``).
"""

from __future__ import annotations

import io
from datetime import UTC, date, datetime
from typing import Any

from agents.data.market.base import ProviderError
from agents.data.market.clock import MarketToday, last_completed_session, market_today
from agents.data.routing import get_provider
from agents.tools.catalog import get_tool, load_builtin_tools, run_tool
from agents.tools.envelope import ToolEnvelope
from agents.tools.registry import REGISTRY, ToolContext
from core.settings import Settings, get_settings
from core.tickers import InvalidTickerError, normalize_ticker
from db import repo
from db.engine import get_engine
from pipeline.chart_data import chart_arguments
from pipeline.service import prepare_database


def list_tools() -> list[dict[str, Any]]:
    """Every registered tool: ``[{name, description, input_schema}]`` sorted by name
    (``input_schema`` is the JSON Schema generated from the tool's pydantic input model)."""
    load_builtin_tools()
    return [
        {"name": t.name, "description": t.description, "input_schema": t.input_model.model_json_schema()}
        for t in sorted(REGISTRY.values(), key=lambda t: t.name)
    ]


def _symbols_in(arguments: dict[str, Any]) -> list[str]:
    """Normalised tickers named in a tool's arguments: ``symbol``, ``symbols[]`` and the
    ``symbol`` of each ``trades[]`` entry (trade tools), in order; invalid ones are skipped (the
    tool reports them itself)."""
    raw: list[Any] = [arguments.get("symbol")]
    if isinstance(arguments.get("symbols"), list):
        raw.extend(arguments["symbols"])
    if isinstance(arguments.get("trades"), list):
        raw.extend(t.get("symbol") for t in arguments["trades"] if isinstance(t, dict))
    out: list[str] = []
    for item in raw:
        if not isinstance(item, str):
            continue
        try:
            out.append(normalize_ticker(item))
        except InvalidTickerError:
            continue
    return list(dict.fromkeys(out))


#: Tools that answer only live (a vendor's current snapshot, e.g. Alpaca's): their "today" is the
#: wall clock's, whatever the configured price data holds.
LIVE_TOOLS: frozenset[str] = frozenset({"get_stock_price"})


def default_clock(*, arguments: dict[str, Any], settings: Settings, name: str | None = None) -> MarketToday:
    """The market clock's "today" for a tool call without ``--as-of``
    (:func:`agents.data.market.clock.market_today` over the symbols in ``arguments``): offline
    data → its last trading day, online data → the last completed XNYS session; a live-only
    tool (:data:`LIVE_TOOLS`) → today (UTC). When the offline data cannot be read at all → the
    last completed session (the tool then reports the data error itself)."""
    provider = get_provider(settings=settings)
    if name in LIVE_TOOLS:
        return MarketToday(day=datetime.now(UTC).date(), basis="live", source=name)
    try:
        return market_today(provider=provider, symbols=_symbols_in(arguments))
    except ProviderError:
        return MarketToday(day=last_completed_session(), basis="exchange_session", source=provider.name)


def default_as_of(*, arguments: dict[str, Any], settings: Settings, name: str | None = None) -> date:
    """The day of :func:`default_clock` (a date the configured data can serve)."""
    return default_clock(arguments=arguments, settings=settings, name=name).day


def run_direct(
    *, name: str, arguments: dict[str, Any], as_of: date | None = None, settings: Settings | None = None
) -> ToolEnvelope:
    """Run tool ``name`` with ``arguments`` at ``as_of`` (default :func:`default_as_of`) and store
    its ``tool_calls`` rows.

    Raises:
        KeyError: unknown tool (the message lists the known ones).
        service.SchemaMissingError: service database not migrated.
    """
    settings = settings or get_settings()
    get_tool(name)
    when = as_of or default_as_of(arguments=arguments, settings=settings, name=name)
    ctx = ToolContext(settings=settings, as_of=when, provider=get_provider(settings=settings))
    envelope = run_tool(name=name, arguments=arguments, ctx=ctx)
    prepare_database(settings=settings)
    repo.insert_tool_calls(engine=get_engine(settings.service.effective_database_url), rows=ctx.rows)
    return envelope


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


def render_analysis_chart(*, analysis_id: str, settings: Settings | None = None) -> ToolEnvelope:
    """Render the chart of a finished analysis on demand (``finagent chart ID``).

    Runs ``render_chart`` on the bars of the analysis's cited ``get_history`` call (loaded from
    its ``tool_calls`` row), annotated with support/resistance, Fibonacci levels and
    trendlines, at the analysis's ``as_of``; the call is logged under the analysis (stage
    ``chart``). Kept off the pipeline's hot path: a render costs 0.15–0.45 s warm, ~1 s cold.

    Raises:
        KeyError: no such analysis, or it has no successful price history to draw.
    """
    settings = settings or get_settings()
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
