"""Daily variance forecasts: EWMA (RiskMetrics), GARCH(1,1) with Student-t innovations (``arch``),
HAR on a range-based realised variance (Corsi 2009), and the 20-session historical variance.

Every model works on a *compressed* series: the sessions the caller keeps (earnings reaction
sessions are left out, :mod:`agents.quant.risk.earnings`), in order, as if the others did not
exist. Arrays use the index ``k`` of that series; ``v[k]`` is the forecast of the variance of
return ``k`` made after return ``k − 1`` (so ``v[K]``, one past the last return, is the forecast
for the next session). Units: variances of daily log returns (fractions²).

Fitting and filtering are separate: :func:`fit_garch` and :func:`fit_har` estimate parameters
from the returns up to an index; :func:`ewma_variance`, :func:`garch_variance` and
:func:`har_variance` then run the recursion or regression with those parameters over any span,
so a walk-forward can refit periodically and filter daily (each output element reads inputs up
to its own index only).

Sources: RiskMetrics — Technical Document, 4th ed. (J.P. Morgan/Reuters 1996), EWMA with
λ = 0.94 for daily data; Bollerslev (1986), GARCH(1,1); ``arch`` (K. Sheppard) for the Student-t
maximum likelihood and its backcast; Corsi (2009), HAR-RV; Garman and Klass (1980) for the range
estimator (:mod:`agents.quant.risk.inputs`).
"""

from __future__ import annotations

import math
import sys
import warnings
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

#: RiskMetrics' decay for daily data (Technical Document, 4th ed., 1996, table 5.9).
RISKMETRICS_LAMBDA: Final = 0.94
#: Sessions whose squared returns seed the EWMA recursion (their mean).
EWMA_SEED: Final = 20
#: ``arch``'s backcast for GARCH: an exponentially weighted mean of the first 75 squared returns
#: with weights 0.94^i (``arch.univariate.volatility.GARCH.backcast``); reproduced so our daily
#: filter matches ``arch``'s conditional variance exactly.
ARCH_BACKCAST_TAU: Final = 75
#: HAR windows: a day, a week (5 sessions) and a month (22 sessions), Corsi (2009).
HAR_WEEK: Final = 5
HAR_MONTH: Final = 22


def ewma_variance(r2: np.ndarray, *, lam: float = RISKMETRICS_LAMBDA, seed: int = EWMA_SEED) -> np.ndarray:
    """RiskMetrics EWMA ``v[k+1] = λ v[k] + (1 − λ) r2[k]``, seeded with ``v[0] = mean(r2[:seed])``.

    Args:
        r2: squared daily returns (fractions²), oldest first, no NaN.
        lam: the decay λ in (0, 1).
        seed: how many first squared returns seed the recursion.
    Returns:
        ``v`` of length ``len(r2) + 1`` (module docstring: ``v[k]`` forecasts ``r2[k]``).
    Raises:
        ValueError: ``r2`` empty or not finite, ``lam`` outside (0, 1).
    """
    r2 = np.asarray(r2, dtype=np.float64)
    if len(r2) == 0 or not np.all(np.isfinite(r2)):
        raise ValueError("ewma_variance needs at least one finite squared return")
    if not 0.0 < lam < 1.0:
        raise ValueError(f"lam must be in (0, 1), got {lam}")
    v0 = float(np.mean(r2[: max(seed, 1)]))
    out = np.empty(len(r2) + 1)
    out[0] = v0
    # y[k] = (1 − λ) r2[k] + λ y[k − 1] from y[−1] = v0, i.e. y[k] = v[k + 1]
    out[1:] = first_order_filter(1.0 - lam, lam, r2, v0)
    return out


