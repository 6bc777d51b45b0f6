"""EmbeddedProvider against the real bokeh_sampledata stock file (no network, no bokeh import)."""

from __future__ import annotations

import subprocess
import sys
import threading
from datetime import date, timedelta
from pathlib import Path

import pandas as pd
import pytest

from agents.data.market import embedded
from agents.data.market.base import (
    BARS_COLUMNS,
    DateOutOfRangeError,
    MarketDataProvider,
    NoDataError,
    SymbolNotFoundError,
    adjusted_ohlc,
)
from agents.data.market.embedded import EmbeddedProvider

REPO_ROOT = Path(__file__).resolve().parents[3]
LAST_BAR = date(2013, 3, 1)


def assert_follows_contract(frame: pd.DataFrame) -> None:
    """The bar contract of agents.data.market.base."""
    assert tuple(frame.columns) == BARS_COLUMNS
    assert all(str(dtype) == "float64" for dtype in frame.dtypes)
    assert isinstance(frame.index, pd.DatetimeIndex)
    assert frame.index.name == "date"
    assert frame.index.tz is None
    assert (frame.index == frame.index.normalize()).all()
    assert frame.index.is_monotonic_increasing
    assert frame.index.is_unique
    assert not frame["close"].isna().any()
    assert not frame["adj_close"].isna().any()


@pytest.fixture
def provider() -> EmbeddedProvider:
    return EmbeddedProvider()


def test_is_a_market_data_provider(provider: EmbeddedProvider) -> None:
    assert isinstance(provider, MarketDataProvider)
    assert provider.name == "embedded"


def test_symbols_are_the_five_companies_in_the_file(provider: EmbeddedProvider) -> None:
    assert provider.symbols() == ["AAPL", "FB", "GOOG", "IBM", "MSFT"]


def test_aapl_spans_2000_to_2013_with_one_row_per_trading_day(provider: EmbeddedProvider) -> None:
    bars = provider.bars(symbol="AAPL", start=None, end=LAST_BAR)

    assert bars.index[0] == pd.Timestamp("2000-03-01")
    assert bars.index[-1] == pd.Timestamp("2013-03-01")
    # 13 years of NYSE sessions (~252 a year); the packaged file holds exactly 3,270.
    assert len(bars) == 3270
    assert provider.latest_date(symbol="AAPL") == LAST_BAR


def test_every_symbol_follows_the_bar_contract(provider: EmbeddedProvider) -> None:
    total = 0
    for symbol in provider.symbols():
        bars = provider.bars(symbol=symbol, start=None, end=LAST_BAR)
        assert_follows_contract(bars)
        assert (bars[["open", "high", "low", "close", "adj_close"]] > 0).all().all()
        total += len(bars)
    assert total == 12154  # every row of the packaged file, none dropped


def test_late_listings_start_at_their_first_trading_day(provider: EmbeddedProvider) -> None:
    assert provider.bars(symbol="GOOG", start=None, end=LAST_BAR).index[0] == pd.Timestamp("2004-08-19")
    assert provider.bars(symbol="FB", start=None, end=LAST_BAR).index[0] == pd.Timestamp("2012-05-18")


def test_aapl_2005_split_halves_raw_close_but_not_the_adjusted_close(provider: EmbeddedProvider) -> None:
    bars = provider.bars(symbol="AAPL", start=date(2005, 1, 3), end=date(2005, 3, 31))
    before, after = pd.Timestamp("2005-02-25"), pd.Timestamp("2005-02-28")

    raw_ratio = bars.loc[after, "close"] / bars.loc[before, "close"]
    assert bars.loc[before, "close"] == pytest.approx(88.99)
    assert bars.loc[after, "close"] == pytest.approx(44.86)
    assert raw_ratio == pytest.approx(0.5, abs=0.01)

    adjusted = adjusted_ohlc(bars)
    adjusted_move = adjusted.loc[after, "close"] / adjusted.loc[before, "close"] - 1
    assert abs(adjusted_move) < 0.05


@pytest.mark.parametrize(
    ("end", "expected_last"),
    [
        (date(2005, 2, 28), date(2005, 2, 28)),  # a trading day is included
        (date(2005, 2, 27), date(2005, 2, 25)),  # Sunday: the Friday before
        (date(2001, 9, 14), date(2001, 9, 10)),  # markets closed 9/11-9/14
        (date(2013, 3, 8), LAST_BAR),  # within 7 days of the last bar
    ],
)
def test_end_filter_never_returns_a_bar_after_end(
    provider: EmbeddedProvider, end: date, expected_last: date
) -> None:
    bars = provider.bars(symbol="MSFT", start=None, end=end)
    assert bars.index.max() <= pd.Timestamp(end)
    assert bars.index[-1].date() == expected_last


def test_start_is_inclusive(provider: EmbeddedProvider) -> None:
    bars = provider.bars(symbol="IBM", start=date(2010, 1, 4), end=date(2010, 1, 8))
    assert [d.date() for d in bars.index] == [date(2010, 1, d) for d in (4, 5, 6, 7, 8)]


