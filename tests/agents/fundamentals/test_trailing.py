"""Trailing EPS and P/E from the earnings calendar, on the price's share basis, checked by hand
against the raw rows of the calendar and the embedded prices (read here with the csv module and
pandas, not through the code under test), and the split table against QuantConnect Lean's
factor files (an independent source)."""

from __future__ import annotations

import csv
import gzip
import importlib.resources
from datetime import date
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest

from agents.data.fundamentals.earnings import default_calendar
from agents.data.fundamentals.splits import split_factor
from agents.data.fundamentals.trailing import Price, trailing_values
from agents.data.market.embedded import EmbeddedProvider
from agents.tools.catalog import run_tool
from agents.tools.registry import ToolContext
from core.settings import Settings
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.usefixtures("clean_settings")

LEAN_FACTORS = SHARED_DATA / "ohlcv" / "lean" / "factor_files"


def _calendar_rows(symbol: str) -> dict[str, float]:
    """``{"Jan 23, 2013": reported_eps}`` straight from the wheel's CSV."""
    path = Path(str(importlib.resources.files("HistoricalEarningsData") / "data"))
    with (path / "aggregated_earnings_data_webscraped.csv").open(newline="") as handle:
        return {
            row["earnings_date"].rsplit(",", 1)[0]: float(row["reported_eps"])
            for row in csv.DictReader(handle)
            if row["symbol"] == symbol and row["reported_eps"] != "-"
        }


def _embedded_close(symbol: str, day: str) -> float:
    resource = importlib.resources.files("bokeh_sampledata").joinpath("_data/stocks.csv.gz")
    with resource.open("rb") as raw, gzip.open(raw, "rt") as text:
        frame = pd.read_csv(text)
    row = frame[(frame["Ticker"] == symbol) & (frame["Date"] == day)]
    return float(row["Close"].iloc[0])


def _ctx(as_of: date) -> ToolContext:
    return ToolContext(
        settings=Settings(data_fundamentals_dir=None), as_of=as_of, provider=EmbeddedProvider()
    )


def test_aapl_pe_at_the_end_of_the_embedded_data_by_hand() -> None:
    rows = _calendar_rows("AAPL")
    # the four reports known at the close of 2013-03-01, as the calendar prints them (2025 shares)
    quarters = [rows["Jan 23, 2013"], rows["Oct 25, 2012"], rows["Jul 24, 2012"], rows["Apr 24, 2012"]]
    assert quarters == [0.49, 0.31, 0.33, 0.44]
    # 7-for-1 (2014-06-09) × 4-for-1 (2020-08-31) = 28 shares of 2025 per share of 2013
    eps_2013_shares = sum(quarters) * 28  # 43.96 USD (Apple printed 13.81 + 8.67 + 9.32 + 12.30 = 44.10)
    assert eps_2013_shares == pytest.approx(43.96)
    close = _embedded_close("AAPL", "2013-03-01")
    assert close == 430.47  # as traded: the embedded Close is not split-adjusted

    env = run_tool(name="get_fundamentals", arguments={"symbols": ["AAPL"]}, ctx=_ctx(date(2013, 3, 1)))
    assert env.ok and env.data
    entry = env.data["fundamentals"][0]
    assert entry["eps_actual"] == pytest.approx(43.96)
    assert entry["pe_ratio"] == pytest.approx(round(430.47 / 43.96, 2))  # 9.79
    assert entry["pe_ratio"] == pytest.approx(430.47 / 44.10, rel=0.01)  # within 1 % of Apple's own EPS
    assert entry["timestamp"] == "2013-03-01"
    assert entry["field_sources"]["pe_ratio"].startswith("HistoricalEarningsData")
    # the citations name the four calendar rows and the price bar
    assert any(r.endswith("#AAPL@2013-01-23") for r in env.source_refs)
    assert any("stocks.csv.gz#AAPL" in r and r.endswith("@2013-03-01") for r in env.source_refs)
    assert entry["trailing_eps"]["split_factor"] == "28"


def test_eps_growth_and_mean_surprise_by_hand() -> None:
    cal = default_calendar()
    got = trailing_values(cal, "AAPL", date(2013, 3, 1), price=None, price_reason="not asked")
    assert got is not None
    values = got.values.values
    # the four quarters before: Jan 24 2012 0.50, Oct 18 2011 0.25, Jul 19 2011 0.28, Apr 20 2011 0.23
    assert values["eps_growth_yoy"] == pytest.approx(1.57 / 1.26 - 1, abs=1e-6)
    # surprises +2.52 %, -0.92 %, -10.12 %, +22.56 % (the file's percentages)
    assert values["eps_surprise_mean_4q"] == pytest.approx((0.0252 - 0.0092 - 0.1012 + 0.2256) / 4)
    assert got.values.reasons["pe_ratio"] == "not asked"