def first_order_filter(b0: float, a1: float, x: np.ndarray, y0: float) -> np.ndarray:
    """``y[k] = b0·x[k] + a1·y[k − 1]`` over ``x`` from ``y[−1] = y0`` (the output has ``len(x)``
    values), bit for bit the same two ways: ``scipy.signal.lfilter([b0], [1, −a1], x,
    zi=[a1·y0])`` (compiled) when the process has imported scipy.signal already, as a worker does
    at start (``tasks.app``), else a Python loop (~0.3 ms for 2,500 values): importing
    scipy.signal (which loads scipy.stats, interpolate, optimize, spatial and sparse) costs a CLI
    analysis ~1 s, far more than its forecasts compute with it. lfilter's transposed direct form
    II of this first-order filter computes ``(a1·y[k − 1]) + (b0·x[k])`` with the same two
    products and one addition, so the choice never changes a digit
    (``tests/agents/quant/risk/test_volatility.py`` compares both on real returns)."""
    signal = sys.modules.get("scipy.signal")
    if signal is not None:
        filtered = signal.lfilter([b0], [1.0, -a1], x, zi=[a1 * y0])[0]
        return np.asarray(filtered, dtype=np.float64)
    y = float(y0)
    out: list[float] = []
    append = out.append
    for value in np.asarray(x, dtype=np.float64).tolist():
        y = a1 * y + b0 * value
        append(y)
    return np.array(out, dtype=np.float64)


def hv_variance(r2: np.ndarray, *, window: int = 20) -> np.ndarray:
    """Historical variance: ``v[k] = mean(r2[k − window .. k − 1])`` (NaN while fewer than
    ``window`` returns exist), the HV20 baseline with ``window = 20`` (no demeaning: the mean of
    daily returns is noise next to their square). Length ``len(r2) + 1``."""
    r2 = np.asarray(r2, dtype=np.float64)
    csum = np.concatenate([[0.0], np.cumsum(r2)])
    out = np.full(len(r2) + 1, np.nan)
    if len(r2) >= window:
        out[window:] = (csum[window:] - csum[:-window]) / window
    return out


@dataclass(frozen=True)
class GarchParams:
    """GARCH(1,1) parameters in *fraction* units: ``v[k+1] = omega + alpha r2[k] + beta v[k]``;
    ``nu`` the Student-t degrees of freedom; ``converged`` whether ``arch``'s optimiser said so."""

    omega: float
    alpha: float
    beta: float
    nu: float
    converged: bool = True

    @property
    def persistence(self) -> float:
        """``alpha + beta``: below 1 the variance reverts to ``omega / (1 − persistence)``."""
        return self.alpha + self.beta


def arch_backcast(r2: np.ndarray) -> float:
    """``arch``'s GARCH backcast: ``Σ w_i r2[i]`` over the first ``min(75, n)`` squared returns,
    ``w_i ∝ 0.94^i`` normalised to sum to 1 (``arch.univariate.volatility.GARCH.backcast``)."""
    tau = min(ARCH_BACKCAST_TAU, len(r2))
    w = 0.94 ** np.arange(tau)
    w /= w.sum()
    return float(np.sum(w * np.asarray(r2[:tau], dtype=np.float64)))


def garch_variance(r2: np.ndarray, params: GarchParams, *, backcast: float | None = None) -> np.ndarray:
    """The GARCH(1,1) filter ``v[k+1] = ω + α r2[k] + β v[k]``, started as ``arch`` starts it:
    ``v[0] = ω + (α + β) b`` with ``b`` the backcast standing in for the squared return and the
    variance before the first (:func:`arch_backcast` of ``r2`` when None). Length
    ``len(r2) + 1``; fraction units."""
    r2 = np.asarray(r2, dtype=np.float64)
    b = arch_backcast(r2) if backcast is None else backcast
    v0 = params.omega + (params.alpha + params.beta) * b
    out = np.empty(len(r2) + 1)
    out[0] = v0
    out[1:] = first_order_filter(1.0, params.beta, params.omega + params.alpha * r2, v0)
    return out


def garch_cumulative(v_next: np.ndarray, params: GarchParams, horizons: tuple[int, ...]) -> np.ndarray:
    """Sum of the expected daily variances over the next ``h`` sessions for each ``h`` in
    ``horizons``, from one-step forecasts ``v_next`` (shape ``(n,)``): ``E v[t+j] = v̄ +
    p^{j−1} (v[t+1] − v̄)`` with ``p = α + β`` and ``v̄ = ω / (1 − p)`` (Bollerslev 1986; what
    ``arch``'s analytic ``forecast(horizon=h)`` returns). With ``p ≥ 1``: ``E v[t+j] = v[t+1] +
    (j − 1) ω``. Returns shape ``(n, len(horizons))``."""
    v_next = np.asarray(v_next, dtype=np.float64)
    p = params.persistence
    out = np.empty((len(v_next), len(horizons)))
    for i, h in enumerate(horizons):
        j = np.arange(h)
        if p < 1.0:
            vbar = params.omega / (1.0 - p)
            weights = p**j
            out[:, i] = h * vbar + (v_next - vbar) * weights.sum()
        else:
            out[:, i] = h * v_next + params.omega * j.sum()
    return out


