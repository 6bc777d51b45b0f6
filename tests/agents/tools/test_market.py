"""get_stock_data and get_history on the real embedded data: fields, point in time, splits."""

from __future__ import annotations

from datetime import date

import pandas as pd
import pytest

from agents.data.market.embedded import EmbeddedProvider
from agents.tools.catalog import run_tool
from agents.tools.history import history_frame
from agents.tools.registry import ToolContext
from core.settings import Settings


def _ctx(as_of: date) -> ToolContext:
    return ToolContext(settings=Settings(), as_of=as_of, provider=EmbeddedProvider())


def _raw_aapl() -> pd.DataFrame:
    import importlib.resources

    path = importlib.resources.files("bokeh_sampledata") / "_data/stocks.csv.gz"
    with path.open("rb") as fh:
        df = pd.read_csv(fh, compression="gzip")
    return df[df.Ticker == "AAPL"].set_index("Date")


def test_stock_data_seed_fields_match_the_source_rows() -> None:
    env = run_tool(name="get_stock_data", arguments={"symbol": "aapl"}, ctx=_ctx(date(2013, 3, 1)))
    assert env.ok and env.data
    d = env.data
    raw = _raw_aapl()
    assert d["symbol"] == "AAPL" and d["date"] == "2013-03-01"
    assert d["current_price"] == pytest.approx(raw.loc["2013-03-01", "Close"])
    assert d["volume"] == raw.loc["2013-03-01", "Volume"]
    # change from the previous session, computed here from the source's own columns
    prev_adj = (
        raw.loc["2013-02-28", "Adj Close"]
        * raw.loc["2013-03-01", "Close"]
        / raw.loc["2013-03-01", "Adj Close"]
    )
    assert d["change"] == pytest.approx(raw.loc["2013-03-01", "Close"] - prev_adj, abs=1e-3)
    assert d["change_percent"] == pytest.approx(d["change"] / prev_adj, abs=1e-5)
    assert d["52w_low"] <= d["current_price"] <= d["52w_high"]
    # the embedded data has no market cap: null with a reason, never invented; the P/E is the
    # earnings calendar's trailing one on the close's share basis: 430.47 / (1.57 × 28), hand-checked
    # in tests/agents/fundamentals/test_trailing.py, and cited
    assert d["market_cap"] is None and set(d["null_reasons"]) == {"market_cap"}
    assert d["pe_ratio"] == pytest.approx(round(raw.loc["2013-03-01", "Close"] / (1.57 * 28), 2))
    assert d["field_sources"]["pe_ratio"].endswith("#AAPL@2012-04-24..2013-01-23 (4 reported quarters)")
    # and the data source's "today" (the market clock): its last day
    assert d["market_clock"]["note"] == "data ends 2013-03-01 (embedded)"


def test_split_is_not_a_crash_in_change_or_52w_range() -> None:
    d = run_tool(name="get_stock_data", arguments={"symbol": "AAPL"}, ctx=_ctx(date(2005, 2, 28))).data
    assert d is not None
    assert d["current_price"] == pytest.approx(44.86)
    assert abs(d["change_percent"]) < 0.05  # the raw close halved (88.99 → 44.86)
    assert d["52w_high"] < 50  # in post-split prices


def test_history_never_returns_a_bar_after_as_of() -> None:
    env = run_tool(
        name="get_history", arguments={"symbol": "MSFT", "period": "1y"}, ctx=_ctx(date(2010, 6, 30))
    )
    assert env.ok and env.data
    stamps = [bar["timestamp"] for bar in env.data["history"]]
    assert max(stamps) == "2010-06-30" and min(stamps) >= "2009-06-30"
    assert 245 <= env.data["count"] <= 255
    frame = history_frame(env.data)
    assert list(frame.columns) == ["open", "high", "low", "close", "adj_close", "volume"]


@pytest.mark.parametrize(("period", "count"), [("1d", 1), ("5d", 5)])
def test_short_periods_count_trading_bars(period: str, count: int) -> None:
    env = run_tool(
        name="get_history", arguments={"symbol": "IBM", "period": period}, ctx=_ctx(date(2012, 12, 31))
    )
    assert env.data and env.data["count"] == count and env.data["last_date"] == "2012-12-31"


def test_weekly_bars_aggregate_daily_bars() -> None:
    ctx = _ctx(date(2012, 12, 31))
    daily = run_tool(name="get_history", arguments={"symbol": "IBM", "period": "3mo"}, ctx=ctx).data
    weekly = run_tool(
        name="get_history", arguments={"symbol": "IBM", "period": "3mo", "interval": "1wk"}, ctx=ctx
    ).data
    assert daily and weekly
    assert 12 <= weekly["count"] <= 15
    assert sum(b["volume"] for b in weekly["history"]) == sum(b["volume"] for b in daily["history"])
    assert max(b["high"] for b in weekly["history"]) == max(b["high"] for b in daily["history"])


