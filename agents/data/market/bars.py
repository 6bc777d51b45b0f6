"""Yahoo-shaped bars → the ``agents.data.market.base`` contract, and the ``end``-date rule.

Shared by the embedded, csv and yfinance providers so all three apply one rule:
:func:`bars_from_yahoo_frame` (column mapping, NaN/"null" rows dropped and counted, duplicate
dates de-duplicated), :func:`check_end_in_range` (future dates, dates before the first bar or
more than :data:`MAX_DAYS_AFTER_LAST_BAR` days after the last are refused) and
:func:`select_window`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import pandas as pd

from agents.data.market.base import BARS_COLUMNS, DateOutOfRangeError, NoDataError

# Yahoo's column names → the contract's (base.BARS_COLUMNS).
YAHOO_COLUMNS: dict[str, str] = {
    "Open": "open",
    "High": "high",
    "Low": "low",
    "Close": "close",
    "Adj Close": "adj_close",
    "Volume": "volume",
}
_PRICE_COLUMNS = ("open", "high", "low", "close", "adj_close")

# How far past a symbol's last bar an ``end`` date may lie and still be served (with the last bar
# as the latest data). 7 calendar days covers every weekend-plus-holiday run on US exchanges,
# including the longest modern closure (last bar 2001-09-10, reopening 2001-09-17); anything
# later means the data stopped (stale file, delisting) and silently answering with old prices
# would mislead the analysis.
MAX_DAYS_AFTER_LAST_BAR = 7


@dataclass(frozen=True)
class ParsedBars:
    """Bars in the contract shape plus what parsing had to discard.

    frame: contract frame (see ``agents.data.market.base``), possibly empty.
    dropped_rows: rows removed because a price was missing (``null``/NaN/blank), non-positive, or
        the date was unparseable. They are dropped, never filled with invented values.
    duplicate_dates: extra rows for a date already present (the last row in file order is kept).
    """

    frame: pd.DataFrame
    dropped_rows: int = 0
    duplicate_dates: int = 0


def bars_from_yahoo_frame(*, raw: pd.DataFrame, date_column: str | None = "Date") -> ParsedBars:
    """Map a Yahoo-shaped frame (``Open, High, Low, Close, Adj Close, Volume``) to the contract.

    Args:
        raw: the frame as read; prices in USD, may hold strings such as ``"null"``.
        date_column: name of the date column, or ``None`` when the dates are the index
            (as ``yfinance`` returns them; a tz-aware index keeps its exchange-local date).
    Returns:
        :class:`ParsedBars` whose frame is sorted ascending, de-duplicated (last row wins), with
        float64 columns ``open, high, low, close, adj_close, volume`` and a tz-naive midnight
        ``DatetimeIndex`` named ``date``. Rows with a missing or non-positive price are dropped
        and counted; a missing volume stays NaN.
    Raises:
        ValueError: a required column is absent.
    """
    missing = [c for c in YAHOO_COLUMNS if c not in raw.columns]
    if missing or (date_column is not None and date_column not in raw.columns):
        wanted = [date_column, *YAHOO_COLUMNS] if date_column else list(YAHOO_COLUMNS)
        raise ValueError(f"not a Yahoo-format price table: need columns {wanted}, got {list(raw.columns)}")

    if date_column is None:
        dates = pd.DatetimeIndex(raw.index)
    else:
        dates = pd.DatetimeIndex(pd.to_datetime(raw[date_column], errors="coerce"))
    if dates.tz is not None:
        # The exchange-local calendar date is the trading day; converting to UTC first could
        # move it (a bar stamped 00:00 New York is still that New York day).
        dates = dates.tz_localize(None)
    dates = dates.normalize()

    columns = {
        new: pd.to_numeric(raw[old], errors="coerce").to_numpy(dtype="float64")
        for old, new in YAHOO_COLUMNS.items()
    }
    frame = pd.DataFrame(columns, index=dates)
    frame.index.name = "date"

    prices = frame[list(_PRICE_COLUMNS)]
    usable = (prices.notna().all(axis=1) & (prices > 0).all(axis=1)).to_numpy() & frame.index.notna()
    dropped = int((~usable).sum())
    frame = frame[usable]

    # Stable sort keeps file order among equal dates, so "keep last" means the later row.
    frame = frame.sort_index(kind="mergesort")
    dup_mask = frame.index.duplicated(keep="last")
    duplicates = int(dup_mask.sum())
    frame = frame[~dup_mask]
    frame = frame.astype("float64")
    frame.index = pd.DatetimeIndex(frame.index, name="date").as_unit("ns")
    return ParsedBars(frame=frame[list(BARS_COLUMNS)], dropped_rows=dropped, duplicate_dates=duplicates)


def today_utc() -> date:
    """Today's date in UTC (the product's reference for "in the future")."""
    return datetime.now(UTC).date()


def check_end_in_range(*, symbol: str, end: date, first: date, last: date, today: date | None = None) -> None:
    """Refuse an ``end`` date the data cannot answer honestly.

    Args:
        symbol: the ticker, for the message.
        end: requested last date (inclusive).
        first, last: dates of the symbol's first and last bar.
        today: reference "today" (UTC); defaults to :func:`today_utc`.
    Raises:
        DateOutOfRangeError: ``end`` is after today (UTC), before ``first``, or more than
            ``MAX_DAYS_AFTER_LAST_BAR`` calendar days after ``last``. The message names the symbol,
            the requested date and the available range.
    """
    today = today or today_utc()
    available = f"available {first.isoformat()}..{last.isoformat()}"
    if end > today:
        raise DateOutOfRangeError(
            f"{symbol}: requested end {end.isoformat()} is in the future (today is {today.isoformat()} UTC); "
            f"{available}"
        )
    if end < first:
        raise DateOutOfRangeError(
            f"{symbol}: requested end {end.isoformat()} is before the first bar; {available}"
        )
    if end > last + timedelta(days=MAX_DAYS_AFTER_LAST_BAR):
        raise DateOutOfRangeError(
            f"{symbol}: requested end {end.isoformat()} is more than {MAX_DAYS_AFTER_LAST_BAR} days after "
            f"the last bar; {available}"
        )


def select_window(*, frame: pd.DataFrame, symbol: str, start: date | None, end: date) -> pd.DataFrame:
    """Rows of a contract frame with ``start <= date <= end`` (``start=None``: from the first).

    Args:
        frame: contract frame for ``symbol`` (not empty; ascending index, as the contract says).
        symbol: the ticker, for messages.
        start, end: inclusive calendar dates.
    Returns:
        A copy (callers may mutate it without touching any cache).
    Raises:
        ValueError: ``start`` after ``end``.
        DateOutOfRangeError: see :func:`check_end_in_range`.
        NoDataError: the window holds no trading day (e.g. a weekend).
    """
    if start is not None and start > end:
        raise ValueError(f"start {start.isoformat()} is after end {end.isoformat()}")
    first = frame.index[0].date()
    last = frame.index[-1].date()
    check_end_in_range(symbol=symbol, end=end, first=first, last=last)
    # the contract's ascending index: two binary searches and one slice (half the cost of two
    # boolean masks over the whole history)
    stop = int(frame.index.searchsorted(pd.Timestamp(end), side="right"))
    begin = 0 if start is None else int(frame.index.searchsorted(pd.Timestamp(start), side="left"))
    window = frame.iloc[begin:stop].copy()
    if window.empty:
        raise NoDataError(
            f"{symbol}: no bars between {start.isoformat() if start else first.isoformat()} and "
            f"{end.isoformat()}; available {first.isoformat()}..{last.isoformat()}"
        )
    return window
