"""The covered-call plan, deterministic: position → chart → options → research with early
rejection, like the cash-secured put (``agents.analysts.csp``), for shares already held.

Rules (docs/options.md, "Covered calls"; the delta, DTE, ROC and liquidity thresholds are the
CSP settings):

* **Position**: the shares are the paper portfolio's position in the symbol (at least 100
  shares: one call per 100, cost basis its average price) or, when the request gives a
  ``cost_basis``, 100 shares at that basis; neither → reject (nothing to cover).
* **Chart**: reject without price history (``NO_DATA``); the resistance zones above the close
  (six-month zones, ``find_support_resistance`` method ``zones``) set the lowest strike: the
  nearest zone's top, so the shares may rise through resistance before they are called away.
* **Options**: reject when the chain or HV is missing (``NO_DATA``), when IV < HV × ``csp_min_iv_hv``,
  or when no call passes ``filter_calls`` with ``min_strike`` = max(resistance top × the
  chain/bars factor, cost basis) and the expiry before the earnings cutoff.
* **Research**: the earnings check of the CSP plan on the chosen expiry, and the ex-dividend
  dates and splits inside the DTE (``get_corporate_events``): an ex-dividend date before the
  expiry is flagged (a call in the money may be exercised the day before it, taking the
  dividend), a split is noticed (the contract is adjusted); without dividend data the flag is
  "not evaluated", never a pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from agents.analysts.csp import (
    Runner,
    _Calls,
    _error_reason,
    _level_text,
    _reason,
    _window_text,
    chain_scale,
    earnings_cutoff,
    events_view,
    failures_by_rule,
    research_view,
    screen_into,
)
from agents.analysts.outcome import AnalystOutcome

#: Shares per equity option contract.
CONTRACT_SHARES = 100


@dataclass(frozen=True)
class CoveredCallInputs:
    """What the plan reads (plain values from the state): as :class:`agents.analysts.csp.CspInputs`,
    plus ``cost_basis`` (USD/share as traded on ``as_of``; ``None``: the paper portfolio's)."""

    symbol: str
    as_of: date
    technical: dict[str, Any] | None
    technical_ref: str | None
    chart: dict[str, Any] | None
    earnings: dict[str, Any] | None
    earnings_ref: str | None
    run: Runner
    cost_basis: float | None = None
    hv_period: int = 20
    min_iv_hv: float = 1.0


def position_view(*, symbol: str, cost_basis: float | None, calls: Runner) -> dict[str, Any]:
    """``{recommendation: pass|reject, shares, contracts, cost_basis, source, reasons}``: the
    given cost basis (100 shares), else the paper portfolio's position (``get_portfolio``)."""
    if cost_basis is not None:
        return {
            "recommendation": "pass",
            "shares": CONTRACT_SHARES,
            "contracts": 1,
            "cost_basis": cost_basis,
            "source": "given cost basis (100 shares assumed)",
            "reasons": [_reason(f"100 shares at the given cost basis {cost_basis}", [])],
        }
    env = calls("get_portfolio", {})
    if not env.ok or env.data is None:
        return {"recommendation": "reject", "reasons": [_error_reason(env, "paper portfolio")]}
    held = [p for p in env.data["portfolio"]["positions"] if p["symbol"] == symbol]
    shares = int(held[0]["quantity"]) if held else 0
    if shares < CONTRACT_SHARES:
        return {
            "recommendation": "reject",
            "shares": shares,
            "reasons": [
                _reason(
                    f"the paper portfolio holds {shares} shares of {symbol} (a covered call needs "
                    f"{CONTRACT_SHARES}) and no cost basis was given",
                    [env.tool_call_id],
                )
            ],
        }
    basis = float(held[0]["avg_price"])
    return {
        "recommendation": "pass",
        "shares": shares,
        "contracts": shares // CONTRACT_SHARES,
        "cost_basis": basis,
        "source": "paper portfolio",
        "reasons": [
            _reason(
                f"{shares} shares of {symbol} at an average {basis} in the paper portfolio",
                [env.tool_call_id],
            )
        ],
    }


def chart_view(
    *, technical: dict[str, Any] | None, technical_ref: str | None, chart: dict[str, Any] | None
) -> dict[str, Any]:
    """``{recommendation, close, resistance_levels, nearest_resistance, reasons, source_refs}``:
    reject without history; the nearest resistance zone above the close (or none)."""
    if not technical:
        return {
            "recommendation": "reject",
            "reasons": [_reason("NO_DATA: no price history or indicators at as_of to read resistance", [])],
        }
    sr = (chart or {}).get("support_resistance") or {}
    sr_ref = (chart or {}).get("support_resistance_ref")
    close = technical.get("close")
    above = [z for z in sr.get("resistance", []) if close is not None and z.get("high", z["price"]) > close]
    nearest = min(above, key=lambda z: z.get("low", z["price"])) if above else None
    text = (
        f"nearest resistance {_level_text(nearest)} above the close {close}" + _window_text(sr)
        if nearest
        else f"no resistance zone above the close {close} in the window" + _window_text(sr)
    )
    return {
        "recommendation": "pass",
        "close": close,
        "resistance_levels": above,
        "nearest_resistance": nearest,
        "reasons": [_reason(text, [technical_ref, sr_ref])],
        "source_refs": [r for r in (technical_ref, sr_ref) if r],
    }


def options_view(
    *,
    symbol: str,
    chart: dict[str, Any],
    cost_basis: float,
    calls: Runner,
    hv_period: int,
    min_iv_hv: float,
    expiry_before: str | None,
) -> dict[str, Any]:
    """``{recommendation: select|reject, iv, hv, iv_hv_ratio, price_scale, min_strike,
    suggestion, alternatives, failed_counts, nearest_misses, reasons, source_refs}``."""
    view: dict[str, Any] = {"recommendation": "reject", "source_refs": []}
    ivhv = calls("calculate_iv_hv", {"symbol": symbol, "hv_period": hv_period})
    if not ivhv.ok or ivhv.data is None:
        view["reasons"] = [_error_reason(ivhv, "IV against HV")]
        return view
    d = ivhv.data
    view.update(iv=d["iv"], hv=d["hv"], iv_hv_ratio=d["iv_hv_ratio"], quote_date=d["quote_date"])
    view["source_refs"].append(ivhv.tool_call_id)
    spot, close = float(d["underlying_price"]), chart.get("close")
    scale = chain_scale(spot=spot, close=close)
    view["price_scale"] = {"chain_underlying": spot, "bars_close": close, "factor": round(scale, 6)}
    nearest = chart.get("nearest_resistance")
    resistance_top = round(float(nearest.get("high", nearest["price"])) * scale, 4) if nearest else None
    min_strike = max(v for v in (resistance_top, cost_basis) if v is not None)
    view["min_strike"] = min_strike
    view["min_strike_from"] = (
        "resistance zone top" if resistance_top is not None and resistance_top >= cost_basis else "cost basis"
    )
    ratio = d["iv_hv_ratio"]
    if ratio is None or ratio < min_iv_hv:
        view["reasons"] = [
            _reason(
                f"IV {d['iv']} below HV({hv_period}) {d['hv']} (IV/HV {ratio} < {min_iv_hv}): "
                "premiums are not rich",
                [ivhv.tool_call_id],
            )
        ]
        return view
    args: dict[str, Any] = {"symbol": symbol, "limit": 4, "min_strike": min_strike}
    if expiry_before is not None:
        args["expiry_before"] = expiry_before
    flt = calls("filter_calls", args)
    f = screen_into(view, flt, "covered-call screen")
    if f is None:
        return view
    if not f["passing"]:
        counts = failures_by_rule(f["failed_counts"])
        view["reasons"] = [
            _reason(
                f"none of {f['screened']} calls with DTE {f['rules']['dte_min']}-{f['rules']['dte_max']} "
                "at or "
                f"above {min_strike} ({view['min_strike_from']}) passes (failures by rule: {counts})",
                [flt.tool_call_id],
            )
        ]
        return view
    best = f["passing"][0]
    view.update(recommendation="select", suggestion=best, alternatives=f["passing"][1:4])
    view["reasons"] = [
        _reason(
            f"{best['contract']}: strike {best['strike']} at or above {min_strike} "
            f"({view['min_strike_from']}), "
            f"delta {best['delta']}, net weekly ROC {best['net_weekly_roc']} on the shares sold at "
            f"{best['fill']} (mid {best['mid']}), IV/HV {ratio}",
            [flt.tool_call_id, ivhv.tool_call_id],
        )
    ]
    return view


def run_covered_call_plan(inputs: CoveredCallInputs) -> AnalystOutcome[dict[str, Any]]:
    """Position → chart → options → research with early rejection (module docstring).

    Returns an outcome whose value is the ``covered_call`` record ``{strategy, symbol, as_of,
    position, chart, options, research, status: suggested|rejected, rejected_by:
    position|chart|options|research|None, reasons, suggestion, alternatives}``.
    """
    symbol, as_of = inputs.symbol, inputs.as_of
    calls = _Calls(inputs.run)
    record: dict[str, Any] = {"strategy": "covered call", "symbol": symbol, "as_of": as_of.isoformat()}

    def done(status: str, by: str | None, reasons: list[dict[str, Any]]) -> AnalystOutcome[dict[str, Any]]:
        record.update(status=status, rejected_by=by, reasons=reasons)
        return AnalystOutcome(value=record, tool_calls=tuple(calls.records))

    position = position_view(symbol=symbol, cost_basis=inputs.cost_basis, calls=calls)
    record["position"] = position
    if position["recommendation"] == "reject":
        return done("rejected", "position", position["reasons"])
    view = chart_view(technical=inputs.technical, technical_ref=inputs.technical_ref, chart=inputs.chart)
    record["chart"] = view
    if view["recommendation"] == "reject":
        return done("rejected", "chart", view["reasons"])
    cutoff = earnings_cutoff(earnings=inputs.earnings, as_of=as_of)
    opts = options_view(
        symbol=symbol,
        chart=view,
        cost_basis=float(position["cost_basis"]),
        calls=calls,
        hv_period=inputs.hv_period,
        min_iv_hv=inputs.min_iv_hv,
        expiry_before=cutoff["first_excluded"] if cutoff else None,
    )
    record["options"] = opts
    if opts["recommendation"] == "reject":
        return done("rejected", "options", opts["reasons"])
    expiry = opts["suggestion"]["expiry"]
    research = research_view(
        expiry=expiry,
        earnings=inputs.earnings,
        earnings_ref=inputs.earnings_ref,
        as_of=as_of,
        dropped=opts.get("failed_counts", {}).get("earnings"),
    )
    research["reasons"] = [
        {**r, "text": r["text"].replace(" puts dropped", " calls dropped")} for r in research["reasons"]
    ]
    events = events_view(symbol=symbol, expiry=expiry, as_of=as_of, calls=calls)
    research["dividend"], research["split"], research["events"] = (
        events["dividend"],
        events["split"],
        events["events"],
    )
    record["research"] = research
    if research["recommendation"] == "reject":
        return done("rejected", "research", research["reasons"])
    record.update(
        suggestion={**opts["suggestion"], "iv_hv_ratio": opts["iv_hv_ratio"], "hv": opts["hv"]},
        alternatives=opts["alternatives"],
    )
    return done(
        "suggested",
        None,
        position["reasons"] + view["reasons"] + opts["reasons"] + research["reasons"] + events["reasons"],
    )
