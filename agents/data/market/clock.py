"""The market clock: what "today" means for a data source.

A default date (a watchlist run without ``--date``, ``finagent tool`` without ``--as-of``, a
quote) must be a date the data can serve. The wall clock is not: the embedded dataset ends
2013-03-01, so "today" (UTC) is thirteen years past its last bar. One rule per kind of source:

* **Offline data** (a provider that lists its symbols: ``embedded``, ``csv``, a plug-in with a
  list): today is the data's last trading day, the date of the last bar (of the given symbols;
  of every symbol the provider has when none is given). Every output that used it says so
  (:meth:`MarketToday.describe`: ``"data ends 2013-03-01"``).
* **Online data** (``yfinance``, Alpaca, a plug-in with an empty list): today is the exchange
  calendar's last *completed* session at the wall clock: the last XNYS session whose close has
  passed (exchange_calendars, the calendar the paper broker already trades on). Before the close
  the day's bar is still moving, so the session before it is the last one with a final bar.

Nothing here reads the network: an online provider's ``latest_date`` is never called.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Literal

import pandas as pd

from agents.data.market.base import MarketDataProvider, ProviderError
from agents.data.market_calendar import CALENDAR, nyse
from core.masking import mask_text

Basis = Literal["data_end", "exchange_session", "live"]


@dataclass(frozen=True)
class MarketToday:
    """ "Today" of one data source.

    Attributes:
        day: the default date (ISO calendar day, exchange-local).
        basis: ``data_end`` (offline data: its last bar), ``exchange_session`` (online data:
            the last completed XNYS session) or ``live`` (a live-only vendor snapshot: today, UTC).
        source: the provider's ``name``.
        symbols: the symbols the day was computed over (empty: every symbol, or online).
    """

    day: date
    basis: Basis
    source: str
    symbols: tuple[str, ...] = ()

    def describe(self) -> str:
        """One phrase for a report or digest, e.g. ``"data ends 2013-03-01 (embedded)"`` or
        ``"last completed XNYS session 2026-11-20 (yfinance)"``."""
        if self.basis == "data_end":
            return f"data ends {self.day.isoformat()} ({self.source})"
        if self.basis == "live":
            return f"live: today {self.day.isoformat()} UTC ({self.source})"
        return f"last completed {CALENDAR} session {self.day.isoformat()} ({self.source})"

    def as_dict(self) -> dict[str, str]:
        """JSON-safe ``{day, basis, source, note}`` (``note`` = :meth:`describe`)."""
        return {
            "day": self.day.isoformat(),
            "basis": self.basis,
            "source": self.source,
            "note": self.describe(),
        }


def is_offline(provider: MarketDataProvider) -> bool:
    """True when ``provider`` serves a fixed offline dataset (it lists its symbols)."""
    return bool(provider.symbols())


def last_completed_session(now: datetime | None = None) -> date:
    """The last XNYS session whose regular close is at or before ``now`` (aware; default the
    wall clock, UTC). Early closes (13:00 New York) and holidays come from exchange_calendars.

    Raises:
        ValueError: ``now`` is naive.
    """
    now = now or datetime.now(UTC)
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    cal = nyse()
    at = pd.Timestamp(now).tz_convert(UTC)
    last_known = cal.last_session
    day = pd.Timestamp(at.tz_convert(cal.tz).date())
    if day > last_known:  # beyond the calendar's horizon (about a year ahead): its last session
        day = last_known
    session = cal.date_to_session(day, direction="previous")
    if cal.session_close(session) > at:
        session = cal.previous_session(session)
    result: date = session.date()
    return result


def market_today(
    *, provider: MarketDataProvider, symbols: Sequence[str] = (), now: datetime | None = None
) -> MarketToday:
    """ "Today" for ``provider`` (module docstring).

    Args:
        provider: the configured market-data provider.
        symbols: the symbols the default is for (a watchlist's tickers, a tool call's symbols).
            Offline data: the latest last-bar date among those the provider knows (unknown ones
            are skipped: the tool then reports ``INVALID_SYMBOL`` itself); none known or none
            given → the latest over every symbol of the provider.
        now: the wall clock (aware), for online data only.
    Returns:
        :class:`MarketToday`.
    Raises:
        ProviderError: only when an offline provider cannot read a single symbol's bars.
    """
    if not is_offline(provider):
        return MarketToday(day=last_completed_session(now), basis="exchange_session", source=provider.name)
    asked = [s for s in dict.fromkeys(symbols) if s]
    known = set(provider.symbols())
    chosen = [s for s in asked if s in known] or sorted(known)
    ends: list[date] = []
    errors: list[str] = []
    for symbol in chosen:
        try:
            ends.append(provider.latest_date(symbol=symbol))
        except ProviderError as exc:
            errors.append(str(exc))
    if not ends:
        raise ProviderError(
            f"no symbol of the {provider.name} data has a last bar: {mask_text('; '.join(errors))[:300]}"
        )
    return MarketToday(
        day=max(ends), basis="data_end", source=provider.name, symbols=tuple(s for s in chosen if s in asked)
    )
