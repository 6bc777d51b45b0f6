"""What selling one option earns and risks, at the price it fills at (docs/design.md, "Option
economics"): the fill, the time value that is income, yields against the T-bill, probabilities of
assignment and touch, premium per unit of the expected move, and the floors a desk applies.

One function measures a put or a call (:func:`measure_contract`); the screens (``screen.py``)
and the plans build on it.

* **Fill**: ``bid`` (default) or ``mid_minus_tick`` (the mid less one tick: 0.05 USD at 3 USD and
  above, 0.01 below, the penny-pilot ticks; never below the bid). Every yield, breakeven and
  probability of profit is at this fill.
* **Income is time value**: intrinsic value (put K − S, call S − K, when positive) is not income:
  a seller of an in-the-money option gives it back at assignment. income = (fill − intrinsic) × 100
  − fee, USD per contract; an option whose fill is at or below its intrinsic value earns nothing.
* **Capital**: a cash-secured put the strike × 100; a covered call the shares' value, spot × 100.
* **Yields** (simple, annualised over calendar days to the last trading session): ``roc`` =
  income / capital, ``weekly_roc`` = roc × 7 / DTE, ``annualized_roc`` = roc × 365 / DTE, the
  **excess yield** over the T-bill (the income is what the trade adds to the capital's T-bill
  interest). For cash collateral (a put) the collateral earns the T-bill meanwhile:
  ``total_yield`` = excess + T-bill (both stated); shares earn none, so a call's total is its
  excess. The T-bill is the 3-month rate of the quote day, stated as a simple annual yield e^r − 1.
* **Expected move**: ±1σ of the underlying to the last trading session, from the real-world model
  (σ per session × √sessions, USD) and from the IV (spot × IV × √(DTE/365)); ``premium_per_move`` =
  income per share / the real-world move: what the trade is paid per unit of the risk the model
  expects (above IV/forecast richness).
* **Score** (the ranking): excess yield × premium per move: both must be positive; a contract
  richer in time value per unit of the expected move and per year of capital ranks first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Literal

from agents.data.market_calendar import sessions_between
from agents.data.options.chains import CONTRACT_MULTIPLIER, OptionQuote
from agents.quant.options.pricing import PricingError, greeks_from_price
from agents.quant.options.probabilities import RealWorldModel, rn_prob_below, rn_prob_touch

Right = Literal["put", "call"]
Fill = Literal["bid", "mid_minus_tick"]
#: Option price at and above which the tick is 0.05 USD (below: 0.01): the penny-pilot rule of the
#: US option exchanges for the names here (AAPL, GOOG, SPY).
TICK_BREAK = 3.0


@dataclass(frozen=True)
class OptionRules:
    """The floors and fill model of a screen (defaults: docs/design.md, "Option rules").

    ``right``: the contracts screened. Delta band as |delta|; DTE calendar days to the last
    trading session; liquidity: open interest and volume (contracts) at least the floors, spread
    (ask − bid) at most ``max(max_spread_abs, max_spread_pct × mid)`` (USD); ``min_excess_yield``
    the annualised income yield over the T-bill (fraction/year); ``min_weekly_roc`` an optional
    floor on weekly income yield (0 = off); ``max_strike`` (puts: the support cap) and
    ``min_strike`` (calls: resistance and cost basis), USD in the chain's units;
    ``expiry_before``: only contracts whose last trading day is before it (the earnings cutoff).
    """

    right: Right = "put"
    delta_min: float = 0.15
    delta_max: float = 0.25
    dte_min: int = 14
    dte_max: int = 45
    min_open_interest: int = 500
    min_volume: int = 10
    max_spread_pct: float = 0.05
    max_spread_abs: float = 0.10
    min_excess_yield: float = 0.06
    min_weekly_roc: float = 0.0
    max_strike: float | None = None
    min_strike: float | None = None
    expiry_before: date | None = None
    fill: Fill = "bid"
    fee_per_contract: float = 0.65
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The rules as a JSON-safe dict (dates ISO)."""
        out = {
            k: v.isoformat() if isinstance(v, date) else v for k, v in self.__dict__.items() if k != "extra"
        }
        return {**out, **self.extra}


