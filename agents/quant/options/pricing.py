"""Black–Scholes–Merton numbers of one contract, with ``vollib`` (the maintained successor of
``py_vollib``: Jäckel's "Let's Be Rational" implied volatility and analytical greeks), and the
cash-secured-put arithmetic (docs/design.md, "Option economics").

Conventions (vollib's, kept as is so they can be checked against the library):

* time to expiry ``t = DTE / 365`` (calendar days, year fraction); ``r`` and ``q`` continuously
  compounded, fractions per year (settings ``options.risk_free_rate`` / ``options.dividend_yield``);
* ``delta`` per USD of the underlying (a put's is negative); ``gamma`` per USD²;
  ``theta`` USD per calendar day (vollib divides the annual theta by 365); ``vega`` USD per
  1 volatility point (vollib divides by 100);
* the listed options here are American; BSM prices the European option. For the short-dated,
  out-of-the-money puts a CSP sells the early-exercise premium is small, and the IV solved from
  an American mid is slightly above the European IV (Hull, ch. "American options").

CSP arithmetic: premium = mid × 100 per contract; collateral = strike × 100;
ROC = premium / collateral (= mid / strike); weekly ROC = ROC × 7 / DTE; annualised ROC =
ROC × 365 / DTE (simple, not compounded, as ``calculate_roc`` returns it); breakeven = strike −
mid; probability of profit (POP) = risk-neutral P(S_T > breakeven) = N(d₂) at K = breakeven
with the contract's IV (Hull, ch. "Black–Scholes–Merton": N(d₂) is the risk-neutral
probability that a call at that strike finishes in the money).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from vollib.black_scholes_merton import black_scholes_merton
from vollib.black_scholes_merton.greeks.analytical import delta, gamma, theta, vega
from vollib.black_scholes_merton.implied_volatility import implied_volatility

from agents.data.options.chains import CONTRACT_MULTIPLIER

#: Calendar days a year: the time unit of t = DTE / 365 (vollib's theta convention).
DAYS_PER_YEAR = 365.0
#: Trading days a year, to annualise daily HV (Hull, "Estimating volatility from historical data").
TRADING_DAYS = 252


class PricingError(ValueError):
    """No implied volatility or greeks for these inputs (price below intrinsic value, DTE 0, ...)."""


@dataclass(frozen=True)
class Greeks:
    """BSM numbers of one contract at its IV: ``iv`` (fraction/year), ``price`` (BSM price at
    that IV, USD; equals the mid up to the solver's precision), ``delta``, ``gamma``, ``theta``
    (USD/day), ``vega`` (USD per vol point)."""

    iv: float
    price: float
    delta: float
    gamma: float
    theta: float
    vega: float


def _flag(right: str) -> str:
    return "p" if right == "put" else "c"


def year_fraction(dte: int) -> float:
    """t = DTE / 365 (years). Raises :class:`PricingError` for DTE ≤ 0 (no time value to solve)."""
    if dte <= 0:
        raise PricingError(f"DTE {dte}: expiring today, no implied volatility")
    return dte / DAYS_PER_YEAR


def bsm_price(*, right: str, spot: float, strike: float, dte: int, r: float, q: float, sigma: float) -> float:
    """BSM price (USD per share) of a European option (vollib ``black_scholes_merton``)."""
    return float(black_scholes_merton(_flag(right), spot, strike, year_fraction(dte), r, sigma, q))


def greeks_from_price(
    *, right: str, price: float, spot: float, strike: float, dte: int, r: float, q: float
) -> Greeks:
    """IV solved from ``price`` (normally the mid) and the greeks at that IV.

    Raises:
        PricingError: DTE ≤ 0, a non-positive price, or a price outside the no-arbitrage bounds
            (vollib raises below intrinsic value and above the bound).
    """
    t = year_fraction(dte)
    if price <= 0 or spot <= 0 or strike <= 0:
        raise PricingError("price, spot and strike must be positive")
    flag = _flag(right)
    try:
        iv = float(implied_volatility(price, spot, strike, t, r, q, flag))
    except Exception as exc:  # vollib raises its own BelowIntrinsicException / AboveMaximumException
        raise PricingError(f"no implied volatility for price {price:g}: {type(exc).__name__}") from None
    if not math.isfinite(iv) or iv <= 0:
        raise PricingError(f"no implied volatility for price {price:g}")
    return Greeks(
        iv=iv,
        price=float(black_scholes_merton(flag, spot, strike, t, r, iv, q)),
        delta=float(delta(flag, spot, strike, t, r, iv, q)),
        gamma=float(gamma(flag, spot, strike, t, r, iv, q)),
        theta=float(theta(flag, spot, strike, t, r, iv, q)),
        vega=float(vega(flag, spot, strike, t, r, iv, q)),
    )


def historical_volatility(closes: list[float] | np.ndarray, *, period: int) -> float:
    """Close-to-close HV: sample std (ddof=1) of the last ``period`` daily log returns × √252.

    ``closes``: adjusted closes, oldest first. Raises ValueError with fewer than ``period`` + 1
    closes or a non-positive close. Same definition as ``hv_20`` in ``agents.quant.indicators``.
    """
    values = np.asarray(closes, dtype="float64")
    if len(values) < period + 1:
        raise ValueError(f"{len(values)} closes; HV({period}) needs {period + 1}")
    tail = values[-(period + 1) :]
    if bool((tail <= 0).any()):
        raise ValueError("closes must be positive")
    returns = np.diff(np.log(tail))
    return float(np.std(returns, ddof=1) * math.sqrt(TRADING_DAYS))


def probability_of_profit(
    *, spot: float, breakeven: float, dte: int, r: float, q: float, sigma: float
) -> float:
    """Risk-neutral P(S_T > ``breakeven``) for a short put, N(d₂) at K = breakeven (module docstring)."""
    if breakeven <= 0:
        return 1.0
    t = year_fraction(dte)
    d2 = (math.log(spot / breakeven) + (r - q - 0.5 * sigma * sigma) * t) / (sigma * math.sqrt(t))
    return NormalDist().cdf(d2)


@dataclass(frozen=True)
class Roc:
    """Return on the cash collateral of one short put: ``premium`` and ``collateral``
    (USD per contract), ``roc``, ``weekly_roc``, ``annualized_roc`` (fractions: 0.005 = 0.5 %),
    ``breakeven`` (USD per share)."""

    premium: float
    collateral: float
    roc: float
    weekly_roc: float
    annualized_roc: float
    breakeven: float


def csp_roc(*, premium: float, strike: float, dte: int) -> Roc:
    """Return on collateral of a cash-secured put sold at ``premium`` (USD per share).

    Raises ValueError for a non-positive strike, a negative premium or DTE ≤ 0.
    """
    if strike <= 0 or premium < 0 or dte <= 0:
        raise ValueError("strike must be > 0, premium >= 0 and DTE > 0")
    roc = premium / strike
    return Roc(
        premium=premium * CONTRACT_MULTIPLIER,
        collateral=strike * CONTRACT_MULTIPLIER,
        roc=roc,
        weekly_roc=roc * 7.0 / dte,
        annualized_roc=roc * DAYS_PER_YEAR / dte,
        breakeven=strike - premium,
    )
