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
from agents.quant.options.parity import parity_spot
from agents.quant.options.pricing import (
    PricingError,
    bsm_price,
    csp_roc,
    greeks_from_price,
    historical_volatility,
    probability_of_profit,
)
from agents.quant.options.rates import RateUnavailableError, risk_free_rate


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


def test_parity_spot_of_the_cboe_file_replaces_its_after_hours_last(options_dir: Path) -> None:
    """The CBOE SPY file's preamble "Last 589.25" is stamped 7:23 PM EDT (after hours); the chain's
    own mids imply a spot near 593.9. Hand check on the 2025-05-19 594 strike (3 days): call and
    put mids from the file, S = C − P + K·e^(−rT) with r = 0.04332 (q = 0)."""
    chain = find_chain(options_dir=options_dir, symbol="SPY", as_of=date(2025, 5, 16))
    assert chain.underlying_price == 589.25
    assert chain.underlying_stale is not None and "7:23 PM EDT" in chain.underlying_stale
    r = risk_free_rate(date(2025, 5, 16)).rate
    est = parity_spot(chain, r=r, q=0.0)
    assert est.expiry == date(2025, 5, 19) and est.dte == 3 and 594.0 in est.strikes
    quotes = chain.by_contract()
    call, put = quotes["SPY250519C00594000"], quotes["SPY250519P00594000"]
    by_hand = (call.bid + call.ask) / 2 - (put.bid + put.ask) / 2 + 594 * math.exp(-r * 3 / 365)
    assert est.per_strike[est.strikes.index(594.0)] == pytest.approx(by_hand, abs=1e-9)
    assert 593.5 < est.spot < 594.3  # the median of five strikes, 0.8 % above the stale Last


def test_rate_from_the_shipped_t_bill_series() -> None:
    """DTB3 2025-05-16 = 4.25 % discount: P = 1 − 0.0425·91/360 = 0.989257, r = −ln P·365/91 = 0.04332.
    A Saturday takes Friday's value; a day before the series has none."""
    rate = risk_free_rate(date(2025, 5, 16))
    assert rate.discount_yield == 4.25 and rate.rate == pytest.approx(0.04332, abs=1e-5)
    assert risk_free_rate(date(2014, 6, 7)).observed == date(2014, 6, 6)
    assert risk_free_rate(date(2014, 6, 7)).rate == pytest.approx(0.000406, abs=1e-6)
    with pytest.raises(RateUnavailableError, match="FINAGENT_OPTIONS_RISK_FREE_RATE"):
        risk_free_rate(date(2005, 1, 3))


def test_recomputed_iv_matches_the_cboe_column_at_the_parity_spot(options_dir: Path) -> None:
    """CBOE's own IVs fit its quotes once the spot is the one the options were quoted against.

    Every 14–45 DTE put of the file (all on 2025-05-30, 14 days) with a bid and a CBOE IV, priced
    at the parity spot, the DTB3 rate and q = 0 (SPY's next ex-dividend date is in June, after the
    expiry): our IV (vollib) against CBOE's column, median |ΔIV| below 0.005 (measured 0.0016 over
    189 puts). The 590 put at CBOE's IV, priced with the textbook formula above, is worth its mid
    (4.605) to within 5 cents; at the stale 589.25 it would be worth about 6.7.
    """
    chain = find_chain(options_dir=options_dir, symbol="SPY", as_of=date(2025, 5, 16))
    r = risk_free_rate(chain.quote_date).rate
    spot = parity_spot(chain, r=r, q=0.0).spot
    diffs = []
    for c in chain.puts():
        if not 14 <= c.dte(chain.quote_date) <= 45 or c.source_iv is None or c.bid <= 0:
            continue
        try:
            g = greeks_from_price(right="put", price=c.mid, spot=spot, strike=c.strike, dte=14, r=r, q=0.0)
        except PricingError:
            continue
        diffs.append(abs(g.iv - c.source_iv))
    assert len(diffs) >= 150
    assert float(np.median(diffs)) < 0.005
    p590 = chain.by_contract()["SPY250530P00590000"]
    assert p590.mid == pytest.approx(4.605) and p590.source_iv is not None
    t = 14 / 365
    assert _put(spot, 590, t, r, 0.0, p590.source_iv) == pytest.approx(4.605, abs=0.05)
    assert _put(589.25, 590, t, r, 0.0, p590.source_iv) > 6.5
