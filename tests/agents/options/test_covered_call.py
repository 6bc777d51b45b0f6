"""The covered-call plan (position → chart → options → research) on the real Lean chains, the
dividend and split events of the Lean factor files, and the plan's row in the table."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pytest
from agents.analysts.covered_call import CoveredCallInputs, run_covered_call_plan

from agents.data.market.csv_folder import CsvFolderProvider
from agents.data.options.dividends import read_factor_file
from agents.tools.catalog import run_tool
from agents.tools.registry import ToolContext
from core.settings import Settings
from tests.conftest import SHARED_DATA

FACTOR_DIR = SHARED_DATA / "ohlcv" / "lean" / "factor_files"
# stocknet AAPL 2014-06-06 through the tools: close 645.57 (the shares traded that day)
AAPL_TECHNICAL = {"close": 645.57, "indicators": {"sma_50": 600.0, "sma_200": 540.0, "adx_14": 30.0}}
AAPL_EARNINGS = {"next": None, "checked_through": "2014-07-06", "recent": [{"date": "2014-04-23"}]}


@pytest.fixture
def factor_dir() -> Path:
    if not FACTOR_DIR.is_dir():
        pytest.skip(f"Lean factor files not found at {FACTOR_DIR} (only present in the workplace)")
    return FACTOR_DIR


def _ctx(tmp_path: Path, stocknet: Path, options: Path, as_of: date, **settings: Any) -> ToolContext:
    return ToolContext(
        settings=Settings(state_dir=tmp_path / "state", options_dir=options, **settings),
        as_of=as_of,
        provider=CsvFolderProvider(data_dir=stocknet),
    )


def _chart(resistance: list[tuple[float, float]]) -> dict[str, Any]:
    return {
        "support_resistance": {
            "resistance": [{"low": lo, "high": hi, "price": hi, "touches": 2} for lo, hi in resistance],
            "window": {"start": "2013-12-06", "end": "2014-06-06", "bars": 125, "period": "6mo"},
        },
        "support_resistance_ref": "find_support_resistance_x",
    }


def _plan(ctx: ToolContext, **kw: Any) -> dict[str, Any]:
    kw.setdefault("technical_ref", "technical_indicators_x")
    kw.setdefault("earnings_ref", "get_earnings_dates_x")
    outcome = run_covered_call_plan(
        CoveredCallInputs(
            as_of=ctx.as_of,
            run=lambda name, args: run_tool(name=name, arguments=args, ctx=ctx),
            **kw,
        )
    )
    return outcome.value


def test_lean_factor_file_gives_aapl_dividends_and_the_split(factor_dir: Path) -> None:
    """AAPL's 2014 events as published: ex-dividend 2014-02-06 3.05 and 2014-05-08 3.29 USD
    (pre-split shares), the 7:1 split effective 2014-06-09, then 0.47 on 2014-08-07 (post-split).
    Hand check of the 05-08 amount: rows 20140507 (price factor 0.8961764, ref 592.33) and
    20140606 (0.9011818): 592.33 × (1 − 0.8961764 / 0.9011818) = 3.29."""
    f = read_factor_file(factor_dir, "AAPL")
    got = [
        (e.kind, e.ex_date.isoformat(), e.amount, e.ratio)
        for e in f.between(date(2014, 1, 1), date(2014, 9, 1))
    ]
    assert got == [
        ("dividend", "2014-02-06", 3.05, None),
        ("dividend", "2014-05-08", 3.29, None),
        ("split", "2014-06-09", None, 7.0),
        ("dividend", "2014-08-07", 0.47, None),
    ]
    assert f.covered_through == date(2021, 3, 31)  # the last bar of lean/AAPL.csv


def test_aapl_2014_06_06_call_side_suggestion_with_the_split_notice(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path, factor_dir: Path
) -> None:
    """Cost basis 600, resistance zone 651.26 (the 2014-06-06 high): the strike must be ≥ 651.26;
    with a 0.2 % weekly target the 2014-06-21 665 call is picked (bid 4.95: 494.35 USD net of the
    0.65 fee, 494.35 / 64,557 × 7 / 15 = 0.357 % a week on the shares). No ex-dividend date
    06-07..06-21 (the next is 08-07); the 7:1 split of 06-09 is noticed."""
    ctx = _ctx(
        tmp_path,
        stocknet_dir,
        options_dir,
        date(2014, 6, 6),
        csp_min_weekly_roc=0.002,
        dividends_dir=factor_dir,
    )
    record = _plan(
        ctx,
        symbol="AAPL",
        technical=AAPL_TECHNICAL,
        chart=_chart([(651.26, 651.26)]),
        earnings=AAPL_EARNINGS,
        cost_basis=600.0,
    )
    assert record["status"] == "suggested", record["reasons"]
    s = record["suggestion"]
    assert s["contract"] == "AAPL140621C00665000" and s["strike"] >= 651.26
    assert s["fill"] == 4.95 and s["net_premium"] == pytest.approx(4.95 * 100 - 0.65)
    assert s["net_weekly_roc"] == pytest.approx(494.35 / 64557.0 * 7 / 15, abs=1e-6)
    assert all(a["strike"] >= 651.26 and a["expiry"] < "2014-07-09" for a in record["alternatives"])
    research = record["research"]
    assert research["dividend"] == "clear" and research["split"] == "noticed"
    texts = " ".join(r["text"] for r in record["reasons"])
    assert "split 7.0:1 on 2014-06-09" in texts and "no ex-dividend date" in texts
    assert record["options"]["min_strike_from"] == "resistance zone top"


def test_cost_basis_above_resistance_sets_the_floor(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path, factor_dir: Path
) -> None:
    ctx = _ctx(
        tmp_path,
        stocknet_dir,
        options_dir,
        date(2014, 6, 6),
        csp_min_weekly_roc=0.002,
        dividends_dir=factor_dir,
    )
    record = _plan(
        ctx, symbol="AAPL", technical=AAPL_TECHNICAL, chart=_chart([(651.26, 651.26)]),
        earnings=AAPL_EARNINGS, cost_basis=680.0,
    )  # fmt: skip
    assert record["options"]["min_strike"] == 680.0 and record["options"]["min_strike_from"] == "cost basis"
    picks = [record["suggestion"], *record["alternatives"]] if record["status"] == "suggested" else []
    assert all(p["strike"] >= 680.0 for p in picks)


def test_goog_2015_12_24_rejected_by_the_options_analyst(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path
) -> None:
    """IV 0.1731 below HV(20) 0.2053 on GOOG 2015-12-24: a cited rejection, as for the put side."""
    ctx = _ctx(tmp_path, stocknet_dir, options_dir, date(2015, 12, 24))
    record = _plan(
        ctx, symbol="GOOG", technical={"close": 748.4, "indicators": {}}, chart=_chart([(754.13, 762.71)]),
        earnings=None, cost_basis=700.0,
    )  # fmt: skip
    assert record["rejected_by"] == "options"
    assert "IV 0.1731 below HV(20) 0.2053" in record["reasons"][0]["text"]
    assert record["reasons"][0]["source_refs"][0].startswith("calculate_iv_hv_")


def test_no_shares_and_no_cost_basis_is_a_cited_rejection(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path
) -> None:
    ctx = _ctx(tmp_path, stocknet_dir, options_dir, date(2014, 6, 6))
    record = _plan(ctx, symbol="AAPL", technical=AAPL_TECHNICAL, chart=_chart([]), earnings=AAPL_EARNINGS)
    assert record["rejected_by"] == "position"
    assert "holds 0 shares of AAPL" in record["reasons"][0]["text"]
    assert record["reasons"][0]["source_refs"][0].startswith("get_portfolio_")


def test_dividends_not_evaluated_without_the_factor_files(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path
) -> None:
    ctx = _ctx(tmp_path, stocknet_dir, options_dir, date(2014, 6, 6), csp_min_weekly_roc=0.002)
    record = _plan(
        ctx, symbol="AAPL", technical=AAPL_TECHNICAL, chart=_chart([(651.26, 651.26)]),
        earnings=AAPL_EARNINGS, cost_basis=600.0,
    )  # fmt: skip
    assert record["status"] == "suggested"
    assert record["research"]["dividend"] == "not_evaluated"
    assert any("NOT_CONFIGURED" in r["text"] for r in record["reasons"])


def test_the_row_is_offered_everywhere() -> None:
    from core.plans import cli_choices, plan_spec
    from pipeline.api.schemas import AnalyzeRequest
    from pipeline.query import analysis_type_of

    assert "covered_call" in cli_choices() and plan_spec("covered_call").level_method == "zones"
    assert AnalyzeRequest(symbol="AAPL", analysis_type="covered_call", options={"cost_basis": 600}).options
    assert analysis_type_of("sell a covered call on AAPL") == "covered_call"


def test_csp_sizing_against_the_paper_account(
    tmp_path: Path, stocknet_dir: Path, options_dir: Path, factor_dir: Path
) -> None:
    """The 2014-06-21 620 put sold at the bid 3.30 (net 329.35 after the 0.65 fee) on the default
    paper account (cash 100,000, nothing held): collateral 62,000 fits once at a 100 % limit; if
    assigned, 100 shares at 620 − 3.2935 = 616.7065. At a 25 % limit (25,000) nothing fits. The
    7:1 split of 2014-06-09 falls before the expiry and is noticed."""
    from agents.analysts.csp import size_suggestion

    ctx = _ctx(tmp_path, stocknet_dir, options_dir, date(2014, 6, 6), dividends_dir=factor_dir)
    put = {
        "contract": "AAPL140621P00620000",
        "strike": 620,
        "expiry": "2014-06-21",
        "fill": 3.3,
        "net_premium": 329.35,
    }

    def run(name: str, args: dict[str, Any]) -> Any:
        return run_tool(name=name, arguments=args, ctx=ctx)

    out = size_suggestion(
        symbol="AAPL", as_of=ctx.as_of, suggestion=put, price_factor=1.0, run=run, max_collateral_pct=1.0,
        check_events=True,
    ).value  # fmt: skip
    sizing = out["sizing"]
    assert (
        sizing["contracts"] == 1 and sizing["by_cash"] == 1 and sizing["collateral_per_contract"] == 62000.0
    )
    assert sizing["assignment"] == {
        "shares": 100, "cost_basis": 616.7065, "cost_basis_bars_units": 616.7065, "capital": 62000.0,
    }  # fmt: skip
    assert out["events"]["split"] == "noticed" and out["events"]["dividend"] == "clear"
    tight = size_suggestion(
        symbol="AAPL", as_of=ctx.as_of, suggestion=put, price_factor=1.0, run=run, max_collateral_pct=0.25,
        check_events=False,
    ).value  # fmt: skip
    assert tight["sizing"]["contracts"] == 0 and tight["events"] is None
    assert tight["sizing"]["reasons"][0]["text"].startswith("no contract fits: collateral 62,000.00 USD")
