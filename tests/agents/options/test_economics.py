"""What selling one option earns and risks (``agents.quant.options``): yields computed by hand
here from the real chains' quotes, fills, DTE to the last session, probabilities against
independent references (the reflection principle, a Monte Carlo with the Brownian-bridge
crossing correction, a textbook BSM written here), size and risk, the early-assignment
threshold, the desk's context and the no-hindsight earnings cutoff."""

from __future__ import annotations

import math
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agents.analysts.option_plan import earnings_cutoff, research_view
from agents.data.options.chains import find_chain
from agents.quant.options.context import earnings_implied_move, hv_cone, iv_rank, put_skew
from agents.quant.options.economics import (
    Market,
    OptionRules,
    early_exercise_threshold,
    failed_rules,
    fill_price,
    measure_contract,
)
from agents.quant.options.probabilities import LognormalRealWorld, first_passage, rn_prob_below
from agents.quant.options.rates import risk_free_rate
from agents.quant.options.sizing import Account, ladder, risk_of


def _n(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def _call(s: float, k: float, t: float, r: float, q: float, v: float) -> float:
    """Hull's BSM call with a dividend yield, written here as the reference."""
    d1 = (math.log(s / k) + (r - q + v * v / 2) * t) / (v * math.sqrt(t))
    return s * math.exp(-q * t) * _n(d1) - k * math.exp(-r * t) * _n(d1 - v * math.sqrt(t))


def _put(s: float, k: float, t: float, r: float, q: float, v: float) -> float:
    d1 = (math.log(s / k) + (r - q + v * v / 2) * t) / (v * math.sqrt(t))
    return k * math.exp(-r * t) * _n(-(d1 - v * math.sqrt(t))) - s * math.exp(-q * t) * _n(-d1)


def _market(options_dir: Path, symbol: str, day: date) -> tuple[Any, Market]:
    chain = find_chain(options_dir=options_dir, symbol=symbol, as_of=day)
    assert chain.underlying_price is not None
    return chain, Market(spot=chain.underlying_price, r=risk_free_rate(day).rate, q=0.0, quote_date=day)


def test_income_is_the_time_value_at_the_bid_and_yields_are_on_it(options_dir: Path) -> None:
    """AAPL 2014-06-06 (spot 645.57): the deep in-the-money 2014-06-21 700 put fills at its bid,
    of which 700 − 645.57 = 54.43 is intrinsic value, given back at assignment: only the rest,
    less the 0.65 USD fee, is income. The out-of-the-money 620 put's whole bid is time value."""
    chain, market = _market(options_dir, "AAPL", date(2014, 6, 6))
    rules = OptionRules()
    quotes = chain.by_contract()
    itm = measure_contract(quotes["AAPL140621P00700000"], market=market, rules=rules)
    bid = quotes["AAPL140621P00700000"].bid
    assert itm["dte"] == 14  # to Friday 2014-06-20, the last session of the Saturday-dated monthly
    assert itm["intrinsic"] == pytest.approx(54.43)
    income = (bid - 54.43) * 100 - 0.65
    assert itm["income"] == pytest.approx(income, abs=0.01)
    assert itm["net_premium"] == pytest.approx(bid * 100 - 0.65, abs=0.01)
    assert itm["excess_yield"] == pytest.approx(income / 70_000 * 365 / 14, abs=1e-6)
    assert itm["weekly_roc"] == pytest.approx(income / 70_000 * 7 / 14, abs=1e-6)
    # what the old screens printed: the whole premium as income, 1.93 a year for this put
    assert itm["excess_yield"] < 0.1 * (bid * 100 / 70_000 * 365 / 14)
    otm = measure_contract(quotes["AAPL140621P00620000"], market=market, rules=rules)
    assert otm["intrinsic"] == 0 and otm["fill"] == 3.30
    assert otm["income"] == pytest.approx(330 - 0.65)
    assert otm["excess_yield"] == pytest.approx(329.35 / 62_000 * 365 / 14, abs=1e-6)
    tbill = math.exp(risk_free_rate(date(2014, 6, 6)).rate) - 1
    assert otm["tbill_yield"] == pytest.approx(tbill, abs=1e-6)
    assert otm["total_yield"] == pytest.approx(otm["excess_yield"] + tbill, abs=1e-6)  # collateral in bills
    assert otm["breakeven"] == pytest.approx(620 - 3.2935, abs=1e-4)  # at the fill, not the mid


def test_a_covered_call_earns_on_the_shares_value_and_its_intrinsic_is_no_income(options_dir: Path) -> None:
    chain, market = _market(options_dir, "AAPL", date(2014, 6, 9))
    rules = OptionRules(right="call")
    itm = measure_contract(chain.by_contract()["AAPL140627C00092860"], market=market, rules=rules)
    q = chain.by_contract()["AAPL140627C00092860"]
    intrinsic = 93.70 - 92.86
    assert itm["capital"] == pytest.approx(9370.0) and itm["intrinsic"] == pytest.approx(intrinsic)
    want = ((q.bid - intrinsic) * 100 - 0.65) / 9370 * 365 / itm["dte"]
    assert itm["excess_yield"] == pytest.approx(want, abs=1e-6)
    assert itm["total_yield"] == itm["excess_yield"]  # shares earn no T-bill
    # the covered position profits above today's price less the net premium
    assert itm["breakeven"] == pytest.approx(93.70 - (q.bid * 100 - 0.65) / 100, abs=1e-4)


def test_fills() -> None:
    assert fill_price(bid=5.20, ask=5.40, fill="bid") == 5.20
    assert fill_price(bid=5.20, ask=5.40, fill="mid_minus_tick") == pytest.approx(5.25)  # 5.30 − 0.05
    assert fill_price(bid=3.30, ask=3.35, fill="mid_minus_tick") == pytest.approx(3.30)  # never below the bid
    assert fill_price(bid=1.94, ask=2.02, fill="mid_minus_tick") == pytest.approx(
        1.97
    )  # 1.98 − 0.01 under 3 USD


def test_iv_is_solved_to_the_last_session_not_the_listed_saturday(options_dir: Path) -> None:
    """The 2014-06-21 monthly lasts traded on Friday 06-20: t = 14/365 from 2014-06-06. Solving
    the mid at 15 days (to the Saturday) gives a different IV."""
    chain, market = _market(options_dir, "AAPL", date(2014, 6, 6))
    quote = chain.by_contract()["AAPL140621P00620000"]
    row = measure_contract(quote, market=market, rules=OptionRules())
    assert row["last_trading_day"] == "2014-06-20" and row["sessions"] == 10

    def iv_at(days: int) -> float:
        lo, hi = 1e-4, 3.0
        for _ in range(100):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if _put(645.57, 620, days / 365, market.r, 0, mid) < quote.mid else (lo, mid)
        return (lo + hi) / 2

    assert row["iv"] == pytest.approx(iv_at(14), abs=1e-4)
    assert abs(iv_at(15) - iv_at(14)) > 0.005


def test_desk_floors_keep_the_liquid_goog_725_put_and_drop_the_730(options_dir: Path) -> None:
    """GOOG 2015-12-24: the 2016-01-15 730 put quotes 6.30/6.70 (6.2 % of the mid), OI 382, volume 15;
    the 725 put 5.20/5.40 (3.8 %), OI 895, volume 782. With the default floors (spread within 5 %
    of the mid or 0.10, OI ≥ 500, volume ≥ 10) only the 725 is sellable."""
    chain, market = _market(options_dir, "GOOG", date(2015, 12, 24))
    rules = OptionRules()
    rows = {
        c: measure_contract(chain.by_contract()[c], market=market, rules=rules)
        for c in ("GOOG160115P00725000", "GOOG160115P00730000")
    }
    assert failed_rules(rows["GOOG160115P00725000"], rules) == []
    assert failed_rules(rows["GOOG160115P00730000"], rules) == ["delta", "spread", "open_interest"]
    r725 = rows["GOOG160115P00725000"]
    assert r725["dte"] == 22 and r725["income"] == pytest.approx(519.35)
    assert r725["excess_yield"] == pytest.approx(519.35 / 72_500 * 365 / 22, abs=1e-6)


def test_risk_neutral_probabilities_against_textbook_formulas() -> None:
    s, k, t, r, q, v = 748.4, 725.0, 22 / 365, 0.002, 0.0, 0.194
    d2 = (math.log(s / k) + (r - q - v * v / 2) * t) / (v * math.sqrt(t))
    assert rn_prob_below(spot=s, level=k, t=t, r=r, q=q, sigma=v) == pytest.approx(_n(-d2), abs=1e-12)
    # with no drift the first passage is the reflection principle: 2 N(ln(K/S) / σ√T)
    assert first_passage(spot=s, level=k, t=t, nu=0.0, sigma=v) == pytest.approx(
        2 * _n(math.log(k / s) / (v * math.sqrt(t))), abs=1e-12
    )
    assert first_passage(spot=s, level=780.0, t=t, nu=0.0, sigma=v) == pytest.approx(
        2 * _n(-math.log(780 / s) / (v * math.sqrt(t))), abs=1e-12
    )


@pytest.mark.parametrize(("level", "nu"), [(90.0, 0.15), (90.0, -0.3), (112.0, 0.25)])
def test_first_passage_with_drift_against_a_monte_carlo(level: float, nu: float) -> None:
    """Brownian motion with drift ν and σ 0.3 over 0.25 years, 40,000 paths of 100 steps; a step
    whose ends both stay on the spot's side still crossed with the Brownian-bridge probability
    exp(−2(x₀ − b)(x₁ − b)/(σ²Δt)) (Glasserman, "Monte Carlo Methods in Financial Engineering",
    §6.4). Standard error about 0.0025."""
    sigma, t, steps, paths = 0.3, 0.25, 100, 40_000
    rng = np.random.default_rng(20151224)
    dt = t / steps
    b = math.log(level / 100.0)
    x = np.cumsum(nu * dt + sigma * math.sqrt(dt) * rng.standard_normal((paths, steps)), axis=1)
    x = np.hstack([np.zeros((paths, 1)), x])
    side = np.sign(b)
    crossed = (side * (x - b) >= 0).any(axis=1)
    a0, a1 = x[:, :-1] - b, x[:, 1:] - b
    bridge = np.exp(-2.0 * np.clip(a0 * a1, 0, None) / (sigma * sigma * dt))
    no_cross = np.prod(1.0 - np.where(a0 * a1 > 0, bridge, 1.0), axis=1)
    mc = np.where(crossed, 1.0, 1.0 - no_cross).mean()
    assert first_passage(spot=100.0, level=level, t=t, nu=nu, sigma=sigma) == pytest.approx(mc, abs=0.01)


def test_the_real_world_model_touches_twice_as_often_as_it_ends_beyond() -> None:
    model = LognormalRealWorld(spot=100.0, daily_sigma=0.015, source="test")
    below = model.prob_below(92.0, 20)
    assert below == pytest.approx(_n(math.log(0.92) / (0.015 * math.sqrt(20))), abs=1e-12)
    assert model.prob_touch(92.0, 20) == pytest.approx(2 * below, abs=1e-12)
    assert model.sigma(25) == pytest.approx(0.075)


def test_measured_probabilities_read_as_a_desk_reads_them(options_dir: Path) -> None:
    """The GOOG 725 put: P(assigned) is P(below 725 at expiry); the strike is touched about twice
    as often (reflection, small drift); POP is the chance of ending above the breakeven, so it
    exceeds 1 − P(assigned)."""
    chain, market = _market(options_dir, "GOOG", date(2015, 12, 24))
    model = LognormalRealWorld(spot=748.4, daily_sigma=0.2048 / math.sqrt(252), source="test")
    market = Market(spot=market.spot, r=market.r, q=0.0, quote_date=market.quote_date, real_world=model)
    row = measure_contract(chain.by_contract()["GOOG160115P00725000"], market=market, rules=OptionRules())
    assert row["p_touch_rn"] == pytest.approx(2 * row["p_assigned_rn"], abs=0.02)
    assert row["pop_rn"] > 1 - row["p_assigned_rn"]
    assert row["p_assigned_rw"] == pytest.approx(model.prob_below(725.0, 14), abs=1e-4)  # 14 sessions
    assert row["expected_move"] == pytest.approx(748.4 * 0.2048 / math.sqrt(252) * math.sqrt(14), abs=1e-3)
    assert row["premium_per_move"] == pytest.approx(5.1935 / row["expected_move"], abs=1e-4)
    assert row["score"] == pytest.approx(row["excess_yield"] * row["premium_per_move"], rel=1e-3)


def test_risk_of_a_short_put_by_hand() -> None:
    risk = risk_of(kind="short_put", spot=93.70, strike=90.71, net=57.35, sigma_h=0.05)
    assert risk["max_loss"] == pytest.approx(9071 - 57.35)
    down = 93.70 * math.exp(-0.10)
    assert risk["price_down_2sigma"] == pytest.approx(down, abs=1e-4)
    assert risk["pnl_down_2sigma"] == pytest.approx(57.35 - (90.71 - down) * 100, abs=0.01)
    assert risk["pnl_gap"] == pytest.approx(57.35 - (90.71 - 74.96) * 100, abs=0.01)
    assert risk["return_on_risk"] == pytest.approx(57.35 / (9071 - 57.35), abs=1e-6)
    call = risk_of(kind="covered_call", spot=93.70, strike=97.14, net=53.35, sigma_h=None)
    assert call["pnl_gap"] == pytest.approx(-0.2 * 93.70 * 100 + 53.35, abs=0.01)
    assert call["pnl_down_2sigma"] is None


def _row(contract: str, expiry: str, strike: float, net: float, spot: float) -> dict[str, Any]:
    return {
        "contract": contract,
        "expiry": expiry,
        "strike": strike,
        "net_premium": net,
        "risk": risk_of(kind="short_put", spot=spot, strike=strike, net=net, sigma_h=0.05),
    }


def test_the_ladder_by_hand() -> None:
    """A 100,000 USD account with a 20 % per-name cap (20,000 USD): the best put of each expiry
    first (9,071 then 8,929 USD of collateral, 18,000 in all), a third contract would pass the
    cap. A 1 % gap-loss cap (1,000 USD) fits none: one put loses 1,517.65 USD on a 20 % gap."""
    rows = [
        _row("A", "2014-06-27", 90.71, 57.35, 93.70),
        _row("A2", "2014-06-27", 90.00, 40.0, 93.70),
        _row("B", "2014-07-03", 89.29, 60.0, 93.70),
    ]
    account = Account(
        cash=100_000,
        total_value=100_000,
        held_value=0,
        held_shares=0,
        max_name_pct=0.20,
        max_gap_loss_pct=0.05,
    )
    out = ladder(kind="short_put", ranked=rows, account=account, spot=93.70)
    assert out["contracts"] == 2 and [r["contract"] for r in out["rungs"]] == ["A", "B"]
    assert out["collateral"] == pytest.approx(9071 + 8929) and out["binding"] == "name_cap"
    assert out["limits"]["by_name_cap"] == 20_000 // 9071
    tight = Account(
        cash=100_000,
        total_value=100_000,
        held_value=0,
        held_shares=0,
        max_name_pct=0.20,
        max_gap_loss_pct=0.01,
    )
    none = ladder(kind="short_put", ranked=rows, account=tight, spot=93.70)
    assert none["contracts"] == 0 and none["binding"] == "gap" and none["rungs"] == []
    held = Account(
        cash=100_000,
        total_value=100_000,
        held_value=12_000,
        held_shares=128,
        max_name_pct=0.20,
        max_gap_loss_pct=0.05,
    )
    assert (
        ladder(kind="short_put", ranked=rows, account=held, spot=93.70)["contracts"] == 0
    )  # 12,000 + 9,071 > 20,000
    calls = [
        {
            **r,
            "risk": risk_of(
                kind="covered_call", spot=93.70, strike=r["strike"] + 8, net=r["net_premium"], sigma_h=0.05
            ),
        }
        for r in rows
    ]
    cc = ladder(kind="covered_call", ranked=calls, account=account, spot=93.70, contracts_wanted=7)
    assert cc["contracts"] == 7 and [r["contracts"] for r in cc["rungs"]] == [3, 2, 2]


def test_early_exercise_threshold_against_a_textbook_call() -> None:
    """At the threshold the call's time value (textbook BSM price less S − K) equals the dividend;
    just below it, more: exercising there would give up more time value than the dividend."""
    k, d, tau, r, q, v = 92.86, 0.47, 9 / 365, 0.0004, 0.0, 0.21
    s_star = early_exercise_threshold(strike=k, dividend=d, tau=tau, r=r, q=q, sigma=v)
    assert s_star is not None and s_star > k
    assert _call(s_star, k, tau, r, q, v) - (s_star - k) == pytest.approx(d, abs=2e-3)
    assert _call(s_star * 0.99, k, tau, r, q, v) - (s_star * 0.99 - k) > d
    # a long call keeps more time value than a small dividend at any price below 3 × K
    assert early_exercise_threshold(strike=k, dividend=0.001, tau=2.0, r=0.05, q=0.0, sigma=0.2) is None


def test_hv_cone_against_pandas_rolling(stocknet_dir: Path) -> None:
    import pandas as pd

    closes = pd.read_csv(stocknet_dir / "GOOG.csv", parse_dates=["Date"]).set_index("Date")["Adj Close"][
        :"2015-12-24"
    ]
    cone = hv_cone(closes.to_numpy())
    rolling = np.log(closes).diff().rolling(20).std() * math.sqrt(252)
    last2y = rolling.dropna().iloc[-504:]
    assert cone["20"]["hv"] == pytest.approx(float(rolling.iloc[-1]), abs=1e-4)
    assert cone["20"]["max"] == pytest.approx(float(last2y.max()), abs=1e-4)
    assert cone["20"]["median"] == pytest.approx(float(last2y.median()), abs=1e-4)
    assert set(cone) == {"10", "20", "60", "252"}


def test_iv_rank_percentile_and_skew_by_hand() -> None:
    hist = [(date(2015, 12, d), iv) for d, iv in ((21, 0.20), (22, 0.25), (23, 0.18), (24, 0.22))]
    rank = iv_rank(hist)
    assert rank is not None
    assert rank["rank"] == pytest.approx((0.22 - 0.18) / (0.25 - 0.18), abs=1e-4)
    assert rank["percentile"] == pytest.approx(2 / 3, abs=1e-4) and rank["meaningful"] is False
    rows = [
        {"expiry": "x", "delta": -0.10, "iv": 0.26},
        {"expiry": "x", "delta": -0.30, "iv": 0.22},
        {"expiry": "x", "delta": -0.45, "iv": 0.20},
        {"expiry": "x", "delta": -0.55, "iv": 0.19},
    ]
    skew = put_skew(rows)
    assert skew is not None
    assert skew["iv_25d"] == pytest.approx(0.26 + (0.22 - 0.26) * 0.15 / 0.20, abs=1e-4)
    assert skew["iv_50d"] == pytest.approx(0.195, abs=1e-4)


def test_earnings_implied_move_by_hand() -> None:
    """ATM IV 0.23 to 2016-01-22 (29 DTE) and 0.31 to 2016-01-29 (36 DTE) around a report on
    2016-01-28: the report day's variance is 0.31²·36/365 − 0.23²·29/365."""
    term = [
        {"last_trading_day": "2016-01-15", "dte": 22, "iv": 0.19},
        {"last_trading_day": "2016-01-22", "dte": 29, "iv": 0.23},
        {"last_trading_day": "2016-01-29", "dte": 36, "iv": 0.31},
    ]
    move = earnings_implied_move(term=term, earnings_day=date(2016, 1, 28), spot=748.4)
    assert move is not None
    sigma = math.sqrt(0.31**2 * 36 / 365 - 0.23**2 * 29 / 365)
    assert move["sigma"] == pytest.approx(sigma, abs=1e-4)
    assert move["expected_abs_move"] == pytest.approx(sigma * math.sqrt(2 / math.pi), abs=1e-4)
    flat = [
        {"last_trading_day": "2016-01-22", "dte": 29, "iv": 0.23},
        {"last_trading_day": "2016-01-29", "dte": 36, "iv": 0.20},
    ]
    assert earnings_implied_move(term=flat, earnings_day=date(2016, 1, 28), spot=748.4)["sigma"] is None  # type: ignore[index]


GOOG_2015_12_24 = {  # get_earnings_dates at 2015-12-24: the calendar's rows up to then
    "next": None,
    "checked_through": "2016-01-23",
    "recent": [
        {"date": "2015-10-22"},
        {"date": "2015-07-16"},
        {"date": "2015-04-23"},
        {"date": "2015-01-29"},
    ],
}


def test_the_earnings_cutoff_uses_what_was_known_at_as_of() -> None:
    """GOOG 2015-12-24: the same quarter a year before (2015-01-29) + 364 days puts the report near
    2016-01-28 (it came on 2016-02-01); less the 7-day margin, the 2016-01-22 expiry is out and the
    2016-01-15 stays. The calendar's 'nothing through 2016-01-23' was scraped later and is not used
    (it let a 01-22 expiry through a 01-21 estimate)."""
    cutoff = earnings_cutoff(earnings=GOOG_2015_12_24, as_of=date(2015, 12, 24))
    assert cutoff is not None
    assert cutoff["earnings_date"] == "2016-01-28" and cutoff["first_excluded"] == "2016-01-21"
    kw: dict[str, Any] = {
        "noun": "put",
        "earnings": GOOG_2015_12_24,
        "earnings_ref": "e",
        "as_of": date(2015, 12, 24),
    }
    assert research_view(expiry="2016-01-22", **kw)["recommendation"] == "reject"
    assert research_view(expiry="2016-01-15", **kw)["recommendation"] == "pass"
    aapl = {
        "next": None,
        "recent": [{"date": d} for d in ("2014-04-23", "2014-01-27", "2013-10-28", "2013-07-23")],
    }
    a = earnings_cutoff(earnings=aapl, as_of=date(2014, 6, 6))
    assert a is not None and (a["earnings_date"], a["first_excluded"]) == ("2014-07-22", "2014-07-15")
    # a report date 30 days out in the calendar was not announced yet: the estimate stands
    later = {**aapl, "next": {"date": "2014-07-06"}}
    assert earnings_cutoff(earnings=later, as_of=date(2014, 6, 6))["source"] == "estimated from past reports"  # type: ignore[index]
    soon = {**aapl, "next": {"date": "2014-06-17"}}
    assert earnings_cutoff(earnings=soon, as_of=date(2014, 6, 6))["first_excluded"] == "2014-06-17"  # type: ignore[index]
    one = {"next": None, "recent": [{"date": "2014-04-23"}]}
    q = earnings_cutoff(earnings=one, as_of=date(2014, 6, 6))
    assert q is not None and (q["earnings_date"], q["margin_days"]) == ("2014-07-23", 14)
    assert earnings_cutoff(earnings=None, as_of=date(2014, 6, 6)) is None
