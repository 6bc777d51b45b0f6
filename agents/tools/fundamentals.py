"""``get_fundamentals(symbols, metrics?)`` (docs/design.md, "Quotes and fundamentals") over the offline
fundamentals folder.

Source: ``FINAGENT_DATA_FUNDAMENTALS_DIR`` (``agents.data.fundamentals.offline``: S&P 500 snapshot, Alpha
Vantage statements, SEC companyfacts; formulas, source columns and dating documented there), and
for ``earnings_date`` / ``eps_consensus`` the earnings calendar of ``agents.data.fundamentals.earnings``
(next report within 30 days of ``as_of``; quarterly EPS estimate). Online (yfinance) ``eps_consensus``
is Yahoo's ``forwardEps`` (next fiscal year) instead.
Unset with ``FINAGENT_DATA_PROVIDER=yfinance`` → Yahoo's current ``info`` through
``agents.data.fundamentals.yfinance_adapter`` (only for an ``as_of`` within three days of today; an
older one falls back to the calendar below). Always, when the calendar covers the symbol: the
trailing ``pe_ratio``, ``eps_actual``, ``eps_growth_yoy`` and ``eps_surprise_mean_4q`` of
``agents.data.fundamentals.trailing`` (four reported quarters on the share basis of the as-of close from
the market-data provider), so the embedded default has a P/E with no configuration; with the
folder also ``market_cap`` = SEC shares outstanding × the as-of close
(``agents.data.fundamentals.offline.market_cap_values``). A folder that is set but missing →
``NOT_CONFIGURED`` with a hint. Which of these answers is decided by the data routing table
(:func:`agents.data.routing.fundamentals_source`; the source contract in
:mod:`agents.data.fundamentals.source`).

Point in time: sources dated after ``as_of`` are refused (listed in ``refused``, their fields
null with the reason). Partial failure as in ``get_quotes``: an unknown symbol gets
``{symbol, error: {code: INVALID_SYMBOL, message}}``; when every symbol is unknown the call
fails with ``INVALID_SYMBOL``; when every symbol is known but no source is dated ≤ ``as_of``,
with ``DATE_OUT_OF_RANGE``.
"""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agents.data.fundamentals.earnings import CalendarUnavailableError
from agents.data.fundamentals.offline import ALL_FIELDS, SEED_FIELDS
from agents.data.fundamentals.source import FundamentalsNotConfiguredError
from agents.data.fundamentals.trailing import Price
from agents.data.market.base import DateOutOfRangeError, ProviderError, SymbolNotFoundError
from agents.data.routing import FUNDAMENTALS_HINT, earnings_calendar, fundamentals_source, serves
from agents.tools.bars import fetch_bars, share_basis_of
from agents.tools.envelope import ErrorCode
from agents.tools.fields import Symbols
from agents.tools.registry import ToolContext, ToolInputError, ToolOutput, register
from core.settings import Settings

#: A bar at most two weeks before as_of prices the P/E (a holiday week has none on as_of itself).
PRICE_LOOKBACK = timedelta(days=14)

NOT_CONFIGURED_HINT = FUNDAMENTALS_HINT


def fundamentals_configured(settings: Settings) -> bool:
    """True when ``get_fundamentals`` has a source: an existing ``FINAGENT_DATA_FUNDAMENTALS_DIR``,
    the yfinance data provider (online, current values only), or the earnings calendar that
    ships in a dependency (trailing EPS, P/E, EPS growth and surprises, no configuration)."""
    root = settings.data.fundamentals_dir
    if root is not None and Path(root).expanduser().is_dir():
        return True
    if serves(settings.data.provider, "fundamentals"):
        return True
    try:
        earnings_calendar().symbols()
    except CalendarUnavailableError:
        return False
    return True


def fundamentals_cover(*, settings: Settings, symbol: str, as_of: date) -> bool:
    """True when ``get_fundamentals`` has a source that may know ``symbol``: a configured folder
    or the yfinance provider (they answer for themselves), else the earnings calendar covering
    the symbol. The research stage asks this so a symbol no source has is not an error."""
    root = settings.data.fundamentals_dir
    if (root is not None and Path(root).expanduser().is_dir()) or serves(
        settings.data.provider, "fundamentals"
    ):
        return True
    try:
        return earnings_calendar().covers(symbol, as_of)
    except CalendarUnavailableError:
        return False


