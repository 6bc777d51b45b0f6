"""The Lean daily folder (``agents.data.market.lean_folder``) on the real SPY file of
``shared/data/ohlcv/lean`` (QuantConnect/Lean, Apache-2.0): raw bars, factor-file adjustment,
and the scorecard's benchmark return through it."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pandas as pd
import pytest

from agents.data.market.base import SymbolNotFoundError
from agents.data.market.lean_folder import LeanFolderProvider, factors_for, is_lean_folder, read_factor_file
from core.settings import Settings
from tests.conftest import SHARED_DATA

LEAN = SHARED_DATA / "ohlcv" / "lean"


@pytest.fixture
def lean_dir() -> Path:
    if not (LEAN / "SPY.csv").is_file():
        pytest.skip(f"shared Lean data not found at {LEAN} (only present in the workplace)")
    return LEAN


def test_factor_rows_apply_to_dates_on_or_before_them(lean_dir: Path) -> None:
    factors = read_factor_file(lean_dir / "factor_files" / "spy.csv")
    days = pd.DatetimeIndex(["2012-03-15", "2012-03-16", "2012-06-14", "2050-12-31", "2060-01-01"])
    # rows 20120315 → 0.8335844, 20120614 → 0.8372375, 20501231 → 1 (file); after it: 1
    assert factors_for(days, factors).tolist() == [0.8335844, 0.8372375, 0.8372375, 1.0, 1.0]


def test_bars_are_raw_with_a_dividend_adjusted_close(lean_dir: Path) -> None:
    provider = LeanFolderProvider(data_dir=lean_dir)
    assert is_lean_folder(lean_dir) and "SPY" in provider.symbols()
    bars = provider.bars(symbol="SPY", start=date(2012, 3, 15), end=date(2012, 3, 22))
    assert bars["close"].tolist() == [140.72, 140.27, 140.88, 140.41, 140.16, 139.16]
    # adjusted = close × factor of the first row on or after the date (hand: 140.72 × 0.8335844)
    assert bars["adj_close"].iloc[0] == pytest.approx(140.72 * 0.8335844, rel=1e-12)
    assert bars["adj_close"].iloc[-1] == pytest.approx(139.16 * 0.8372375, rel=1e-12)
    assert provider.latest_date(symbol="SPY") == date(2021, 3, 31)
    assert provider.source_ref(symbol="SPY").startswith("lean:") and provider.name == "lean"


def test_raw_closes_agree_with_the_pandas_ta_spy_file(lean_dir: Path) -> None:
    # a second, independent source of SPY closes (shared/data/ohlcv/spy/SPY_D.csv): over the 1,258
    # stocknet-era days both cover, measured: median difference 0.005 %, 99th percentile 0.083 %,
    # largest 0.256 % (2013-06-28; the sources take the close at slightly different times)
    other = pd.read_csv(SHARED_DATA / "ohlcv" / "spy" / "SPY_D.csv", index_col=0, parse_dates=["date"])
    other = other.set_index("date")["close"]
    ours = LeanFolderProvider(data_dir=lean_dir).bars(
        symbol="SPY", start=date(2012, 9, 4), end=date(2017, 9, 1)
    )
    joined = pd.concat([ours["close"], other], axis=1, join="inner").dropna()
    assert len(joined) > 1200
    diff = (joined.iloc[:, 0] / joined.iloc[:, 1] - 1).abs()
    assert diff.median() < 0.0001 and diff.quantile(0.99) < 0.001 and diff.max() < 0.003


def test_unknown_symbol_is_symbol_not_found(lean_dir: Path) -> None:
    with pytest.raises(SymbolNotFoundError):
        LeanFolderProvider(data_dir=lean_dir).bars(symbol="ZZZZ", start=None, end=date(2012, 3, 22))


def test_scorecard_benchmark_reads_spy_from_a_lean_folder(lean_dir: Path, tmp_path: Path) -> None:
    from apps.scorecard import PriceBook

    book = PriceBook.from_settings(Settings(service_state_dir=tmp_path, analysis_benchmark_data_dir=lean_dir))
    got = book.benchmark_return(start=date(2012, 3, 15), end=date(2012, 3, 22), universe=["AAPL"])
    assert got is not None
    ret, name = got
    # hand: 139.16 × 0.8372375 / (140.72 × 0.8335844) − 1 = 116.50997 / 117.30200 − 1 = −0.0067520
    # (raw closes alone: −1.109 %; the 0.6139 dividend of the 2012-03-16 ex-date is in the
    # adjusted return)
    assert name == "SPY" and ret == pytest.approx(-0.0067520, abs=2e-7)
