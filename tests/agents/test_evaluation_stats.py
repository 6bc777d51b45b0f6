"""The scorecard's statistics against hand-computed and published values."""

from __future__ import annotations

import math
from datetime import date

import numpy as np
import pytest

from agents.quant import evaluation_stats as es


def _wilson_textbook(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    # Wilson (1927): (p + z²/2n ± z·sqrt(p(1−p)/n + z²/4n²)) / (1 + z²/n)
    p = k / n
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)


def test_wilson_interval_matches_the_textbook_formula_for_485_of_1000() -> None:
    got = es.wilson_interval(485, 1000)
    low, high = _wilson_textbook(485, 1000)
    assert got.rate == 0.485
    assert got.low == pytest.approx(low, abs=1e-9)
    assert got.high == pytest.approx(high, abs=1e-9)
    assert got.low == pytest.approx(0.4541, abs=5e-5)  # the interval contains 0.5: no claim
    assert not got.excludes(0.5)


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [(81, 263, 0.2553, 0.3662), (0, 20, 0.0, 0.1611), (15, 148, 0.0624, 0.1605)],
)
def test_wilson_interval_matches_newcombe_1998_table(k: int, n: int, low: float, high: float) -> None:
    # Newcombe, "Two-sided confidence intervals for the single proportion", Stat. Med. 1998, table II
    got = es.wilson_interval(k, n)
    assert (got.low, got.high) == (pytest.approx(low, abs=1e-4), pytest.approx(high, abs=1e-4))


def test_wilson_interval_refuses_impossible_counts() -> None:
    with pytest.raises(ValueError, match="successes"):
        es.wilson_interval(5, 4)
    with pytest.raises(ValueError, match="successes"):
        es.wilson_interval(0, 0)


def test_hac_mean_matches_newey_west_by_hand() -> None:
    # y = 1..5, mean 3, residuals −2..2; one lag, Bartlett weight 1/2:
    # S = (Σe² + 2·½·Σe_t e_{t−1}) / n = (10 + 4) / 5 = 2.8; var(mean) = S / n = 0.56
    got = es.hac_mean([1.0, 2.0, 3.0, 4.0, 5.0], maxlags=1)
    assert got is not None
    assert got.mean == pytest.approx(3.0)
    assert got.se == pytest.approx(math.sqrt(0.56))
    assert got.t == pytest.approx(3.0 / math.sqrt(0.56))
    assert (got.n, got.lags) == (5, 1)
    # no lag: White's variance Σe²/n² = 10/25
    plain = es.hac_mean([1.0, 2.0, 3.0, 4.0, 5.0], maxlags=0)
    assert plain is not None and plain.se == pytest.approx(math.sqrt(0.4))


def test_positive_autocorrelation_widens_the_newey_west_interval() -> None:
    rng = np.random.default_rng(7)
    shocks = rng.normal(size=400)
    overlapping = np.convolve(shocks, np.ones(12) / 12, mode="valid") + 0.05  # MA(11): 12-period windows
    naive = es.hac_mean(overlapping, maxlags=0)
    robust = es.hac_mean(overlapping, maxlags=11)
    assert naive is not None and robust is not None
    assert robust.se > 2 * naive.se
    assert abs(robust.t) < abs(naive.t)


def test_hac_mean_needs_three_values_with_spread() -> None:
    assert es.hac_mean([1.0, 2.0], maxlags=0) is None
    assert es.hac_mean([1.0, 1.0, 1.0, 1.0], maxlags=0) is None
    with pytest.raises(ValueError, match="maxlags"):
        es.hac_mean([1.0, 2.0, 3.0], maxlags=-1)


@pytest.mark.parametrize(
    ("h", "step", "lags"), [(5, 5, 0), (20, 5, 3), (60, 5, 11), (5, 1, 4), (7, 5, 1), (3, 5, 0)]
)
def test_overlap_lags(h: int, step: float, lags: int) -> None:
    assert es.overlap_lags(h, step) == lags


def test_grid_step_of_weekly_fridays_is_five_sessions() -> None:
    fridays = [date(2015, 1, 2), date(2015, 1, 9), date(2015, 1, 16), date(2015, 1, 23)]
    assert es.grid_step_sessions([*fridays, *fridays]) == 5.0
    assert es.grid_step_sessions([date(2015, 1, 2)]) == 1.0


def test_date_clustered_mean_averages_dates_first() -> None:
    d1, d2, d3 = date(2015, 1, 2), date(2015, 1, 9), date(2015, 1, 16)
    got = es.date_clustered_mean([d1, d1, d2, d2, d3], [1.0, 3.0, 2.0, 2.0, 6.0], maxlags=0)
    # per-date means 2, 2, 6: mean 10/3 (the row mean would be 14/5); residuals −4/3, −4/3, 8/3
    assert got is not None
    assert got.mean == pytest.approx(10 / 3)
    assert got.n == 3
    assert got.se == pytest.approx(math.sqrt((96 / 9) / 9))


def test_per_date_ic_is_spearman_within_each_date() -> None:
    a, b, c, d = (date(2015, 1, n) for n in (2, 9, 16, 23))
    dates = [a, a, a, b, b, b, c, c, d, d, d, d]
    scores = [1, 2, 3, 1, 2, 3, 1, 2, 1, 2, 3, 4]
    outcomes = [0.1, 0.2, 0.3, 0.3, 0.2, 0.1, 0.5, 0.6, 0.1, 0.3, 0.2, 0.4]
    got = es.per_date_ic(dates, scores, outcomes)
    # d: ranks of the outcomes 1,3,2,4 → Σd² = 2, ρ = 1 − 6·2/(4·15) = 0.8; c has two names only
    assert list(got.index) == [a, b, d]
    assert got.to_list() == [pytest.approx(1.0), pytest.approx(-1.0), pytest.approx(0.8)]


def test_brier_ece_and_reliability_on_a_hand_example() -> None:
    p = [0.1, 0.15, 0.8, 0.85, 0.95]
    y = [0, 1, 1, 1, 0]
    # Brier: (0.01 + 0.7225 + 0.04 + 0.0225 + 0.9025) / 5
    assert es.brier_score(p, y) == pytest.approx(1.6975 / 5)
    table = es.reliability_table(p, y)
    assert [(b["bin"], b["n"]) for b in table] == [(1, 2), (8, 2), (9, 1)]
    assert [b["mean_p"] for b in table] == [pytest.approx(0.125), pytest.approx(0.825), pytest.approx(0.95)]
    assert [b["observed"] for b in table] == [0.5, 1.0, 0.0]
    # ECE: (2·0.375 + 2·0.175 + 1·0.95) / 5
    assert es.expected_calibration_error(p, y) == pytest.approx(2.05 / 5)


def test_always_half_scores_the_no_view_baseline() -> None:
    y = [0, 1, 1, 0, 1]
    assert es.brier_score([0.5] * 5, y) == pytest.approx(0.25)
    assert es.expected_calibration_error([0.5] * 5, y) == pytest.approx(0.1)  # |0.6 − 0.5|


def test_probability_one_falls_in_the_last_bin_and_bad_input_is_refused() -> None:
    assert es.reliability_table([1.0], [1])[0]["bin"] == 9
    with pytest.raises(ValueError, match="probability"):
        es.brier_score([1.2], [1])
    with pytest.raises(ValueError, match="0 or 1"):
        es.brier_score([0.5], [2])
    with pytest.raises(ValueError, match="one length"):
        es.brier_score([0.5, 0.5], [1])
