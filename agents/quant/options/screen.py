"""Cash-secured-put screen: every put of a chain measured (IV from the mid, greeks,
POP, ROC) and checked against the CSP rules, each rule a setting (docs/design.md, "CSP rules").

Rules per contract: |delta| in
[delta_min, delta_max] (0.15–0.30); DTE in [dte_min, dte_max] (14–45); strike at or below a
support level (``max_strike``); weekly ROC above ``min_weekly_roc`` (0.5 %); liquidity: spread
(ask − bid)/mid ≤ ``max_spread_pct``, volume ≥ ``min_volume``, open interest ≥
``min_open_interest`` (an unknown open interest fails the rule). IV ≥ HV is a rule on the
symbol (``calculate_iv_hv``), not on each contract.
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

    def as_dict(self) -> dict[str, Any]:
        """The rules as a JSON-safe dict."""
        return dict(self.__dict__)


def _r(value: float | None, digits: int = 4) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    out = round(float(value), digits)
    return 0.0 if out == 0 else out


def measure_put(quote: OptionQuote, *, quote_date: date, spot: float, r: float, q: float) -> dict[str, Any]:
    """All numbers of one put: quote, DTE, IV/greeks from the mid, POP, breakeven, ROC, and the
    source's own IV/delta with the differences. ``error`` says why IV could not be solved.

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
    if row.get("delta") is None:
        failed.append("no_iv")
        return failed
    if not rules.delta_min <= abs(row["delta"]) <= rules.delta_max:
        failed.append("delta")
    if rules.max_strike is not None and row["strike"] > rules.max_strike:
        failed.append("strike_above_support")
    if row["weekly_roc"] is None or row["weekly_roc"] <= rules.min_weekly_roc:
        failed.append("weekly_roc")
    if row["spread_pct"] is None or row["spread_pct"] > rules.max_spread_pct:
        failed.append("spread")
    if row["volume"] < rules.min_volume:
        failed.append("volume")
    if row["open_interest"] is None or row["open_interest"] < rules.min_open_interest:
        failed.append("open_interest")
    return failed


def screen_puts(
    chain: OptionChain, *, spot: float, r: float, q: float, rules: CspRules
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Measure the puts with DTE in the rules' window and split them into ``(passing,
    failing)``; each row gets ``failed`` (rule names). Passing rows are ranked by weekly ROC,
    highest first; failing rows with an IV first, by number of failed rules, then |delta|
    distance from the middle of the delta range (nearest misses first).
    """
    passing: list[dict[str, Any]] = []
    failing: list[dict[str, Any]] = []
    for quote in chain.puts():
        if not rules.dte_min <= quote.dte(chain.quote_date) <= rules.dte_max:
            continue
        row = measure_put(quote, quote_date=chain.quote_date, spot=spot, r=r, q=q)
        row["failed"] = failed_rules(row, rules)
        (failing if row["failed"] else passing).append(row)
    passing.sort(key=lambda x: -(x["weekly_roc"] or 0.0))
    # nearest misses: fewest failed rules, then |delta| closest to the middle of the range
    middle = (rules.delta_min + rules.delta_max) / 2
    failing.sort(
        key=lambda x: (x.get("delta") is None, len(x["failed"]), abs(abs(x.get("delta") or 1.0) - middle))
    )
    return passing, failing
