"""The earnings calendar (HistoricalEarningsData wheel) and ``get_earnings_dates``: point in time,
the 30-day announcement window, coverage and gaps, partial and total failure, and the
EARNINGS_SOON flag it feeds.

Expected values are the source rows themselves, quoted next to each assertion (read from
``HistoricalEarningsData/data/aggregated_earnings_data_webscraped.csv``).
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pytest

from agents.data.fundamentals.earnings import (
    CalendarUnavailableError,
    EarningsCalendar,
    default_calendar,
    parse_report_time,
)
from agents.data.market.embedded import EmbeddedProvider
from agents.quant.scorer import score_technical
from agents.tools.catalog import run_tool
from agents.tools.registry import ToolContext
from core.settings import Settings

pytestmark = pytest.mark.usefixtures("clean_settings")


def _call(as_of: date, **args: Any) -> Any:
    ctx = ToolContext(settings=Settings(), as_of=as_of, provider=EmbeddedProvider())
    return run_tool(name="get_earnings_dates", arguments=args, ctx=ctx), ctx


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Aug 01, 2024, 4 PMEDT", (date(2024, 8, 1), "after_close")),
        ("Oct 11, 2024, 6 AMEDT", (date(2024, 10, 11), "before_open")),
        ("Jan 15, 2025, 8 AMEST", (date(2025, 1, 15), "before_open")),
        ("Jul 24, 2012, 12 AMEDT", (date(2012, 7, 24), "unknown")),
        ("Mar 03, 2020, 11 AMEST", (date(2020, 3, 3), "during_market")),
        ("Mar 03, 2020, 12 PMEST", (date(2020, 3, 3), "during_market")),
    ],
)
def test_report_times_parse_into_session_buckets(raw: str, expected: tuple[date, str]) -> None:
    assert parse_report_time(raw) == expected


def test_malformed_report_time_is_refused() -> None:
    with pytest.raises(ValueError, match="unrecognised earnings date"):
        parse_report_time("2024-08-01")


def test_next_report_within_the_window_and_past_quarters() -> None:
    entry = default_calendar().at("AAPL", date(2012, 7, 17), recent=2)
    assert entry is not None
    # AAPL,"Jul 24, 2012, 12 AMEDT",0.37,0.33,-10.12  (the actual is after as_of: not shown)
    assert entry["next"] == {
        "date": "2012-07-24",
        "time_of_day": "unknown",
        "days_until": 7,
        "eps_estimate": 0.37,
    }
    assert "eps_actual" not in entry["next"]
    # AAPL,"Apr 24, 2012, 12 AMEDT",0.36,0.44,+22.56 ; AAPL,"Jan 24, 2012, 12 AMEST",0.36,0.5,+36.46
    assert entry["recent"] == [
        {
            "date": "2012-04-24",
            "time_of_day": "unknown",
            "eps_estimate": 0.36,
            "eps_actual": 0.44,
            "surprise": 0.2256,
        },
        {
            "date": "2012-01-24",
            "time_of_day": "unknown",
            "eps_estimate": 0.36,
            "eps_actual": 0.5,
            "surprise": 0.3646,
        },
    ]
    assert entry["checked_through"] == "2012-08-16"
    assert entry["source_refs"][0].endswith("#AAPL@2012-07-24")


def test_a_report_after_the_close_of_as_of_is_still_upcoming() -> None:
    # AAPL,"Aug 01, 2024, 4 PMEDT",1.35,1.4,+3.99 ; AAPL,"May 02, 2024, 4 PMEDT",1.5,1.53,+1.97
    entry = default_calendar().at("AAPL", date(2024, 8, 1), recent=1)
    assert entry is not None
    assert entry["next"]["date"] == "2024-08-01" and entry["next"]["days_until"] == 0
    assert entry["next"]["time_of_day"] == "after_close"
    assert entry["recent"][0]["date"] == "2024-05-02"
    after = default_calendar().at("AAPL", date(2024, 8, 2), recent=1)
    assert after is not None and after["recent"][0]["eps_actual"] == 1.4


def test_a_report_before_the_open_of_as_of_is_reported_by_the_close() -> None:
    # JPM,"Oct 11, 2024, 6 AMEDT",4.01,4.37,+9.03
    entry = default_calendar().at("JPM", date(2024, 10, 11), recent=1)
    assert entry is not None
    assert entry["recent"][0] == {
        "date": "2024-10-11",
        "time_of_day": "before_open",
        "eps_estimate": 4.01,
        "eps_actual": 4.37,
        "surprise": 0.0903,
    }
    assert entry["next"] is None  # JPM's next row is Jan 15, 2025: beyond 30 days


def test_dates_beyond_the_window_are_withheld_without_leaking_them() -> None:
    entry = default_calendar().at("AAPL", date(2012, 6, 1))
    assert entry is not None
    assert entry["next"] is None and entry["checked_through"] == "2012-07-01"
    assert "2012-07-24" not in entry["next_null_reason"] and "30 days" in entry["next_null_reason"]


@pytest.mark.parametrize(
    ("symbol", "as_of", "needle"),
    [
        ("AAPL", date(2026, 1, 1), "last report of AAPL is 2025-07-30"),  # past the calendar's end
        ("AAPL", date(1999, 6, 1), "first report of AAPL is 1999-10-13"),  # before its start
        ("CMCSA", date(2015, 1, 10), "no row of CMCSA after 2014-10-23"),  # rows 2014-10-23, 2015-02-24
    ],
)
def test_the_calendar_does_not_vouch_outside_its_rows(symbol: str, as_of: date, needle: str) -> None:
    entry = default_calendar().at(symbol, as_of)
    assert entry is not None
    assert entry["next"] is None and entry["checked_through"] is None
    assert needle in entry["next_null_reason"]


def test_a_calendar_file_with_other_columns_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cal.csv"
    path.write_text("ticker,date\nAAPL,2024-01-01\n")
    with pytest.raises(CalendarUnavailableError, match="lacks column"):
        EarningsCalendar(path, ref="x").symbols()
    with pytest.raises(CalendarUnavailableError, match="cannot read"):
        EarningsCalendar(tmp_path / "missing.csv", ref="x").symbols()


def test_tool_envelope_rows_and_partial_failure() -> None:
    env, ctx = _call(date(2012, 7, 17), symbols=["aapl", "ZZZZ"], recent=1)
    assert env.ok and env.data
    aapl, missing = env.data["earnings"]
    assert aapl["symbol"] == "AAPL" and aapl["next"]["date"] == "2012-07-24"
    assert missing["symbol"] == "ZZZZ" and missing["error"]["code"] == "INVALID_SYMBOL"
    assert env.data["window_days"] == 30 and env.data["as_of"] == "2012-07-17"
    assert any(ref.endswith("#AAPL@2012-07-24") for ref in env.source_refs)
    assert env.source_refs[0] == env.tool_call_id
    (row,) = ctx.rows
    assert row["tool"] == "get_earnings_dates" and row["status"] == "success"


def test_every_symbol_missing_is_invalid_symbol() -> None:
    env, _ = _call(date(2012, 7, 17), symbols=["ZZZZ"])
    assert not env.ok and env.error and env.error.code == "INVALID_SYMBOL"


@pytest.mark.parametrize(
    "args",
    [
        {"symbols": []},
        {"symbols": ["AAPL"], "recent": 13},
        {"symbols": ["AAPL"], "extra": 1},
        {"symbols": ["$$"]},
    ],
)
def test_bad_input_is_invalid_input(args: dict[str, Any]) -> None:
    env, _ = _call(date(2012, 7, 17), **args)
    assert not env.ok and env.error and env.error.code == "INVALID_INPUT"


BULLISH = {"rsi_14": 55.0, "macd": 1.0, "macd_signal": 0.5, "close": 100.0, "dollar_volume_20": 5e9}
REFS = {"indicators": "technical_indicators_0123456789ab", "earnings": "get_earnings_dates_0123456789ab"}


def test_earnings_soon_and_the_evaluated_negative_cite_the_calendar_call() -> None:
    soon = score_technical(indicators=BULLISH, refs=REFS, earnings_date="2012-07-24", as_of="2012-07-17")
    (flag,) = [f for f in soon.risk_flags if f.flag == "EARNINGS_SOON"]
    assert flag.source_refs == ["get_earnings_dates_0123456789ab"] and "2012-07-24" in flag.text
    # no report within the 30-day window → evaluated: a cited "none within two weeks" statement
    clear = score_technical(
        indicators=BULLISH,
        refs=REFS,
        earnings_date=None,
        earnings_checked_through="2012-07-01",
        as_of="2012-06-01",
    )
    assert not [f for f in clear.risk_flags if f.flag == "EARNINGS_SOON"]
    (note,) = [s for s in clear.rationale if "earnings" in s.text.lower()]
    assert note.text.startswith("No earnings report") and note.source_refs == [
        "get_earnings_dates_0123456789ab"
    ]
    # the calendar cannot vouch (checked_through None) → "not evaluated"
    unknown = score_technical(indicators=BULLISH, refs=REFS, earnings_date=None, as_of="2026-01-01")
    (note,) = [s for s in unknown.rationale if "earnings" in s.text.lower()]
    assert "not evaluated" in note.text
    # a window shorter than two weeks after as_of cannot rule the flag out
    short = score_technical(
        indicators=BULLISH,
        refs=REFS,
        earnings_date=None,
        earnings_checked_through="2012-06-10",
        as_of="2012-06-01",
    )
    (note,) = [s for s in short.rationale if "earnings" in s.text.lower()]
    assert "not evaluated" in note.text


def test_renamed_tickers_read_the_same_companys_rows() -> None:
    cal = default_calendar()
    # META,"Jan 30, 2013, 12 AMEST",0.15,0.17,+11.75 — Facebook reported as FB then
    fb = cal.at("FB", date(2013, 1, 28))
    assert fb is not None and fb["symbol"] == "FB" and fb["calendar_symbol"] == "META"
    assert "2022-06-09" in fb["alias_note"]
    assert fb["next"]["date"] == "2013-01-30" and fb["next"]["eps_estimate"] == 0.15
    assert fb["source_refs"][0].endswith("#META@2013-01-30")
    # GOOGL,"Oct 18, 2012, 12 AMEDT",0.27,0.23,-15.22 — before 2014-04-03 GOOG was the class A share
    goog = cal.at("GOOG", date(2012, 10, 10))
    assert goog is not None and goog["calendar_symbol"] == "GOOGL" and goog["next"]["date"] == "2012-10-18"
    # after the split GOOG is its own row set: GOOG,"Jan 29, 2015, 4 PMEST",-,6.88,-
    later = cal.at("GOOG", date(2015, 1, 20))
    assert later is not None and later["calendar_symbol"] == "GOOG" and later["alias_note"] is None
    assert later["next"]["date"] == "2015-01-29" and later["next"]["time_of_day"] == "after_close"
    assert cal.covers("FB", date(2013, 1, 28)) and not cal.covers("ZZZZ", date(2013, 1, 28))


def test_research_skips_the_calendar_for_a_symbol_it_does_not_cover() -> None:
    from agents.data.market.csv_folder import CsvFolderProvider
    from core.state import FinancialAgentState
    from pipeline.stages.research import research
    from tests.conftest import SHARED_DATA

    folder = SHARED_DATA / "ohlcv" / "stocknet"
    if not (folder / "GMRE.csv").is_file():
        pytest.skip(f"stocknet data not found under {folder} (only present in the workplace)")
    as_of = date(2017, 8, 31)
    state = FinancialAgentState(analysis_id="e-1", stock_symbol="GMRE", as_of=as_of)
    ctx = ToolContext(
        settings=Settings(), as_of=as_of, provider=CsvFolderProvider(data_dir=folder), stage="research"
    )
    assert not default_calendar().covers("GMRE", as_of)
    state = research(state=state, ctx=ctx)
    assert state.stock_data and state.stock_data.status == "success"
    assert "get_earnings_dates" not in [h.tool for h in state.tool_history] and not state.errors
