"""Statistics of the forward scorecard that do not flatter: intervals, clustered and
overlap-robust t statistics, cross-sectional IC and calibration scores.

Pure functions on arrays (no database, no prices), so any probability column can be scored
(the confidence mapped to ``p`` today, a calibrated ``p_outperform`` later) and the tests can
check them against hand-computed values. The evaluation rules they serve: docs/evaluation.md.

* :func:`wilson_interval`: the Wilson score interval of a proportion (Wilson 1927; Brown, Cai &
  DasGupta 2001 recommend it over the normal approximation), through statsmodels'
  ``proportion_confint(method="wilson")``.
* :func:`hac_mean`: the mean of a series with a Newey–West (1987) heteroskedasticity and
  autocorrelation consistent standard error (Bartlett kernel), through statsmodels'
  ``OLS(y, 1).fit(cov_type="HAC", cov_kwds={"maxlags": L})``.
* :func:`date_clustered_mean`: rows of one date are averaged first (the cross-section of one
  date shares the market's move: clustering by date, Petersen 2009), then :func:`hac_mean` over
  the per-date series with ``L = overlap_lags(h, step)``: forward windows of ``h`` sessions
  taken every ``step`` sessions overlap with the next ``ceil(h/step) − 1`` dates, so their
  returns are autocorrelated up to that lag (Hansen & Hodrick 1980; the lag rule of the
  overlapping-observations literature, e.g. Harri & Brorsen 2009).
* :func:`per_date_ic`: Spearman rank correlation across the tickers of each date (scipy), the
  information coefficient of Grinold & Kahn, "Active Portfolio Management", ch. 6; its mean is
  tested with :func:`hac_mean` over the date series (as Fama–MacBeth 1973 test per-period
  slopes, with the Newey–West correction for overlap).
* :func:`brier_score`, :func:`reliability_table`, :func:`expected_calibration_error`: Brier
  (1950) ``mean((p − y)²)``, 0.25 for always saying 0.5; ECE over equal-width bins of ``p``
  weighted by count (Naeini, Cooper & Hauskrecht 2015; Guo et al. 2017).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pandas as pd

#: Two-sided 95 %: the level of every interval of the scorecard.
ALPHA: Final = 0.05
#: The normal quantile of a two-sided 95 % interval (an interval "separates" from a value when
#: the value lies outside it).
Z_95: Final = 1.959963984540054
#: Equal-width bins of p for ECE and the reliability table: 10, the usual choice (Naeini et al.
#: 2015; Guo et al. 2017) and the one the calibration target (ECE ≤ 0.03) is stated in.
CALIBRATION_BINS: Final = 10
#: A 1-d run of numbers: a list, a numpy array or a pandas Series.
type Values = Sequence[float] | np.ndarray | pd.Series


@dataclass(frozen=True)
class Proportion:
    """``successes`` of ``n`` with the Wilson 95 % interval ``[low, high]`` (fractions)."""

    successes: int
    n: int
    rate: float
    low: float
    high: float

    def excludes(self, value: float) -> bool:
        """Whether ``value`` (a fraction) lies outside the interval."""
        return value < self.low or value > self.high

    def as_dict(self) -> dict[str, Any]:
        """``{successes, n, rate, low, high}`` for the JSON scorecard."""
        return {
            "successes": self.successes,
            "n": self.n,
            "rate": self.rate,
            "low": self.low,
            "high": self.high,
        }


def wilson_interval(successes: int, n: int, *, alpha: float = ALPHA) -> Proportion:
    """The Wilson score interval of ``successes / n`` at level ``1 − alpha`` (statsmodels
    ``proportion_confint(method="wilson")``; Wilson 1927). Raises ``ValueError`` when ``n < 1``
    or ``successes`` is outside ``[0, n]``."""
    from statsmodels.stats.proportion import proportion_confint  # lazy: statsmodels is slow to import

    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"a proportion needs 0 <= successes <= n and n >= 1, got {successes}/{n}")
    low, high = proportion_confint(successes, n, alpha=alpha, method="wilson")
    rate = successes / n
    return Proportion(successes=int(successes), n=int(n), rate=rate, low=float(low), high=float(high))


@dataclass(frozen=True)
class MeanTest:
    """A mean with its HAC standard error: ``t = mean / se``, the 95 % interval ``mean ± 1.96·se``,
    over ``n`` observations (dates, for the clustered tests) with ``lags`` Newey–West lags."""

    mean: float
    se: float
    t: float
    n: int
    lags: int

    @property
    def low(self) -> float:
        """Lower end of the 95 % interval."""
        return self.mean - Z_95 * self.se

    @property
    def high(self) -> float:
        """Upper end of the 95 % interval."""
        return self.mean + Z_95 * self.se

    def excludes(self, value: float = 0.0) -> bool:
        """Whether ``value`` lies outside the 95 % interval."""
        return value < self.low or value > self.high

    def as_dict(self) -> dict[str, Any]:
        """``{mean, se, t, low, high, n, lags}`` for the JSON scorecard."""
        return {
            "mean": self.mean,
            "se": self.se,
            "t": self.t,
            "low": self.low,
            "high": self.high,
            "n": self.n,
            "lags": self.lags,
        }


def hac_mean(values: Values, *, maxlags: int) -> MeanTest | None:
    """Mean of ``values`` (in order: a time series) with the Newey–West standard error of
    ``maxlags`` lags (Bartlett weights ``1 − l/(L+1)``, no small-sample correction: statsmodels'
    default for ``cov_type="HAC"``), from the regression of the series on a constant. ``None``
    with fewer than 3 values or no spread (no standard error exists). Raises ``ValueError``
    for ``maxlags < 0``."""
    import statsmodels.api as sm  # lazy: statsmodels is slow to import

    if maxlags < 0:
        raise ValueError(f"maxlags must be >= 0, got {maxlags}")
    y = np.asarray(values, dtype=float)
    y = y[np.isfinite(y)]
    if len(y) < 3 or float(np.ptp(y)) == 0.0:
        return None
    lags = min(maxlags, len(y) - 1)
    fit = sm.OLS(y, np.ones((len(y), 1))).fit(cov_type="HAC", cov_kwds={"maxlags": lags})
    mean, se = float(fit.params[0]), float(fit.bse[0])
    if not se > 0:
        return None
    return MeanTest(mean=mean, se=se, t=mean / se, n=len(y), lags=lags)


def overlap_lags(horizon: int, step: float) -> int:
    """Newey–West lags for forward windows of ``horizon`` sessions sampled every ``step``
    sessions: ``ceil(horizon/step) − 1`` (the number of later dates whose window overlaps one
    date's window; 0 when they do not overlap). Raises ``ValueError`` for ``step <= 0``."""
    if step <= 0:
        raise ValueError(f"step must be positive, got {step}")
    return max(math.ceil(horizon / step - 1e-9) - 1, 0)


def grid_step_sessions(dates: Sequence[Any] | pd.Series | np.ndarray) -> float:
    """Median spacing of the distinct ``dates`` in weekday sessions (``numpy.busday_count``:
    weekends skipped, holidays counted, so a weekly grid gives 5); 1.0 with fewer than two dates."""
    days = np.array(sorted({pd.Timestamp(d).date() for d in dates}), dtype="datetime64[D]")
    if len(days) < 2:
        return 1.0
    return max(float(np.median(np.busday_count(days[:-1], days[1:]))), 1.0)


def per_date_means(dates: Sequence[Any] | pd.Series | np.ndarray, values: Values) -> pd.Series:
    """Mean of ``values`` per distinct date, ascending by date (NaN values dropped)."""
    frame = pd.DataFrame({"date": list(dates), "value": np.asarray(values, dtype=float)})
    return frame.dropna().groupby("date")["value"].mean().sort_index()


def date_clustered_mean(
    dates: Sequence[Any] | pd.Series | np.ndarray, values: Values, *, maxlags: int
) -> MeanTest | None:
    """Mean of the per-date means of ``values`` (module docstring: clustered by date) with a
    Newey–West t of ``maxlags`` lags over the date series (:func:`hac_mean`). The mean is the
    equal-weighted average of dates, not of rows. ``None`` with fewer than 3 dates."""
    return hac_mean(per_date_means(dates, values).to_numpy(), maxlags=maxlags)


def per_date_ic(
    dates: Sequence[Any] | pd.Series | np.ndarray,
    scores: Values,
    outcomes: Values,
    *,
    min_names: int = 3,
) -> pd.Series:
    """Spearman rank correlation of ``scores`` with ``outcomes`` across the rows of each date
    (scipy ``spearmanr``), ascending by date. Dates with fewer than ``min_names`` valid rows, or
    with tied-only scores or outcomes (the correlation is undefined), are left out."""
    from scipy.stats import spearmanr  # type: ignore[import-untyped]  # lazy: scipy is slow to import

    frame = pd.DataFrame(
        {
            "date": list(dates),
            "score": np.asarray(scores, dtype=float),
            "outcome": np.asarray(outcomes, dtype=float),
        }
    ).dropna()
    out: dict[Any, float] = {}
    for day, group in frame.groupby("date"):
        if len(group) < min_names or group["score"].nunique() < 2 or group["outcome"].nunique() < 2:
            continue
        out[day] = float(spearmanr(group["score"], group["outcome"]).statistic)
    return pd.Series(out, dtype=float).sort_index()


def _checked(p: Values, y: Values) -> tuple[np.ndarray, np.ndarray]:
    p_arr, y_arr = np.asarray(p, dtype=float), np.asarray(y, dtype=float)
    if p_arr.shape != y_arr.shape or p_arr.ndim != 1:
        raise ValueError(f"p and y must be 1-d of one length, got {p_arr.shape} and {y_arr.shape}")
    if len(p_arr) == 0:
        raise ValueError("no probabilities to score")
    if np.any((p_arr < 0) | (p_arr > 1)) or not np.all(np.isfinite(p_arr)):
        raise ValueError("every p must be a probability in [0, 1]")
    if not np.all((y_arr == 0) | (y_arr == 1)):
        raise ValueError("every outcome must be 0 or 1")
    return p_arr, y_arr


def brier_score(p: Values, y: Values) -> float:
    """Brier score ``mean((p − y)²)`` of probabilities ``p`` against 0/1 outcomes ``y`` (Brier
    1950): 0 is perfect, 0.25 is always saying 0.5. Raises ``ValueError`` for mismatched or empty
    arrays, a ``p`` outside [0, 1] or an outcome other than 0/1."""
    p_arr, y_arr = _checked(p, y)
    return float(np.mean((p_arr - y_arr) ** 2))


def reliability_table(p: Values, y: Values, *, bins: int = CALIBRATION_BINS) -> list[dict[str, float | int]]:
    """The non-empty equal-width bins of ``p`` on [0, 1] (``p = 1`` in the last): ``{bin, lower,
    upper, n, mean_p, observed}`` with ``observed`` the realised frequency of ``y = 1`` in the bin.
    Raises ``ValueError`` as :func:`brier_score`."""
    p_arr, y_arr = _checked(p, y)
    which = np.minimum((p_arr * bins).astype(int), bins - 1)
    out: list[dict[str, float | int]] = []
    for b in range(bins):
        mask = which == b
        if mask.any():
            out.append(
                {
                    "bin": b,
                    "lower": b / bins,
                    "upper": (b + 1) / bins,
                    "n": int(mask.sum()),
                    "mean_p": float(p_arr[mask].mean()),
                    "observed": float(y_arr[mask].mean()),
                }
            )
    return out


def expected_calibration_error(p: Values, y: Values, *, bins: int = CALIBRATION_BINS) -> float:
    """ECE ``Σ_b (n_b/N)·|observed_b − mean_p_b|`` over the equal-width bins of
    :func:`reliability_table` (Naeini et al. 2015). Raises ``ValueError`` as :func:`brier_score`."""
    table = reliability_table(p, y, bins=bins)
    total = sum(int(b["n"]) for b in table)
    return float(sum(int(b["n"]) / total * abs(float(b["observed"]) - float(b["mean_p"])) for b in table))
