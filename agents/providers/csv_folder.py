"""The ``csv`` provider: a folder of Yahoo-format daily CSVs, one file per ticker.

Each file is ``<TICKER>.csv`` with the header ``Date,Open,High,Low,Close,Adj Close,Volume`` (what
Yahoo Finance's download button and ``yfinance`` write). Share classes use Yahoo's dash in file
names (``BRK-A.csv``) while the product writes them with a dot (``BRK.A``); both spellings are
accepted. An optional ``StockTable.tsv`` (``Sector<TAB>Symbol<TAB>Company``, symbols written
``$XOM``) supplies company names. Example folder: ``shared/data/ohlcv/stocknet/`` (88 tickers,
2012-09-04 .. 2017-09-01, from yumoxu/stocknet-dataset).

This module also holds the helpers every provider uses to turn Yahoo-shaped columns into the
``agents.providers.base`` bar contract and to check a requested ``end`` date against the data
(:func:`bars_from_yahoo_frame`, :func:`check_end_in_range`, :func:`select_window`), so the
embedded, csv and yfinance providers apply one rule.
"""

from __future__ import annotations

import csv
import logging
import re
import threading
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pandas as pd

from agents.providers.base import (
    BARS_COLUMNS,
    DateOutOfRangeError,
    NoDataError,
    Profile,
    SymbolNotFoundError,
)

logger = logging.getLogger(__name__)

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

STOCK_TABLE_FILENAME = "StockTable.tsv"

# Symbols reach us normalised (pipeline.tickers), but a file name built from one must never
# escape the folder, so anything outside this alphabet is refused before touching the disk.
_SAFE_SYMBOL_RE = re.compile(r"^[A-Z0-9][A-Z0-9.\-]{0,15}$")


@dataclass(frozen=True)
class ParsedBars:
    """Bars in the contract shape plus what parsing had to discard.

    frame: contract frame (see ``agents.providers.base``), possibly empty.
    dropped_rows: rows removed because a price was missing (``null``/NaN/blank), non-positive, or
        the date was unparseable. They are dropped, never filled with invented values.
    duplicate_dates: extra rows for a date already present (the last row in file order is kept).
    """

    frame: pd.DataFrame
    dropped_rows: int = 0
    duplicate_dates: int = 0


def empty_bars() -> pd.DataFrame:
    """An empty frame that still follows the contract (float64 columns, ``date`` index)."""
    index = pd.DatetimeIndex([], name="date", dtype="datetime64[ns]")
    return pd.DataFrame({c: pd.Series([], dtype="float64", index=index) for c in BARS_COLUMNS}, index=index)


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
        frame: contract frame for ``symbol`` (not empty).
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
    upper = frame.index <= pd.Timestamp(end)
    mask = upper if start is None else upper & (frame.index >= pd.Timestamp(start))
    window = frame.loc[mask].copy()
    if window.empty:
        raise NoDataError(
            f"{symbol}: no bars between {start.isoformat() if start else first.isoformat()} and "
            f"{end.isoformat()}; available {first.isoformat()}..{last.isoformat()}"
        )
    return window


def _file_stem(symbol: str) -> str:
    """Yahoo file naming: share classes with a dash (``BRK.A`` → ``BRK-A``)."""
    return symbol.replace(".", "-")


def _product_symbol(stem: str) -> str:
    """Product naming: share classes with a dot (``BRK-A`` → ``BRK.A``)."""
    return stem.upper().replace("-", ".")


@dataclass(frozen=True)
class _CacheEntry:
    mtime_ns: int
    parsed: ParsedBars


# Parsed files shared by every CsvFolderProvider in the process, keyed by resolved path and
# refreshed when the file's mtime changes. One entry per file, so the size is bounded by the
# folder; a lock keeps concurrent worker threads from parsing the same file twice.
_FILE_CACHE: dict[Path, _CacheEntry] = {}
_NAMES_CACHE: dict[Path, tuple[int, dict[str, str]]] = {}
_CACHE_LOCK = threading.Lock()


