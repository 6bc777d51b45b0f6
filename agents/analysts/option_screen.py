"""The option plan's options step (:mod:`agents.analysts.option_plan`): at-the-money IV against the
real-world σ forecast, then the screen of puts or calls ranked by yield and income per move."""

from __future__ import annotations

from typing import Any

from agents.analysts.option_common import _SAME_UNIT, OptionPlanInputs, Runner, error_reason, reason
from core.display import money, percent, whole
from core.display import ratio as _ratio

# -- options -------------------------------------------------------------------------------------


def chain_scale(*, spot: float, close: float | None) -> float:
    """Factor from the bars' prices to the chain's strikes: ``spot / close`` when they differ by
    more than ``_SAME_UNIT`` (a split between the chain's quote and the adjusted bars), else 1."""
    if close and abs(spot / float(close) - 1.0) > _SAME_UNIT:
        return spot / float(close)
    return 1.0


def failures_by_rule(failed_counts: dict[str, int]) -> str:
    """``"delta 12, open_interest 3"``: a screen's failures per rule, most frequent first."""
    return ", ".join(f"{k} {v}" for k, v in sorted(failed_counts.items(), key=lambda kv: -kv[1]))


#: Why a contract fails each rule, for the nearest miss (:func:`miss_text`): money to the cent,
#: shares of the mid and yields as percentages, counts whole, a delta as the tables print it.
_WHY = {
    "spread": lambda m, r: (
        f"spread {money(m['spread'])} ({percent(m['spread_pct'], digits=1)} of the mid) over "
        f"max({money(r['max_spread_abs'])}, {percent(r['max_spread_pct'], digits=0)} of the mid)"
    ),
    "open_interest": lambda m, r: (
        f"open interest {whole(m['open_interest'])} under {whole(r['min_open_interest'])}"
    ),
    "volume": lambda m, r: f"volume {whole(m['volume'])} under {whole(r['min_volume'])}",
    "delta": lambda m, r: (
        f"|delta| {_ratio(abs(m['delta']))} outside {_ratio(r['delta_min'])}-{_ratio(r['delta_max'])}"
    ),
    "excess_yield": lambda m, r: (
        f"yield over the T-bill {percent(m['excess_yield'], digits=1)} a year under "
        f"{percent(r['min_excess_yield'], digits=0)}"
    ),
    "no_time_value": lambda m, r: (
        f"its fill {money(m.get('fill'))} holds no time value over its intrinsic "
        f"{money(m.get('intrinsic'))} after fees"
    ),
    "earnings": lambda m, r: (
        f"its last trading day {m['last_trading_day']} is on or after the earnings cutoff "
        f"{r['expiry_before']}"
    ),
    "strike_above_cap": lambda m, r: (
        f"strike {money(m['strike'])} above the support cap {money(r['max_strike'])}"
    ),
    "strike_below_min": lambda m, r: (
        f"strike {money(m['strike'])} below the lowest strike {money(r['min_strike'])}"
    ),
    "weekly_roc": lambda m, r: (
        f"weekly income yield {percent(m.get('weekly_roc'))} under {percent(r['min_weekly_roc'])}"
    ),
    "dte": lambda m, r: f"DTE {m['dte']} outside {r['dte_min']}-{r['dte_max']}",
    "no_iv": lambda m, r: "no IV can be solved from its mid",
}


def miss_text(miss: dict[str, Any], rules: dict[str, Any]) -> str:
    """Why the nearest miss fails, every figure as the report prints it (money to the cent,
    percentages with their sign, counts whole): ``"GOOG160115C00775000 (3.10/3.40): spread 0.30
    (9.2 % of the mid) over max(0.10, 5 % of the mid)"``; a rule whose figures are missing is
    named alone."""
    parts = []
    for rule in miss.get("failed") or []:
        try:
            parts.append(_WHY[rule](miss, rules))
        except (KeyError, TypeError):
            parts.append(rule)
    return f"{miss['contract']} ({money(miss['bid'])}/{money(miss['ask'])}): " + "; ".join(parts)


