"""The paper account as the tools see it: the engine (schema ensured), the point-in-time book,
pricing at ``as_of`` and valuation.

Not a tool module: ``get_portfolio``, ``trade_simulate`` / ``trade_execute`` and ``log_event``
share these, so no tool imports another for them. Prices are USD, the raw close of each
symbol's last bar on or before ``as_of`` (point in time); adjusted closes feed the risk metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

import pandas as pd
from sqlalchemy import Engine

from agents.broker.paper import Bar, Book
from agents.broker.risk import MODEL_VALUES
from agents.data.market.base import adjusted_ohlc
from agents.tools.bars import fetch_bars
from agents.tools.registry import ToolContext
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
    ``risk_window_bars`` lookback, at least the risk model's (``agents.broker.risk.MODEL_VALUES``);
    one cached fetch serves price and history.

    Provider errors (INVALID_SYMBOL, DATE_OUT_OF_RANGE, NO_DATA...) propagate to ``run_tool``.
    """
    # the risk model's VaR reads up to its fit window of daily values; the other metrics the window
    start = lookback_start(as_of=ctx.as_of, bars=max(ctx.settings.broker.risk_window_bars, MODEL_VALUES))
    out: dict[str, Priced] = {}
    for symbol in sorted(symbols):
        bars = fetch_bars(
            provider=ctx.provider, symbol=symbol, start=start, end=ctx.as_of, settings=ctx.settings
        )
        last = bars.iloc[-1]
        out[symbol] = Priced(
            bar=Bar(date=bars.index[-1].date(), close=float(last["close"]), volume=float(last["volume"])),
            adj_close=adjusted_ohlc(bars)["close"],
            source=ctx.provider.source_ref(symbol=symbol),
        )
    return out


def migrated_engine(ctx: ToolContext) -> Engine:
    """The engine of ``ctx.settings.service.effective_database_url``, with the schema migrated to head
    (``db.migrate.ensure_schema``: memoised per process, one cheap check when current).

    Raises ``db.migrate.SchemaVersionError`` for a database migrated by newer code and
    SQLAlchemy connection errors.
    """
    # Why a tool call may run migrations: the account and events tables are the only ones a
    # tool writes, and a tool can be the first thing to touch the database (``finagent tool
    # get_portfolio`` on a fresh embedded SQLite file, or a worker whose start-up check ran
    # against another URL). Workers and the CLI already ensure the schema at start, so here it
    # is normally the memoised no-op; it stays so first use never fails on a missing table.
    url = ctx.settings.service.effective_database_url
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
        return Book(cash=ctx.settings.broker.starting_cash), False
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
