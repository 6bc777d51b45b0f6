"""The CSP plan (chart → options → research): each analyst's early rejection, and a full
suggestion on the real AAPL chain of 2014-06-06 (pre-split strikes, split-adjusted bars)."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pytest
from agents.analysts.csp import CspInputs, run_csp_plan

from agents.data.market.csv_folder import CsvFolderProvider
from agents.tools.catalog import run_tool
from agents.tools.registry import ToolContext
from core.settings import Settings

# stocknet AAPL 2014-06-06: close 92.224289 (split-adjusted), the chain's underlying 645.57 = 7 x
AAPL_TECHNICAL = {
    "close": 92.2243,
    "indicators": {"sma_50": 87.0, "sma_200": 78.0, "adx_14": 30.0, "atr_14": 1.33},
}
AAPL_EARNINGS_CLEAR = {
    "next": None,
    "checked_through": "2014-07-06",
    "recent": [{"date": "2014-04-23"}],
}


def _ctx(tmp_path: Path, stocknet: Path, options: Path, as_of: date, **settings: Any) -> ToolContext:
    return ToolContext(
        settings=Settings(state_dir=tmp_path / "state", options_dir=options, **settings),
        as_of=as_of,
        provider=CsvFolderProvider(data_dir=stocknet),
    )


def _chart(support: list[float]) -> dict[str, Any]:
    return {
        "support_resistance": {
            "support": [{"price": p, "strength": "strong", "touches": 3} for p in support]
        },
        "support_resistance_ref": "find_support_resistance_x",
    }


def _plan(ctx: ToolContext, **kw: Any) -> dict[str, Any]:
    outcome = run_csp_plan(
        CspInputs(
            as_of=ctx.as_of,
            technical_ref="technical_indicators_x",
            earnings_ref="get_earnings_dates_x",
            run=lambda name, args: run_tool(name=name, arguments=args, ctx=ctx),
            min_iv_hv=ctx.settings.options.csp_min_iv_hv,
            **kw,
        )
    )
    return outcome.value


def test_chart_rejects_without_history(tmp_path: Path, stocknet_dir: Path, options_dir: Path) -> None:
    ctx = _ctx(tmp_path, stocknet_dir, options_dir, date(2025, 5, 16))
    record = _plan(ctx, symbol="SPY", technical=None, chart=None, earnings=None)
    assert record["status"] == "rejected" and record["rejected_by"] == "chart"
    assert record["reasons"][0]["text"].startswith("NO_DATA")
    assert "options" not in record and ctx.rows == []  # ended before the options analyst


def test_chart_rejects_without_support_below_the_close(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path
) -> None:
    ctx = _ctx(tmp_path, stocknet_dir, options_dir, date(2014, 6, 6))
    record = _plan(ctx, symbol="AAPL", technical=AAPL_TECHNICAL, chart=_chart([95.0]), earnings=None)
    assert record["rejected_by"] == "chart"
    assert "no support level below the close" in record["reasons"][0]["text"]
    assert record["reasons"][0]["source_refs"] == ["technical_indicators_x", "find_support_resistance_x"]


def test_options_rejects_goog_when_iv_is_below_hv(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path
) -> None:
    ctx = _ctx(tmp_path, stocknet_dir, options_dir, date(2015, 12, 24))
    technical = {
        "close": 748.4,
        "indicators": {"sma_50": 740.0, "sma_200": 650.0, "adx_14": 15.0, "atr_14": 14.0},
    }
    record = _plan(ctx, symbol="GOOG", technical=technical, chart=_chart([725.0]), earnings=None)
    assert record["rejected_by"] == "options"
    reason = record["reasons"][0]
    assert "below HV(20)" in reason["text"] and reason["source_refs"][0].startswith("calculate_iv_hv_")
    assert record["options"]["iv_hv_ratio"] < 1 and "research" not in record


def test_options_rejects_with_no_data_when_no_chain_was_quoted(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path
) -> None:
    ctx = _ctx(tmp_path, stocknet_dir, options_dir, date(2015, 12, 22))
    technical = {
        "close": 750.0,
        "indicators": {"sma_50": 740.0, "sma_200": 650.0, "adx_14": 15.0, "atr_14": 14.0},
    }
    record = _plan(ctx, symbol="GOOG", technical=technical, chart=_chart([725.0]), earnings=None)
    assert record["rejected_by"] == "options"
    assert record["reasons"][0]["text"].startswith(
        "NO_DATA: IV against HV: no option chain for GOOG quoted on 2015-12-22"
    )


def test_a_suggestion_across_the_split_units(tmp_path: Path, stocknet_dir: Path, options_dir: Path) -> None:
    # a 0.2 % weekly ROC target (the default 0.5 % is not met by any AAPL put that day)
    ctx = _ctx(tmp_path, stocknet_dir, options_dir, date(2014, 6, 6), csp_min_weekly_roc=0.002)
    record = _plan(
        ctx, symbol="AAPL", technical=AAPL_TECHNICAL, chart=_chart([88.57]), earnings=AAPL_EARNINGS_CLEAR
    )
    assert record["status"] == "suggested", record["reasons"]
    opts = record["options"]
    assert opts["price_scale"]["factor"] == pytest.approx(7.0, abs=1e-3)
    assert opts["max_strike"] == pytest.approx(88.57 * 645.57 / 92.2243, abs=1e-3)  # ≈ 620.0
    s = record["suggestion"]
    assert s["strike"] <= opts["max_strike"] and 0.15 <= abs(s["delta"]) <= 0.30
    assert s["collateral"] == s["strike"] * 100 and s["premium"] == pytest.approx(s["mid"] * 100)
    assert s["breakeven"] == pytest.approx(s["strike"] - s["mid"])
    assert len(record["alternatives"]) <= 3
    assert record["research"]["recommendation"] == "pass"  # cadence: 2014-04-23 + 91 d = 07-23


def test_earnings_before_every_expiry_leave_no_put(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path
) -> None:
    # a report on 2014-06-13 comes before every 14–45 DTE expiry (the first is 06-21): all dropped
    ctx = _ctx(tmp_path, stocknet_dir, options_dir, date(2014, 6, 6), csp_min_weekly_roc=0.002)
    earnings = {"next": {"date": "2014-06-13"}, "checked_through": "2014-07-06", "recent": []}
    record = _plan(ctx, symbol="AAPL", technical=AAPL_TECHNICAL, chart=_chart([88.57]), earnings=earnings)
    assert record["rejected_by"] == "options"
    assert record["options"]["rules"]["expiry_before"] == "2014-06-13"
    assert record["options"]["failed_counts"]["earnings"] == record["options"]["screened"]


def test_earnings_drop_only_the_expiries_that_reach_them(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path
) -> None:
    """AAPL 2014-06-06 with a reported report on 2014-06-24: the 06-27 and later expiries are
    dropped (pick and alternatives), the 06-21 puts stay; AAPL140621P00625000 (support 89.47 × 7 =
    626.29 caps the strike) passes."""
    ctx = _ctx(tmp_path, stocknet_dir, options_dir, date(2014, 6, 6), csp_min_weekly_roc=0.002)
    earnings = {"next": {"date": "2014-06-24"}, "checked_through": "2014-07-06", "recent": []}
    record = _plan(ctx, symbol="AAPL", technical=AAPL_TECHNICAL, chart=_chart([89.47]), earnings=earnings)
    assert record["status"] == "suggested", record["reasons"]
    picks = [record["suggestion"], *record["alternatives"]]
    assert "AAPL140621P00625000" in [p["contract"] for p in picks]
    assert all(p["expiry"] < "2014-06-24" for p in picks)
    assert record["options"]["failed_counts"]["earnings"] > 0
    research = record["research"]
    assert research["recommendation"] == "pass" and research["cutoff"]["source"] == "reported calendar"
    assert "next earnings 2014-06-24 (reported calendar)" in research["reasons"][0]["text"]
    assert research["reasons"][0]["source_refs"] == ["get_earnings_dates_x"]


def test_earnings_not_evaluated_is_said_and_not_a_pass(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path
) -> None:
    ctx = _ctx(tmp_path, stocknet_dir, options_dir, date(2014, 6, 6), csp_min_weekly_roc=0.002)
    record = _plan(ctx, symbol="AAPL", technical=AAPL_TECHNICAL, chart=_chart([89.47]), earnings=None)
    assert record["research"]["recommendation"] == "not_evaluated"
    assert any(r["text"].startswith("earnings not evaluated") for r in record["reasons"])


def test_research_rejects_a_pick_that_reaches_the_reported_date() -> None:
    # the backstop for a pick made outside the screen (a model's own filter_options call)
    from agents.analysts.csp import research_view

    earnings = {"next": {"date": "2014-06-13"}, "checked_through": "2014-07-06", "recent": []}
    view = research_view(expiry="2014-06-21", earnings=earnings, earnings_ref="e", as_of=date(2014, 6, 6))
    assert view["recommendation"] == "reject"
    assert "earnings on 2014-06-13 fall inside the DTE" in view["reasons"][0]["text"]


def test_chart_rejects_a_strong_downtrend() -> None:
    from agents.analysts.csp import chart_view

    technical = {
        "close": 80.0,
        "indicators": {"sma_50": 85.0, "sma_200": 90.0, "adx_14": 31.0, "atr_14": 2.0},
    }
    view = chart_view(technical=technical, technical_ref="t", chart=_chart([75.0]))
    assert view["recommendation"] == "reject" and view["trend_direction"] == "down"
    assert "strong downtrend" in view["reasons"][0]["text"]
    # the same levels with ADX 18 (no trend by Wilder's reading) pass
    technical["indicators"]["adx_14"] = 18.0
    assert (
        chart_view(technical=technical, technical_ref="t", chart=_chart([75.0]))["recommendation"] == "pass"
    )


def test_research_rejects_on_the_quarterly_cadence_when_the_date_is_not_announced() -> None:
    from agents.analysts.csp import research_view

    # GOOG 2015-12-24: last report 2015-10-22, nothing announced through 2016-01-23; + 91 days is
    # 2016-01-21, before a 2016-02-05 expiry (GOOG in fact reported on 2016-02-01)
    earnings = {"next": None, "checked_through": "2016-01-23", "recent": [{"date": "2015-10-22"}]}
    view = research_view(expiry="2016-02-05", earnings=earnings, earnings_ref="e", as_of=date(2015, 12, 24))
    assert view["recommendation"] == "reject" and "2016-01-21" in view["reasons"][0]["text"]
    ok = research_view(expiry="2016-01-15", earnings=earnings, earnings_ref="e", as_of=date(2015, 12, 24))
    assert ok["recommendation"] == "pass"


def test_cadence_margin_drops_an_expiry_inside_it() -> None:
    """AAPL: last report 2014-04-23, nothing announced through 2014-06-20; the cadence puts the next
    near 2014-07-23 (+91 days), so with the ±14-day margin expiries from 2014-07-09 are dropped:
    07-19 is inside the margin (rejected), 07-03 is clear."""
    from agents.analysts.csp import earnings_cutoff, research_view

    earnings = {"next": None, "checked_through": "2014-06-20", "recent": [{"date": "2014-04-23"}]}
    cutoff = earnings_cutoff(earnings=earnings, as_of=date(2014, 6, 6))
    assert cutoff is not None and cutoff["first_excluded"] == "2014-07-09"
    assert cutoff["earnings_date"] == "2014-07-23" and cutoff["margin_days"] == 14
    kw: dict[str, Any] = {"earnings": earnings, "earnings_ref": "e", "as_of": date(2014, 6, 6)}
    assert research_view(expiry="2014-07-19", **kw)["recommendation"] == "reject"
    assert research_view(expiry="2014-07-03", **kw)["recommendation"] == "pass"
    assert earnings_cutoff(earnings=None, as_of=date(2014, 6, 6)) is None


def test_ranking_at_the_bid_prefers_the_liquid_put(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path
) -> None:
    """AAPL 2014-06-06 (support 89.47 × 7 = 626.29): the 06-21 625 put (bid 4.35 / ask 4.45, spread
    2.3 %, OI 6,950) ranks above the 06-27 625 put (6.05 / 6.50, spread 7.2 %, OI 143), which
    earns a little more at the mid (6.275/625·7/21 = 0.335 % a week against 4.40/625·7/15 =
    0.329 %). At the bid less a 0.65 USD fee: 06-21 (435 − 0.65)/62,500·7/15 = 0.3243 % a week."""
    ctx = _ctx(tmp_path, stocknet_dir, options_dir, date(2014, 6, 6), csp_min_weekly_roc=0.002)
    record = _plan(
        ctx, symbol="AAPL", technical=AAPL_TECHNICAL, chart=_chart([89.47]), earnings=AAPL_EARNINGS_CLEAR
    )
    s = record["suggestion"]
    assert s["contract"] == "AAPL140621P00625000", [s["contract"], s.get("score")]
    assert s["spread_pct"] == pytest.approx(0.1 / 4.4, abs=1e-4) and s["open_interest"] == 6950
    assert s["fill"] == 4.35 and s["net_premium"] == pytest.approx(434.35)
    assert s["net_weekly_roc"] == pytest.approx(434.35 / 62500 * 7 / 15, abs=1e-6)
    assert s["expected_move"] == pytest.approx(645.57 * s["iv"] * (15 / 365) ** 0.5, abs=1e-3)
    assert s["strike_distance"] == pytest.approx(20.57, abs=1e-6)
    assert s["theta_per_contract"] == pytest.approx(s["theta"] * 100, abs=0.01) and s["theta"] < 0
    screen = run_tool(
        name="filter_options", arguments={"symbol": "AAPL", "max_strike": 626.29, "limit": 50}, ctx=ctx
    ).data
    assert screen is not None
    ranked = [p["contract"] for p in screen["passing"]]
    assert ranked.index("AAPL140621P00625000") < ranked.index("AAPL140627P00625000")
    thin = screen["passing"][ranked.index("AAPL140627P00625000")]
    assert thin["open_interest"] == 143 and thin["spread_pct"] == pytest.approx(0.45 / 6.275, abs=1e-4)
    assert thin["weekly_roc"] > s["weekly_roc"]  # better at the mid, worse as a trade


def test_presplit_open_interest_is_carried_to_the_adjusted_contracts(options_dir: Path) -> None:
    """AAPL 2014-06-09 (7:1 split): the quoted 2014-06-21 92.86 put (= 650/7) has no OI in the
    file; the unquoted 650 row has 4,213 contracts → 4,213 × 7 = 29,491 adjusted contracts."""
    from agents.data.options.chains import find_chain

    chain = find_chain(options_dir=options_dir, symbol="AAPL", as_of=date(2014, 6, 9))
    assert chain.split_ratio == 7
    put = chain.by_contract()["AAPL140621P00092860"]
    assert put.open_interest == 29491 and put.open_interest_from_strike == 650.0
    same_day = find_chain(options_dir=options_dir, symbol="AAPL", as_of=date(2014, 6, 6))
    assert same_day.split_ratio is None