def _ivhv_fields(d: dict[str, Any]) -> dict[str, Any]:
    """The view's fields from ``calculate_iv_hv``'s data ``d``: at-the-money IV, HV and their ratio
    (annualised fractions), the σ forecast and IV against it, the quote's date, spot (USD) and
    risk-free rate with their sources. Raises KeyError when a required field is missing."""
    return {
        "iv": d["iv"],
        "hv": d["hv"],
        "iv_hv_ratio": d["iv_hv_ratio"],
        "sigma_forecast": d.get("sigma_forecast"),
        "iv_forecast_ratio": d.get("iv_forecast_ratio"),
        "real_world": d.get("real_world"),
        "atm": d["atm"],
        "quote_date": d["quote_date"],
        "spot": d["underlying_price"],
        "spot_source": d["underlying_source"],
        "risk_free_rate": d["risk_free_rate"],
        "risk_free_rate_source": d["risk_free_rate_source"],
        "parity_spot": d.get("parity_spot"),
    }


def _price_scale(spot: float, close: float | None, scale: float) -> dict[str, Any]:
    """The view's ``price_scale``: the chain's underlying ``spot`` and the bars' ``close`` (USD),
    the factor :func:`chain_scale` found (6 decimals) and a note saying what it means."""
    return {
        "chain_underlying": spot,
        "bars_close": close,
        "factor": round(scale, 6),
        "note": (
            "chain strikes and bar prices are on different share bases (a split between the chain's quote "
            "and the adjusted bars); chart levels are converted to the chain's units by this factor"
            if scale != 1.0
            else "chain and bars in the same units"
        ),
    }


def _strike_bound(
    view: dict[str, Any],
    args: dict[str, Any],
    *,
    right: str,
    chart: dict[str, Any],
    scale: float,
    cost_basis: float | None,
) -> str:
    """Bound the screen's strikes by the chart (in the chain's units, ``scale`` × bar prices):
    puts at or below the nearest support zone's low (its price without a zone), calls at or
    above the higher of the nearest resistance zone's top and the ``cost_basis`` (USD). Sets
    ``view``'s ``max_strike`` or ``min_strike`` and ``min_strike_from`` and ``args``' bound (none
    without a level) and returns the bound as text for the reasons."""
    if right == "put":
        nearest = chart.get("nearest_support")
        cap = round(nearest.get("low", nearest["price"]) * scale, 4) if nearest else None
        view["max_strike"] = cap
        if cap is not None:
            args["max_strike"] = cap
        where = "the support zone low" if nearest and "low" in nearest else "support"
        return f"at or below {where} {money(cap)}"
    near = chart.get("nearest_resistance")
    top = round(float(near.get("high", near["price"])) * scale, 4) if near else None
    floor = max(v for v in (top, cost_basis) if v is not None) if (top or cost_basis) else None
    view["min_strike"] = floor
    view["min_strike_from"] = (
        "resistance zone top"
        if top is not None and (cost_basis is None or top >= cost_basis)
        else "cost basis"
    )
    if floor is not None:
        args["min_strike"] = floor
    return f"at or above {money(floor)} ({view['min_strike_from']})"


def _iv_too_low(inputs: OptionPlanInputs, d: dict[str, Any], ref: str) -> list[dict[str, Any]] | None:
    """The reasons to reject when at-the-money IV over the σ forecast (over HV of the window when
    there is no forecast) is missing or under ``inputs.min_iv_forecast``, citing the IV call
    ``ref``; None when the premium is rich enough to screen."""
    iv_ratio = d.get("iv_forecast_ratio")
    against = "the real-world σ forecast"
    if iv_ratio is None:  # no forecast (too little history): the HV of the window stands in
        iv_ratio, against = d["iv_hv_ratio"], f"HV({inputs.hv_period})"
    if iv_ratio is None or iv_ratio < inputs.min_iv_forecast:
        sigma = d.get("sigma_forecast") if against.startswith("the real") else d["hv"]
        return [
            reason(
                f"at-the-money IV {percent(d['iv'])} is below {against} {percent(sigma)} (ratio "
                f"{_ratio(iv_ratio)} < {_ratio(inputs.min_iv_forecast)}): "
                "the premium pays clearly less than the move the model expects",
                [ref],
            )
        ]
    return None