@dataclass(frozen=True)
class Market:
    """What a chain is priced at: ``spot`` (USD, the chain's units), ``r`` and ``q`` (continuous,
    fraction/year), the quote day, and the real-world model (``None``: no price history)."""

    spot: float
    r: float
    q: float
    quote_date: date
    real_world: RealWorldModel | None = None

    @property
    def tbill_yield(self) -> float:
        """The T-bill as a simple annual yield, e^r − 1 (fraction)."""
        return math.exp(self.r) - 1.0


def _r(value: float | None, digits: int = 4) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    out = round(float(value), digits)
    return 0.0 if out == 0 else out


def tick_of(price: float) -> float:
    """The quoting tick of an option at ``price`` (USD): 0.05 from :data:`TICK_BREAK`, else 0.01."""
    return 0.05 if price >= TICK_BREAK else 0.01


def fill_price(*, bid: float, ask: float, fill: Fill) -> float:
    """USD/share a sell order fills at: the bid, or the mid less one tick but never below the bid
    (and never above the mid)."""
    mid = (bid + ask) / 2.0
    if fill == "bid":
        return bid
    return max(bid, min(mid, round(mid - tick_of(mid), 2)))


def intrinsic_value(*, right: Right, spot: float, strike: float) -> float:
    """Exercise value now, USD/share: put max(K − S, 0), call max(S − K, 0)."""
    return max(strike - spot, 0.0) if right == "put" else max(spot - strike, 0.0)


def spread_limit(mid: float, rules: OptionRules) -> float:
    """The widest spread the liquidity floor allows at ``mid`` (USD): max(abs, pct × mid)."""
    return max(rules.max_spread_abs, rules.max_spread_pct * mid)


def _quote_row(quote: OptionQuote, *, dte: int, sessions: int) -> dict[str, Any]:
    """The quote's part of :func:`measure_contract`'s row (its first keys, in their order):
    contract, right, dates, ``dte``/``sessions`` (as given), strike, bid/ask/mid/spread, volume,
    open interest and the source's IV and delta (USD/share, fractions)."""
    right: Right = quote.right
    mid = quote.mid
    row: dict[str, Any] = {
        "contract": quote.contract,
        "right": right,
        "expiry": quote.expiry.isoformat(),
        "last_trading_day": quote.last_trading_day.isoformat(),
        "dte": dte,
        "sessions": sessions,
        "strike": quote.strike,
        "bid": quote.bid,
        "ask": quote.ask,
        "mid": _r(mid),
        "spread": _r(quote.ask - quote.bid),
        "spread_pct": _r(quote.spread_pct),
        "volume": quote.volume,
        "open_interest": quote.open_interest,
        "source_iv": quote.source_iv,
        "source_delta": quote.source_delta,
    }
    if quote.open_interest_from_strike is not None:
        row["open_interest_from_strike"] = quote.open_interest_from_strike
    return row