@pytest.mark.parametrize("interval", ["5d", "1wk", "1mo", "3mo"])
def test_aggregated_bars_are_stamped_with_their_last_trading_day(interval: str) -> None:
    # as_of 2012-07-17 is a Tuesday mid-month: a calendar period-end label (pandas' default)
    # would stamp the last bar 2012-07-20 / 07-31 / 09-30, after as_of
    ctx = _ctx(date(2012, 7, 17))
    args = {"symbol": "AAPL", "period": "1y", "interval": interval}
    data = run_tool(name="get_history", arguments=args, ctx=ctx).data
    daily = run_tool(name="get_history", arguments={"symbol": "AAPL", "period": "1y"}, ctx=ctx).data
    assert data and daily
    trading_days = {b["timestamp"] for b in daily["history"]}
    stamps = [b["timestamp"] for b in data["history"]]
    assert stamps[-1] == data["last_date"] == "2012-07-17"
    assert set(stamps) <= trading_days  # every label is a real bar's date
    by_day = {b["timestamp"]: b for b in daily["history"]}
    assert all(b["close"] == by_day[b["timestamp"]]["close"] for b in data["history"])
    if interval == "1wk":
        assert stamps[-2] == "2012-07-13"  # the previous week's Friday


def test_adjusted_close_is_point_in_time() -> None:
    # bokeh_sampledata's Adj Close folds in AAPL's 2014 7:1 split and later dividends (about
    # 600 USD closes carry an Adj Close near 78); as of 2012-12-31 only the dividends paid by
    # then may count, in the prices traded that day
    raw = _raw_aapl().loc["2012-01-03":"2012-12-31"]
    env = run_tool(
        name="get_history", arguments={"symbol": "AAPL", "period": "1y"}, ctx=_ctx(date(2012, 12, 31))
    )
    assert env.ok and env.data
    bars = {b["timestamp"]: b for b in env.data["history"]}
    assert raw.loc["2012-12-31", "Adj Close"] < 0.2 * raw.loc["2012-12-31", "Close"]  # the vintage
    assert bars["2012-12-31"]["adjusted_close"] == pytest.approx(raw.loc["2012-12-31", "Close"])
    scale = raw.loc["2012-12-31", "Close"] / raw.loc["2012-12-31", "Adj Close"]
    for day in ("2012-01-03", "2012-08-08", "2012-08-09", "2012-11-06", "2012-11-07"):
        assert bars[day]["adjusted_close"] == pytest.approx(raw.loc[day, "Adj Close"] * scale)
    # AAPL went ex-dividend (2.65 USD) on 2012-08-09 and 2012-11-07: earlier bars are scaled down
    assert bars["2012-01-03"]["adjusted_close"] < bars["2012-01-03"]["close"]
    assert bars["2012-11-07"]["adjusted_close"] == pytest.approx(bars["2012-11-07"]["close"])


def test_intraday_interval_and_bad_period_get_clear_errors() -> None:
    ctx = _ctx(date(2012, 12, 31))
    env = run_tool(
        name="get_history", arguments={"symbol": "IBM", "period": "1mo", "interval": "5m"}, ctx=ctx
    )
    assert env.error is not None and env.error.code.value == "INVALID_INPUT" and "daily" in env.error.message
    env = run_tool(name="get_history", arguments={"symbol": "IBM", "period": "3w"}, ctx=ctx)
    assert env.error is not None and env.error.code.value == "INVALID_INPUT" and "period" in env.error.message


def test_date_outside_the_data_is_a_permanent_error() -> None:
    env = run_tool(name="get_stock_data", arguments={"symbol": "FB"}, ctx=_ctx(date(2010, 1, 4)))
    assert env.error is not None and env.error.code.value == "DATE_OUT_OF_RANGE"


def test_history_row_carries_the_source_adjusted_closes_and_the_factor_for_storage() -> None:
    # the stored row may keep the source's Adj Close (the same for every analysis date) and one
    # factor per date instead of every point-in-time value (db.blobs): they must give the
    # returned values exactly
    raw = _raw_aapl().loc["2012-01-03":"2012-12-31"]
    ctx = _ctx(date(2012, 12, 31))
    env = run_tool(name="get_history", arguments={"symbol": "AAPL", "period": "1y"}, ctx=ctx)
    assert env.ok and env.data
    basis = ctx.rows[-1]["result_basis"]["history"]["adjusted_close"]
    bars = env.data["history"]
    assert len(basis["base"]) == len(bars)
    for bar, base in zip(bars, basis["base"], strict=True):
        assert base == pytest.approx(raw.loc[bar["timestamp"], "Adj Close"])
        assert base * basis["scale"] == bar["adjusted_close"]
    assert "result_basis" not in env.data
    # weekly bars are aggregated: no basis, the values are stored as they are
    weekly = _ctx(date(2012, 12, 31))
    run_tool(name="get_history", arguments={"symbol": "AAPL", "period": "1y", "interval": "1wk"}, ctx=weekly)
    assert "result_basis" not in weekly.rows[-1]
