"""Cash-secured-put screen: every put of a chain measured (IV from the mid, greeks,
POP, ROC) and checked against the CSP rules, each rule a setting (docs/design.md, "CSP rules").

Rules per contract: |delta| in
[delta_min, delta_max] (0.15–0.30); DTE in [dte_min, dte_max] (14–45); strike at or below a
support level (``max_strike``); weekly ROC above ``min_weekly_roc`` (0.5 %); liquidity: spread
(ask − bid)/mid ≤ ``max_spread_pct``, volume ≥ ``min_volume``, open interest ≥
``min_open_interest`` (an unknown open interest fails the rule); expiry before
``expiry_before`` (the next earnings date, when the caller knows it: rule ``earnings``).
IV ≥ HV is a rule on the symbol (``calculate_iv_hv``), not on each contract.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date
from typing import Any

from agents.data.options.chains import OptionChain, OptionQuote
from agents.quant.options.pricing import PricingError, csp_roc, greeks_from_price, probability_of_profit


@dataclass(frozen=True)
class CspRules:
    """The thresholds of the screen (fractions, days, contracts); defaults: docs/design.md, "CSP rules"."""

    delta_min: float = 0.15
    delta_max: float = 0.30
    dte_min: int = 14
    dte_max: int = 45
    min_weekly_roc: float = 0.005
    max_spread_pct: float = 0.10
    min_volume: int = 1
    min_open_interest: int = 100
    max_strike: float | None = None
    expiry_before: date | None = None
    fill_slippage: float = 1.0
    fee_per_contract: float = 0.65
    full_open_interest: int = 1000

    def as_dict(self) -> dict[str, Any]:
        """The rules as a JSON-safe dict (dates ISO)."""
        return {k: v.isoformat() if isinstance(v, date) else v for k, v in self.__dict__.items()}


def _r(value: float | None, digits: int = 4) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    out = round(float(value), digits)
    return 0.0 if out == 0 else out


def measure_put(quote: OptionQuote, *, quote_date: date, spot: float, r: float, q: float) -> dict[str, Any]:
    """All numbers of one put: quote, DTE, IV/greeks from the mid, POP, breakeven, ROC, and the
    source's own IV/delta with the differences. ``error`` says why IV could not be solved;
    ``below_intrinsic`` (USD, present only then) is the exercise value a mid falls short of.

    Units: USD per share for prices, USD per contract for ``premium``/``collateral``, fractions
    for IV, spread, POP and ROC; theta USD/day, vega USD per vol point.
    """
    dte = quote.dte(quote_date)
    row: dict[str, Any] = {
        "contract": quote.contract,
        "expiry": quote.expiry.isoformat(),
        "dte": dte,
        "strike": quote.strike,
        "bid": quote.bid,
        "ask": quote.ask,
        "mid": _r(quote.mid),
        "spread_pct": _r(quote.spread_pct),
        "volume": quote.volume,
        "open_interest": quote.open_interest,
        "source_iv": quote.source_iv,
        "source_delta": quote.source_delta,
    }
    if quote.open_interest_from_strike is not None:
        row["open_interest_from_strike"] = quote.open_interest_from_strike
    # An American option is worth at least its exercise value: a mid below it is a stale or
    # crossed quote (or a wrong spot), not a price to trust.
    intrinsic = max(quote.strike - spot, 0.0) if quote.right == "put" else max(spot - quote.strike, 0.0)
    if quote.mid < intrinsic:
        row["below_intrinsic"] = _r(intrinsic)
    try:
        g = greeks_from_price(
            right=quote.right, price=quote.mid, spot=spot, strike=quote.strike, dte=dte, r=r, q=q
        )
    except PricingError as exc:
        row["error"] = str(exc)
        return row
    roc = csp_roc(premium=quote.mid, strike=quote.strike, dte=dte)
    row.update(
        iv=_r(g.iv),
        delta=_r(g.delta),
        gamma=_r(g.gamma, 6),
        theta=_r(g.theta),
        vega=_r(g.vega),
        bsm_price=_r(g.price),
        pop=_r(probability_of_profit(spot=spot, breakeven=roc.breakeven, dte=dte, r=r, q=q, sigma=g.iv)),
        breakeven=_r(roc.breakeven),
        premium=_r(roc.premium, 2),
        collateral=_r(roc.collateral, 2),
        roc=_r(roc.roc, 6),
        weekly_roc=_r(roc.weekly_roc, 6),
        annualized_roc=_r(roc.annualized_roc, 6),
        iv_diff=_r(g.iv - quote.source_iv) if quote.source_iv is not None else None,
        delta_diff=_r(g.delta - quote.source_delta) if quote.source_delta is not None else None,
    )
    return row


def failed_rules(row: dict[str, Any], rules: CspRules) -> list[str]:
    """Names of the rules ``row`` (a :func:`measure_put` result) fails, in rule order."""
    failed: list[str] = []
    if not rules.dte_min <= row["dte"] <= rules.dte_max:
        failed.append("dte")
    if rules.expiry_before is not None and row["expiry"] >= rules.expiry_before.isoformat():
        failed.append("earnings")
    if row.get("delta") is None:
        failed.append("no_iv")
        return failed
    if not rules.delta_min <= abs(row["delta"]) <= rules.delta_max:
        failed.append("delta")
    if rules.max_strike is not None and row["strike"] > rules.max_strike:
        failed.append("strike_above_support")
    weekly = row.get("net_weekly_roc", row["weekly_roc"])
    if weekly is None or weekly <= rules.min_weekly_roc:
        failed.append("weekly_roc")
    if row["spread_pct"] is None or row["spread_pct"] > rules.max_spread_pct:
        failed.append("spread")
    if row["volume"] < rules.min_volume:
        failed.append("volume")
    if row["open_interest"] is None or row["open_interest"] < rules.min_open_interest:
        failed.append("open_interest")
    return failed


def fill_metrics(row: dict[str, Any], *, spot: float, rules: CspRules) -> dict[str, Any]:
    """What a seller gets and risks, added to a :func:`measure_put` row that has an IV.

    * ``fill`` (USD/share): ``mid − fill_slippage × (mid − bid)``: the bid by default, never above
      the mid; ``net_premium`` (USD/contract) = fill × 100 − ``fee_per_contract``;
      ``net_roc``/``net_weekly_roc``/``net_annualized_roc`` on the collateral as for the mid;
    * ``theta_per_contract`` (USD/day): the BSM theta × 100 (time value earned a day, at the IV);
    * ``expected_move`` (USD): ±1σ of the underlying to expiry, spot × IV × √(DTE/365);
      ``strike_distance`` (USD, spot − strike) and ``distance_sigma`` (that over the move);
    * ``score``: ``net_weekly_roc × (1 − spread_pct) × oi_factor`` with ``oi_factor =
      min(1, log10(OI) / log10(full_open_interest))`` (0 for unknown OI): a wide or thin market
      is worth less than its quote says, since closing or rolling early pays the spread again.
    """
    dte = int(row["dte"])
    mid, bid = float(row["mid"]), float(row["bid"])
    fill = min(mid, mid - rules.fill_slippage * (mid - bid))
    net = fill * 100.0 - rules.fee_per_contract
    collateral = float(row["strike"]) * 100.0
    net_roc = net / collateral
    iv = float(row["iv"])
    move = spot * iv * math.sqrt(dte / 365.0)
    oi = row.get("open_interest")
    oi_factor = min(1.0, math.log10(oi) / math.log10(rules.full_open_interest)) if oi and oi > 1 else 0.0
    spread = row.get("spread_pct")
    spread_factor = max(0.0, 1.0 - spread) if spread is not None else 0.0
    net_weekly = net_roc * 7.0 / dte
    return {
        "fill": _r(fill),
        "net_premium": _r(net, 2),
        "net_roc": _r(net_roc, 6),
        "net_weekly_roc": _r(net_weekly, 6),
        "net_annualized_roc": _r(net_roc * 365.0 / dte, 6),
        "theta_per_contract": _r(float(row["theta"]) * 100.0, 2),
        "expected_move": _r(move),
        "strike_distance": _r(spot - float(row["strike"])),
        "distance_sigma": _r((spot - float(row["strike"])) / move) if move > 0 else None,
        "score": _r(net_weekly * spread_factor * oi_factor, 6),
    }


def screen_puts(
    chain: OptionChain, *, spot: float, r: float, q: float, rules: CspRules
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Measure the puts with DTE in the rules' window and split them into ``(passing,
    failing)``; each row gets ``failed`` (rule names) and, with an IV, :func:`fill_metrics` (the
    weekly-ROC rule is judged at the net fill). Passing rows are ranked by ``score`` (net weekly
    ROC at the fill with the spread and open-interest penalties), highest first; failing rows
    with an IV first, by number of failed rules, then |delta|
    distance from the middle of the delta range (nearest misses first).
    """
    passing: list[dict[str, Any]] = []
    failing: list[dict[str, Any]] = []
    for quote in chain.puts():
        if not rules.dte_min <= quote.dte(chain.quote_date) <= rules.dte_max:
            continue
        row = measure_put(quote, quote_date=chain.quote_date, spot=spot, r=r, q=q)
        if row.get("iv") is not None:
            row.update(fill_metrics(row, spot=spot, rules=rules))
        row["failed"] = failed_rules(row, rules)
        (failing if row["failed"] else passing).append(row)
    passing.sort(key=lambda x: -(x.get("score") or 0.0))
    # nearest misses: fewest failed rules, then |delta| closest to the middle of the range
    middle = (rules.delta_min + rules.delta_max) / 2
    failing.sort(
        key=lambda x: (x.get("delta") is None, len(x["failed"]), abs(abs(x.get("delta") or 1.0) - middle))
    )
    return passing, failing


