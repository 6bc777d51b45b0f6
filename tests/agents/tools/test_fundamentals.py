"""get_fundamentals on the real offline snapshots: values traced to source columns, point in time
(refusing later snapshots, SEC facts filed ≤ as_of), every error code."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from agents.data.fundamentals.offline import SEED_FIELDS
from agents.data.market.embedded import EmbeddedProvider
from agents.tools.catalog import run_tool
from agents.tools.registry import ToolContext
from core.settings import Settings
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.usefixtures("clean_settings")

FUND_DIR = SHARED_DATA / "fundamentals"


@pytest.fixture
def fund_dir() -> Path:
    if not (FUND_DIR / "sp500").is_dir():
        pytest.skip(f"shared fundamentals not found at {FUND_DIR} (only present in the workplace)")
    return FUND_DIR


def _ctx(as_of: date, **settings: Any) -> ToolContext:
    return ToolContext(settings=Settings(**settings), as_of=as_of, provider=EmbeddedProvider())


def _call(as_of: date, fund_dir: Path | None, **args: Any) -> Any:
    return run_tool(name="get_fundamentals", arguments=args, ctx=_ctx(as_of, data_fundamentals_dir=fund_dir))


def test_after_the_sp500_snapshot_values_come_from_its_columns(fund_dir: Path) -> None:
    env = _call(date(2026, 9, 1), fund_dir, symbols=["MSFT"])
    assert env.ok and env.data
    entry = env.data["fundamentals"][0]
    assert set(SEED_FIELDS) <= set(entry) and entry["timestamp"] == "2026-08-22"
    sp = pd.read_csv(fund_dir / "sp500" / "constituents-financials.csv").set_index("Symbol").loc["MSFT"]
    assert entry["pe_ratio"] == pytest.approx(sp["Price/Earnings"])
    assert entry["eps_actual"] == pytest.approx(sp["Earnings/Share"])
    assert entry["field_sources"]["pe_ratio"].startswith("sp500/")
    av = pd.read_csv(fund_dir / "alphavantage" / "fundamentals.csv").set_index("Symbol").loc["MSFT"]
    assert entry["peg_ratio"] == pytest.approx(float(av["PEGRatio"]))
    assert entry["gross_margin"] == pytest.approx(
        float(av["grossProfit"]) / float(av["totalRevenue"]), abs=1e-4
    )
    for name in ("ev_ebitda", "eps_consensus", "earnings_date", "current_ratio", "debt_to_equity"):
        assert entry[name] is None and entry["null_reasons"][name]


def test_a_snapshot_dated_after_as_of_is_refused(fund_dir: Path) -> None:
    env = _call(
        date(2024, 6, 1), fund_dir, symbols=["AAPL"], metrics=["pe_ratio", "eps_actual", "price_to_book"]
    )
    assert env.ok and env.data
    entry = env.data["fundamentals"][0]
    av = pd.read_csv(fund_dir / "alphavantage" / "fundamentals.csv").set_index("Symbol").loc["AAPL"]
    # the 2026 S&P snapshot is refused; the Alpha Vantage overview (dated FY end + 90 d) is used
    assert entry["pe_ratio"] == pytest.approx(float(av["PERatio"]))
    assert (
        entry["price_to_book"] is None and "after as_of 2024-06-01" in entry["null_reasons"]["price_to_book"]
    )
    assert {"source": "sp500", "dated": "2026-08-22"}.items() <= entry["refused"][0].items()
    assert entry["timestamp"] <= "2024-06-01"
    # before every source (ADM: in the snapshots, not in the earnings calendar): a permanent
    # DATE_OUT_OF_RANGE
    env = _call(date(2013, 3, 1), fund_dir, symbols=["ADM"])
    assert env.error is not None and env.error.code.value == "DATE_OUT_OF_RANGE"


def test_sec_facts_are_used_only_when_filed_by_as_of(fund_dir: Path) -> None:
    doc = json.loads(next((fund_dir / "sec_companyfacts").glob("TSLA_*.json")).read_text())
    gaap = doc["facts"]["us-gaap"]

    def fy(concept: str, end: str, unit: str = "USD") -> float:
        return next(
            f["val"]
            for f in gaap[concept]["units"][unit]
            if f["form"] == "10-K" and f["end"] == end and f.get("fp") == "FY"
        )

    # FY2020 10-K was filed 2021-02-08: on 2021-02-07 only FY2019 is known, on 2021-06-01 FY2020
    before = _call(date(2021, 2, 7), fund_dir, symbols=["TSLA"], metrics=["current_ratio", "eps_actual"])
    after = _call(date(2021, 6, 1), fund_dir, symbols=["TSLA"], metrics=["current_ratio", "eps_actual"])
    assert before.data and after.data
    b, a = before.data["fundamentals"][0], after.data["fundamentals"][0]
    assert a["current_ratio"] == pytest.approx(
        fy("AssetsCurrent", "2020-12-31") / fy("LiabilitiesCurrent", "2020-12-31"), abs=1e-4
    )
    assert b["current_ratio"] == pytest.approx(
        fy("AssetsCurrent", "2019-12-31") / fy("LiabilitiesCurrent", "2019-12-31"), abs=1e-4
    )
    assert a["field_sources"]["current_ratio"].endswith("#10-K@2020-12-31")
    assert a["timestamp"] <= "2021-06-01" and b["timestamp"] <= "2021-02-07"
    # SNOW: no debt concept in its filings → null with the reason, never invented
    snow = _call(date(2025, 6, 1), fund_dir, symbols=["SNOW"]).data
    assert snow is not None
    s = snow["fundamentals"][0]
    assert s["gross_margin"] is not None and s["debt_to_equity"] is None
    assert "LongTermDebt" in s["null_reasons"]["debt_to_equity"]


def test_unknown_symbol_entry_and_every_error_code(fund_dir: Path, tmp_path: Path) -> None:
    env = _call(date(2026, 9, 1), fund_dir, symbols=["AAPL", "ZZZZ"])
    assert env.ok and env.data
    assert env.data["fundamentals"][1] == {
        "symbol": "ZZZZ",
        "error": {"code": "INVALID_SYMBOL", "message": env.data["fundamentals"][1]["error"]["message"]},
    }
    env = _call(date(2026, 9, 1), fund_dir, symbols=["ZZZZ"])
    assert env.error is not None and env.error.code.value == "INVALID_SYMBOL"
    env = _call(date(2026, 9, 1), fund_dir, symbols=["AAPL"], metrics=["pe_ratio", "moat"])
    assert env.error is not None and env.error.code.value == "INVALID_INPUT" and "moat" in env.error.message
    # no folder: the earnings calendar alone answers (trailing EPS / P/E), so a symbol it lacks
    # is INVALID_SYMBOL and a date past its coverage (last AAPL report 2024-08-01) is refused
    env = _call(date(2013, 3, 1), None, symbols=["ADM"])
    assert env.error is not None and env.error.code.value == "INVALID_SYMBOL"
    env = _call(date(2026, 9, 1), None, symbols=["AAPL"])
    assert env.error is not None and env.error.code.value == "DATE_OUT_OF_RANGE"
    env = _call(date(2026, 9, 1), tmp_path / "missing", symbols=["AAPL"])
    assert env.error is not None and env.error.code.value == "NOT_CONFIGURED"
    assert env.retry_hint and "FINAGENT_DATA_FUNDAMENTALS_DIR" in env.retry_hint


def test_earnings_fields_come_from_the_calendar_without_dating_the_ratios(fund_dir: Path) -> None:
    # HistoricalEarningsData: AAPL,"Oct 31, 2024, 4 PMEDT",1.55,-,- (11 days after as_of)
    env = _call(date(2024, 10, 20), fund_dir, symbols=["AAPL"])
    assert env.ok and env.data
    entry = env.data["fundamentals"][0]
    assert entry["earnings_date"] == "2024-10-31" and entry["eps_consensus"] == 1.55
    assert entry["field_sources"]["earnings_date"].endswith("#AAPL@2024-10-31")
    # the ratios' date is still the Alpha Vantage file's, not the calendar's as_of
    assert entry["timestamp"] < "2024-10-20"
    # 2012: the snapshots are later, but the calendar alone still answers
    early = _call(date(2012, 7, 17), fund_dir, symbols=["AAPL"])
    assert early.ok and early.data
    e = early.data["fundamentals"][0]
    assert (e["earnings_date"], e["eps_consensus"]) == ("2012-07-24", 0.37)
    # the P/E is the calendar's trailing one (agents/data/fundamentals/trailing.py; hand-checked in
    # tests/agents/fundamentals/test_trailing.py), not a later snapshot's
    assert e["field_sources"]["pe_ratio"].startswith("HistoricalEarningsData")
    # outside the 30-day window both are null with the calendar's reason
    far = _call(date(2012, 6, 1), fund_dir, symbols=["AAPL"], metrics=["earnings_date", "eps_consensus"])
    assert far.ok and far.data
    f = far.data["fundamentals"][0]
    assert f["earnings_date"] is None and "no report within 30 days" in f["null_reasons"]["earnings_date"]


def test_sec_shares_outstanding_point_in_time(fund_dir: Path) -> None:
    # TSLA's dei:EntityCommonStockSharesOutstanding, read off the file by hand: the 10-Q for
    # 2012-10-31 (filed 2012-11-07) says 113,778,865; the 10-K for 2013-01-31 (filed 2013-03-07)
    # says 114,517,973
    args = {"symbols": ["TSLA"], "metrics": ["shares_outstanding", "market_cap"]}
    before = run_tool(
        name="get_fundamentals", arguments=args, ctx=_ctx(date(2013, 3, 6), data_fundamentals_dir=fund_dir)
    )
    after = run_tool(
        name="get_fundamentals", arguments=args, ctx=_ctx(date(2013, 3, 7), data_fundamentals_dir=fund_dir)
    )
    assert before.data and after.data
    b, a = before.data["fundamentals"][0], after.data["fundamentals"][0]
    assert b["shares_outstanding"] == 113_778_865 and a["shares_outstanding"] == 114_517_973
    assert a["field_sources"]["shares_outstanding"].endswith("@2013-01-31 (10-K filed 2013-03-07)")
    # market cap = shares × the as-of close; the embedded prices have no TSLA, so it is null, why
    assert a["market_cap"] is None and "not in the embedded dataset" in a["null_reasons"]["market_cap"]