def _as_of_price(ctx: ToolContext, symbol: str) -> tuple[Price | None, str | None]:
    """The close traded on the last bar ≤ ``ctx.as_of`` (raw, the share basis of that day) from
    the market-data provider, or None with the provider's reason."""
    try:
        bars = fetch_bars(
            provider=ctx.provider,
            symbol=symbol,
            start=ctx.as_of - PRICE_LOOKBACK,
            end=ctx.as_of,
            settings=ctx.settings,
        )
    except ProviderError as exc:
        if exc.transient:
            raise
        return None, f"no price at as_of from the {ctx.provider.name} data: {exc}"
    if bars.empty:
        return None, f"no bar of {symbol} in the {PRICE_LOOKBACK.days} days up to as_of"
    day = bars.index[-1].date()
    ref = f"{ctx.provider.source_ref(symbol=symbol)}@{day.isoformat()}"
    basis = share_basis_of(bars)  # fetch_bars put the close on the shares of as_of
    return Price(close=float(bars["close"].iloc[-1]), day=day, ref=ref, basis_reason=basis.reason), None


class FundamentalsInput(BaseModel):
    """``{symbols, metrics?}``: 1..50 tickers; metrics ⊂ the default fields plus extras."""

    model_config = ConfigDict(extra="forbid")

    symbols: Symbols = Field(description="Tickers, e.g. ['AAPL']")
    metrics: list[str] | None = Field(
        default=None,
        description=f"Fields to return (default: {', '.join(SEED_FIELDS)}); "
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
    """Fundamentals for ``params.symbols`` at ``ctx.as_of``.

    Returns data ``{fundamentals: [{symbol, <metrics>, timestamp, field_sources, null_reasons,
    refused}], metrics, as_of}``. Ratios are plain numbers (gross_margin 0.4459 = 44.59 %),
    ``eps_actual`` USD/share, ``market_cap``/``ebitda`` USD, ``timestamp`` the ISO date of the
    newest source used. ``field_sources`` cites the file, row and period behind every value.

    Raises:
        ToolInputError: NOT_CONFIGURED (no folder), INVALID_INPUT (unknown metrics, named).
        SymbolNotFoundError / DateOutOfRangeError: every symbol failed (module docstring).
    """
    try:
        source = fundamentals_source(ctx.settings)
    except FundamentalsNotConfiguredError as exc:
        raise ToolInputError(str(exc), code=ErrorCode.NOT_CONFIGURED, retry_hint=exc.hint) from None
    metrics = list(dict.fromkeys(params.metrics)) if params.metrics else list(SEED_FIELDS)
    unknown = [m for m in metrics if m not in ALL_FIELDS]
    if unknown:
        raise ToolInputError(f"unknown metric(s): {', '.join(unknown)}; known: {', '.join(ALL_FIELDS)}")

    def price_at(symbol: str) -> tuple[Price | None, str | None]:
        return _as_of_price(ctx, symbol)

    refs: list[str] = []
    entries: list[dict[str, Any]] = []
    unknown_symbols: list[str] = []
    undated: list[str] = []
    for symbol in params.symbols:
        record = source.fundamentals(symbol, ctx.as_of, price_at=price_at, provider=ctx.provider)
        merged = record.values if record is not None else None
        trailing = record.trailing if record is not None else None
        if merged is None:
            unknown_symbols.append(symbol)
            entries.append(
                {
                    "symbol": symbol,
                    "error": {
                        "code": ErrorCode.INVALID_SYMBOL.value,
                        "message": f"{symbol} is in none of the fundamentals sources ({source.label})",
                    },
                }
            )
            continue
        if merged["timestamp"] is None:
            why = merged["null_reasons"].get("pe_ratio") or "no source is dated on or before as_of"
            undated.append(f"{symbol} ({why})")
        entries.append(
            {
                "symbol": symbol,
                **{m: merged[m] for m in metrics},
                "timestamp": merged["timestamp"],
                "field_sources": {k: v for k, v in merged["field_sources"].items() if k in metrics},
                "null_reasons": {k: v for k, v in merged["null_reasons"].items() if k in metrics},
                "refused": merged["refused"],
                **({"trailing_eps": trailing.detail} if trailing is not None and trailing.detail else {}),
            }
        )
        if trailing is not None and any(
            src == trailing.values.ref for k, src in merged["field_sources"].items() if k in metrics
        ):
            refs.extend(trailing.detail.get("source_refs") or [])
    if len(unknown_symbols) == len(params.symbols):
        raise SymbolNotFoundError(f"no fundamentals for {', '.join(unknown_symbols)} ({source.label})")
    if len(unknown_symbols) + len(undated) == len(params.symbols):
        raise DateOutOfRangeError(
            f"no fundamentals at {ctx.as_of.isoformat()} for {'; '.join(undated)} "
            "(dating rules: agents.data.fundamentals.offline and agents.data.fundamentals.trailing)"
        )
    ok = len(entries) - len(unknown_symbols)
    summary = f"fundamentals of {ok}/{len(entries)} symbols at {ctx.as_of.isoformat()}"
    return ToolOutput(
        data={"fundamentals": entries, "metrics": metrics, "as_of": ctx.as_of.isoformat()},
        summary=summary,
        source_refs=tuple(dict.fromkeys(refs)),
        symbol=params.symbols[0] if len(params.symbols) == 1 else None,
    )
