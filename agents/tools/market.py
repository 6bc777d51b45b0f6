"""Market-data tools: ``get_stock_data`` (docs/design.md, "Stock data tool") and ``get_history``.

Point in time: every bar comes from ``provider.bars(end=ctx.as_of)`` (through
:func:`agents.tools.bars.fetch_bars`); nothing after ``as_of``. Prices are USD. Adjusted prices
are split- and dividend-adjusted and expressed in the prices traded on the last bar
(``agents.data.market.base.adjusted_ohlc``), so a 2:1 split is not a crash.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from agents.tools.bars import history_window_basis, iso_dates, stock_data
from agents.tools.fields import Interval, Period, Symbol
from agents.tools.registry import ToolContext, ToolInputError, ToolOutput, register

INTRADAY: frozenset[str] = frozenset({"1m", "2m", "5m", "15m", "30m", "60m", "90m", "1h"})


class StockDataInput(BaseModel):
    """``{symbol}``: one ticker."""

    model_config = ConfigDict(extra="forbid")

    symbol: Symbol = Field(description="Stock ticker, e.g. AAPL")


@register(
    name="get_stock_data",
    description=(
        "Latest quote as of the analysis date: price, change, change_percent (fraction), volume, "
        "52-week high/low, market cap and P/E where the provider has them."
    ),
    input_model=StockDataInput,
)
def get_stock_data(params: StockDataInput, ctx: ToolContext) -> ToolOutput:
    """The quote (docs/design.md, "Stock data tool") for ``params.symbol`` at ``ctx.as_of``.

    Returns data ``{symbol, date, current_price, previous_close, change, change_percent, volume,
    market_cap, pe_ratio, 52w_high, 52w_low, currency, null_reasons, source}``; ``current_price``
    is the close traded on ``date`` (the last bar ≤ as_of); ``previous_close``, ``change`` and the
    52-week range use adjusted prices on that basis; ``change_percent`` is a fraction
    (0.0145 = 1.45 %). market_cap / pe_ratio are null with a reason when the source lacks them
    (:func:`agents.tools.bars.stock_data`).
    """
    return stock_data(ctx=ctx, symbol=params.symbol)


class HistoryInput(BaseModel):
    """``{symbol, period, interval?}``: one ticker, a period back from the analysis date, a bar size."""

    model_config = ConfigDict(extra="forbid")

    symbol: Symbol = Field(description="Stock ticker, e.g. AAPL")
    period: Period = Field(default="1y", description="How far back from the analysis date")
    interval: Interval = Field(default="1d", description="Bar size (providers here serve daily data)")


@register(
    name="get_history",
    description=(
        "Daily OHLCV bars with adjusted close up to the analysis date, for a period and a bar size."
    ),
    input_model=HistoryInput,
)
def get_history(params: HistoryInput, ctx: ToolContext) -> ToolOutput:
    """Bars for ``params.period`` ending at ``ctx.as_of``.

    Returns data ``{symbol, period, interval, count, first_date, last_date, history: [{timestamp,
    open, high, low, close, volume, adjusted_close}], source}``: timestamps are ISO dates of the
    bar (the period's last trading day for 5d/1wk/1mo/3mo, never after ``as_of``), prices raw
    USD as traded, ``adjusted_close`` split/dividend-adjusted as it stood on ``as_of``
    (:func:`agents.data.market.base.point_in_time_adj_close`: equal to the close on the last bar;
    later splits and dividends are not in it).

    Raises:
        ToolInputError: an intraday interval (the providers here serve daily bars).
    """
    if params.interval in INTRADAY:
        raise ToolInputError(
            f"interval {params.interval!r} is intraday; the {ctx.provider.name} provider serves daily bars "
            "only (use 1d, 5d, 1wk, 1mo or 3mo)"
        )
    bars, basis = history_window_basis(
        ctx=ctx, symbol=params.symbol, period=params.period, interval=params.interval
    )
    # Column lists (not itertuples): plain Python floats/ints, and ~10x faster on 500 bars.
    columns = {name: bars[name].tolist() for name in ("open", "high", "low", "close", "adj_close", "volume")}
    stamps = iso_dates(bars.index)
    history = [
        {
            "timestamp": stamp,
            "open": float(o),
            "high": float(h),
            "low": float(lo),
            "close": float(c),
            "volume": int(v),
            "adjusted_close": float(a),
        }
        for stamp, o, h, lo, c, a, v in zip(
            stamps,
            *(columns[k] for k in ("open", "high", "low", "close", "adj_close", "volume")),
            strict=True,
        )
    ]
    data = {
        "symbol": params.symbol,
        "period": params.period,
        "interval": params.interval,
        "count": len(history),
        "first_date": history[0]["timestamp"] if history else None,
        "last_date": history[-1]["timestamp"] if history else None,
        "history": history,
        "source": ctx.provider.source_ref(symbol=params.symbol),
    }
    summary = (
        f"{params.symbol} {params.period}/{params.interval}: {len(history)} bars "
        f"{data['first_date']}..{data['last_date']}"
    )
    storage = None
    if basis is not None and len(basis[0]) == len(history):
        storage = {"history": {"adjusted_close": {"base": basis[0], "scale": basis[1]}}}
    return ToolOutput(data=data, summary=summary, symbol=params.symbol, storage_basis=storage)