def measure_contract(quote: OptionQuote, *, market: Market, rules: OptionRules) -> dict[str, Any]:
    """Every number of selling one contract (module docstring), as a JSON-safe row.

    Keys: the quote (``contract, right, expiry, last_trading_day, dte, sessions, strike, bid, ask,
    mid, spread, spread_pct, volume, open_interest, source_iv, source_delta``), ``intrinsic`` and,
    when the mid is below it, ``below_intrinsic``; with an IV solved from the mid: ``iv, delta,
    gamma, theta, vega, bsm_price``; at the fill: ``fill, extrinsic, premium, net_premium, income,
    capital, breakeven, roc, weekly_roc, annualized_roc, excess_yield, tbill_yield, total_yield``;
    the moves ``expected_move`` (real-world, USD), ``expected_move_iv``, ``strike_distance``,
    ``distance_sigma``, ``premium_per_move``; probabilities ``p_assigned_rn/_rw`` (finishing in
    the money), ``p_touch_rn/_rw`` (touching the strike before expiry), ``pop_rn/_rw`` (finishing
    beyond the breakeven); ``score``. ``error`` says why no IV could be solved. Units: USD/share
    for prices, USD/contract for premium, income and capital, fractions for the rest.
    """
    right: Right = quote.right
    spot, r, q = market.spot, market.r, market.q
    dte = quote.dte(market.quote_date)
    sessions = sessions_between(market.quote_date, quote.last_trading_day)
    mid = quote.mid
    row = _quote_row(quote, dte=dte, sessions=sessions)
    intrinsic = intrinsic_value(right=right, spot=spot, strike=quote.strike)
    row["intrinsic"] = _r(intrinsic)
    # an American option is worth at least its exercise value: a mid below it is a stale or
    # crossed quote (or a wrong spot), not a price to trust
    if mid < intrinsic:
        row["below_intrinsic"] = _r(intrinsic)
    try:
        g = greeks_from_price(right=right, price=mid, spot=spot, strike=quote.strike, dte=dte, r=r, q=q)
    except PricingError as exc:
        row["error"] = str(exc)
        return row
    t = dte / 365.0
    fill = fill_price(bid=quote.bid, ask=quote.ask, fill=rules.fill)
    extrinsic = fill - intrinsic
    net = fill * CONTRACT_MULTIPLIER - rules.fee_per_contract
    income = extrinsic * CONTRACT_MULTIPLIER - rules.fee_per_contract
    capital = (quote.strike if right == "put" else spot) * CONTRACT_MULTIPLIER
    roc = income / capital
    tbill = market.tbill_yield
    excess = roc * 365.0 / dte
    # breakeven of the position at expiry: a short put is assigned below K − net; shares held with
    # a short call lose below today's price less the net premium
    breakeven = (
        quote.strike - net / CONTRACT_MULTIPLIER if right == "put" else spot - net / CONTRACT_MULTIPLIER
    )
    row.update(
        iv=_r(g.iv),
        delta=_r(g.delta),
        gamma=_r(g.gamma, 6),
        theta=_r(g.theta),
        vega=_r(g.vega),
        bsm_price=_r(g.price),
        iv_diff=_r(g.iv - quote.source_iv) if quote.source_iv is not None else None,
        delta_diff=_r(g.delta - quote.source_delta) if quote.source_delta is not None else None,
        fill=_r(fill),
        extrinsic=_r(extrinsic),
        premium=_r(fill * CONTRACT_MULTIPLIER, 2),
        net_premium=_r(net, 2),
        income=_r(income, 2),
        capital=_r(capital, 2),
        breakeven=_r(breakeven),
        roc=_r(roc, 6),
        weekly_roc=_r(roc * 7.0 / dte, 6),
        annualized_roc=_r(excess, 6),
        excess_yield=_r(excess, 6),
        tbill_yield=_r(tbill, 6),
        total_yield=_r(excess + (tbill if right == "put" else 0.0), 6),
        theta_per_contract=_r(g.theta * CONTRACT_MULTIPLIER, 2),
    )
    distance = spot - quote.strike if right == "put" else quote.strike - spot
    move_iv = spot * g.iv * math.sqrt(t)
    row.update(expected_move_iv=_r(move_iv), strike_distance=_r(distance))
    rw = market.real_world
    move_rw = spot * rw.sigma(sessions) if rw is not None and sessions > 0 else None
    row["expected_move"] = _r(move_rw)
    row["distance_sigma"] = _r(distance / move_rw) if move_rw else None
    per_share_income = income / CONTRACT_MULTIPLIER
    ppm = per_share_income / move_rw if move_rw else None
    row["premium_per_move"] = _r(ppm)
    # probabilities: put assigned below K, call above; the position profits beyond the breakeven
    below_k = rn_prob_below(spot=spot, level=quote.strike, t=t, r=r, q=q, sigma=g.iv)
    below_be = rn_prob_below(spot=spot, level=breakeven, t=t, r=r, q=q, sigma=g.iv)
    row["p_assigned_rn"] = _r(below_k if right == "put" else 1.0 - below_k)
    row["p_touch_rn"] = _r(rn_prob_touch(spot=spot, level=quote.strike, t=t, r=r, q=q, sigma=g.iv))
    row["pop_rn"] = _r(1.0 - below_be)
    row["pop"] = row["pop_rn"]
    if rw is not None and sessions > 0:
        rw_below_k = rw.prob_below(quote.strike, sessions)
        row["p_assigned_rw"] = _r(rw_below_k if right == "put" else 1.0 - rw_below_k)
        row["p_touch_rw"] = _r(rw.prob_touch(quote.strike, sessions))
        row["pop_rw"] = _r(1.0 - rw.prob_below(breakeven, sessions)) if breakeven > 0 else 1.0
    else:
        row.update(p_assigned_rw=None, p_touch_rw=None, pop_rw=None)
    row["score"] = _r(excess * ppm, 6) if ppm is not None and ppm > 0 and excess > 0 else 0.0
    return row