def test_a_price_on_a_later_share_basis_is_not_mixed() -> None:
    # The first session after the 7-for-1 (2014-06-09, AAPL underlying close 93.70 in the shared
    # Lean option chain of that day): only the 2020 4-for-1 remains, the factor is 4.
    cal = default_calendar()
    got = trailing_values(
        cal, "AAPL", date(2014, 6, 9), price=Price(close=93.70, day=date(2014, 6, 9), ref="lean:AAPL")
    )
    assert got is not None
    # Apr 23 2014 0.42, Jan 27 2014 0.52, Oct 28 2013 0.30, Jul 23 2013 0.27 → 1.51 × 4 = 6.04
    assert got.values.values["eps_actual"] == pytest.approx(6.04)
    assert got.values.values["pe_ratio"] == pytest.approx(round(93.70 / 6.04, 2))


def test_refusals_say_why() -> None:
    cal = default_calendar()
    # AAPL mid 2008: 0.04 + 0.06 + 0.04 + 0.03 = 0.17 on 2025 shares; rounding to 0.01 per
    # quarter can be 0.02 off, 12 % of the sum: too coarse to convert (× 28)
    early = trailing_values(cal, "AAPL", date(2008, 6, 30), price=None)
    assert early is not None and "too small to convert" in early.values.reasons["pe_ratio"]
    # FB at the end of the embedded data: three reports since the 2012 IPO
    fb = trailing_values(cal, "FB", date(2013, 3, 1), price=None)
    assert fb is not None and "3 reported quarter(s)" in fb.values.reasons["pe_ratio"]
    # a symbol without a split history on file gets no P/E on a guessed basis
    ko = trailing_values(cal, "KO", date(2013, 3, 1), price=None)
    assert ko is not None and "no split history of KO" in ko.values.reasons["pe_ratio"]
    assert trailing_values(cal, "ZZZZ", date(2013, 3, 1), price=None) is None


def _lean_split_factor(symbol: str, day: date) -> float:
    """Lean's cumulative split factor for ``day``: the first row dated on or after it."""
    frame = pd.read_csv(LEAN_FACTORS / f"{symbol.lower()}.csv", header=None, names=["d", "p", "s", "ref"])
    frame["d"] = pd.to_datetime(frame["d"].astype(str), format="%Y%m%d")
    return float(frame[frame["d"] >= pd.Timestamp(day)]["s"].iloc[0])


@pytest.mark.parametrize(
    ("symbol", "day"),
    [
        ("AAPL", date(2005, 2, 25)),  # before the 2005 2-for-1: Lean 1/56 through 2021
        ("AAPL", date(2014, 6, 6)),  # before the 7-for-1: 1/28
        ("AAPL", date(2020, 8, 28)),  # before the 4-for-1: 1/4
        ("AAPL", date(2020, 9, 1)),  # after every split: 1
        ("GOOGL", date(2014, 4, 1)),  # before the Class C dividend: 1/2 (Lean ends before 2022)
    ],
)
def test_split_table_agrees_with_lean_factor_files(symbol: str, day: date) -> None:
    if not LEAN_FACTORS.is_dir():
        pytest.skip(f"Lean factor files not found at {LEAN_FACTORS} (only present in the workplace)")
    ours = split_factor(symbol, after=day, through=date(2021, 3, 31))  # Lean's data ends 2021-03-31
    assert ours is not None
    assert float(1 / ours) == pytest.approx(_lean_split_factor(symbol, day), rel=1e-5)


def test_split_table_agrees_with_the_embedded_adjustment() -> None:
    # bokeh_sampledata: Adj Close / Close doubles across AAPL's 2005-02-28 2-for-1 (a dividend-free
    # stretch then), the split the table lists.
    bars = EmbeddedProvider().bars(symbol="AAPL", start=date(2005, 2, 24), end=date(2005, 3, 1))
    ratio = bars["adj_close"] / bars["close"]
    assert float(ratio.loc["2005-02-28"] / ratio.loc["2005-02-25"]) == pytest.approx(2.0, rel=1e-3)
    assert split_factor("AAPL", after=date(2005, 2, 25), through=date(2005, 3, 1)) == Fraction(2)
    assert split_factor("AAPL", after=date(1999, 1, 1)) is None  # before the table is complete


def test_a_source_whose_close_already_divides_out_a_later_split_is_detected() -> None:
    # stocknet's CSVs carry closes split-adjusted to 2017 (AAPL 2013-03-01: 61.495716, as traded
    # 430.47 = 61.4957 × 7); the 7-for-1 of 2014-06-09 shows no drop there, so the bars are put
    # back on the 2013 share basis and both sources give the same close and P/E
    stocknet = SHARED_DATA / "ohlcv" / "stocknet"
    if not (stocknet / "AAPL.csv").is_file():
        pytest.skip(f"stocknet CSVs not found at {stocknet} (only present in the workplace)")
    from agents.data.market.csv_folder import CsvFolderProvider

    ctx = ToolContext(
        settings=Settings(data_fundamentals_dir=None),
        as_of=date(2013, 3, 1),
        provider=CsvFolderProvider(data_dir=stocknet),
    )
    env = run_tool(name="get_fundamentals", arguments={"symbols": ["AAPL"]}, ctx=ctx)
    assert env.ok and env.data
    entry = env.data["fundamentals"][0]
    assert entry["trailing_eps"]["price"]["close"] == pytest.approx(61.495716 * 7)  # 430.47
    # 9.79, as on the embedded data
    assert entry["pe_ratio"] == pytest.approx(round(61.495716 * 7 / 43.96, 2))
