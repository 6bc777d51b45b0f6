"""Building calibration rows from scored recommendations, the signal from p, the report sentence."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest

from agents.quant import calibration as cal
from apps.calibration import CalibrateError, evaluate, rows_from_scores
from core.parts import Recommendation
from core.state import FinancialAgentState
from pipeline.report import report_json, report_markdown
from pipeline.stages.recommendation import _calibrate, calibrated_probability

KEY = "rules-test000000"


def _score(aid: str, *, as_of: date, end: date, h: int, excess: float, score: float = 0.4) -> dict[str, Any]:
    return {
        "analysis_id": aid,
        "horizon": h,
        "as_of": as_of,
        "end_date": end,
        "signal": "BUY",
        "confidence": 0.7,
        "score": score,
        "excess_return": excess,
        "benchmark": "SPY",
        "analyst": "deterministic scorer",
        "prompt_version": KEY,
    }


def test_rows_carry_the_embargo_and_drop_held_out_outcomes() -> None:
    scores = [
        # Friday 2014-06-20 + 5 sessions = 2014-06-27; + 5 more (2014-07-04 a holiday) = 2014-07-07
        _score("a", as_of=date(2014, 6, 20), end=date(2014, 6, 27), h=5, excess=0.01),
        # outcome in the held-out period: never fitted
        _score("b", as_of=date(2015, 12, 24), end=date(2016, 1, 4), h=5, excess=0.02),
        {
            **_score("c", as_of=date(2014, 6, 20), end=date(2014, 6, 27), h=5, excess=0.01),
            "benchmark": "universe",
        },
    ]
    rows, late, other = rows_from_scores(scores, raw_signals={}, until=cal.FIT_UNTIL, benchmark="SPY")
    assert (len(rows), late, other) == (1, 1, 1)
    (row,) = rows
    assert row.known_after == date(2014, 7, 7) and row.outperformed and row.x == 0.4
    # a model of 300 such rows: invisible on the embargo's last day, usable the day after
    # (where one date is no evidence either: the gate abstains, having seen the rows)
    model = cal.CalibrationModel([row] * 300, benchmark="SPY")
    assert model.predict(key=KEY, x=0.4, as_of=date(2014, 7, 7), horizon=5).rows == 0
    assert model.predict(key=KEY, x=0.4, as_of=date(2014, 7, 8), horizon=5).rows == 300


def test_fitting_on_the_held_out_period_is_refused() -> None:
    with pytest.raises(CalibrateError, match="held out"):
        rows_from_scores([], raw_signals={}, until=date(2016, 1, 4), benchmark="SPY")


def test_an_llm_row_is_binned_by_its_own_signal_and_confidence() -> None:
    row = {
        **_score("l", as_of=date(2014, 6, 20), end=date(2014, 6, 27), h=5, excess=-0.01),
        "analyst": "llm synthesis",
        "signal": "HOLD",  # the published (calibrated) signal
    }
    rows, _, _ = rows_from_scores([row], raw_signals={"l": "SELL"}, until=cal.FIT_UNTIL, benchmark="SPY")
    assert rows[0].x == -0.7 and not rows[0].outperformed


def _model(n: int, wins: int, *, x: float = 0.6) -> cal.CalibrationModel:
    known = date(2014, 3, 3)
    rows = [
        cal.CalibrationRow(
            key=KEY,
            horizon=h,
            as_of=known - timedelta(days=70 + 7 * (i % 60)),  # 60 weekly dates
            end_date=known - timedelta(days=30),
            known_after=known,
            x=x,
            outperformed=i < wins,
        )
        for h in cal.HORIZONS
        for i in range(n)
    ]
    return cal.CalibrationModel(rows, benchmark="SPY")


def _state(rec: Recommendation, as_of: date) -> FinancialAgentState:
    return FinancialAgentState(analysis_id="a", stock_symbol="AAPL", as_of=as_of, recommendation=rec)


def test_the_report_names_p_its_evidence_and_the_model_version() -> None:
    model = _model(1000, 700)
    prob = calibrated_probability(key=KEY, x=0.6, as_of=date(2014, 6, 2), model=model)
    p = (700 + cal.PRIOR_ROWS / 2) / (1000 + cal.PRIOR_ROWS)  # the m-estimate by hand: 0.6667
    rec = Recommendation(
        signal=cal.signal_from(p), confidence=0.71, score=0.6, raw_signal="BUY", probability=prob
    )
    md = report_markdown(_state(rec, date(2014, 6, 2)))
    # at 60 days the 60 weekly dates are 5 non-overlapping blocks: |t| >= 3 read on t(4) needs
    # t >= 6.6, which 0.70 of 1,000 overlapping rows does not reach
    assert (
        f"**Signal: BUY**: p(outperform SPY, 20d) = {p:.2f}, calibrated on 1,000 past signals of {KEY}, "
        f"2012-11 .. 2013-12 ({model.version}); 5d {p:.2f}, 60d abstained."
    ) in md
    # the raw confidence stays, as a detail: in the details section, never above it
    head, details = md.split("## Details of the direction call")
    assert "confidence" not in head and "0.71" not in head
    assert "Raw rule score +0.60 (BUY, rule set `rules-test000000`; confidence 0.71" in details
    data = report_json(_state(rec, date(2014, 6, 2)))
    assert data["p_outperform"] == round(p, 4)
    assert "confidence" not in data and "score" not in data and "raw_signal" not in data
    assert data["details"]["confidence"] == 0.71 and data["details"]["raw_signal"] == "BUY"
    assert data["direction"]["evidence"] is True and data["headline"] == f"BUY: p {p:.2f} (20d)"


def test_without_evidence_the_recommendation_abstains_to_hold() -> None:
    # 2012: before every row of the shipped artifact
    rec = Recommendation(signal="BUY", confidence=0.85, score=0.7)
    _calibrate(rec, as_of=date(2012, 6, 29))
    assert (rec.signal, rec.raw_signal) == ("HOLD", "BUY")
    assert rec.probability is not None and rec.probability["abstained"] is True
    assert all(v["p"] == 0.5 for v in rec.probability["horizons"].values())
    md = report_markdown(_state(rec, date(2012, 6, 29)))
    # the headline is one plain sentence with the rule set's measured hit rate, computed here
    # from the shipped artifact's rows by hand: BUY at score >= 0.25, SELL at <= -0.25, right
    # when a BUY beat SPY or a SELL did not
    rows = [r for r in cal.load().rows if r.horizon == 20 and r.key == rec.probability["key"]]
    calls = [(r.x >= 0.25) == r.outperformed for r in rows if abs(r.x) >= 0.25]
    rate = sum(calls) / len(calls)
    head = md.split("## Details of the direction call")[0]
    assert (
        "**Signal: HOLD**: No evidence that any signal here predicts AAPL against SPY; our directional "
        f"calls were right {rate * 100:.0f} % ["
    ) in head
    assert (
        f"of the time at 20 sessions ({len(calls):,} calls, 2013-07..2015-11; 95 %, clustered by date" in head
    )
    assert "confidence" not in head and "0.85" not in head and "calibration-" not in head
    # the abstention's reason and the calibration's version are in the details, with the raw BUY
    assert "- Calibration: p(outperform SPY, 20d) = 0.50: abstained, no out-of-sample evidence" in md
    buys = [(r.outperformed) for r in rows if r.x >= 0.25]
    assert (
        f"- Raw rule score +0.70 (BUY, rule set `{rec.probability['key']}`; confidence 0.85, a vote share, "
        f"not a probability): BUY calls of these rules were right {sum(buys) / len(buys) * 100:.0f} % ["
    ) in md
    data = report_json(_state(rec, date(2012, 6, 29)))
    assert data["headline"] == "HOLD: no evidence" and data["direction"]["evidence"] is False
    assert data["direction"]["record"]["calls"] == len(calls)


def test_evaluation_counts_abstentions_at_one_half() -> None:
    model = _model(300, 150, x=0.1)
    result = evaluate(model, start=date(2012, 1, 1), end=date(2015, 12, 31))
    for h in cal.HORIZONS:
        m = result["horizons"][h]
        # every row predates the embargo of all rows: all abstain, p = 0.5, Brier exactly 0.25
        assert (m["n"], m["abstained"]) == (300, 300)
        assert m["brier"] == pytest.approx(0.25) and m["brier_called"] is None
