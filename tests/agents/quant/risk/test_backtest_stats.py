"""VaR backtest statistics against their textbook formulas (computed here independently, term by
term) and the Basel Committee's published table."""

from __future__ import annotations

import math

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats

from agents.quant.risk import backtest as bt


def _kupiec_by_hand(x: int, n: int, p: float) -> float:
    # Kupiec (1995): LR = -2 ln[(1-p)^(n-x) p^x] + 2 ln[(1-x/n)^(n-x) (x/n)^x]
    phat = x / n
    null = (n - x) * math.log(1 - p) + (x * math.log(p) if x else 0.0)
    alt = ((n - x) * math.log(1 - phat) if x < n else 0.0) + (x * math.log(phat) if x else 0.0)
    return -2 * null + 2 * alt


@pytest.mark.parametrize(("x", "n", "p"), [(8, 250, 0.01), (0, 250, 0.01), (17, 250, 0.05), (12, 252, 0.05)])
def test_kupiec_matches_the_formula(x: int, n: int, p: float) -> None:
    got = bt.kupiec_pof(x, n, p)
    lr = _kupiec_by_hand(x, n, p)
    assert got.statistic == pytest.approx(lr, rel=1e-12)
    assert got.p_value == pytest.approx(stats.chi2.sf(lr, 1), rel=1e-12)


def test_kupiec_worked_example_eight_exceptions_in_250_days_rejects_a_99_var() -> None:
    # 8 exceptions where 2.5 are expected, worked by hand:
    # null = 242 ln 0.99 + 8 ln 0.01 = -2.432182 - 36.841361 = -39.273543
    # alt  = 242 ln 0.968 + 8 ln 0.032 = -7.870617 - 27.536155 = -35.406772
    # LR = -2 (-39.273543) + 2 (-35.406772) = 7.733542 > 3.841 (chi2(1) at 5 %)
    got = bt.kupiec_pof(8, 250, 0.01)
    assert got.statistic == pytest.approx(7.7335, abs=1e-3)
    assert not got.passes(0.05)
    assert bt.kupiec_pof(3, 250, 0.01).passes(0.05)


def test_kupiec_refuses_impossible_counts() -> None:
    for args in ((5, 4, 0.01), (-1, 10, 0.01), (1, 0, 0.01), (1, 10, 1.0)):
        with pytest.raises(ValueError, match="kupiec_pof needs"):
            bt.kupiec_pof(*args)


def test_christoffersen_transition_counts_and_statistics_by_hand() -> None:
    e = [0, 0, 1, 1, 0, 0, 0, 1, 0, 0]
    # pairs: 00 01 11 10 00 00 01 10 00 -> n00=4, n01=2, n10=2, n11=1
    got = bt.christoffersen(np.array(e, dtype=bool), 0.05)
    assert (got.n00, got.n01, got.n10, got.n11) == (4, 2, 2, 1)
    pi0, pi1, pi = 2 / 6, 1 / 3, 3 / 9
    l_markov = 4 * math.log(1 - pi0) + 2 * math.log(pi0) + 2 * math.log(1 - pi1) + 1 * math.log(pi1)
    l_ind = 6 * math.log(1 - pi) + 3 * math.log(pi)
    lr_ind = -2 * (l_ind - l_markov)
    assert got.independence.statistic == pytest.approx(lr_ind, abs=1e-12)
    assert got.pof.statistic == pytest.approx(_kupiec_by_hand(3, 9, 0.05), rel=1e-12)
    lr_cc = _kupiec_by_hand(3, 9, 0.05) + lr_ind
    assert got.conditional_coverage.statistic == pytest.approx(lr_cc, rel=1e-12)
    assert got.conditional_coverage.p_value == pytest.approx(stats.chi2.sf(lr_cc, 2), rel=1e-12)


def test_christoffersen_flags_clustered_exceptions() -> None:
    clustered = np.zeros(500, dtype=bool)
    clustered[100:125] = True  # 25 exceptions (5 %) all in a row
    spread = np.zeros(500, dtype=bool)
    spread[::20] = True  # 25 exceptions, never two in a row
    assert not bt.christoffersen(clustered, 0.05).independence.passes()
    assert bt.christoffersen(spread, 0.05).pof.passes()


def test_christoffersen_with_no_exception_has_no_independence_evidence() -> None:
    got = bt.christoffersen(np.zeros(250, dtype=bool), 0.01)
    assert got.independence.statistic == 0.0
    assert got.n11 == got.n10 == got.n01 == 0


