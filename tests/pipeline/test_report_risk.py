"""The report leads with the risk forecast: an embedded analysis's Risk section and ``risk`` JSON
hold the risk model's numbers on the same bars (computed here from the source's file), the
backtest record's rates beside them, the stop's probabilities, and the chart reads the ranges."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import date
from typing import Any

import pandas as pd
import pytest

from agents.analysts.table import ANALYSTS, of_stage
from agents.quant.risk import coverage_line, forecast_risk, load_record
from apps.chart_data import risk_bands
from tests.agents.tools.test_risk_tools import source_bars

AS_OF = date(2012, 6, 1)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One composite AAPL analysis as of 2012-06-01 in embedded mode (its analyses row), with the
    settings of a clean environment (as the ``clean_settings`` fixture, for the module)."""
    from core import masking
    from core.settings import get_settings
    from pipeline.producer import stop_embedded_worker
    from tasks import enqueue_analysis

    state = tmp_path_factory.mktemp("risk-report")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(masking, "_extra", [])
        mp.setattr(masking, "_warned", set())
        mp.setattr(masking, "_current", None)
        for key in list(os.environ):
            if key.startswith("FINAGENT_"):
                mp.delenv(key)
        mp.setenv("FINAGENT_SERVICE_STATE_DIR", str(state / "state"))
        mp.chdir(state)
        get_settings.cache_clear()
        try:
            yield enqueue_analysis("AAPL", as_of=AS_OF, settings=get_settings()).wait(timeout=300)
        finally:
            stop_embedded_worker()
            get_settings.cache_clear()


def test_the_risk_analyst_is_the_first_row_of_the_table() -> None:
    assert ANALYSTS[0].name == "risk" and ANALYSTS[0].section == "Risk"
    assert [row.name for row in of_stage("analysis")] == ["risk", "technical"]


def test_the_json_risk_is_the_models_forecast_on_the_same_bars(finished: dict[str, Any]) -> None:
    assert finished["status"] == "done"
    report = finished["report_json"]
    risk = report["risk"]
    want = forecast_risk(source_bars("AAPL", AS_OF), symbol="AAPL", as_of=AS_OF, horizons=(1, 5, 20, 60))
    assert risk["close"] == pytest.approx(want.close) and risk["as_of"] == "2012-06-01"
    assert risk["sigma_daily"] == pytest.approx(want.sigma_daily, rel=1e-9)
    for got, h in zip(risk["horizons"], want.horizons, strict=True):
        assert got["horizon"] == h.horizon
        assert got["var_95"] == pytest.approx(h.var_95, rel=1e-9)
        assert got["loss_usd"]["var_95"]["per_100"] == pytest.approx(100 * h.var_95 * want.close, rel=1e-9)
        assert [x for r in got["ranges"] for x in (r["low"], r["high"])] == pytest.approx(
            [x for r in h.ranges for x in (r.low, r.high)], rel=1e-9
        )
    # every fact cites its call, and the call is in the analysis's sources
    ref = risk["source_refs"][0]
    assert ref.startswith("risk_forecast_") and ref in report["source_refs"]
    # the stop's probabilities are the model's at the report's stop
    stop = report["stop_loss"]["value"]
    odds = {row["horizon"]: row for row in risk["stop"]["horizons"]}
    assert risk["stop"]["level"] == pytest.approx(stop)
    assert odds[20]["p_touch"] == pytest.approx(want.prob_touch(stop, 20), abs=1e-9)
    assert odds[20]["p_below"] == pytest.approx(want.prob_below(stop, 20), abs=1e-9)
    # the headline: the ranges, then the direction in plain words
    band = next(r for r in risk["horizons"][2]["ranges"] if r["probability"] == 0.8)
    assert report["headline"].startswith(f"80 % range in 20 sessions {band['low']:,.2f}–{band['high']:,.2f}")
    assert report["headline"].endswith(": no evidence") or ": p " in report["headline"]


def test_the_markdown_leads_with_risk_and_cites_the_record(finished: dict[str, Any]) -> None:
    md = finished["report"]
    assert (
        md.index("**Risk**: 80 % range") < md.index("**Signal:") < md.index("## Risk") < md.index("## Quote")
    )
    record = load_record()["horizons"]["20"]
    held = record["ranges"]["80"]
    assert f"(held {held['rate'] * 100:.1f} % [{held['low'] * 100:.1f}, {held['high'] * 100:.1f}])" in md
    exceeded = load_record()["horizons"]["1"]["var"]["95"]
    assert f"(exceeded {exceeded['rate'] * 100:.1f} % [" in md
    assert f"; {coverage_line(20, 0.8)});" in md  # the lead's sentence is the record's own
    assert "P(close below the stop)" in md and "ES(97.5 %)" in md