def test_unknown_symbol_is_symbol_not_found(provider: EmbeddedProvider) -> None:
    with pytest.raises(SymbolNotFoundError, match="TSLA"):
        provider.bars(symbol="TSLA", start=None, end=LAST_BAR)
    with pytest.raises(SymbolNotFoundError):
        provider.latest_date(symbol="TSLA")
    with pytest.raises(SymbolNotFoundError):
        provider.profile(symbol="TSLA")


def test_end_in_the_future_is_out_of_range(provider: EmbeddedProvider) -> None:
    tomorrow = date.today() + timedelta(days=2)
    with pytest.raises(DateOutOfRangeError) as excinfo:
        provider.bars(symbol="AAPL", start=None, end=tomorrow)
    message = str(excinfo.value)
    assert "AAPL" in message
    assert tomorrow.isoformat() in message
    assert "2000-03-01..2013-03-01" in message


def test_end_before_the_first_bar_is_out_of_range(provider: EmbeddedProvider) -> None:
    with pytest.raises(DateOutOfRangeError, match=r"FB.*2012-05-17.*2012-05-18\.\.2013-03-01"):
        provider.bars(symbol="FB", start=None, end=date(2012, 5, 17))


def test_end_long_after_the_last_bar_is_out_of_range(provider: EmbeddedProvider) -> None:
    with pytest.raises(DateOutOfRangeError, match=r"AAPL.*2013-03-11.*2000-03-01\.\.2013-03-01"):
        provider.bars(symbol="AAPL", start=None, end=date(2013, 3, 11))


def test_a_window_without_trading_days_is_no_data(provider: EmbeddedProvider) -> None:
    with pytest.raises(NoDataError):
        provider.bars(symbol="AAPL", start=date(2005, 2, 26), end=date(2005, 2, 27))


def test_start_after_end_is_a_caller_error(provider: EmbeddedProvider) -> None:
    with pytest.raises(ValueError, match="after end"):
        provider.bars(symbol="AAPL", start=date(2005, 3, 1), end=date(2005, 2, 1))


def test_callers_cannot_corrupt_the_shared_data(provider: EmbeddedProvider) -> None:
    bars = provider.bars(symbol="AAPL", start=None, end=LAST_BAR)
    bars.loc[:, "close"] = -1.0
    again = provider.bars(symbol="AAPL", start=None, end=LAST_BAR)
    assert again.loc[pd.Timestamp("2005-02-25"), "close"] == pytest.approx(88.99)


def test_profile_has_the_name_and_nothing_invented(provider: EmbeddedProvider) -> None:
    profile = provider.profile(symbol="MSFT")
    assert profile.name == "Microsoft Corporation"
    assert profile.market_cap is None
    assert profile.pe_ratio is None
    assert profile.source_ref is not None
    assert "stocks.csv.gz#MSFT" in profile.source_ref


def test_source_ref_names_the_packaged_file_and_symbol(provider: EmbeddedProvider) -> None:
    assert provider.source_ref(symbol="AAPL").startswith("bokeh_sampledata/_data/stocks.csv.gz#AAPL")


def test_concurrent_first_use_loads_one_consistent_dataset(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a process that has not loaded the file yet
    monkeypatch.setattr(embedded, "_FRAMES", None)
    results: list[int] = []
    errors: list[BaseException] = []

    def read() -> None:
        try:
            results.append(len(EmbeddedProvider().bars(symbol="AAPL", start=None, end=LAST_BAR)))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    # When eight threads ask at once
    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    # Then all see the same full frame
    assert errors == []
    assert results == [3270] * 8


def test_reading_the_data_does_not_import_bokeh() -> None:
    code = (
        "import sys\n"
        "from datetime import date\n"
        "from agents.data.market.embedded import EmbeddedProvider\n"
        "EmbeddedProvider().bars(symbol='AAPL', start=None, end=date(2013, 3, 1))\n"
        "loaded = [m for m in sys.modules if m == 'bokeh' or m.startswith('bokeh.')]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, check=True, timeout=120)


def test_a_window_is_every_bar_between_start_and_end() -> None:
    """select_window's binary search on the contract's ascending index keeps exactly the bars
    with start <= date <= end, both ends included."""
    import random
    from datetime import timedelta

    from agents.data.market.bars import select_window

    frame = EmbeddedProvider()._frame("IBM")
    days = list(frame.index)
    rng = random.Random(3)
    for _ in range(100):
        end = days[0].date() + timedelta(days=rng.randrange(30, (days[-1] - days[0]).days))
        start = None if rng.random() < 0.2 else end - timedelta(days=rng.randrange(0, 900))
        window = select_window(frame=frame, symbol="IBM", start=start, end=end)
        inside = [d for d in frame.index if (start is None or d.date() >= start) and d.date() <= end]
        assert list(window.index) == inside
        assert window.equals(frame.loc[inside])
    # a window whose ends are trading days keeps both
    first, last = days[100].date(), days[140].date()
    assert list(select_window(frame=frame, symbol="IBM", start=first, end=last).index) == days[100:141]
