"""``get_fundamentals(symbols, metrics?)`` (seed 002) over the offline fundamentals folder.

Source: ``FINAGENT_FUNDAMENTALS_DIR`` (``agents.fundamentals.offline``: S&P 500 snapshot, Alpha
Vantage statements, SEC companyfacts; formulas, source columns and dating documented there), and
for ``earnings_date`` / ``eps_consensus`` the earnings calendar of ``agents.fundamentals.earnings``
(next report within 30 days of ``as_of``; quarterly EPS estimate). Online (yfinance) ``eps_consensus``
is Yahoo's ``forwardEps`` (next fiscal year) instead.
Unset with ``FINAGENT_DATA_PROVIDER=yfinance`` → Yahoo's current ``info`` through
``agents.fundamentals.yfinance_adapter`` (only for an ``as_of`` within three days of today).
Otherwise unset → ``NOT_CONFIGURED`` with a hint.

Point in time: sources dated after ``as_of`` are refused (listed in ``refused``, their fields
null with the reason). Partial failure as in ``get_quotes``: an unknown symbol gets
``{symbol, error: {code: INVALID_SYMBOL, message}}``; when every symbol is unknown the call
fails with ``INVALID_SYMBOL``; when every symbol is known but no source is dated ≤ ``as_of``,
with ``DATE_OUT_OF_RANGE``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agents.fundamentals.earnings import CalendarUnavailableError, EarningsCalendar, default_calendar
from agents.fundamentals.offline import ALL_FIELDS, SEED_FIELDS, fundamentals_at, get_offline_fundamentals
from agents.fundamentals.yfinance_adapter import yfinance_fundamentals
from agents.providers.base import DateOutOfRangeError, SymbolNotFoundError
from agents.tools.envelope import ErrorCode
from agents.tools.fields import Symbols
from agents.tools.registry import ToolContext, ToolInputError, ToolOutput, register
from pipeline.core.settings import Settings

NOT_CONFIGURED_HINT = (
    "Set FINAGENT_FUNDAMENTALS_DIR to a folder with sp500/, alphavantage/ or sec_companyfacts/ "
    "(e.g. ../shared/data/fundamentals)."
)


def fundamentals_configured(settings: Settings) -> bool:
    """True when ``get_fundamentals`` has a source: an existing ``FINAGENT_FUNDAMENTALS_DIR``,
    or the yfinance data provider (online, current values only)."""
    root = settings.fundamentals_dir
    if root is not None:
        return Path(root).expanduser().is_dir()
    return settings.data_provider == "yfinance"


class FundamentalsInput(BaseModel):
    """``{symbols, metrics?}``: 1..50 tickers; metrics ⊂ the seed-002 fields plus extras."""

    model_config = ConfigDict(extra="forbid")

    symbols: Symbols = Field(description="Tickers, e.g. ['AAPL']")
    metrics: list[str] | None = Field(
        default=None,
        description=f"Fields to return (default the seed-002 set: {', '.join(SEED_FIELDS)}); "
        f"also {', '.join(f for f in ALL_FIELDS if f not in SEED_FIELDS)}",
    )


@register(
    name="get_fundamentals",
    description=(
        "Fundamentals known at the analysis date: pe_ratio, peg_ratio, ev_ebitda, roic, gross_margin, "
        "current_ratio, debt_to_equity, net_debt_to_ebitda, eps_consensus, eps_actual, earnings_date "
        "(ratios as fractions); missing values are null with a reason."
    ),
    input_model=FundamentalsInput,
)
def get_fundamentals(params: FundamentalsInput, ctx: ToolContext) -> ToolOutput:
    """Seed-002 fundamentals for ``params.symbols`` at ``ctx.as_of``.

    Returns data ``{fundamentals: [{symbol, <metrics>, timestamp, field_sources, null_reasons,
    refused}], metrics, as_of}``. Ratios are plain numbers (gross_margin 0.4459 = 44.59 %),
    ``eps_actual`` USD/share, ``market_cap``/``ebitda`` USD, ``timestamp`` the ISO date of the
    newest source used. ``field_sources`` cites the file, row and period behind every value.

    Raises:
        ToolInputError: NOT_CONFIGURED (no folder), INVALID_INPUT (unknown metrics, named).
        SymbolNotFoundError / DateOutOfRangeError: every symbol failed (module docstring).
    """
    root = ctx.settings.fundamentals_dir
    online = root is None and ctx.settings.data_provider == "yfinance"
    if not online and (root is None or not Path(root).expanduser().is_dir()):
        raise ToolInputError(
            "No fundamentals folder is configured."
            if root is None
            else f"FINAGENT_FUNDAMENTALS_DIR={str(root)!r} is not a folder.",
            code=ErrorCode.NOT_CONFIGURED,
            retry_hint=NOT_CONFIGURED_HINT,
        )
    metrics = list(dict.fromkeys(params.metrics)) if params.metrics else list(SEED_FIELDS)
    unknown = [m for m in metrics if m not in ALL_FIELDS]
    if unknown:
        raise ToolInputError(f"unknown metric(s): {', '.join(unknown)}; known: {', '.join(ALL_FIELDS)}")
    store = get_offline_fundamentals(Path(root)) if root is not None else None
    try:
        calendar: EarningsCalendar | None = default_calendar()
    except CalendarUnavailableError:
        calendar = None  # earnings_date / eps_consensus then null with the no-source reason
    entries: list[dict[str, Any]] = []
    unknown_symbols: list[str] = []
    undated: list[str] = []
    for symbol in params.symbols:
        if store is None:
            try:
                merged: dict[str, Any] | None = yfinance_fundamentals(symbol, as_of=ctx.as_of)
            except SymbolNotFoundError:
                merged = None
        else:
            merged = fundamentals_at(store, symbol, ctx.as_of, calendar=calendar)
        if merged is None:
            unknown_symbols.append(symbol)
            entries.append(
                {
                    "symbol": symbol,
                    "error": {
                        "code": ErrorCode.INVALID_SYMBOL.value,
                        "message": f"{symbol} is in none of the fundamentals sources ({root or 'yfinance'})",
                    },
                }
            )
            continue
        if merged["timestamp"] is None:
            undated.append(symbol)
        entries.append(
            {
                "symbol": symbol,
                **{m: merged[m] for m in metrics},
                "timestamp": merged["timestamp"],
                "field_sources": {k: v for k, v in merged["field_sources"].items() if k in metrics},
                "null_reasons": {k: v for k, v in merged["null_reasons"].items() if k in metrics},
                "refused": merged["refused"],
            }
        )
    if len(unknown_symbols) == len(params.symbols):
        raise SymbolNotFoundError(f"no fundamentals for {', '.join(unknown_symbols)} ({root or 'yfinance'})")
    if len(unknown_symbols) + len(undated) == len(params.symbols):
        raise DateOutOfRangeError(
            f"no fundamentals source for {', '.join(undated)} is dated on or before {ctx.as_of.isoformat()} "
            "(the offline snapshots are later; see agents.fundamentals.offline)"
        )
    ok = len(entries) - len(unknown_symbols)
    summary = f"fundamentals of {ok}/{len(entries)} symbols at {ctx.as_of.isoformat()}"
    return ToolOutput(
        data={"fundamentals": entries, "metrics": metrics, "as_of": ctx.as_of.isoformat()},
        summary=summary,
        source_refs=(),
        symbol=params.symbols[0] if len(params.symbols) == 1 else None,
    )
