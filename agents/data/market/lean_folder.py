"""The ``lean`` provider: QuantConnect Lean daily equity files with their factor files, offline.

Layout (``shared/data/ohlcv/lean/``): ``<TICKER>.csv`` with ``Date,Open,High,Low,Close,Volume``
(raw prices, as traded, USD) and ``factor_files/<ticker>.csv`` in Lean's factor-file format,
one row per corporate action, no header: ``YYYYMMDD,price_factor,split_factor,ref_price``.

Adjustment (Lean ``FactorFile`` semantics, checked on the data): the factors of a row apply to
every bar dated on or before the row's date and after the previous row's; the row's date is
the last trading day before an ex-date and ``ref_price`` that day's raw close. The adjusted
close is ``close × price_factor × split_factor`` (dividends and splits, like Yahoo's
``Adj Close``). Check on SPY's 2012-03-16 ex-date (dividend 0.6139): rows ``20120315,0.8335844``
and ``20120614,0.8372375``; closes 140.72 (03-15) and 140.27 (03-16); adjusted return
140.27 × 0.8372375 / (140.72 × 0.8335844) − 1 = 0.1171 %, total return (140.27 + 0.6139) /
140.72 − 1 = 0.1165 % (the factor file's 7-digit rounding).

Used as the scorecard's benchmark source (``FINAGENT_ANALYSIS_BENCHMARK_DATA_DIR`` pointing at a Lean
folder: SPY 1998-01-02 .. 2021-03-31 covers the stocknet years).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd

from agents.data.market.bars import ParsedBars, bars_from_yahoo_frame
from agents.data.market.base import SymbolNotFoundError
from agents.data.market.csv_folder import CsvFolderProvider

FACTOR_DIR = "factor_files"


def is_lean_folder(path: Path) -> bool:
    """True when ``path`` holds a ``factor_files/`` folder (Lean's layout)."""
    return (Path(path) / FACTOR_DIR).is_dir()


def read_factor_file(path: Path) -> pd.DataFrame:
    """A Lean factor file as ``{date, factor}`` rows (``factor`` = price × split factor), by date.

    Raises:
        ValueError: a row that is not ``YYYYMMDD,price_factor,split_factor[,ref_price]``.
    """
    rows: list[tuple[pd.Timestamp, float]] = []
    with path.open(newline="") as handle:
        for line in csv.reader(handle):
            if not line or not line[0].strip():
                continue
            try:
                day = pd.Timestamp(line[0].strip())
                factor = float(line[1]) * float(line[2])
            except (IndexError, ValueError) as exc:
                raise ValueError(f"{path.name}: not a Lean factor row: {line!r}") from exc
            rows.append((day, factor))
    frame = pd.DataFrame(rows, columns=["date", "factor"]).sort_values("date", ignore_index=True)
    if frame.empty:
        raise ValueError(f"{path.name}: an empty factor file")
    return frame


def factors_for(dates: pd.DatetimeIndex, factors: pd.DataFrame) -> np.ndarray:
    """The factor of each date: that of the first factor row dated on or after it (module
    docstring); dates after the last row get 1 (no later action known)."""
    rows = factors["date"].to_numpy(dtype="datetime64[ns]")
    idx = np.searchsorted(rows, dates.to_numpy(dtype="datetime64[ns]"), side="left")
    values = np.append(factors["factor"].to_numpy(dtype=np.float64), 1.0)
    return values[idx]


class LeanFolderProvider(CsvFolderProvider):
    """Daily bars from a Lean folder (``name = "lean"``): raw OHLCV plus the adjusted close from
    the factor file (module docstring). Without a factor file the adjusted close is the raw close
    (stated in the log of the parse). Prices USD; profiles carry no name, market cap or P/E.

    Raises:
        ValueError: ``data_dir`` is not an existing directory.
    """

    name = "lean"

    def _parse(self, *, path: Path, symbol: str) -> ParsedBars:  # type: ignore[override]
        raw = pd.read_csv(path, dtype=str, keep_default_na=False)
        factor_path = self.data_dir / FACTOR_DIR / f"{path.stem.lower()}.csv"
        try:
            if factor_path.is_file():
                dates = pd.DatetimeIndex(pd.to_datetime(raw["Date"], errors="coerce"))
                closes = pd.to_numeric(raw["Close"], errors="coerce").to_numpy(dtype=np.float64)
                adj = closes * factors_for(dates, read_factor_file(factor_path))
                raw["Adj Close"] = [repr(float(v)) for v in adj]
            else:
                raw["Adj Close"] = raw["Close"]
            return bars_from_yahoo_frame(raw=raw, date_column="Date")
        except (KeyError, ValueError) as exc:
            raise SymbolNotFoundError(f"{symbol}: {path.name} is not a Lean daily file ({exc})") from exc

    def source_ref(self, *, symbol: str) -> str:
        """``lean:<absolute path of the file>`` (its factor file beside it in ``factor_files/``)."""
        return f"lean:{self._path_for(symbol)}"
