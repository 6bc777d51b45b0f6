"""Backtest statistics of risk forecasts: pure functions on arrays (no prices, no model), so they
can be checked against textbook values and reused by any caller (the ``finagent eval risk``
command, the scorecard).

* :func:`kupiec_pof`: Kupiec (1995) proportion-of-failures likelihood ratio,
  ``LR = −2 ln[(1−p)^{n−x} p^x] + 2 ln[(1−x/n)^{n−x} (x/n)^x] ~ χ²(1)``.
* :func:`christoffersen`: Christoffersen (1998, *International Economic Review* 39) independence
  test from the 2×2 transition counts of the exception series, and conditional coverage
  ``LR_cc = LR_pof + LR_ind ~ χ²(2)``.
* :func:`basel_zone`: the Basel Committee's traffic light (BCBS 1996, "Supervisory framework for
  the use of backtesting"): 99 % VaR over 250 sessions, green ≤ 4 exceptions, yellow 5–9, red ≥ 10.
* :func:`qlike` and :func:`diebold_mariano_by_date`: Patton's (2011) QLIKE loss
  ``r²/σ̂² − ln(r²/σ̂²) − 1`` (robust to noise in the proxy) and the Diebold–Mariano (1995) t of
  a loss difference, here on the per-date cross-sectional mean with Newey–West errors.
* :func:`clustered_rate`: a share (coverage, exceptions) over all rows with an interval clustered
  by date (stock-days of one date share the market's move; overlapping windows are autocorrelated
  up to ``h − 1`` dates): a ratio estimator's delta-method error through a Newey–West mean over
  dates (:func:`agents.quant.evaluation_stats.hac_mean`).
* :func:`pit_histogram`: the probability integral transform's 10-bin histogram (Diebold, Gunther
  and Tay 1998) with Pearson's χ² test of uniformity (``scipy.stats.chisquare``) and each bin's
  date-clustered interval.

The χ² tail probabilities come from ``scipy.stats.chi2``; the HAC errors from statsmodels (through
:mod:`agents.quant.evaluation_stats`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import numpy as np
import pandas as pd
from scipy import stats  # type: ignore[import-untyped]
from scipy.special import xlogy  # type: ignore[import-untyped]

from agents.quant.evaluation_stats import MeanTest, date_clustered_mean

#: Basel traffic light for 99 % VaR over 250 sessions (BCBS 1996, table 2).
BASEL_WINDOW: Final = 250
BASEL_GREEN_MAX: Final = 4
BASEL_YELLOW_MAX: Final = 9
#: Equal-width PIT bins.
PIT_BINS: Final = 10

Zone = Literal["green", "yellow", "red"]


@dataclass(frozen=True)
class LRTest:
    """A likelihood-ratio statistic, its degrees of freedom and χ² tail probability."""

    statistic: float
    df: int
    p_value: float

    def passes(self, alpha: float = 0.05) -> bool:
        """Not rejected at ``alpha``."""
        return self.p_value >= alpha


def _loglik(count0: float, count1: float, prob1: float) -> float:
    """``count0 ln(1 − prob1) + count1 ln(prob1)`` with ``0 · ln 0 = 0``."""
    return float(xlogy(count0, 1.0 - prob1) + xlogy(count1, prob1))


def kupiec_pof(exceptions: int, n: int, p: float) -> LRTest:
    """Kupiec's proportion-of-failures test that ``exceptions`` of ``n`` occur at rate ``p``
    (module docstring). Raises ``ValueError`` for ``n < 1``, ``exceptions`` outside ``[0, n]`` or
    ``p`` outside (0, 1)."""
    if n < 1 or not 0 <= exceptions <= n or not 0.0 < p < 1.0:
        raise ValueError(
            f"kupiec_pof needs 0 <= exceptions <= n, n >= 1, 0 < p < 1; got {exceptions}, {n}, {p}"
        )
    x = float(exceptions)
    lr = -2.0 * (_loglik(n - x, x, p) - _loglik(n - x, x, x / n))
    lr = max(lr, 0.0)
    return LRTest(statistic=lr, df=1, p_value=float(stats.chi2.sf(lr, 1)))


@dataclass(frozen=True)
class Christoffersen:
    """Christoffersen's tests of one exception series: transition counts ``n00, n01, n10, n11``
    (``nij``: a day in state i followed by one in state j), the POF, independence and
    conditional-coverage tests."""

    n00: int
    n01: int
    n10: int
    n11: int
    pof: LRTest
    independence: LRTest
    conditional_coverage: LRTest


def christoffersen(exceptions: Sequence[bool] | np.ndarray, p: float) -> Christoffersen:
    """Christoffersen's independence and conditional-coverage tests of a 0/1 exception series in
    time order at VaR rate ``p`` (module docstring). The independence LR compares a first-order
    Markov chain (``π01 = n01/(n00+n01)``, ``π11 = n11/(n10+n11)``) with independence
    (``π = (n01+n11)/N``); ``LR_cc = LR_pof + LR_ind`` with the POF on the ``N`` transitions'
    second days (Christoffersen 1998, eq. 10, as Jorion's *Value at Risk* does).
    Raises ``ValueError`` with fewer than 2 observations."""
    e = np.asarray(exceptions, dtype=bool)
    if len(e) < 2:
        raise ValueError("christoffersen needs at least 2 observations")
    prev, nxt = e[:-1], e[1:]
    n00 = int(np.sum(~prev & ~nxt))
    n01 = int(np.sum(~prev & nxt))
    n10 = int(np.sum(prev & ~nxt))
    n11 = int(np.sum(prev & nxt))
    total = n00 + n01 + n10 + n11
    pi = (n01 + n11) / total
    pi0 = n01 / (n00 + n01) if n00 + n01 else 0.0
    pi1 = n11 / (n10 + n11) if n10 + n11 else 0.0
    l_ind = _loglik(n00 + n10, n01 + n11, pi)
    l_markov = _loglik(n00, n01, pi0) + _loglik(n10, n11, pi1)
    lr_ind = max(-2.0 * (l_ind - l_markov), 0.0)
    pof = kupiec_pof(n01 + n11, total, p)
    lr_cc = pof.statistic + lr_ind
    return Christoffersen(
        n00=n00,
        n01=n01,
        n10=n10,
        n11=n11,
        pof=pof,
        independence=LRTest(statistic=lr_ind, df=1, p_value=float(stats.chi2.sf(lr_ind, 1))),
        conditional_coverage=LRTest(statistic=lr_cc, df=2, p_value=float(stats.chi2.sf(lr_cc, 2))),
    )


def basel_zone(exceptions: int) -> Zone:
    """The traffic-light zone of ``exceptions`` of a 99 % VaR in 250 sessions (module docstring)."""
    if exceptions <= BASEL_GREEN_MAX:
        return "green"
    if exceptions <= BASEL_YELLOW_MAX:
        return "yellow"
    return "red"


def basel_blocks(exceptions: Sequence[bool] | np.ndarray, *, window: int = BASEL_WINDOW) -> list[Zone]:
    """Zones of consecutive, non-overlapping blocks of ``window`` sessions of one name's 99 %
    exception series (a trailing partial block is left out)."""
    e = np.asarray(exceptions, dtype=bool)
    return [basel_zone(int(e[i : i + window].sum())) for i in range(0, len(e) - window + 1, window)]


def basel_expected_shares(*, window: int = BASEL_WINDOW, p: float = 0.01) -> dict[str, float]:
    """The share of blocks in each zone when the VaR is right (exceptions ~ Binomial(window, p))."""
    green = float(stats.binom.cdf(BASEL_GREEN_MAX, window, p))
    yellow = float(stats.binom.cdf(BASEL_YELLOW_MAX, window, p)) - green
    return {"green": green, "yellow": yellow, "red": 1.0 - green - yellow}


def qlike(proxy: np.ndarray, forecast: np.ndarray) -> np.ndarray:
    """Patton's QLIKE ``proxy/forecast − ln(proxy/forecast) − 1`` (0 for a perfect forecast; NaN
    where the proxy is 0 or either is NaN: ``ln 0`` is undefined). Arrays of variances."""
    proxy = np.asarray(proxy, dtype=np.float64)
    forecast = np.asarray(forecast, dtype=np.float64)
    ratio = np.where((proxy > 0) & (forecast > 0), proxy / np.where(forecast > 0, forecast, 1.0), np.nan)
    return np.asarray(ratio - np.log(ratio) - 1.0, dtype=np.float64)


def mse(proxy: np.ndarray, forecast: np.ndarray) -> np.ndarray:
    """Squared error of a variance forecast ``(proxy − forecast)²``."""
    return np.asarray((np.asarray(proxy, float) - np.asarray(forecast, float)) ** 2, dtype=np.float64)


def diebold_mariano_by_date(
    dates: Sequence[Any] | np.ndarray | pd.Series, loss_a: np.ndarray, loss_b: np.ndarray, *, maxlags: int
) -> MeanTest | None:
    """Diebold–Mariano test of ``loss_a − loss_b`` (negative: ``a`` better): the mean of the
    per-date cross-sectional mean difference and its Newey–West t (``maxlags`` lags; use at
    least ``h − 1`` for overlapping ``h``-session windows). Rows where either loss is NaN are
    left out. ``None`` with fewer than 3 dates."""
    a = np.asarray(loss_a, dtype=np.float64)
    b = np.asarray(loss_b, dtype=np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    d = np.asarray(dates)[ok]
    return date_clustered_mean(d, a[ok] - b[ok], maxlags=maxlags)


def clustered_rate(
    dates: Sequence[Any] | np.ndarray | pd.Series, hits: np.ndarray, *, maxlags: int
) -> dict[str, Any]:
    """A share of 0/1 ``hits`` (NaN rows left out) with a 95 % interval clustered by date:
    ``{rate, low, high, se, n_rows, n_dates, lags, pooled, per_date_mean}``.

    ``rate`` (= ``pooled``) is the share of all rows, Σ hits / N. Its standard error treats it as
    a ratio of per-date sums (the delta method for a ratio estimator; with ``maxlags = 0`` it is
    the cluster-robust CR0 error of the mean clustered by date): the per-date terms
    ``(hits_d − rate · n_d) / n̄`` go through a Newey–West mean with ``maxlags`` lags (windows of
    ``h`` sessions overlap the next ``h − 1`` dates), so stock-days of one date, which share the
    market's move, count as one observation. ``per_date_mean`` is the mean of the per-date shares
    (every date weighted alike). ``low``/``high``/``se`` are None with fewer than 3 dates or no
    spread; the interval is cut to [0, 1]."""
    from agents.quant.evaluation_stats import Z_95, hac_mean

    h = np.asarray(hits, dtype=np.float64)
    ok = np.isfinite(h)
    d = np.asarray(dates)[ok]
    h = h[ok]
    out: dict[str, Any] = {
        "rate": None,
        "low": None,
        "high": None,
        "se": None,
        "n_rows": len(h),
        "n_dates": 0,
        "lags": maxlags,
        "pooled": None,
        "per_date_mean": None,
    }
    if len(h) == 0:
        return out
    frame = pd.DataFrame({"date": d, "hit": h}).groupby("date", sort=True)["hit"].agg(["sum", "count"])
    rate = float(h.mean())
    out.update(
        rate=rate,
        pooled=rate,
        n_dates=len(frame),
        per_date_mean=float((frame["sum"] / frame["count"]).mean()),
    )
    terms = (frame["sum"].to_numpy() - rate * frame["count"].to_numpy()) / frame["count"].mean()
    test = hac_mean(terms, maxlags=maxlags)
    if test is not None:
        # a share lies in [0, 1]: the normal interval is cut there (it crosses 0 for rare events)
        out.update(se=test.se, low=max(rate - Z_95 * test.se, 0.0), high=min(rate + Z_95 * test.se, 1.0))
    return out


def pit_histogram(
    dates: Sequence[Any] | np.ndarray | pd.Series, pit: np.ndarray, *, maxlags: int, bins: int = PIT_BINS
) -> dict[str, Any]:
    """10-bin histogram of PIT values ``u = F̂(realised)`` (NaN left out): per bin its count, share
    and date-clustered 95 % interval (expected share ``1/bins``), Pearson's χ² test of equal
    counts (``scipy.stats.chisquare``; it treats stock-days as independent, so its p-value
    overstates the evidence when outcomes cluster by date) and the Kolmogorov–Smirnov statistic
    against the uniform."""
    u = np.asarray(pit, dtype=np.float64)
    ok = np.isfinite(u)
    d = np.asarray(dates)[ok]
    u = np.clip(u[ok], 0.0, 1.0)
    if len(u) == 0:
        return {"n": 0, "bins": [], "chi2": None, "chi2_p": None, "ks": None}
    which = np.minimum((u * bins).astype(int), bins - 1)
    counts = np.bincount(which, minlength=bins)
    rows = []
    for b in range(bins):
        share = clustered_rate(d, (which == b).astype(float), maxlags=maxlags)
        rows.append(
            {
                "bin": b,
                "lower": b / bins,
                "upper": (b + 1) / bins,
                "count": int(counts[b]),
                "share": share["rate"],
                "low": share["low"],
                "high": share["high"],
            }
        )
    chi = stats.chisquare(counts)
    ks = stats.kstest(u, "uniform")
    return {
        "n": len(u),
        "bins": rows,
        "chi2": float(chi.statistic),
        "chi2_p": float(chi.pvalue),
        "ks": float(ks.statistic),
        "ks_p": float(ks.pvalue),
    }