def test_basel_zones_and_the_committee_table() -> None:
    assert [bt.basel_zone(x) for x in (0, 4, 5, 9, 10, 15)] == [
        "green",
        "green",
        "yellow",
        "yellow",
        "red",
        "red",
    ]
    shares = bt.basel_expected_shares()
    # BCBS (1996), "Supervisory framework for the use of backtesting", table 1 (99 % VaR, 250
    # observations): cumulative probability 89.22 % at 4 exceptions, 99.97 % at 9.
    assert shares["green"] == pytest.approx(0.8922, abs=5e-5)
    assert shares["green"] + shares["yellow"] == pytest.approx(0.9997, abs=5e-5)


def test_basel_blocks_drop_the_partial_tail() -> None:
    e = np.zeros(600, dtype=bool)
    e[:6] = True
    e[250:251] = True
    assert bt.basel_blocks(e) == ["yellow", "green"]


def test_qlike_is_zero_for_a_perfect_forecast_and_matches_the_formula() -> None:
    got = bt.qlike(np.array([1.0, 2.0, 0.0, 0.5]), np.array([1.0, 1.0, 1.0, 2.0]))
    assert got[0] == 0.0
    assert got[1] == pytest.approx(2 - math.log(2) - 1)
    assert np.isnan(got[2])  # ln 0
    assert got[3] == pytest.approx(0.25 - math.log(0.25) - 1)


def test_diebold_mariano_by_date_equals_newey_west_on_the_per_date_means() -> None:
    rng_dates = np.repeat(np.arange(40), 3)
    a = np.tile([1.0, 2.0, 3.0], 40) + np.sin(np.arange(120))
    b = a + 0.1 + 0.05 * np.cos(np.arange(120) * 1.7)
    got = bt.diebold_mariano_by_date(rng_dates, a, b, maxlags=2)
    assert got is not None
    per_date = (a - b).reshape(40, 3).mean(axis=1)
    fit = sm.OLS(per_date, np.ones((40, 1))).fit(cov_type="HAC", cov_kwds={"maxlags": 2})
    assert got.mean == pytest.approx(fit.params[0])
    assert got.t == pytest.approx(fit.params[0] / fit.bse[0])
    assert got.t < -2


def test_clustered_rate_equals_the_cluster_robust_error_by_date() -> None:
    # unbalanced dates: 1 to 6 rows each, hits that cluster on some dates
    rng_counts = [1, 3, 6, 2, 5, 4, 6, 1, 2, 3] * 6
    dates = np.repeat(np.arange(len(rng_counts)), rng_counts)
    hits = np.array([(i * 7 + d) % 5 == 0 for i, d in enumerate(dates)], dtype=float)
    hits[dates % 9 == 0] = 1.0  # a few dates where everything hit
    got = bt.clustered_rate(dates, hits, maxlags=0)
    assert got["rate"] == pytest.approx(hits.mean())
    # statsmodels' cluster-robust standard error of the mean, clustered by date, without the
    # small-sample correction (CR0)
    fit = sm.OLS(hits, np.ones((len(hits), 1))).fit(
        cov_type="cluster", cov_kwds={"groups": dates, "use_correction": False}
    )
    assert got["se"] == pytest.approx(fit.bse[0], rel=1e-9)
    assert got["low"] == pytest.approx(hits.mean() - 1.959963984540054 * fit.bse[0], rel=1e-9)
    per_date = [hits[dates == k].mean() for k in np.unique(dates)]
    assert got["per_date_mean"] == pytest.approx(np.mean(per_date))


def test_clustered_rate_leaves_nan_rows_out() -> None:
    dates = np.repeat(np.arange(50), 4)
    hits = np.tile([1.0, 1.0, 0.0, np.nan], 50)
    got = bt.clustered_rate(dates, hits, maxlags=0)
    assert got["rate"] == pytest.approx(2 / 3)
    assert got["n_rows"] == 150 and got["n_dates"] == 50


def test_pit_histogram_counts_and_uniformity() -> None:
    pit = np.tile(np.linspace(0.05, 0.95, 10), 20)
    hist = bt.pit_histogram(np.repeat(np.arange(20), 10), pit, maxlags=0)
    assert [b["count"] for b in hist["bins"]] == [20] * 10
    assert hist["chi2"] == 0.0 and hist["chi2_p"] == pytest.approx(1.0)
