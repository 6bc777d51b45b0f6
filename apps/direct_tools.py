"""Direct tool use (``finagent tool``): run one registered tool outside an analysis.

The call goes through the same ``run_tool`` as the pipeline: same validation, envelope, retries,
JSON log line and ``tool_calls`` row (with ``analysis_id`` NULL and stage ``direct``). Only the
called tool's module is imported (``agents.tools.catalog.load_tool``), so a quote does not load
the chart, option and indicator libraries; the chart of a stored analysis is
:mod:`apps.analysis_chart`'s.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from typing import Any

from agents.data.market.base import ProviderError
from agents.data.market.clock import MarketToday, last_completed_session, market_today
from agents.data.routing import get_provider
from agents.tools.catalog import BUILTIN_TOOLS, load_builtin_tools, load_tool
from agents.tools.envelope import ToolEnvelope
from agents.tools.registry import REGISTRY, ToolContext, run_tool
from core.settings import Settings
from core.tickers import InvalidTickerError, normalize_ticker
from db import repo
from db.engine import get_engine
from pipeline.database import prepare_database


def list_tools() -> list[dict[str, Any]]:
    """Every registered tool: ``[{name, summary, description, input_schema}]`` sorted by name
    (``summary`` one line: the catalog's, or the description's head for a tool registered
    elsewhere; ``input_schema`` the JSON Schema generated from the tool's pydantic input model)."""
    load_builtin_tools()
    return [
        {
            "name": t.name,
            "summary": BUILTIN_TOOLS[t.name].summary
            if t.name in BUILTIN_TOOLS
            else description_head(t.description),
            "description": t.description,
            "input_schema": t.input_model.model_json_schema(),
        }
        for t in sorted(REGISTRY.values(), key=lambda t: t.name)
    ]


#: Where a description's head ends: its first colon (what follows lists the fields), or the end
#: of its first sentence (a full stop before a capital, so not "e.g. change").
_HEAD_END = re.compile(r":\s|(?<=[.!?])\s+(?=[A-Z(])")


def description_head(text: str) -> str:
    """What a tool does, from its description: the words before the first colon or the end of
    the first sentence (the whole text when it has neither), without a closing full stop."""
    return _HEAD_END.split(" ".join(text.split()), maxsplit=1)[0].rstrip(".")


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
    *, name: str, arguments: dict[str, Any], as_of: date | None = None, settings: Settings
) -> ToolEnvelope:
    """Run tool ``name`` with ``arguments`` at ``as_of`` (default :func:`default_as_of`) and store
    its ``tool_calls`` rows.

    Raises:
        KeyError: unknown tool (the message lists the known ones).
        service.SchemaMissingError: service database not migrated.
    """
    load_tool(name)
    when = as_of or default_as_of(arguments=arguments, settings=settings, name=name)
    ctx = ToolContext(settings=settings, as_of=when, provider=get_provider(settings=settings))
    envelope = run_tool(name=name, arguments=arguments, ctx=ctx)
    prepare_database(settings=settings)
    repo.insert_tool_calls(engine=get_engine(settings.service.effective_database_url), rows=ctx.rows)
    return envelope
