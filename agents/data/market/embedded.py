"""The ``embedded`` provider: real daily bars that ship inside the ``bokeh_sampledata`` wheel.

Source: ``bokeh_sampledata/_data/stocks.csv.gz`` (columns ``Ticker,Date,Open,High,Low,Close,
Volume,Adj Close``; public-domain Quandl WIKI prices), 12,154 rows: AAPL, IBM and MSFT from
2000-03-01 to 2013-03-01, GOOG from 2004-08-19, FB from 2012-05-18. ``Close`` is the price as
traded (AAPL's 2:1 split shows as 88.99 on 2005-02-25 → 44.86 on 2005-02-28); ``Adj Close`` is
split- and dividend-adjusted. The file is read with ``importlib.resources`` and pandas, without
importing bokeh, once per process.
"""

from __future__ import annotations

import functools
import gzip
import importlib.metadata
import importlib.resources
import threading
from datetime import date

import pandas as pd

from agents.data.market.bars import bars_from_yahoo_frame, select_window
from agents.data.market.base import NoDataError, Profile, SymbolNotFoundError

PACKAGE = "bokeh_sampledata"
RESOURCE = "_data/stocks.csv.gz"

# The five companies in the file, named as they were during the data's span (GOOG is Google Inc.
# until 2013, before the Alphabet reorganisation).
COMPANY_NAMES: dict[str, str] = {
    "AAPL": "Apple Inc.",
    "FB": "Facebook, Inc.",
    "GOOG": "Google Inc.",
    "IBM": "International Business Machines Corporation",
    "MSFT": "Microsoft Corporation",
}

# Loaded once per process (the gzip is ~0.3 MB and parses in ~30 ms); the lock stops several
# worker threads from parsing it concurrently on first use.
_FRAMES: dict[str, pd.DataFrame] | None = None
_LOAD_LOCK = threading.Lock()


@functools.cache  # importlib.metadata scans site-packages: ~1 ms a call, called per tool call
def _package_version() -> str | None:
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return None


def _load_frames() -> dict[str, pd.DataFrame]:
    """Per-symbol contract frames parsed from the packaged file (cached for the process)."""
    global _FRAMES
    with _LOAD_LOCK:
        if _FRAMES is None:
            resource = importlib.resources.files(PACKAGE).joinpath(RESOURCE)
            with resource.open("rb") as handle, gzip.open(handle, "rt", encoding="utf-8") as text:
                raw = pd.read_csv(text, dtype={"Ticker": str, "Date": str})
            frames: dict[str, pd.DataFrame] = {}
            for ticker, rows in raw.groupby("Ticker", sort=True):
                parsed = bars_from_yahoo_frame(raw=rows, date_column="Date")
                if not parsed.frame.empty:
                    frames[str(ticker).strip().upper()] = parsed.frame
            _FRAMES = frames
        return _FRAMES


class EmbeddedProvider:
    """Daily bars for AAPL, FB, GOOG, IBM, MSFT from ``bokeh_sampledata`` (``name = "embedded"``).

    Works offline with no configuration (the product's default). Prices are USD; see the module
    docstring for spans and the split-adjustment caveat. Profiles carry only the company name
    (market cap and P/E are ``None``: the file does not hold them).
    """

    name = "embedded"

    def _frame(self, symbol: str) -> pd.DataFrame:
        frame = _load_frames().get(symbol)
        if frame is None:
            raise SymbolNotFoundError(
                f"{symbol}: not in the embedded dataset (available: {', '.join(self.symbols())})"
            )
        return frame

    def bars(self, *, symbol: str, start: date | None, end: date) -> pd.DataFrame:
        """Daily bars for ``symbol`` with ``start <= date <= end`` (contract frame, USD).

        Raises:
            SymbolNotFoundError: not one of the five embedded symbols.
            DateOutOfRangeError: ``end`` in the future, before the first bar, or more than
                7 days after the last one (2013-03-01).
            NoDataError: the window holds no trading day.
            ValueError: ``start`` after ``end``.
        """
        return select_window(frame=self._frame(symbol), symbol=symbol, start=start, end=end)

    def latest_date(self, *, symbol: str) -> date:
        """Date of the symbol's last bar (2013-03-01 for all five). Raises ``SymbolNotFoundError``."""
        frame = self._frame(symbol)
        if frame.empty:  # pragma: no cover - _load_frames keeps only non-empty frames
            raise NoDataError(f"{symbol}: no bars in the embedded dataset")
        last: date = frame.index[-1].date()
        return last

    def symbols(self) -> list[str]:
        """The embedded symbols, sorted: ``["AAPL", "FB", "GOOG", "IBM", "MSFT"]``."""
        return sorted(_load_frames())

    def profile(self, *, symbol: str) -> Profile:
        """Company name only; ``market_cap`` and ``pe_ratio`` are ``None``.

        Raises:
            SymbolNotFoundError: not an embedded symbol.
        """
        self._frame(symbol)
        return Profile(name=COMPANY_NAMES.get(symbol), source_ref=self.source_ref(symbol=symbol))

    def source_ref(self, *, symbol: str) -> str:
        """E.g. ``bokeh_sampledata/_data/stocks.csv.gz#AAPL (bokeh_sampledata 2026.1)``."""
        version = _package_version()
        suffix = f" ({PACKAGE} {version})" if version else ""
        return f"{PACKAGE}/{RESOURCE}#{symbol}{suffix}"