class CsvFolderProvider:
    """Daily bars from a folder of Yahoo-format CSV files (``name = "csv"``), fully offline.

    Args:
        data_dir: the folder (e.g. ``FINAGENT_DATA_DIR=../shared/data/ohlcv/stocknet``).
    Raises:
        ValueError: ``data_dir`` is not an existing directory.

    Prices are USD as in the files: ``open..close`` as traded, ``adj_close`` split- and
    dividend-adjusted. Profiles carry the company name from ``StockTable.tsv`` when present;
    market cap and P/E are always ``None`` (the files do not hold them).
    """

    name = "csv"

    def __init__(self, *, data_dir: Path) -> None:
        data_dir = Path(data_dir).expanduser()
        if not data_dir.is_dir():
            raise ValueError(f"csv provider: data directory {str(data_dir)!r} is not an existing folder")
        self.data_dir = data_dir.resolve()

    # -- files -------------------------------------------------------------------------------

    def _path_for(self, symbol: str) -> Path:
        """The file holding ``symbol``, trying the given spelling then the dash/dot variant."""
        if not _SAFE_SYMBOL_RE.fullmatch(symbol):
            raise SymbolNotFoundError(f"{symbol!r}: not a symbol the csv provider can look up")
        for stem in dict.fromkeys((symbol, _file_stem(symbol), symbol.replace("-", "."))):
            path = self.data_dir / f"{stem}.csv"
            if path.is_file():
                return path
        raise SymbolNotFoundError(f"{symbol}: no file {_file_stem(symbol)}.csv in {self.data_dir}")

    def parsed(self, *, symbol: str) -> ParsedBars:
        """All bars of ``symbol`` with the parsing report (dropped rows, duplicate dates).

        Raises:
            SymbolNotFoundError: no such file, or the file holds no usable bar.
        """
        path = self._path_for(symbol)
        mtime_ns = path.stat().st_mtime_ns
        with _CACHE_LOCK:
            entry = _FILE_CACHE.get(path)
            if entry is None or entry.mtime_ns != mtime_ns:
                entry = _CacheEntry(mtime_ns=mtime_ns, parsed=self._parse(path=path, symbol=symbol))
                _FILE_CACHE[path] = entry
        if entry.parsed.frame.empty:
            raise SymbolNotFoundError(f"{symbol}: {path.name} holds no usable bar")
        return entry.parsed

    @staticmethod
    def _parse(*, path: Path, symbol: str) -> ParsedBars:
        # Read everything as text: "null" in a price column must become NaN in our own parser
        # (counted and dropped), not make pandas guess an object dtype for the whole column.
        raw = pd.read_csv(path, dtype=str, keep_default_na=False)
        try:
            parsed = bars_from_yahoo_frame(raw=raw, date_column="Date")
        except ValueError as exc:
            raise SymbolNotFoundError(f"{symbol}: {path.name} is not a Yahoo-format CSV ({exc})") from exc
        if parsed.dropped_rows or parsed.duplicate_dates:
            logger.warning(
                "csv provider: %s: dropped %d row(s) without usable prices, %d duplicate date(s)",
                path.name,
                parsed.dropped_rows,
                parsed.duplicate_dates,
            )
        return parsed

    def _names(self) -> dict[str, str]:
        """Company names from ``StockTable.tsv`` (product spelling → name); empty if absent."""
        path = self.data_dir / STOCK_TABLE_FILENAME
        if not path.is_file():
            return {}
        mtime_ns = path.stat().st_mtime_ns
        with _CACHE_LOCK:
            cached = _NAMES_CACHE.get(path)
            if cached is not None and cached[0] == mtime_ns:
                return cached[1]
            names: dict[str, str] = {}
            with path.open(newline="", encoding="utf-8") as handle:
                for row in csv.DictReader(handle, delimiter="\t"):
                    raw_symbol = (row.get("Symbol") or "").strip().lstrip("$")
                    company = " ".join((row.get("Company") or "").split())
                    if raw_symbol and company:
                        names[_product_symbol(raw_symbol)] = company
            _NAMES_CACHE[path] = (mtime_ns, names)
            return names

    # -- MarketDataProvider ------------------------------------------------------------------

    def bars(self, *, symbol: str, start: date | None, end: date) -> pd.DataFrame:
        """Daily bars for ``symbol`` with ``start <= date <= end`` (contract frame, USD).

        Raises:
            SymbolNotFoundError: no ``<symbol>.csv`` (nor its dash/dot variant) in the folder.
            DateOutOfRangeError: ``end`` in the future, before the first bar, or more than
                ``MAX_DAYS_AFTER_LAST_BAR`` days after the last one.
            NoDataError: the window holds no trading day.
            ValueError: ``start`` after ``end``.
        """
        return select_window(frame=self.parsed(symbol=symbol).frame, symbol=symbol, start=start, end=end)

    def latest_date(self, *, symbol: str) -> date:
        """Date of the last usable bar in the symbol's file. Raises ``SymbolNotFoundError``."""
        last: date = self.parsed(symbol=symbol).frame.index[-1].date()
        return last

    def symbols(self) -> list[str]:
        """Every ``*.csv`` in the folder, in product spelling (``BRK-A.csv`` → ``BRK.A``), sorted."""
        return sorted(_product_symbol(path.stem) for path in self.data_dir.glob("*.csv"))

    def profile(self, *, symbol: str) -> Profile:
        """Company name from ``StockTable.tsv`` when listed; market cap and P/E ``None``.

        Raises:
            SymbolNotFoundError: no file for ``symbol``.
        """
        path = self._path_for(symbol)
        name = self._names().get(_product_symbol(path.stem))
        return Profile(name=name, source_ref=self.source_ref(symbol=symbol))

    def source_ref(self, *, symbol: str) -> str:
        """``csv:<absolute path of the file>``, e.g. ``csv:/data/stocknet/AAPL.csv``."""
        return f"csv:{self._path_for(symbol)}"