def _none_passes(f: dict[str, Any], right: str, bound: str, ref: str) -> dict[str, Any]:
    """The reason to reject when no contract of the screen ``f`` (``filter_options`` or
    ``filter_calls`` data) passes: how many were screened, the DTE window and strike ``bound``,
    the failures by rule and why the nearest miss fails, citing the screen's call ``ref``."""
    closest = f["nearest_misses"][0] if f["nearest_misses"] else None
    text = (
        f"none of {f['screened']} {right}s with DTE {f['rules']['dte_min']}-{f['rules']['dte_max']} "
        f"{bound} "
        f"passes the floors (failures by rule: {failures_by_rule(f['failed_counts'])})"
    )
    if closest is not None:
        text += f"; the nearest miss {miss_text(closest, f['rules'])}"
    return reason(text, [ref])


def _selected(
    view: dict[str, Any], f: dict[str, Any], d: dict[str, Any], bound: str, refs: list[str]
) -> dict[str, Any]:
    """``view`` selecting the screen ``f``'s best contract (its first passing one; the next three
    as alternatives, all of them as candidates), with the reason citing ``refs``: strike, delta,
    fill and mid (USD a share), income (USD a contract), yield over the T-bill (a year), premium
    per ±1σ move and IV over the forecast from ``d``. Raises KeyError on a contract without them."""
    best = f["passing"][0]
    view.update(
        recommendation="select",
        suggestion=best,
        alternatives=f["passing"][1:4],
        candidates=f["passing"],
    )
    view["reasons"] = [
        reason(
            f"{best['contract']}: strike {money(best['strike'])} {bound}, delta {_ratio(best['delta'])}, "
            f"sold at {money(best['fill'])} (mid {money(best['mid'])}): income {money(best['income'])} USD "
            f"a contract, {percent(best['excess_yield'])} a year over the T-bill "
            f"{percent(f.get('tbill_yield', 0))}, {_ratio(best['premium_per_move'])} of the ±1σ move "
            f"{money(best['expected_move'])}; IV/forecast {_ratio(d.get('iv_forecast_ratio'))}",
            refs,
        )
    ]
    return view


def options_view(
    *,
    inputs: OptionPlanInputs,
    chart: dict[str, Any],
    calls: Runner,
    cost_basis: float | None = None,
    expiry_before: str | None = None,
) -> dict[str, Any]:
    """The options analyst's view given the chart context: ``{recommendation: select|reject, iv,
    hv, iv_hv_ratio, sigma_forecast, iv_forecast_ratio, real_world, price_scale, max_strike |
    min_strike, suggestion, alternatives (≤ 3), candidates (≤ 10, for the ladder),
    failed_counts, nearest_misses (≤ 3), rules, reasons, source_refs}``. A failed tool call, IV
    under the forecast or an empty screen rejects with the reason; nothing is raised for them."""
    right, symbol = inputs.right, inputs.symbol
    view: dict[str, Any] = {"recommendation": "reject", "source_refs": []}
    ivhv = calls("calculate_iv_hv", {"symbol": symbol, "hv_period": inputs.hv_period})
    if not ivhv.ok or ivhv.data is None:
        view["reasons"] = [error_reason(ivhv, "IV against the forecast")]
        return view
    d = ivhv.data
    view.update(_ivhv_fields(d))
    view["source_refs"].append(ivhv.tool_call_id)
    spot, close = float(d["underlying_price"]), chart.get("close")
    scale = chain_scale(spot=spot, close=close)
    view["price_scale"] = _price_scale(spot, close, scale)
    args: dict[str, Any] = {"symbol": symbol, "limit": 10, **inputs.screen}
    bound = _strike_bound(view, args, right=right, chart=chart, scale=scale, cost_basis=cost_basis)
    too_low = _iv_too_low(inputs, d, ivhv.tool_call_id)
    if too_low is not None:
        view["reasons"] = too_low
        return view
    if expiry_before is not None:
        args["expiry_before"] = expiry_before
    tool = "filter_options" if right == "put" else "filter_calls"
    flt = calls(tool, args)
    if not flt.ok or flt.data is None:
        view["reasons"] = [error_reason(flt, f"{inputs.strategy} screen")]
        return view
    view["source_refs"].append(flt.tool_call_id)
    f = flt.data
    view.update(
        rules=f["rules"],
        screened=f["screened"],
        failed_counts=f["failed_counts"],
        tbill_yield=f.get("tbill_yield"),
        nearest_misses=f["nearest_misses"][:3],
    )
    if not f["passing"]:
        view["reasons"] = [_none_passes(f, right, bound, flt.tool_call_id)]
        return view
    return _selected(view, f, d, bound, [flt.tool_call_id, ivhv.tool_call_id])
