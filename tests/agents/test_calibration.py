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


def _many(
    n: int, *, known_after: date, x: float, wins: int, h: int = 20, dates: int = 40
) -> list[CalibrationRow]:
    """``n`` rows in x's bin, ``wins`` of them outperforming, all known after ``known_after``,
    dealt in turn over ``dates`` weekly as_of dates (so the evidence gate sees many dates)."""
    last = known_after - timedelta(days=60)
    return [
        _row(
            as_of=last - timedelta(weeks=i % dates),
            end=known_after - timedelta(days=30),
            known_after=known_after,
            x=x,
            won=i < wins,
            h=h,
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


def test_a_bin_that_speaks_is_shrunk_toward_one_half() -> None:
    # 100 rows at 5 days over 50 weekly dates, every one outperformed: the raw frequency is
    # 1.0, the gate lets the bin speak, and the m-estimate says (100 + 100) / (100 + 200)
    rows = _many(240, known_after=date(2014, 1, 10), x=0.0, wins=120, h=5, dates=50)
    rows += _many(100, known_after=date(2014, 1, 10), x=0.8, wins=100, h=5, dates=50)
    model = CalibrationModel(rows, benchmark="SPY")
    pred = model.predict(key=KEY, x=0.8, as_of=date(2014, 2, 1), horizon=5)
    assert not pred.abstained
    assert (pred.bin_rows, pred.bin_wins) == (100, 100)
    assert pred.p == pytest.approx(200 / 300)
    # the same 100 % with many rows moves far from 0.5
    many = CalibrationModel(_many(5000, known_after=date(2014, 1, 10), x=0.8, wins=5000), benchmark="SPY")
    assert many.predict(key=KEY, x=0.8, as_of=date(2014, 2, 1), horizon=20).p > 0.95


def test_few_rows_in_a_bin_abstain_by_the_gate() -> None:
    # 10 rows in the top bin, all outperformed, at 20 days over weekly dates: 10 dates are 2.5
    # blocks of non-overlapping outcomes, far too few to tell 1.0 from a coin flip
    rows = _many(240, known_after=date(2014, 1, 10), x=0.0, wins=120)
    rows += _many(10, known_after=date(2014, 1, 10), x=0.8, wins=10)
    pred = CalibrationModel(rows, benchmark="SPY").predict(key=KEY, x=0.8, as_of=date(2014, 2, 1), horizon=20)
    assert pred.abstained and pred.p == 0.5 and (pred.bin_rows, pred.bin_wins) == (10, 10)
    assert pred.reason is not None and "coin flip" in pred.reason


def _clustered(wins_per_date: list[int], *, per_date: int = 20, h: int = 5) -> CalibrationModel:
    """Rows at weekly dates, ``per_date`` a date in the top bin, ``wins_per_date[k]`` of date k
    outperforming."""
    rows: list[CalibrationRow] = []
    for k, wins in enumerate(wins_per_date):
        as_of = date(2013, 1, 7) + timedelta(weeks=k)
        rows += [
            _row(as_of=as_of, end=as_of, known_after=date(2013, 12, 2), x=0.8, won=i < wins, h=h)
            for i in range(per_date)
        ]
    return CalibrationModel(rows, benchmark="SPY")


def test_the_gate_by_hand_clustered_by_date() -> None:
    # 10 weekly dates x 20 rows: 8 dates with 16 wins, 2 with 5. p^ = 138/200 = 0.69; residuals
    # S_c - p^ n_c: +2.2 (8 dates), -8.8 (2 dates); sum of squares 193.6; Var = 193.6/200^2 *
    # 10/9 = 0.0053778, se 0.0733333; L = 1 (5-day outcomes every 5 sessions): t = 0.19 / se =
    # 2.59. That cleared the old 95 % gate (t(0.975, 9) = 2.262); the hurdle |t| >= 3 read on
    # t(9) is 4.0943: no evidence
    model = _clustered([16] * 8 + [5] * 2)
    speaks, half = model.separates(key=KEY, horizon=5, bin_index=4, usable=200)
    assert not speaks and half == pytest.approx(4.094255 * 0.0733333, abs=2e-6)
    assert model.predict(key=KEY, x=0.8, as_of=date(2014, 1, 6), horizon=5).abstained
    # 8 dates with 18 wins, 2 with 10: p^ = 164/200 = 0.82; residuals +1.6 and -6.4; sum of
    # squares 102.4; Var = 0.0028444 (above the binomial floor 0.66 * 0.34 / 200 = 0.0011220),
    # se 0.0533333: t = 6.0 clears 4.0943; half-width 4.094255 * 0.0533333 = 0.218360
    model = _clustered([18] * 8 + [10] * 2)
    speaks, half = model.separates(key=KEY, horizon=5, bin_index=4, usable=200)
    assert speaks and half == pytest.approx(0.218360, abs=2e-6)
    pred = model.predict(key=KEY, x=0.8, as_of=date(2014, 1, 6), horizon=5)
    assert not pred.abstained and pred.p == pytest.approx((164 + 100) / 400)
    # the same rows as 20-day outcomes overlap four weekly dates each: 10 dates are 2.5 blocks,
    # the variance 4x and the t quantile with 1.5 degrees of freedom huge: no evidence
    model = _clustered([18] * 8 + [10] * 2, h=20)
    assert not model.separates(key=KEY, horizon=20, bin_index=4, usable=200)[0]


def test_a_t_of_two_and_a_half_is_not_evidence() -> None:
    # 100 weekly dates x 20 rows: 56 dates with 11 wins, 44 with 10. p^ = 1056/2000 = 0.528; the
    # clustered variance (6.2e-6) is below the binomial floor at the shrunk p, (1056 + 100) /
    # 2200 = 0.525455: 0.525455 * 0.474545 / 2000 = 1.24676e-4, se 0.0111659, t = 2.51 on 100
    # date blocks: above the 1.98 of a 95 % test, below the hurdle 3.0775 (t(99) at p = 0.0027)
    model = _clustered([11] * 56 + [10] * 44)
    speaks, half = model.separates(key=KEY, horizon=5, bin_index=4, usable=2000)
    assert not speaks
    assert half == pytest.approx(3.077549 * 0.0111659, abs=2e-6)
    pred = model.predict(key=KEY, x=0.8, as_of=date(2015, 1, 5), horizon=5)
    assert pred.abstained and pred.reason is not None
    assert "|t| ≥ 3 needed after 39 signals tried" in pred.reason


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


def test_critical_value_is_the_hurdle_of_three_read_on_students_t() -> None:
    from scipy.stats import norm  # type: ignore[import-untyped]
    from scipy.stats import t as student_t

    # many blocks: the normal hurdle itself; few: the t quantile at the same tail (p = 0.0027)
    assert cal.critical_value(1e7) == pytest.approx(3.0, abs=1e-4)
    for blocks in (5, 10, 28, 100):
        c = cal.critical_value(blocks)
        assert c > 3.0
        assert 2 * student_t.sf(c, blocks - 1) == pytest.approx(2 * norm.sf(3.0), rel=1e-9)
    assert cal.critical_value(10) == pytest.approx(4.094255, abs=1e-6)
    with pytest.raises(ValueError, match="more than one"):
        cal.critical_value(1)


def test_the_trials_counted_are_in_the_artifacts_method() -> None:
    assert cal.trials() == 39
    assert cal.method_constants()["trials"] == 39
    assert "|t| >= 3.0" in cal.method_constants()["gate"]


def test_the_track_record_at_five_days_is_statsmodels_cluster_robust_interval() -> None:
    """The shipped rule set's raw calls at 5 days (weekly dates: no overlap) against an
    independent computation: the hit indicator regressed on a constant with statsmodels'
    cluster-robust covariance by as_of date and Student's t with G - 1 degrees of freedom."""
    import numpy as np
    import statsmodels.api as sm

    model = cal.load()
    key = model.labels()[0]
    rows = [r for r in model.rows if r.key == key and r.horizon == 5 and abs(r.x) >= 0.25]
    right = np.array([float((r.x >= 0.25) == r.outperformed) for r in rows])
    dates = np.unique([r.as_of for r in rows], return_inverse=True)[1]
    fit = sm.OLS(right, np.ones(len(right))).fit(cov_type="cluster", cov_kwds={"groups": dates}, use_t=True)
    low, high = fit.conf_int(alpha=0.05)[0]
    record = model.call_record(key=key, horizon=5)
    assert record is not None
    assert (record["calls"], record["right"]) == (len(rows), int(right.sum()))
    assert record["rate"] == pytest.approx(right.mean(), abs=5e-5)
    assert (record["low"], record["high"]) == (pytest.approx(low, abs=5e-5), pytest.approx(high, abs=5e-5))
    # one side only, and no record for a key that never called
    sells = model.call_record(key=key, horizon=5, side="SELL")
    assert sells is not None and sells["calls"] == sum(r.x <= -0.25 for r in rows)
    assert model.call_record(key="prompts-never0000", horizon=5) is None
    with pytest.raises(ValueError, match="side"):
        model.call_record(key=key, horizon=5, side="HOLD")
