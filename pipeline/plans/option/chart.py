"""What ``finagent chart`` draws for an option plan, read from a stored state (JSON): the strike
and the breakeven (a put) or the cost basis (a call) as marks; the last trading day, the ±1σ
cone to it, the earnings estimate, ex-dividend dates and splits, and the payoff at expiry as the
overlay (``render_chart``'s ``option`` argument). Prices in the bars' units: a chain quoted on
another share basis (a split between it and the adjusted bars) is divided by its factor."""

from __future__ import annotations

from typing import Any

from core.display import money, ratio
from pipeline.plans.option.models import OptionPlanResult

#: Labels of the marks (the PNG's legend and margin).
STRIKE_MARK = {"csp": "put strike", "covered_call": "call strike"}
BREAKEVEN_MARK = "breakeven"
BASIS_MARK = "cost basis"


def _record(state: dict[str, Any], name: str) -> OptionPlanResult | None:
    raw = state.get("plan_result") if state.get("analysis_type") == name else None
    raw = raw or (state.get("analysis") or {}).get(name)
    if not raw:
        return None
    return OptionPlanResult.model_validate(
        {k: v for k, v in raw.items() if k in OptionPlanResult.model_fields}
    )


def marks(state: dict[str, Any], name: str) -> dict[str, float]:
    """``{label: price}`` of a suggestion (bars' units); ``{}`` for a rejection."""
    rec = _record(state, name)
    if rec is None or rec.status != "suggested" or rec.suggestion is None:
        return {}
    s, factor = rec.suggestion, rec.price_factor()
    out = {STRIKE_MARK[name]: round(float(s.strike) / factor, 4)}
    if name == "csp" and s.breakeven is not None:
        out[BREAKEVEN_MARK] = round(float(s.breakeven) / factor, 4)
    basis = (rec.position or {}).get("cost_basis")
    if name == "covered_call" and basis:
        out[BASIS_MARK] = round(float(basis) / factor, 4)
    return out


def overlay(state: dict[str, Any], name: str) -> dict[str, Any]:
    """``{"option": {...}}`` for ``render_chart`` of a suggestion, else ``{}``: ``expiry`` (the
    last trading day, ISO), ``sigma`` (the real-world σ a year, else the IV), ``spot`` (bars'
    units), ``events`` ([{date, label}]), ``payoff`` ({kind, strike, net, spot, multiplier,
    contracts}); the render_chart tool's ``option`` argument."""
    rec = _record(state, name)
    if rec is None or rec.status != "suggested" or rec.suggestion is None:
        return {}
    s, factor = rec.suggestion.model_dump(mode="json"), rec.price_factor()
    options = rec.options or {}
    sigma = (options.get("real_world") or {}).get("sigma_annual") or s.get("iv")
    spot = float(options.get("spot") or s["strike"])
    events = []
    cutoff = (rec.research or {}).get("cutoff") or {}
    if cutoff.get("earnings_date"):
        events.append({"date": cutoff["earnings_date"], "label": f"earnings ({cutoff.get('source')})"})
    for e in (rec.events or {}).get("events") or []:
        label = (  # the amount to the cent, as the reasons print it; a ratio without ".0"
            f"ex-div {money(e.get('amount'))}"
            if e["kind"] == "dividend"
            else f"split {ratio(e.get('ratio'))}:1"
        )
        events.append({"date": e["ex_date"], "label": label})
    sizing = rec.sizing or {}
    n = int(sizing.get("contracts") or 1)
    payoff: dict[str, Any] = {
        "kind": "short_put" if name == "csp" else "covered_call",
        "strike": round(float(s["strike"]) / factor, 4),
        "net": float(s.get("net_premium") or 0.0),  # USD a contract, whatever the units
        "spot": round(spot / factor, 4),
        "multiplier": round(100.0 * factor, 6),  # a pre-split contract covers 100 × factor bar shares
        "contracts": n,
    }
    return {
        "option": {
            "expiry": s.get("last_trading_day") or s["expiry"],
            "sigma": sigma,
            "spot": round(spot / factor, 4),
            "events": events,
            "payoff": payoff,
        }
    }