def failed_call_rules(row: dict[str, Any], rules: CspRules, *, min_strike: float | None) -> list[str]:
    """Names of the covered-call rules ``row`` (a :func:`measure_put` row of a call, with
    :func:`call_fill_metrics`) fails: the CSP rules' delta, DTE, earnings, weekly ROC (on the
    shares' value) and liquidity, with ``strike_below_min`` (below the resistance zone or the
    cost basis) instead of the support cap."""
    failed = failed_rules(row, rules)
    if min_strike is not None and row["strike"] < min_strike:
        failed.append("strike_below_min")
    return failed


def call_fill_metrics(row: dict[str, Any], *, spot: float, rules: CspRules) -> dict[str, Any]:
    """:func:`fill_metrics` for a covered call: the capital is the 100 shares (spot × 100), not a
    strike's collateral, so the net ROC is net premium / (spot × 100); ``strike_distance`` is
    strike − spot (how far the shares may rise before they are called away)."""
    out = fill_metrics(row, spot=spot, rules=rules)
    dte = int(row["dte"])
    net = float(out["net_premium"] or 0.0)
    capital = spot * 100.0
    net_roc = net / capital
    move = float(out["expected_move"] or 0.0)
    out.update(
        capital=_r(capital, 2),
        net_roc=_r(net_roc, 6),
        net_weekly_roc=_r(net_roc * 7.0 / dte, 6),
        net_annualized_roc=_r(net_roc * 365.0 / dte, 6),
        strike_distance=_r(float(row["strike"]) - spot),
        distance_sigma=_r((float(row["strike"]) - spot) / move) if move > 0 else None,
        called_away_return=_r((float(row["strike"]) - spot) * 100.0 + net, 2),
    )
    spread = row.get("spread_pct")
    oi = row.get("open_interest")
    oi_factor = min(1.0, math.log10(oi) / math.log10(rules.full_open_interest)) if oi and oi > 1 else 0.0
    spread_factor = max(0.0, 1.0 - spread) if spread is not None else 0.0
    out["score"] = _r(float(out["net_weekly_roc"] or 0.0) * spread_factor * oi_factor, 6)
    return out


