"""BSM numbers from vollib checked against an independent textbook implementation (Hull's
formulas with math.erf and bisection, written here), and against the chain's own IV/delta."""

from __future__ import annotations

import itertools
import math
from datetime import date
from pathlib import Path

import numpy as np
import pytest

from agents.data.options.chains import find_chain
from agents.quant.options.pricing import (
    PricingError,
    bsm_price,
    csp_roc,
    greeks_from_price,
    historical_volatility,
    probability_of_profit,
)


def _n(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def _put(s: float, k: float, t: float, r: float, q: float, v: float) -> float:
    """Hull, "Black–Scholes–Merton with a dividend yield": p = K e^{-rT} N(-d2) - S e^{-qT} N(-d1)."""
    d1 = (math.log(s / k) + (r - q + v * v / 2) * t) / (v * math.sqrt(t))
    d2 = d1 - v * math.sqrt(t)
    return k * math.exp(-r * t) * _n(-d2) - s * math.exp(-q * t) * _n(-d1)


def _put_iv(price: float, s: float, k: float, t: float, r: float, q: float) -> float:
    lo, hi = 1e-4, 5.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _put(s, k, t, r, q, mid) < price else (lo, mid)
    return (lo + hi) / 2


@pytest.mark.parametrize(
    ("spot", "strike", "dte", "r", "q", "price"),
    [
        (748.40, 700.0, 36, 0.0, 0.0, 10.65),
        (589.25, 570.0, 14, 0.043, 0.012, 1.105),
        (645.57, 600.0, 15, 0.0, 0.0, 2.0),
    ],
)
def test_iv_and_delta_match_an_independent_bsm(
    spot: float, strike: float, dte: int, r: float, q: float, price: float
) -> None:
    t = dte / 365
    g = greeks_from_price(right="put", price=price, spot=spot, strike=strike, dte=dte, r=r, q=q)
    want_iv = _put_iv(price, spot, strike, t, r, q)
    assert g.iv == pytest.approx(want_iv, abs=1e-6)
    assert g.price == pytest.approx(price, abs=1e-6)
    d1 = (math.log(spot / strike) + (r - q + want_iv**2 / 2) * t) / (want_iv * math.sqrt(t))
    assert g.delta == pytest.approx(-math.exp(-q * t) * _n(-d1), abs=1e-6)
    # theta per day and vega per vol point by finite differences of the independent price
    h = 1e-5
    vega = (
        (_put(spot, strike, t, r, q, want_iv + h) - _put(spot, strike, t, r, q, want_iv - h)) / (2 * h) / 100
    )
    assert g.vega == pytest.approx(vega, rel=1e-4)
    theta = _put(spot, strike, t - 1 / 365, r, q, want_iv) - _put(spot, strike, t, r, q, want_iv)
    assert g.theta == pytest.approx(theta, rel=0.02)  # one-day step vs the analytic derivative
    assert bsm_price(
        right="put", spot=spot, strike=strike, dte=dte, r=r, q=q, sigma=want_iv
    ) == pytest.approx(price, abs=1e-6)


def test_no_iv_below_intrinsic_or_at_expiry() -> None:
    with pytest.raises(PricingError):
        greeks_from_price(
            right="put", price=40.0, spot=700.0, strike=750.0, dte=30, r=0.0, q=0.0
        )  # intrinsic 50
    with pytest.raises(PricingError):
        greeks_from_price(right="put", price=1.0, spot=700.0, strike=650.0, dte=0, r=0.0, q=0.0)


def test_csp_roc_by_hand() -> None:
    # calculate_roc: premium 1.25 on a 95 strike, 21 days
    roc = csp_roc(premium=1.25, strike=95.0, dte=21)
    assert roc.roc == pytest.approx(1.25 / 95)
    assert roc.weekly_roc == pytest.approx(0.0131578947 * 7 / 21)
    assert roc.annualized_roc == pytest.approx(0.0131578947 * 365 / 21)
    assert (roc.premium, roc.collateral, roc.breakeven) == (pytest.approx(125.0), 9500.0, 93.75)
    with pytest.raises(ValueError, match="DTE > 0"):
        csp_roc(premium=1.0, strike=95.0, dte=0)


def test_pop_is_the_probability_above_breakeven() -> None:
    # at-the-money breakeven, r = q = 0: P(S_T > S) = N(-sigma sqrt(t) / 2)
    t = 30 / 365
    assert probability_of_profit(spot=100, breakeven=100, dte=30, r=0, q=0, sigma=0.2) == pytest.approx(
        _n(-0.2 * math.sqrt(t) / 2)
    )
    assert probability_of_profit(spot=100, breakeven=80, dte=30, r=0, q=0, sigma=0.2) > 0.99


def test_hv_is_the_annualised_sample_std_of_log_returns() -> None:
    closes = [100.0, 101.0, 99.5, 102.0, 101.5, 103.0]
    rets = [math.log(b / a) for a, b in itertools.pairwise(closes)]
    mean = sum(rets) / len(rets)
    sd = math.sqrt(sum((x - mean) ** 2 for x in rets) / (len(rets) - 1))
    assert historical_volatility(closes, period=5) == pytest.approx(sd * math.sqrt(252))
    with pytest.raises(ValueError, match="needs 7"):
        historical_volatility(closes, period=6)


def test_recomputed_iv_and_delta_against_the_cboe_file(options_dir: Path) -> None:
    """The CBOE SPY file's own IV/delta vs ours from its mids (r 0.043 ≈ the 3-month T-bill in May
    2025, q 0.012 ≈ SPY's yield), puts of 2025-05-30 (14 DTE) with CBOE |delta| 0.05..0.5.

    Measured: our IV is lower by a median 0.028 (max 0.058) and our |delta| higher by a median
    0.025 (max 0.18, at the money). The file's values are not consistent with its own quotes: the
    590 put (mid 4.605, spot 589.25, 14 days) priced at CBOE's IV 0.145 is worth 6.70, not 4.61,
    so they were computed at another time/spot; the tolerance below is what we measured, with a
    little room, and documented in docs/options.md, "Against the chain's own values".
    """
    chain = find_chain(options_dir=options_dir, symbol="SPY", as_of=date(2025, 5, 16))
    spot = chain.underlying_price
    assert spot is not None
    iv_diff, delta_diff = [], []
    for c in chain.puts():
        if c.expiry != date(2025, 5, 30) or c.source_iv is None or c.source_delta is None or c.bid <= 0:
            continue
        if not 0.05 <= abs(c.source_delta) <= 0.5:
            continue
        g = greeks_from_price(right="put", price=c.mid, spot=spot, strike=c.strike, dte=14, r=0.043, q=0.012)
        iv_diff.append(g.iv - c.source_iv)
        delta_diff.append(g.delta - c.source_delta)
    assert len(iv_diff) >= 30
    assert float(np.median(iv_diff)) == pytest.approx(-0.028, abs=0.005)
    assert max(abs(x) for x in iv_diff) < 0.07
    assert float(np.median(delta_diff)) == pytest.approx(-0.025, abs=0.005)
    assert max(abs(x) for x in delta_diff) < 0.20
    cboe_590 = chain.by_contract()["SPY250530P00590000"]
    assert bsm_price(
        right="put", spot=spot, strike=590, dte=14, r=0.043, q=0.012, sigma=cboe_590.source_iv or 0
    ) == (pytest.approx(6.70, abs=0.01))
