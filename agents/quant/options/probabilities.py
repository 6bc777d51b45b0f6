"""Probabilities of a strike: at expiry (below / above a level) and before it (touching a level),
risk-neutral from the contract's IV and real-world from a volatility forecast.

* **Risk-neutral** (what the option price implies): the underlying follows geometric Brownian
  motion with drift ``r − q`` and volatility ``σ`` = the contract's IV. P(S_T < L) = N(−d₂(L))
  with d₂ = [ln(S/L) + (r − q − σ²/2)T] / (σ√T) (Hull, "Black–Scholes–Merton"); the probability
  that the path touches ``L`` before T is the first-passage probability of a Brownian motion with
  drift ν = r − q − σ²/2 to the barrier b = ln(L/S) (Shreve, "Stochastic Calculus for Finance II",
  §7.2.2; the reflection principle when ν = 0): for a barrier below the spot
  N((b − νT)/(σ√T)) + e^(2νb/σ²) N((b + νT)/(σ√T)), mirrored for a barrier above.
* **Real-world** (what the stock is expected to do): a :class:`RealWorldModel` gives σ of the log
  return to a horizon in trading sessions and the two probabilities. The risk forecast of the
  project is the intended model (:func:`agents.quant.options.real_world.real_world_model` picks
  it up); until it exists the interim :class:`LognormalRealWorld` is used: log returns normal with
  zero drift and the daily σ of a RiskMetrics EWMA (λ = 0.94, J.P. Morgan 1996) of the adjusted
  closes, so P(below) = N(ln(L/S)/(σ√h)) and P(touch) = 2·N(−|ln(L/S)|/(σ√h)) (reflection).

Units: prices USD in the chain's units, σ fractions (per year for IV, per session for the daily
σ), T in years (DTE/365, calendar days to the last trading session), horizons in sessions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Protocol

import numpy as np

_N = NormalDist()
#: Sessions a year, to state a daily σ per year (Hull, "Estimating volatility").
SESSIONS_PER_YEAR = 252
#: RiskMetrics' decay for daily data (J.P. Morgan/Reuters, "RiskMetrics Technical Document", 1996).
EWMA_LAMBDA = 0.94


def rn_prob_below(*, spot: float, level: float, t: float, r: float, q: float, sigma: float) -> float:
    """Risk-neutral P(S_T < ``level``) = N(−d₂); ``t`` in years (> 0), ``sigma`` per year (> 0)."""
    if level <= 0:
        return 0.0
    s = sigma * math.sqrt(t)
    d2 = (math.log(spot / level) + (r - q - 0.5 * sigma * sigma) * t) / s
    return _N.cdf(-d2)


def first_passage(*, spot: float, level: float, t: float, nu: float, sigma: float) -> float:
    """P(the path of ln S, a Brownian motion with drift ``nu`` and volatility ``sigma`` per year,
    touches ln ``level`` within ``t`` years); 1.0 when ``level`` is at or beyond the spot already."""
    b = math.log(level / spot)
    if b == 0:
        return 1.0
    s = sigma * math.sqrt(t)
    if b < 0:
        p = _N.cdf((b - nu * t) / s) + math.exp(2 * nu * b / sigma**2) * _N.cdf((b + nu * t) / s)
    else:
        p = _N.cdf((-b + nu * t) / s) + math.exp(2 * nu * b / sigma**2) * _N.cdf((-b - nu * t) / s)
    return min(1.0, max(0.0, p))


def rn_prob_touch(*, spot: float, level: float, t: float, r: float, q: float, sigma: float) -> float:
    """Risk-neutral probability of touching ``level`` before ``t`` years (module docstring)."""
    return first_passage(spot=spot, level=level, t=t, nu=r - q - 0.5 * sigma * sigma, sigma=sigma)


class RealWorldModel(Protocol):
    """A real-world forecast of the underlying to a horizon in trading sessions.

    ``source`` says what it is (printed with every number it gives); ``sigma(h)`` is the
    standard deviation of the log return from ``as_of``'s close to ``h`` sessions later;
    ``prob_below(level, h)`` P(close below ``level`` after ``h`` sessions); ``prob_touch(level, h)``
    P(the price reaches ``level`` within ``h`` sessions). Prices in the units of the spot the
    model was built with."""

    @property
    def source(self) -> str: ...

    @property
    def spot(self) -> float: ...

    def sigma(self, horizon: int) -> float: ...

    def prob_below(self, level: float, horizon: int) -> float: ...

    def prob_touch(self, level: float, horizon: int) -> float: ...


@dataclass(frozen=True)
class LognormalRealWorld:
    """Zero-drift lognormal model with a constant daily σ (the interim model, module docstring)."""

    spot: float
    daily_sigma: float
    source: str

    def sigma(self, horizon: int) -> float:
        """σ of the log return to ``horizon`` sessions: daily σ × √horizon."""
        return self.daily_sigma * math.sqrt(max(horizon, 0))

    def prob_below(self, level: float, horizon: int) -> float:
        """N(ln(level/spot) / σ_h); 1 or 0 at a zero horizon."""
        s = self.sigma(horizon)
        if s <= 0:
            return 1.0 if level > self.spot else 0.0
        return _N.cdf(math.log(level / self.spot) / s)

    def prob_touch(self, level: float, horizon: int) -> float:
        """2·N(−|ln(level/spot)| / σ_h) (reflection principle), at most 1."""
        s = self.sigma(horizon)
        if level == self.spot:
            return 1.0
        if s <= 0:
            return 0.0
        return min(1.0, 2.0 * _N.cdf(-abs(math.log(level / self.spot)) / s))


def ewma_daily_sigma(closes: list[float] | np.ndarray, *, lam: float = EWMA_LAMBDA, seed: int = 60) -> float:
    """RiskMetrics EWMA σ of daily log returns: the variance starts as the sample variance of the
    first ``seed`` returns, then σ²ₜ = λσ²ₜ₋₁ + (1 − λ)rₜ². ``closes`` oldest first (adjusted).

    Raises ValueError with fewer than ``seed`` + 2 closes or a non-positive close."""
    values = np.asarray(closes, dtype="float64")
    if len(values) < seed + 2:
        raise ValueError(f"{len(values)} closes; the EWMA needs at least {seed + 2}")
    if bool((values <= 0).any()):
        raise ValueError("closes must be positive")
    returns = np.diff(np.log(values))
    var = float(np.var(returns[:seed], ddof=1))
    for x in returns[seed:]:
        var = lam * var + (1.0 - lam) * float(x) * float(x)
    return math.sqrt(var)
