"""The ``csv`` provider: a folder of Yahoo-format daily CSVs, one file per ticker.

Each file is ``<TICKER>.csv`` with the header ``Date,Open,High,Low,Close,Adj Close,Volume`` (what
Yahoo Finance's download button and ``yfinance`` write). Share classes use Yahoo's dash in file
names (``BRK-A.csv``) while the product writes them with a dot (``BRK.A``); both spellings are
accepted. An optional ``StockTable.tsv`` (``Sector<TAB>Symbol<TAB>Company``, symbols written
``$XOM``) supplies company names. Example folder: ``shared/data/ohlcv/stocknet/`` (88 tickers,
2012-09-04 .. 2017-09-01, from yumoxu/stocknet-dataset).

Column mapping and the ``end``-date rule shared with the other providers live in
:mod:`agents.data.market.bars`. Prices are served as the files hold them: Yahoo's ``Close`` is
split-adjusted to the day of the download (stocknet's AAPL 2014-03-07: 75.78, traded 530.44),
which the tools undo for the splits they know (:mod:`agents.data.fundamentals.share_basis`).
"""

from __future__ import annotations

import csv
import logging
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Final

import pandas as pd

from agents.data.market.bars import ParsedBars, bars_from_yahoo_frame, select_window
from agents.data.market.base import (
    Profile,
    SymbolNotFoundError,
)
from core.settings.data import DataSettings

logger = logging.getLogger(__name__)

STOCK_TABLE_FILENAME = "StockTable.tsv"

# Symbols reach us normalised (core.tickers), but a file name built from one must never
# escape the folder, so anything outside this alphabet is refused before touching the disk.
_SAFE_SYMBOL_RE = re.compile(r"^[A-Z0-9][A-Z0-9.\-]{0,15}$")


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


# Parsed files shared by every CsvFolderProvider in the process, keyed by path and refreshed
# when the file's mtime changes; a lock keeps concurrent worker threads from parsing the same
# file twice. Least recently used first out past the provider's ``cache_files``
# (FINAGENT_DATA_CSV_CACHE_FILES): bounding it by the folder was not enough (a 5,000-ticker night took
# a pool child to 792 MB, docs/benchmarks.md, "A night at scale"), while a backtest, which reads
# the same few files for every date, still hits.
#: The default bound: FINAGENT_DATA_CSV_CACHE_FILES's default, kept in the settings only (a parsed
#: 5-year daily file is ~0.2 MB: the cache holds bound x 0.2 MB at most).
FILE_CACHE_MAX: Final[int] = DataSettings.model_fields["csv_cache_files"].default
_FILE_CACHE: OrderedDict[Path, _CacheEntry] = OrderedDict()
_NAMES_CACHE: dict[Path, tuple[int, dict[str, str]]] = {}
_CACHE_LOCK = threading.Lock()


class CsvFolderProvider:
    """Daily bars from a folder of Yahoo-format CSV files (``name = "csv"``), fully offline.

    Args:
        data_dir: the folder (e.g. ``FINAGENT_DATA_DIR=../shared/data/ohlcv/stocknet``).
        cache_files: how many parsed files the process-wide cache keeps after a parse by this
            provider (least recently used out; ``FINAGENT_DATA_CSV_CACHE_FILES``, default
            :data:`FILE_CACHE_MAX`).
    Raises:
        ValueError: ``data_dir`` is not an existing directory, or ``cache_files`` < 1.

    Prices are USD as in the files: ``open..close`` as traded, ``adj_close`` split- and
    dividend-adjusted. Profiles carry the company name from ``StockTable.tsv`` when present;
    market cap and P/E are always ``None`` (the files do not hold them).
    """

    name = "csv"

    def __init__(self, *, data_dir: Path, cache_files: int = FILE_CACHE_MAX) -> None:
        data_dir = Path(data_dir).expanduser()
        if not data_dir.is_dir():
            raise ValueError(f"csv provider: data directory {str(data_dir)!r} is not an existing folder")
        if cache_files < 1:
            raise ValueError(f"csv provider: cache_files must be at least 1, not {cache_files}")
        self.data_dir = data_dir.resolve()
        self.cache_files = cache_files

    # -- files -------------------------------------------------------------------------------

    def _path_for(self, symbol: str) -> Path:
        """The file holding ``symbol``, trying the given spelling then the dash/dot variant."""
        if not _SAFE_SYMBOL_RE.fullmatch(symbol):
            raise SymbolNotFoundError(f"{symbol!r}: not a symbol the csv provider can look up")
        for stem in dict.fromkeys((symbol, _file_stem(symbol), symbol.replace("-", "."))):
            path = self.data_dir / f"{stem}.csv"
            if path.is_file():
                return path
        # what a user reads (CLI, API, console): the tickers there are, never the server's folder
        known = self.symbols()
        examples = ", ".join(known[:8]) + (", ..." if len(known) > 8 else "")
        raise SymbolNotFoundError(
            f"{symbol}: not in the csv data ({len(known)} tickers: {examples})"
            if known
            else f"{symbol}: not in the csv data (the folder holds no CSV file)"
        )

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
                while len(_FILE_CACHE) > self.cache_files:
                    _FILE_CACHE.popitem(last=False)
            _FILE_CACHE.move_to_end(path)
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