def fit_garch(
    r: np.ndarray, *, start: GarchParams | None = None, fallback: GarchParams | None = None
) -> GarchParams:
    """GARCH(1,1) with Student-t innovations and a zero mean, fitted by ``arch`` on ``100 · r``
    (returns in percent, for the optimiser's numerical stability, as ``arch``'s documentation
    advises), parameters returned in fraction units.

    Args:
        r: daily log returns (fractions), oldest first, at least 100.
        start: the previous fit's parameters as starting values (a walk-forward's refits), or None.
        fallback: returned when the optimiser does not converge or the fit is not stationary
            (``α + β ≥ 1``); None: RiskMetrics' EWMA as an integrated GARCH
            (``ω = 0, α = 1 − λ, β = λ``, ``nu = 8``).
    Raises:
        ValueError: fewer than 100 returns or a non-finite one.
    """
    from arch import arch_model  # lazy: arch imports statsmodels

    r = np.asarray(r, dtype=np.float64)
    if len(r) < 100 or not np.all(np.isfinite(r)):
        raise ValueError(f"fit_garch needs at least 100 finite returns, got {len(r)}")
    model = arch_model(100.0 * r, mean="Zero", vol="GARCH", p=1, q=1, dist="t", rescale=False)
    sv: Any = None  # arch types starting_values as a 1-d float64 array
    if start is not None:
        sv = np.array([start.omega * 1e4, start.alpha, start.beta, start.nu], dtype=np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence chatter; judged below from the result
        res = model.fit(disp="off", show_warning=False, starting_values=sv)
    params = res.params
    fitted = GarchParams(
        omega=float(params["omega"]) / 1e4,
        alpha=float(params["alpha[1]"]),
        beta=float(params["beta[1]"]),
        nu=float(params["nu"]),
        converged=int(res.convergence_flag) == 0,
    )
    if fitted.converged and fitted.persistence < 1.0 and fitted.omega > 0:
        return fitted
    if fallback is not None:
        return fallback
    return GarchParams(
        omega=0.0, alpha=1.0 - RISKMETRICS_LAMBDA, beta=RISKMETRICS_LAMBDA, nu=8.0, converged=False
    )


def har_regressors(x: np.ndarray) -> np.ndarray:
    """HAR regressors at each index ``k``: ``[1, x[k], mean(x[k−4..k]), mean(x[k−21..k])]``
    (Corsi 2009; NaN before index 21). Shape ``(len(x), 4)``."""
    x = np.asarray(x, dtype=np.float64)
    csum = np.concatenate([[0.0], np.cumsum(x)])
    n = len(x)
    out = np.full((n, 4), np.nan)
    out[:, 0] = 1.0
    out[:, 1] = x
    k = np.arange(n)
    ok_w = k >= HAR_WEEK - 1
    out[ok_w, 2] = (csum[k[ok_w] + 1] - csum[k[ok_w] + 1 - HAR_WEEK]) / HAR_WEEK
    ok_m = k >= HAR_MONTH - 1
    out[ok_m, 3] = (csum[k[ok_m] + 1] - csum[k[ok_m] + 1 - HAR_MONTH]) / HAR_MONTH
    return out


@dataclass(frozen=True)
class HarParams:
    """One HAR regression per horizon: ``coefs[h]`` (4 numbers: constant, day, week, month) predict
    the mean of the next ``h`` squared returns (``log=False``) or, with ``log=True``, of ``ln`` of
    the mean next-``h`` range variance, scaled back by ``exp(·) · smear · ratio``. ``ratio`` is
    mean(r²)/mean(range variance) over the fit (the range estimator misses some close-to-close
    variance); ``floor`` and ``ceiling`` the smallest and largest daily variance a forecast may
    take (5 % and 50 times the fit's mean squared return); ``x_floor`` the smallest range variance
    the log model reads (a tenth of the fit's median positive one: a session that did not trade,
    high = low = open = previous close, has a range variance of 0, whose log would dominate the
    weekly and monthly means).
    """

    coefs: dict[int, tuple[float, float, float, float]]
    smear: dict[int, float]
    ratio: float
    floor: float
    log: bool
    ceiling: float = math.inf
    x_floor: float = 1e-12


def fit_har(
    x: np.ndarray,
    r2: np.ndarray,
    *,
    end: int,
    horizons: tuple[int, ...],
    log: bool,
    window: int | None = None,
) -> HarParams:
    """Fit the HAR regressions of every horizon by OLS (``numpy.linalg.lstsq``) on the rows whose
    target is known at index ``end`` (row ``k`` with ``k + h ≤ end``; no look-ahead).

    Args:
        x: daily range variance (the regressors), compressed series; r2: squared log returns
            (the level model's target), same length.
        end: the last index whose data the fit may read.
        horizons: sessions ahead, one regression each.
        log: ``True`` for the log model (target ln of the mean range variance, then the
            ``ratio`` to squared returns and Duan's (1983) smearing factor), ``False`` for the
            level model on squared returns.
        window: use only the last ``window`` rows (None: all).
    Raises:
        ValueError: fewer than 60 usable rows for some horizon.
    """
    x = np.asarray(x, dtype=np.float64)[: end + 1]
    r2 = np.asarray(r2, dtype=np.float64)[: end + 1]
    n = len(x)
    span = slice(max(0, n - (window or n)), n)
    positive = x[span][x[span] > 0]
    x_floor = 0.1 * float(np.median(positive)) if len(positive) else 1e-12
    reg = har_regressors(np.log(np.maximum(x, x_floor)) if log else x)
    coefs: dict[int, tuple[float, float, float, float]] = {}
    smear: dict[int, float] = {}
    target_src = np.maximum(x, x_floor) if log else r2
    csum = np.concatenate([[0.0], np.cumsum(target_src)])
    for h in horizons:
        rows: np.ndarray = np.arange(HAR_MONTH - 1, n - h)
        if window is not None:
            rows = rows[-window:]
        if len(rows) < 60:
            raise ValueError(
                f"HAR for {h} sessions needs at least 60 rows up to index {end}, got {len(rows)}"
            )
        y = (csum[rows + 1 + h] - csum[rows + 1]) / h
        if log:
            y = np.log(y)
        a = reg[rows]
        beta, *_ = np.linalg.lstsq(a, y, rcond=None)
        coefs[h] = (float(beta[0]), float(beta[1]), float(beta[2]), float(beta[3]))
        if log:
            resid = y - a @ beta
            smear[h] = float(np.mean(np.exp(resid)))
        else:
            smear[h] = 1.0
    ratio = float(np.sum(r2[span]) / np.sum(x[span])) if log else 1.0
    mean_r2 = float(np.mean(r2[span]))
    return HarParams(
        coefs=coefs,
        smear=smear,
        ratio=ratio,
        floor=0.05 * mean_r2,
        log=log,
        ceiling=50.0 * mean_r2,
        x_floor=x_floor,
    )


def har_variance(x: np.ndarray, params: HarParams, horizons: tuple[int, ...]) -> np.ndarray:
    """Cumulative variance over the next ``h`` sessions from each index ``k`` (origin after return
    ``k``): ``h ·`` the HAR prediction, kept within ``h · [floor, ceiling]``. Shape
    ``(len(x), len(horizons))``, NaN before index 21. Row ``k`` reads ``x[..k]`` only."""
    x = np.asarray(x, dtype=np.float64)
    reg = har_regressors(np.log(np.maximum(x, params.x_floor)) if params.log else x)
    out = np.empty((len(x), len(horizons)))
    for i, h in enumerate(horizons):
        pred = reg @ np.asarray(params.coefs[h])
        daily = np.exp(pred) * params.smear[h] * params.ratio if params.log else pred
        out[:, i] = h * np.clip(daily, params.floor, params.ceiling)
    return out


def annualised(sigma_daily: float) -> float:
    """``σ · √252``: a daily σ as an annual one (252 sessions a year)."""
    return sigma_daily * math.sqrt(252.0)
