"""The research stage gathers fundamentals and news when configured (non-critical), and the
deterministic sentiment/fundamental views (zero headlines → NEUTRAL with a note)."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pytest

from agents.analysts.views import fundamental_summary, sentiment_summary
from agents.data.market.embedded import EmbeddedProvider
from agents.tools.registry import ToolContext
from core.settings import Settings
from core.state import FinancialAgentState
from pipeline.stages.research import gather_context, research
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.usefixtures("clean_settings")

FUND_DIR = SHARED_DATA / "fundamentals"
NEWS_DIR = SHARED_DATA / "news"


@pytest.fixture
def shared() -> None:
    if not (FUND_DIR / "sec_companyfacts").is_dir() or not (NEWS_DIR / "benzinga").is_dir():
        pytest.skip(f"shared data not found under {SHARED_DATA} (only present in the workplace)")


def _run(symbol: str, as_of: date, **settings: Any) -> tuple[FinancialAgentState, ToolContext]:
    state = FinancialAgentState(analysis_id="a-1", stock_symbol=symbol, as_of=as_of)
    ctx = ToolContext(
        settings=Settings(**settings),
        as_of=as_of,
        provider=EmbeddedProvider(),
        analysis_id="a-1",
        stage="research",
    )
    return research(state=state, ctx=ctx), ctx


def test_unconfigured_research_calls_the_earnings_calendar_and_its_fundamentals(tmp_path: Path) -> None:
    state, _ = _run(
        "AAPL", date(2013, 3, 1), data_fundamentals_dir=None, data_news_dir=None, data_news_provider="files"
    )
    assert state.stock_data and state.stock_data.status == "success"
    assert [h.tool for h in state.tool_history] == [
        "get_stock_data",
        "get_history",
        "get_earnings_dates",
        "get_fundamentals",  # the calendar's trailing EPS and P/E need no configuration
    ]
    assert not state.errors
    assert state.stock_data.views is not None and state.stock_data.views.sentiment is None
    fundamentals = state.stock_data.fundamentals
    assert fundamentals is not None  # 430.47 / (1.57 × 28): tests/agents/fundamentals/test_trailing.py
    assert fundamentals["pe_ratio"] == 9.79 and state.stock_data.fundamentals_ref in state.source_refs
    # HistoricalEarningsData: AAPL,"Jan 23, 2013, 12 AMEST",0.48,0.49,+2.52 then "Apr 23, 2013"
    earnings = state.stock_data.earnings
    assert earnings is not None
    assert earnings["recent"][0] == {
        "date": "2013-01-23",
        "time_of_day": "unknown",
        "eps_estimate": 0.48,
        "eps_actual": 0.49,
        "surprise": 0.0252,
    }
    assert earnings["next"] is None and earnings["checked_through"] == "2013-03-31"
    assert state.stock_data.earnings_ref in state.source_refs


def test_configured_research_degrades_and_reads_zero_headlines_as_neutral(shared: None) -> None:
    state, _ = _run(
        "AAPL",
        date(2013, 3, 1),
        data_fundamentals_dir=FUND_DIR,
        data_news_dir=NEWS_DIR,
        data_news_provider="files",
    )
    assert state.stock_data and state.stock_data.status == "success"
    assert [h.tool for h in state.tool_history] == [
        "get_stock_data",
        "get_history",
        "get_earnings_dates",
        "get_fundamentals",
        "get_news",
    ]
    # the 2024/2026 snapshots are after 2013 and refused; the calendar's trailing values answer
    assert not state.errors
    fundamentals = state.stock_data.fundamentals
    assert fundamentals is not None
    assert {r["source"] for r in fundamentals["refused"]} >= {"sp500", "av_overview"}
    assert fundamentals["field_sources"]["pe_ratio"].startswith("HistoricalEarningsData")
    assert state.stock_data.views is not None
    sentiment = state.stock_data.views.sentiment
    assert sentiment is not None
    assert sentiment["label"] == "NEUTRAL" and sentiment["count"] == 0 and "No headlines" in sentiment["note"]
    assert sentiment["source_refs"] == [state.stock_data.news_ref]
    assert state.stock_data.news_ref in state.source_refs


def test_network_failure_of_news_does_not_fail_research() -> None:
    state, _ = _run(
        "AAPL", date(2013, 3, 1), data_news_provider="rss", data_news_rss_urls="http://127.0.0.1:9/x.xml"
    )
    assert state.stock_data and state.stock_data.status == "success"
    (err,) = state.errors
    assert err.code == "NETWORK_ERROR" and not err.critical
    assert state.stock_data.views is not None and state.stock_data.views.sentiment is None


def test_gather_context_on_real_fundamentals_and_headlines(shared: None) -> None:
    settings = Settings(data_fundamentals_dir=FUND_DIR, data_news_dir=NEWS_DIR, data_news_provider="files")
    state = FinancialAgentState(
        analysis_id="a-2", stock_symbol="TSLA", as_of=date(2021, 6, 1), stock_data={"status": "success"}
    )
    ctx = ToolContext(settings=settings, as_of=date(2021, 6, 1), provider=EmbeddedProvider())
    gather_context(state=state, ctx=ctx)
    assert state.stock_data is not None
    assert state.stock_data.views is not None and state.stock_data.fundamentals is not None
    fundamental = state.stock_data.views.fundamental
    assert fundamental is not None
    assert fundamental["values"]["current_ratio"] == state.stock_data.fundamentals["current_ratio"]
    assert fundamental["outlook"] in {"positive", "negative", "neutral"}
    assert fundamental["timestamp"] <= "2021-06-01"
    # AAPL headlines exist for June 2020 in the Benzinga file
    state = FinancialAgentState(
        analysis_id="a-3", stock_symbol="AAPL", as_of=date(2020, 6, 9), stock_data={"status": "success"}
    )
    ctx = ToolContext(settings=settings, as_of=date(2020, 6, 9), provider=EmbeddedProvider())
    gather_context(state=state, ctx=ctx)
    assert state.stock_data is not None
    assert state.stock_data.views is not None
    sentiment = state.stock_data.views.sentiment
    assert sentiment is not None
    assert sentiment["count"] > 0 and sentiment["label"] in {"POSITIVE", "NEGATIVE", "NEUTRAL"}
    assert sentiment["positive"] + sentiment["negative"] + sentiment["neutral"] == sentiment["count"]
    assert len(sentiment["top"]) <= 5


def test_sentiment_and_fundamental_rules_by_hand() -> None:
    news = {
        "news": [
            {"sentiment": 0.5, "impact_score": 0.5, "tags": ["earnings"]},
            {"sentiment": -0.2, "impact_score": 0.9, "tags": []},
        ]
    }
    s = sentiment_summary(news, ref="n1")
    assert s["mean_sentiment"] == pytest.approx(0.15) and s["label"] == "POSITIVE"
    assert s["positive"] == 1 and s["negative"] == 1 and s["tags"] == {"earnings": 1}
    assert s["top"][0]["impact_score"] == 0.9
    assert (
        sentiment_summary({"news": [{"sentiment": 0.01, "impact_score": 0, "tags": []}]}, ref=None)["label"]
        == "NEUTRAL"
    )
    f = fundamental_summary(
        {"symbol": "X", "pe_ratio": 45.0, "gross_margin": 0.5, "current_ratio": 0.8}, ref="f1"
    )
    assert [o["field"] for o in f["observations"]] == ["pe_ratio", "gross_margin", "current_ratio"]
    assert f["outlook"] == "negative"
    assert fundamental_summary({"symbol": "X", "pe_ratio": None}, ref=None)["outlook"] == "unknown"