def test_the_chart_draws_the_reports_ranges(finished: dict[str, Any]) -> None:
    bands = risk_bands(finished["report_json"])
    risk20 = finished["report_json"]["risk"]["horizons"][2]
    assert [b["horizon"] for b in bands] == [20, 20, 20]
    assert [(b["low"], b["high"]) for b in bands] == [(r["low"], r["high"]) for r in risk20["ranges"]]


def test_the_scorecard_scores_the_stored_ranges_once_their_windows_ended(finished: dict[str, Any]) -> None:
    from apps.scorecard import build_scorecard, markdown
    from apps.scorecard_risk import BIN_LABELS, risk_svg
    from core.settings import get_settings
    from tests.agents.tools.conftest import raw_rows

    card = build_scorecard(settings=get_settings())
    tables = card["risk"]
    assert set(tables) == {"1", "5", "20", "60"}  # the embedded data runs to 2013-03-01
    # the realised return from the source's adjusted closes, checked against the report's ranges
    closes = raw_rows("AAPL")["Adj Close"]
    start = closes.index.get_loc("2012-06-01")
    risk = finished["report_json"]["risk"]
    for h in risk["horizons"]:
        realised = closes.iloc[start + h["horizon"]] / closes.iloc[start] - 1
        table = tables[str(h["horizon"])]
        assert table["rows"] == 1 and sum(table["bins"]) == pytest.approx(1.0)
        for band in h["ranges"]:
            inside = band["low_return"] <= realised <= band["high_return"]
            assert table["ranges"][str(round(band["probability"] * 100))]["rate"] == float(inside)
        assert table["var"]["95"]["rate"] == float(realised < -h["var_95"])
    text = markdown(card)
    assert "## Risk forecasts of stored analyses" in text and "VaR(95 %) exceeded" in text
    svg = risk_svg(tables)
    assert svg.startswith("<svg") and svg.count("<rect") == 4 * len(BIN_LABELS) and "<script" not in svg


def test_the_consoles_chart_data_carries_the_ranges(finished: dict[str, Any]) -> None:
    from apps.chart_data import analysis_chart_data
    from core.settings import get_settings

    data = analysis_chart_data(analysis_id=str(finished["id"]), settings=get_settings())
    risk20 = finished["report_json"]["risk"]["horizons"][2]
    assert [(b["low"], b["high"], b["horizon"]) for b in data["bands"]] == [
        (r["low"], r["high"], 20) for r in risk20["ranges"]
    ]
    assert data["bars"][-1]["time"] == "2012-06-01"


def test_an_archived_report_keeps_what_the_risk_tables_read(finished: dict[str, Any]) -> None:
    from apps.scorecard_risk import risk_rows
    from db.archive import slim_report
    from tests.agents.tools.conftest import raw_rows

    closes = raw_rows("AAPL")["Adj Close"]
    closes.index = pd.DatetimeIndex(pd.to_datetime(closes.index))
    report = finished["report_json"]
    slim = slim_report(report)
    assert slim is not None and len(json.dumps(slim["risk"])) < len(json.dumps(report["risk"])) / 3
    entry = {"symbol": "AAPL", "as_of": AS_OF}
    whole = risk_rows({"a": {**entry, "risk": report["risk"]}}, lambda _s: closes)
    kept = risk_rows({"a": {**entry, "risk": slim["risk"]}}, lambda _s: closes)
    assert len(whole) == 4 and whole.equals(kept)


def test_a_report_without_a_forecast_says_why() -> None:
    from core.state import FinancialAgentState, StageError
    from pipeline.report import report_json, report_markdown

    why = "cannot forecast AAPL's risk: 33 session(s) up to 2000-04-14; the risk model needs at least 60"
    state = FinancialAgentState(
        analysis_id="a",
        stock_symbol="AAPL",
        as_of=date(2000, 4, 14),
        errors=[
            StageError(
                stage="analysis", iteration=0, code="INVALID_INPUT", message=f"risk_forecast: {why}",
                critical=False, permanent=True,
            )
        ],
    )  # fmt: skip
    assert f"**Risk**: no forecast: {why}." in report_markdown(state)
    assert "## Risk" not in report_markdown(state) and report_json(state)["risk"] is None


def test_the_lead_prints_prices_and_percentages_by_the_products_rule() -> None:
    """Prices to the cent with thousands separators, a VaR as a percentage to two decimals with a
    space before the sign (docs/design.md), on numbers made here."""
    from pipeline.report_risk import risk_lead

    one = {
        "horizon": 1,
        "ranges": [{"probability": 0.8, "low": 1180.5, "high": 1290.126}],
        "var_95": 0.029512,
        "loss_usd": {"var_95": {"per_share": 36.104}},
    }
    text = risk_lead({"horizons": [one], "close": 1234.5})
    # 0.029512 × 100 = 2.9512 → "2.95 %"; 1290.126 → "1,290.13"; 36.104 → "36.10"
    assert text == (
        "**Risk**: 80 % range in 1 session 1,180.50–1,290.13 USD (close 1,234.50; not backtested); "
        "VaR(95 %, 1 session) 2.95 % = 36.10 USD a share."
    )
