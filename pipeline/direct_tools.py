"""Direct tool use (``finagent tool``): run one registered tool outside an analysis.

The call goes through the same ``run_tool`` as the pipeline: same validation, envelope, retries,
JSON log line and ``tool_calls`` row (with ``analysis_id`` NULL and stage ``direct``).
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

from agents.providers.base import ProviderError
from agents.providers.factory import get_provider
from agents.tools.envelope import ToolEnvelope
from agents.tools.registry import REGISTRY, ToolContext, get_tool, load_builtin_tools, run_tool
from db import repo
from db.engine import get_engine
from pipeline.service import prepare_database
from pipeline.settings import Settings, get_settings
from pipeline.tickers import InvalidTickerError, normalize_ticker


def list_tools() -> list[dict[str, Any]]:
    """Every registered tool: ``[{name, description, input_schema}]`` sorted by name
    (``input_schema`` is the JSON Schema generated from the tool's pydantic input model)."""
    load_builtin_tools()
    return [
        {"name": t.name, "description": t.description, "input_schema": t.input_model.model_json_schema()}
        for t in sorted(REGISTRY.values(), key=lambda t: t.name)
    ]


def _first_symbol(arguments: dict[str, Any]) -> str | None:
    raw = arguments.get("symbol")
    if raw is None and isinstance(arguments.get("symbols"), list) and arguments["symbols"]:
        raw = arguments["symbols"][0]
    if not isinstance(raw, str):
        return None
    try:
        return normalize_ticker(raw)
    except InvalidTickerError:
        return None


def default_as_of(*, arguments: dict[str, Any], settings: Settings) -> date:
    """The provider's latest date for the first symbol in ``arguments`` (``symbol`` or
    ``symbols[0]``), else today (UTC). A symbol the provider does not know → today, and the
    tool itself reports ``INVALID_SYMBOL``."""
    symbol = _first_symbol(arguments)
    if symbol is not None:
        try:
            return get_provider(settings=settings).latest_date(symbol=symbol)
        except ProviderError:
            pass
    return datetime.now(UTC).date()


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
    when = as_of or default_as_of(arguments=arguments, settings=settings)
    ctx = ToolContext(settings=settings, as_of=when, provider=get_provider(settings=settings))
    envelope = run_tool(name=name, arguments=arguments, ctx=ctx)
    prepare_database(settings=settings)
    repo.insert_tool_calls(engine=get_engine(settings.effective_database_url), rows=ctx.rows)
    return envelope
