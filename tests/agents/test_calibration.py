"""The calibration model: walk-forward embargo, shrinkage toward 0.5, abstention, the artifact."""

from __future__ import annotations

import json
from datetime import date, timedelta

import pytest

from agents.quant import calibration as cal
from agents.quant.calibration import CalibrationModel, CalibrationRow

KEY = "rules-test000000"


def _row(*, as_of: date, end: date, known_after: date, x: float, won: bool, h: int = 20) -> CalibrationRow:
    return CalibrationRow(
        key=KEY, horizon=h, as_of=as_of, end_date=end, known_after=known_after, x=x, outperformed=won
    )


def _many(n: int, *, known_after: date, x: float, wins: int, h: int = 20) -> list[CalibrationRow]:
    """``n`` rows in x's bin, ``wins`` of them outperforming, all known after ``known_after``."""
    as_of = known_after - timedelta(days=60)
    return [
        _row(
            as_of=as_of, end=known_after - timedelta(days=30), known_after=known_after, x=x, won=i < wins, h=h
        )
        for i in range(n)
    ]


def test_embargo_excludes_rows_whose_outcome_is_not_known_before_the_prediction() -> None:
    # 1,000 rows known by 2014-01-10, all winners; 1,000 more, all losers, whose embargo ends
    # on 2014-06-02: a prediction on that very day must not see the losers (known_after < T)
    early = _many(1000, known_after=date(2014, 1, 10), x=0.6, wins=1000)
    late = _many(1000, known_after=date(2014, 6, 2), x=0.6, wins=0)
    model = CalibrationModel(early + late, benchmark="SPY")

    on_the_day = model.predict(key=KEY, x=0.6, as_of=date(2014, 6, 2), horizon=20)
    assert on_the_day.rows == 1000
    assert on_the_day.p == pytest.approx((1000 + cal.PRIOR_ROWS / 2) / (1000 + cal.PRIOR_ROWS))
    day_after = model.predict(key=KEY, x=0.6, as_of=date(2014, 6, 3), horizon=20)
    assert day_after.rows == 2000
    assert day_after.p == pytest.approx((1000 + cal.PRIOR_ROWS / 2) / (2000 + cal.PRIOR_ROWS))


def test_embargo_end_adds_h_sessions_after_the_outcome() -> None:
    # 2014-06-27 is a Friday; 5 NYSE sessions later is Monday 2014-07-07 (2014-07-04 a holiday)
    assert cal.embargo_end(date(2014, 6, 27), 5) == date(2014, 7, 7)
    # an end date on a weekend counts from the session before
    assert cal.embargo_end(date(2014, 6, 28), 1) == date(2014, 6, 30)
    with pytest.raises(ValueError, match="positive"):
        cal.embargo_end(date(2014, 6, 27), 0)


def test_few_rows_are_shrunk_toward_one_half() -> None:
    # 250 rows, only 10 in the top bin and all 10 outperformed: the raw frequency is 1.0,
    # the m-estimate stays near 0.5
    rows = _many(240, known_after=date(2014, 1, 10), x=0.0, wins=120)
    rows += _many(10, known_after=date(2014, 1, 10), x=0.8, wins=10)
    model = CalibrationModel(rows, benchmark="SPY")
    pred = model.predict(key=KEY, x=0.8, as_of=date(2014, 2, 1), horizon=20)
    assert not pred.abstained
    assert (pred.bin_rows, pred.bin_wins) == (10, 10)
    assert 0.5 < pred.p < 0.55
    # the same 100 % with many rows moves far from 0.5
    many = CalibrationModel(_many(5000, known_after=date(2014, 1, 10), x=0.8, wins=5000), benchmark="SPY")
    assert many.predict(key=KEY, x=0.8, as_of=date(2014, 2, 1), horizon=20).p > 0.95


def test_m_estimate_formula_and_errors() -> None:
    assert cal.m_estimate(0, 0) == 0.5
    assert cal.m_estimate(30, 40, m=10) == pytest.approx(35 / 50)
    with pytest.raises(ValueError, match="bad counts"):
        cal.m_estimate(5, 4)


def test_zero_rows_abstain_with_a_reason() -> None:
    model = CalibrationModel([], benchmark="SPY")
    pred = model.predict(key=KEY, x=0.9, as_of=date(2015, 1, 2), horizon=20)
    assert pred.abstained and pred.p == 0.5 and pred.rows == 0
    assert pred.reason is not None and KEY in pred.reason and "2015-01-02" in pred.reason
    assert cal.signal_from(pred.p, abstained=True) == "HOLD"


def test_too_few_rows_or_another_key_abstain() -> None:
    rows = _many(cal.MIN_ROWS - 1, known_after=date(2014, 1, 10), x=0.6, wins=cal.MIN_ROWS - 1)
    model = CalibrationModel(rows, benchmark="SPY")
    assert model.predict(key=KEY, x=0.6, as_of=date(2014, 3, 1), horizon=20).abstained
    # rows of one rule set are no evidence for another rule set, nor for another horizon
    full = CalibrationModel(_many(500, known_after=date(2014, 1, 10), x=0.6, wins=400), benchmark="SPY")
    assert not full.predict(key=KEY, x=0.6, as_of=date(2014, 3, 1), horizon=20).abstained
    assert full.predict(key="prompts-other00000", x=0.6, as_of=date(2014, 3, 1), horizon=20).abstained
    assert full.predict(key=KEY, x=0.6, as_of=date(2014, 3, 1), horizon=5).abstained


def test_signal_from_p_uses_the_margin() -> None:
    assert cal.signal_from(0.5 + cal.MARGIN) == "BUY"
    assert cal.signal_from(0.5 - cal.MARGIN) == "SELL"
    assert cal.signal_from(0.5 + cal.MARGIN / 2) == "HOLD"
    assert cal.signal_from(0.99, abstained=True) == "HOLD"


def test_raw_value_of_scorer_and_llm_rows() -> None:
    assert cal.raw_value(signal="BUY", confidence=0.7, score=-0.3, author_kind=None) == -0.3
    assert cal.raw_value(signal="SELL", confidence=0.7, score=0.9, author_kind="llm") == -0.7
    assert cal.raw_value(signal="HOLD", confidence=0.4, score=0.9, author_kind="llm") == 0.0
    with pytest.raises(ValueError, match="without a score"):
        cal.raw_value(signal="BUY", confidence=0.5, score=None, author_kind=None)


def test_artifact_round_trip_and_tamper_check(tmp_path) -> None:  # type: ignore[no-untyped-def]
    rows = _many(300, known_after=date(2014, 1, 10), x=-0.4, wins=100)
    model = CalibrationModel(rows, benchmark="SPY", source="hand-made")
    data = json.loads(json.dumps(model.to_json()))
    again = cal.from_json(data)
    assert again.version == model.version and again.version.startswith("calibration-")
    data["rows"][0][6] = 1 - data["rows"][0][6]  # flip one outcome: a different row set
    with pytest.raises(cal.CalibrationError, match="does not match"):
        cal.from_json(data)
    late = CalibrationModel(
        [_row(as_of=date(2015, 12, 1), end=date(2016, 1, 4), known_after=date(2016, 1, 11), x=0.1, won=True)],
        benchmark="SPY",
    )
    with pytest.raises(cal.CalibrationError, match="held-out"):
        cal.from_json(late.to_json())


def test_the_shipped_artifact_loads_and_fits_nothing_after_2015() -> None:
    model = cal.load()
    assert all(r.end_date <= date(2015, 12, 31) for r in model.rows)
    assert model.version.startswith("calibration-")