def failed_rules(row: dict[str, Any], rules: OptionRules) -> list[str]:
    """The rule names ``row`` (a :func:`measure_contract` row) fails, in rule order:
    ``dte``, ``earnings``, ``no_iv``, ``delta``, ``strike_above_cap`` (put), ``strike_below_min``
    (call), ``no_time_value`` (income ≤ 0: an in-the-money contract whose fill holds no time
    value beyond fees), ``excess_yield``, ``weekly_roc`` (when that floor is on), ``spread``,
    ``volume``, ``open_interest`` (unknown open interest fails)."""
    failed: list[str] = []
    if not rules.dte_min <= row["dte"] <= rules.dte_max:
        failed.append("dte")
    if rules.expiry_before is not None and row["last_trading_day"] >= rules.expiry_before.isoformat():
        failed.append("earnings")
    if row.get("delta") is None:
        failed.append("no_iv")
        return failed
    if not rules.delta_min <= abs(row["delta"]) <= rules.delta_max:
        failed.append("delta")
    if rules.right == "put" and rules.max_strike is not None and row["strike"] > rules.max_strike:
        failed.append("strike_above_cap")
    if rules.right == "call" and rules.min_strike is not None and row["strike"] < rules.min_strike:
        failed.append("strike_below_min")
    if (row.get("income") or 0.0) <= 0:
        failed.append("no_time_value")
    elif (row.get("excess_yield") or 0.0) < rules.min_excess_yield:
        failed.append("excess_yield")
    if rules.min_weekly_roc > 0 and (row.get("weekly_roc") or 0.0) <= rules.min_weekly_roc:
        failed.append("weekly_roc")
    if row["spread"] is None or row["spread"] > spread_limit(float(row["mid"] or 0.0), rules) + 1e-9:
        failed.append("spread")
    if row["volume"] < rules.min_volume:
        failed.append("volume")
    if row["open_interest"] is None or row["open_interest"] < rules.min_open_interest:
        failed.append("open_interest")
    return failed


def rank_key(row: dict[str, Any]) -> tuple[float, float]:
    """Sort key of passing rows, best first: the score, then the excess yield."""
    return (-(row.get("score") or 0.0), -(row.get("excess_yield") or 0.0))


def miss_key(row: dict[str, Any], rules: OptionRules) -> tuple[bool, int, float]:
    """Sort key of failing rows, nearest misses first: with an IV first, fewest failed rules,
    then |delta| nearest the middle of the band."""
    middle = (rules.delta_min + rules.delta_max) / 2
    return (row.get("delta") is None, len(row["failed"]), abs(abs(row.get("delta") or 1.0) - middle))


def call_time_value(*, spot: float, strike: float, tau: float, r: float, q: float, sigma: float) -> float:
    """BSM call price less its exercise value (USD/share) at ``spot`` with ``tau`` years left."""
    from agents.quant.options.pricing import bsm_price

    dte = max(1, round(tau * 365.0))
    price = bsm_price(right="call", spot=spot, strike=strike, dte=dte, r=r, q=q, sigma=sigma)
    return price - max(spot - strike, 0.0)


def early_exercise_threshold(
    *, strike: float, dividend: float, tau: float, r: float, q: float, sigma: float
) -> float | None:
    """The lowest price S* (USD) on the eve of an ex-dividend date at which a call with ``tau``
    years left after it holds less time value than ``dividend`` (USD/share): a holder then gains by
    exercising before the ex-date, so a covered call above S* is likely assigned (Hull, "American
    options": early exercise of a call is optimal only just before an ex-dividend date, when the
    dividend exceeds the time value given up). The time value of an in-the-money call falls as
    the price rises (toward K(1 − e^(−rτ))); at the strike it is largest. ``None`` when even a
    very deep call keeps more time value than the dividend (never worth exercising)."""

    def tv(s: float) -> float:
        return call_time_value(spot=s, strike=strike, tau=tau, r=r, q=q, sigma=sigma)

    if tv(strike) <= dividend:
        return strike
    hi = strike * 3.0
    if tv(hi) > dividend:
        return None
    lo = strike
    for _ in range(60):
        mid = (lo + hi) / 2.0
        if tv(mid) > dividend:
            lo = mid
        else:
            hi = mid
    return hi
