"""The option tools through ``run_tool``: envelopes, rows, errors, point in time."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from agents.data.market.csv_folder import CsvFolderProvider
from agents.tools.catalog import run_tool
from agents.tools.registry import ToolContext
from core.settings import Settings


def _ctx(tmp_path: Path, stocknet: Path, options: Path | None, as_of: date) -> ToolContext:
    return ToolContext(
        settings=Settings(state_dir=tmp_path / "state", options_dir=options),
        as_of=as_of,
        provider=CsvFolderProvider(data_dir=stocknet),
    )


def test_get_option_chain_filters_dte_and_right(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path
) -> None:
    ctx = _ctx(tmp_path, stocknet_dir, options_dir, date(2015, 12, 24))
    env = run_tool(
        name="get_option_chain", arguments={"symbol": "goog", "dte_min": 14, "dte_max": 45}, ctx=ctx
    )
    assert env.ok and env.data
    d = env.data
    # 2015-12-24 + 14..45 days: the expiries 2016-01-08, -15, -22, -29 and 2016-02-05 are listed in the file
    assert [e["expiry"] for e in d["expiries"]] == [
        "2016-01-08",
        "2016-01-15",
        "2016-01-22",
        "2016-01-29",
        "2016-02-05",
    ]
    assert {c["right"] for c in d["contracts"]} == {"put"}
    assert d["underlying_price"] == 748.4 and d["quote_date"] == "2015-12-24"
    assert env.source_refs == [env.tool_call_id, "options-file:lean_goog_2015-12/GOOG_eod_2015-12-24.csv"]
    assert [r["tool"] for r in ctx.rows] == ["get_option_chain"] and ctx.rows[0]["status"] == "success"


def test_no_chain_on_as_of_is_no_data(tmp_path: Path, stocknet_dir: Path, options_dir: Path) -> None:
    ctx = _ctx(tmp_path, stocknet_dir, options_dir, date(2015, 12, 22))
    env = run_tool(name="get_option_chain", arguments={"symbol": "GOOG"}, ctx=ctx)
    assert env.error is not None and env.error.code == "NO_DATA"
    assert "2015-12-22" in env.error.message and ctx.rows[0]["error_code"] == "NO_DATA"


def test_unconfigured_options_folder(tmp_path: Path, stocknet_dir: Path) -> None:
    env = run_tool(
        name="get_option_chain",
        arguments={"symbol": "GOOG"},
        ctx=_ctx(tmp_path, stocknet_dir, None, date(2015, 12, 24)),
    )
    assert env.error is not None and env.error.code == "NOT_CONFIGURED"


def test_iv_hv_of_spy_without_history_is_no_data(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path
) -> None:
    # the SPY chain exists, but the stocknet folder has no SPY bars to measure HV
    env = run_tool(
        name="calculate_iv_hv",
        arguments={"symbol": "SPY"},
        ctx=_ctx(tmp_path, stocknet_dir, options_dir, date(2025, 5, 16)),
    )
    assert env.error is not None and env.error.code in {"NO_DATA", "INVALID_SYMBOL"}


def test_iv_hv_of_goog(tmp_path: Path, stocknet_dir: Path, options_dir: Path) -> None:
    env = run_tool(
        name="calculate_iv_hv",
        arguments={"symbol": "GOOG", "hv_period": 20},
        ctx=_ctx(tmp_path, stocknet_dir, options_dir, date(2015, 12, 24)),
    )
    assert env.ok and env.data
    d = env.data
    # the at-the-money strike of the first expiry in 14..45 DTE (2016-01-08) nearest 748.40 is 747.5
    assert d["atm"]["expiry"] == "2016-01-08" and d["atm"]["strike"] == 747.5
    assert d["hv_window"]["last_bar"] == "2015-12-24"
    assert d["iv_hv_ratio"] == pytest.approx(d["iv"] / d["hv"], abs=1e-3)
    assert 0.1 < d["iv"] < 0.3 and 0.1 < d["hv"] < 0.4


def test_calculate_roc_by_hand(tmp_path: Path, stocknet_dir: Path) -> None:
    env = run_tool(
        name="calculate_roc",
        arguments={"premium": 1.25, "strike": 95, "dte": 21},
        ctx=_ctx(tmp_path, stocknet_dir, None, date(2015, 12, 24)),
    )
    assert env.ok and env.data
    assert env.data["weekly_roc"] == pytest.approx(1.25 / 95 * 7 / 21, abs=1e-6)
    assert env.data["annualized_roc"] == pytest.approx(1.25 / 95 * 365 / 21, abs=1e-6)
    assert env.data["collateral"] == 9500 and env.data["breakeven"] == 93.75
    bad = run_tool(
        name="calculate_roc",
        arguments={"premium": 1, "strike": 95, "dte": 0},
        ctx=_ctx(tmp_path, stocknet_dir, None, date(2015, 12, 24)),
    )
    assert bad.error is not None and bad.error.code == "INVALID_INPUT"


def test_get_option_greeks_reports_both_ivs(tmp_path: Path, stocknet_dir: Path, options_dir: Path) -> None:
    env = run_tool(
        name="get_option_greeks",
        arguments={"contracts": ["GOOG160129P00700000", "GOOG160129P00123000"]},
        ctx=_ctx(tmp_path, stocknet_dir, options_dir, date(2015, 12, 24)),
    )
    assert env.ok and env.data
    row, missing = env.data["contracts"]
    assert row["mid"] == pytest.approx(10.65) and row["dte"] == 36
    assert row["source_iv"] == pytest.approx(0.91091) and row["iv_diff"] == pytest.approx(
        row["iv"] - 0.91091, abs=1e-4
    )
    assert -0.3 < row["delta"] < -0.15 and row["breakeven"] == pytest.approx(700 - 10.65)
    assert "not quoted" in missing["error"]


def test_filter_options_applies_each_rule(tmp_path: Path, stocknet_dir: Path, options_dir: Path) -> None:
    ctx = _ctx(tmp_path, stocknet_dir, options_dir, date(2014, 6, 6))
    env = run_tool(
        name="filter_options",
        arguments={"symbol": "AAPL", "min_weekly_roc": 0.002, "max_strike": 620, "limit": 50},
        ctx=ctx,
    )
    assert env.ok and env.data
    d = env.data
    assert d["rules"]["delta_min"] == 0.15 and d["rules"]["min_open_interest"] == 100  # default CSP settings
    assert d["passing"], d["failed_counts"]
    for row in d["passing"]:
        assert 0.15 <= abs(row["delta"]) <= 0.30 and 14 <= row["dte"] <= 45 and row["strike"] <= 620
        # the ROC rule is judged at the bid less the fee, never above the mid
        assert row["net_weekly_roc"] > 0.002 and row["net_weekly_roc"] <= row["weekly_roc"]
        assert row["fill"] == row["bid"] and row["spread_pct"] <= 0.10
        assert row["volume"] >= 1 and row["open_interest"] >= 100
    scores = [r["score"] for r in d["passing"]]
    assert scores == sorted(scores, reverse=True)


def test_spy_chain_is_priced_at_its_parity_spot_and_the_t_bill_rate(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path
) -> None:
    """The CBOE file's Last (589.25) is an after-hours print: the tools price at the parity spot of
    the chain's mids (≈593.9) and at the DTB3 rate of 2025-05-16 (4.25 % discount → r 0.0433)."""
    ctx = _ctx(tmp_path, stocknet_dir, options_dir, date(2025, 5, 16))
    env = run_tool(name="get_option_chain", arguments={"symbol": "SPY"}, ctx=ctx)
    assert env.ok and env.data
    d = env.data
    assert d["underlying_quoted"] == 589.25 and 593.5 < d["underlying_price"] < 594.3
    assert "put-call parity" in d["underlying_source"] and "after the 16:00 close" in d["underlying_source"]
    assert d["parity_spot"]["expiry"] == "2025-05-19"
    assert d["risk_free_rate"] == pytest.approx(0.0433, abs=1e-4)
    assert "DTB3" in d["risk_free_rate_source"] and "2025-05-16" in d["risk_free_rate_source"]


