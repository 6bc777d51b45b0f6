"""``get_portfolio`` (seed 002) and the pricing helpers the trading tools share.

The portfolio is the paper account's state after its orders of sessions up to ``as_of`` (orders
of later sessions are left out: point in time, ``db.trading_repo.read_book``) valued at ``as_of``:
each position at the raw close of its last bar on or before ``as_of`` (USD, as traded), weights
as fractions of ``total_value = cash + sum market_value``. An account that never traded is shown
with the ``broker_starting_cash`` setting and no positions (and is not created by reading it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Engine

from agents.broker.paper import Bar, Book
from agents.providers.base import adjusted_ohlc
from agents.tools.market import fetch_bars
from agents.tools.registry import ToolContext, ToolOutput, register
from db.engine import get_engine
from db.migrate import ensure_schema
from db.trading_repo import read_book


@dataclass(frozen=True)
class Priced:
    """One symbol's ``as_of`` bar and its adjusted close history (``as_of`` prices, USD)."""

    bar: Bar
    adj_close: pd.Series
    source: str


def lookback_start(*, as_of: date, bars: int) -> date:
    """A calendar start holding at least ``bars`` NYSE sessions before ``as_of`` (252 sessions
    span ~365 days; x1.5 + 10 days leaves room for holidays and closures)."""
    return as_of - timedelta(days=int(bars * 1.5) + 10)


def price_symbols(*, ctx: ToolContext, symbols: set[str]) -> dict[str, Priced]:
    """``Priced`` for each symbol from bars ending at ``ctx.as_of`` (point in time), over the
    ``risk_window_bars`` lookback (one cached fetch serves price and history).

    Provider errors (INVALID_SYMBOL, DATE_OUT_OF_RANGE, NO_DATA...) propagate to ``run_tool``.
    """
    start = lookback_start(as_of=ctx.as_of, bars=ctx.settings.risk_window_bars)
    out: dict[str, Priced] = {}
    for symbol in sorted(symbols):
        bars = fetch_bars(provider=ctx.provider, symbol=symbol, start=start, end=ctx.as_of)
        last = bars.iloc[-1]
        out[symbol] = Priced(
            bar=Bar(date=bars.index[-1].date(), close=float(last["close"]), volume=float(last["volume"])),
            adj_close=adjusted_ohlc(bars)["close"],
            source=ctx.provider.source_ref(symbol=symbol),
        )
    return out


def trading_engine(ctx: ToolContext) -> Engine:
    """The engine of ``effective_database_url``, migrated to head (memoised, cheap when current)."""
    url = ctx.settings.effective_database_url
    ensure_schema(url=url)
    return get_engine(url)


def load_book(
    *, ctx: ToolContext, engine: Engine, user_id: str, point_in_time: bool = True
) -> tuple[Book, bool]:
    """The account's book and whether the account exists (else a fresh starting-cash book).

    ``point_in_time``: the book after the orders of sessions up to ``ctx.as_of`` only (orders
    of later sessions are left out, ``db.trading_repo.read_book``); else the current book.
    """
    book = read_book(engine=engine, user_id=user_id, as_of=ctx.as_of if point_in_time else None)
    if book is None:
        return Book(cash=ctx.settings.broker_starting_cash), False
    return book, True


def value_book(*, book: Book, priced: dict[str, Priced], with_avg: bool = True) -> dict[str, Any]:
    """``{positions: [{symbol, quantity, avg_price?, current_price, market_value, weight,
    price_date}], cash, total_value}``: USD; ``weight`` = market_value / total_value."""
    prices = {s: priced[s].bar.close for s in book.positions}
    total = book.total_value(prices)
    positions = []
    for symbol in sorted(book.positions):
        holding = book.positions[symbol]
        value = holding.quantity * prices[symbol]
        row: dict[str, Any] = {"symbol": symbol, "quantity": holding.quantity}
        if with_avg:
            row["avg_price"] = round(holding.avg_price, 4)
        row.update(
            current_price=round(prices[symbol], 4),
            market_value=round(value, 2),
            weight=round(value / total, 6) if total > 0 else None,
            price_date=priced[symbol].bar.date.isoformat(),
        )
        positions.append(row)
    return {"positions": positions, "cash": round(book.cash, 2), "total_value": round(total, 2)}


class PortfolioInput(BaseModel):
    """``{user_id?}`` (seed 002); default: the ``portfolio_default_user`` setting."""

    model_config = ConfigDict(extra="forbid")

    user_id: str | None = Field(default=None, min_length=1, max_length=128, description="Paper account owner")


@register(
    name="get_portfolio",
    description=(
        "The paper account's positions and cash valued at the analysis date's closes: quantity, "
        "avg_price, current_price, market_value (USD) and weight (fraction of total_value)."
    ),
    input_model=PortfolioInput,
)
def get_portfolio(params: PortfolioInput, ctx: ToolContext) -> ToolOutput:
    """Seed-002 ``get_portfolio``.

    Returns data ``{portfolio: {positions: [{symbol, quantity, avg_price, current_price,
    market_value, weight, price_date}], cash, total_value, currency}, user_id, account_exists,
    as_of, sources}``. USD; weights are fractions of ``total_value``.
    """
    user_id = params.user_id or ctx.settings.portfolio_default_user
    engine = trading_engine(ctx)
    book, exists = load_book(ctx=ctx, engine=engine, user_id=user_id)
    priced = price_symbols(ctx=ctx, symbols=set(book.positions))
    portfolio = value_book(book=book, priced=priced)
    portfolio["currency"] = "USD"
    data = {
        "portfolio": portfolio,
        "user_id": user_id,
        "account_exists": exists,
        "as_of": ctx.as_of.isoformat(),
        "sources": sorted({p.source for p in priced.values()}),
    }
    summary = (
        f"portfolio {user_id}: {len(portfolio['positions'])} positions, cash ${portfolio['cash']:,.2f}, "
        f"total ${portfolio['total_value']:,.2f}"
    )
    return ToolOutput(data=data, summary=summary)
