"""The report renders fundamental and sentiment views with their citations."""

from __future__ import annotations

from datetime import date

from agents.views import fundamental_summary, sentiment_summary
from pipeline.report import report_json, report_markdown
from pipeline.state import FinancialAgentState


def test_views_are_rendered_and_cited() -> None:
    views = {
        "fundamental": fundamental_summary(
            {"symbol": "T", "pe_ratio": 35.2, "current_ratio": 0.8}, ref="get_fundamentals_aaaaaaaaaaaa"
        ),
        "sentiment": sentiment_summary({"news": []}, ref="get_news_bbbbbbbbbbbb"),
    }
    state = FinancialAgentState(
        analysis_id="a",
        stock_symbol="T",
        as_of=date(2017, 9, 1),
        stock_data={"status": "success", "views": views},
    )
    md = report_markdown(state)
    assert "## Fundamentals `[get_fundamentals_aaaaaaaaaaaa]`" in md
    assert "pe_ratio 35.2: price/earnings above thirty" in md
    assert "current_ratio 0.8: current ratio below one" in md
    assert "## News sentiment `[get_news_bbbbbbbbbbbb]`" in md
    assert "**NEUTRAL**: 0 headlines" in md
    assert report_json(state)["views"] == views
