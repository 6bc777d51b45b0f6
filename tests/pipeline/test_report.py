"""The report renders fundamental and sentiment views with their citations."""

from __future__ import annotations

from datetime import date

from agents.analysts.views import fundamental_summary, sentiment_summary
from core.state import FinancialAgentState, StageError, Status
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
    # ratios to two decimals, as the Quote table prints the P/E
    assert "pe_ratio 35.20: P/E above thirty" in md
    assert "current_ratio 0.80: current ratio below one" in md
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
    # a price level prints to the cent (the JSON keeps the tool's 455.6549)
    assert "61.8% 455.65" in md and "455.6549" not in md


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


def _csp_row(contract: str, strike: float) -> dict:
    return {
        "contract": contract,
        "expiry": "2014-06-27",
        "dte": 21,
        "strike": strike,
        "bid": 4.0,
        "ask": 4.2,
        "mid": 4.1,
        "spread_pct": 0.0488,
        "volume": 69,
        "open_interest": 638,
        "delta": -0.23,
        "iv": 0.2367,
        "pop": 0.8123,
        "breakeven": strike - 4.1,
        "premium": 410.0,
        "collateral": strike * 100,
        "weekly_roc": 0.002215,
        "annualized_roc": 0.115484,
    }


def test_cash_secured_put_suggestion_is_rendered_and_in_json() -> None:
    csp = {
        "status": "suggested",
        "rejected_by": None,
        "suggestion": {**_csp_row("AAPL140627P00620000", 620.0), "iv_hv_ratio": 1.6954, "hv": 0.1356},
        "alternatives": [_csp_row("AAPL140627P00615000", 615.0)],
        "reasons": [{"text": "strike at or below support", "source_refs": ["filter_options_eeeeeeeeeeee"]}],
        "options": {"source_refs": ["calculate_iv_hv_ffffffffffff", "filter_options_eeeeeeeeeeee"]},
    }
    state = FinancialAgentState(
        analysis_id="a",
        stock_symbol="AAPL",
        as_of=date(2014, 6, 6),
        analysis={"csp": csp},
        analysis_type="csp",
    )
    # a record stored before the option plan answered in plan_result: today's section renders it
    md = report_markdown(state)
    assert "## Cash-secured put" in md
    assert (
        "**Sell 1 AAPL140627P00620000**: put, strike 620.00, expiry 2014-06-27 (last trading day 2014-06-27, "
        "21 DTE)" in md
    )
    assert "| bid / ask / mid | 4.00 / 4.20 / 4.10 |" in md
    assert "| IV/HV (at the money) | 1.6954 (HV 13.6 %) |" in md
    assert "| probability of profit (at the mid) | 81.2 % |" in md
    assert "| ROC weekly / annualised (on the whole premium) | 0.22 % / 11.5 % |" in md
    assert "| AAPL140627P00615000 | 2014-06-27 | 615.00 | 21 | 4.00 / 4.20 / 4.10 |" in md
    assert "- strike at or below support `[filter_options_eeeeeeeeeeee]`" in md
    assert report_json(state)["csp"] == csp


def test_cash_secured_put_rejection_names_the_analyst() -> None:
    csp = {
        "status": "rejected",
        "rejected_by": "options",
        "reasons": [
            {"text": "IV 0.1731 below HV(20) 0.2053", "source_refs": ["calculate_iv_hv_ffffffffffff"]}
        ],
        "options": {},
    }
    state = FinancialAgentState(
        analysis_id="a", stock_symbol="GOOG", as_of=date(2015, 12, 24), analysis={"csp": csp}
    )
    md = report_markdown(state)
    assert "**Rejected by the options analyst.**" in md
    assert "- IV 0.1731 below HV(20) 0.2053 `[calculate_iv_hv_ffffffffffff]`" in md
    assert report_json(FinancialAgentState(analysis_id="b", stock_symbol="GOOG"))["csp"] is None


def test_a_failure_outside_should_continue_states_its_error_as_the_stop_reason() -> None:
    # given an analysis failed by the chain's error callback in its second pass: an error of the
    # first pass, then the failing task's (pipeline.steps.close.fail_analysis appends it last)
    state = FinancialAgentState(analysis_id="a", stock_symbol="T", status=Status.FAILED, iteration=1)
    state.errors.append(StageError(stage="research", iteration=0, code="NO_DATA", message="no bars"))
    state.errors.append(
        StageError(
            stage="analysis",
            iteration=1,
            code="STAGE_FAILED",
            message="finagent.analysis failed: ValueError: bars contain NaN prices in ['close']",
        )
    )
    # then the reason is that error, in the JSON and right under the missing signal
    reason = "STAGE_FAILED: finagent.analysis failed: ValueError: bars contain NaN prices in ['close']"
    assert report_json(state)["stop_reason"] == reason
    assert f"Stopped: {reason}" in report_markdown(state)
    # and an error that already starts with its code (the sweep's "STALLED after 3 recoveries")
    state.errors.append(
        StageError(stage="sweep", iteration=1, code="STALLED", message="STALLED after 3 recoveries")
    )
    assert report_json(state)["stop_reason"] == "STALLED after 3 recoveries"


def test_outlook_lines_print_margins_as_percentages_and_ratios_to_two_decimals() -> None:
    """MSFT on the real offline snapshots at 2026-09-01 (the S&P 500 table and the Alpha Vantage
    overview): its gross margin, gross profit over revenue (a fraction), prints as a percentage to
    two decimals, not as the fraction; the P/E to two decimals."""
    import pytest

    from agents.data.market.embedded import EmbeddedProvider
    from agents.tools.catalog import run_tool
    from agents.tools.registry import ToolContext
    from core.settings import Settings
    from tests.conftest import SHARED_DATA

    fund_dir = SHARED_DATA / "fundamentals"
    if not (fund_dir / "sp500").is_dir():
        pytest.skip(f"shared fundamentals not found at {fund_dir} (only present in the workplace)")
    ctx = ToolContext(
        settings=Settings(data_fundamentals_dir=fund_dir), as_of=date(2026, 9, 1), provider=EmbeddedProvider()
    )
    env = run_tool(name="get_fundamentals", arguments={"symbols": ["MSFT"]}, ctx=ctx)
    assert env.ok and env.data
    entry = env.data["fundamentals"][0]
    margin = entry["gross_margin"]
    assert 0.4 <= margin < 1  # a fraction: gross profit over revenue, over the forty percent rule
    view = fundamental_summary(entry, ref=env.tool_call_id)
    state = FinancialAgentState(
        analysis_id="a",
        stock_symbol="MSFT",
        as_of=date(2026, 9, 1),
        stock_data={"status": "success", "views": {"fundamental": view}},
    )
    md = report_markdown(state)
    assert f"- gross_margin {100 * margin:.2f} %: gross margin of forty percent or more" in md
    assert f"- gross_margin {margin}" not in md
    if entry["pe_ratio"] is not None and entry["pe_ratio"] > 30:
        assert f"- pe_ratio {entry['pe_ratio']:.2f}: P/E above thirty" in md