def screen_calls(
    chain: OptionChain, *, spot: float, r: float, q: float, rules: CspRules, min_strike: float | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The covered-call screen: the calls with DTE in the rules' window measured as
    :func:`screen_puts` measures puts (``breakeven``/``collateral``/``roc`` of those rows are the
    put formulas and are dropped), with :func:`call_fill_metrics` and
    :func:`failed_call_rules`; ``(passing by score, failing nearest first)``."""
    passing: list[dict[str, Any]] = []
    failing: list[dict[str, Any]] = []
    calls = sorted((c for c in chain.contracts if c.right == "call"), key=lambda c: (c.expiry, c.strike))
    for quote in calls:
        if not rules.dte_min <= quote.dte(chain.quote_date) <= rules.dte_max:
            continue
        row = measure_put(quote, quote_date=chain.quote_date, spot=spot, r=r, q=q)
        for key in ("breakeven", "collateral", "roc", "weekly_roc", "annualized_roc", "pop"):
            row.pop(key, None)
        if row.get("iv") is not None:
            row.update(call_fill_metrics(row, spot=spot, rules=rules))
            row["weekly_roc"] = row["net_weekly_roc"]
        else:
            row["weekly_roc"] = None
        row["failed"] = failed_call_rules(row, rules, min_strike=min_strike)
        (failing if row["failed"] else passing).append(row)
    passing.sort(key=lambda x: -(x.get("score") or 0.0))
    middle = (rules.delta_min + rules.delta_max) / 2
    failing.sort(
        key=lambda x: (x.get("delta") is None, len(x["failed"]), abs(abs(x.get("delta") or 1.0) - middle))
    )
    return passing, failing
