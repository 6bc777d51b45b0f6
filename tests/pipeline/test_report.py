"""The report renders fundamental and sentiment views with their citations."""

from __future__ import annotations

from datetime import date

from agents.views import fundamental_summary, sentiment_summary
from pipeline.core.state import FinancialAgentState, Status
from pipeline.report import report_json, report_markdown


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


def test_chart_levels_are_rendered_and_cited() -> None:
    chart = {
        "support_resistance": {
            "support": [{"price": 384.76, "strength": "strong", "touches": 27}],
            "resistance": [{"price": 563.9, "strength": "strong", "touches": 29}],
        },
        "support_resistance_ref": "find_support_resistance_cccccccccccc",
        "fib": {
            "levels": {"0%": 697.7881, "61.8%": 455.6549, "100%": 305.9869},
            "swing_high": 697.7881,
            "swing_low": 305.9869,
            "direction": "up",
            "swing_high_date": "2012-09-21",
            "swing_low_date": "2011-06-20",
        },
        "fib_ref": "calculate_fib_levels_dddddddddddd",
    }
    state = FinancialAgentState(
        analysis_id="a", stock_symbol="AAPL", as_of=date(2013, 3, 1), analysis={"chart": chart}
    )
    md = report_markdown(state)
    assert "## Support and resistance `[find_support_resistance_cccccccccccc]`" in md
    assert "- support: 384.76 (strong, 27 touches)" in md
    assert "## Fibonacci retracement `[calculate_fib_levels_dddddddddddd]`" in md
    assert "61.8% 455.6549" in md


def test_only_the_verdict_that_ended_the_analysis_is_its_stop_reason() -> None:
    # given a pass started by should_continue's "re-running" note, then failed in a task (the
    # chain's error callback sets failed and appends no verdict)
    rerun = {"role": "assistant", "name": "should_continue", "content": "stock data missing; re-running"}
    state = FinancialAgentState(
        analysis_id="a", stock_symbol="T", status=Status.FAILED, iteration=1, messages=[rerun]
    )
    # then the note is not reported as the stop reason
    assert report_json(state)["stop_reason"] is None
    assert "Stopped:" not in report_markdown(state)
    # given the verdict end_of_pass appends when it ends the analysis as failed
    state.messages.append(
        {"role": "assistant", "name": "should_continue", "content": "2 critical errors", "status": "failed"}
    )
    # then it is, right under the (missing) signal
    assert report_json(state)["stop_reason"] == "2 critical errors"
    lines = report_markdown(state).splitlines()
    assert lines[2:5] == [
        "**No recommendation**: the analysis could not complete (see Errors).",
        "",
        "Stopped: 2 critical errors",
    ]