def test_lean_chain_keeps_its_underlying_close_when_parity_agrees(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path
) -> None:
    """GOOG 2015-12-24: close 748.40, parity ≈748.27 (0.02 % apart, inside the 0.5 % tolerance)."""
    ctx = _ctx(tmp_path, stocknet_dir, options_dir, date(2015, 12, 24))
    d = run_tool(name="get_option_chain", arguments={"symbol": "GOOG"}, ctx=ctx).data
    assert d is not None and d["underlying_price"] == 748.4
    assert d["underlying_source"] == "chain underlying close"
    assert d["parity_spot"]["spot"] == pytest.approx(748.4, rel=0.005)


def test_a_mid_below_the_exercise_value_is_flagged(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path
) -> None:
    """AAPL 2014-06-06: the 2014-06-13 720 put quotes 73.15 / 75.45, mid 74.30, below its exercise
    value 720 − 645.57 = 74.43 (an American put is worth at least that): flagged, no IV."""
    ctx = _ctx(tmp_path, stocknet_dir, options_dir, date(2014, 6, 6))
    env = run_tool(name="get_option_greeks", arguments={"contracts": ["AAPL140613P00720000"]}, ctx=ctx)
    assert env.ok and env.data
    (row,) = env.data["contracts"]
    assert row["mid"] == pytest.approx(74.30) and row["below_intrinsic"] == pytest.approx(74.43)
    assert "error" in row and "iv" not in row
