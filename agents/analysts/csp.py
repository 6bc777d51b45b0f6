"""The cash-secured-put plan, deterministic: Chart Analyst → Options Analyst (given the
chart context) → Research Analyst, where any ``reject`` ends the plan with its reasons.

The analysts never see the pipeline state: they get plain values (the indicators and chart
levels the analysis stage computed, the research stage's earnings entry) and a ``run`` callable
that runs a tool by name (``agents.tools.catalog.run_tool`` with the stage's context), and return
an :class:`~agents.analysts.outcome.AnalystOutcome` whose value is the ``csp`` record and whose
tool calls the stage records. Every reason cites the tool calls (or data rows) it rests on.

Rules (docs/design.md, "CSP plan"; thresholds are settings, see ``agents.quant.options.screen``):

* **Chart**: reject without price history or indicators (``NO_DATA``), without a support level
  below the close (a CSP strike should sit at or below support), or in a strong downtrend (close
  and SMA(50) below SMA(200) with ADX(14) > 25, Wilder's trend threshold).
* **Options**: reject when the chain or the HV cannot be had (``NO_DATA``), when at-the-money
  IV < ``csp_min_iv_hv`` × HV (IV ≥ HV: premiums must be rich), or when no put passes the screen
  (delta, DTE, strike ≤ nearest support, weekly ROC, spread, volume, open interest). The pick is
  the passing put with the highest weekly ROC; the next three are the alternatives.
* **Research**: reject when a known earnings report falls on or before the expiry (never
  sell a put through earnings), or, where the calendar cannot vouch that far,
  when the quarterly cadence (last report + 91 days) puts one on or before it (when in
  doubt, flag the risk).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from agents.analysts.outcome import AnalystOutcome, ToolCallRecord
from agents.tools.envelope import ToolEnvelope

#: ADX(14) above 25 = a trending market (Wilder 1978).
ADX_TRENDING = 25.0
#: A quarter: US companies report about every 13 weeks (10-Q cadence), 91 days.
QUARTER_DAYS = 91
#: Two prices are "the same unit" when their ratio is within 2 %: beyond it the chain and the
#: bars are quoted on different share bases (a split between them, e.g. AAPL 7:1 in 2014).
_SAME_UNIT = 0.02

Runner = Callable[[str, dict[str, Any]], ToolEnvelope]


@dataclass(frozen=True)
class CspInputs:
    """What the csp plan reads, deterministic or LLM (plain values from the state, no state).

    Attributes:
        symbol / as_of: the analysis' ticker and date.
        technical / technical_ref: the ``technical_indicators`` data and its tool_call_id
            (``None`` when research found no price history: the chart analyst then rejects).
        chart: the chart levels ``{support_resistance, support_resistance_ref, fib, fib_ref}``.
        earnings / earnings_ref: the research stage's ``get_earnings_dates`` entry and id.
        run: runs a tool by name with the stage's context (its calls are recorded by the stage).
        hv_period: trading days of HV (``FINAGENT_CSP_HV_PERIOD``); min_iv_hv: the IV/HV floor
            (``FINAGENT_CSP_MIN_IV_HV``).
    """

    symbol: str
    as_of: date
    technical: dict[str, Any] | None
    technical_ref: str | None
    chart: dict[str, Any] | None
    earnings: dict[str, Any] | None
    earnings_ref: str | None
    run: Runner
    hv_period: int = 20
    min_iv_hv: float = 1.0


def _reason(text: str, refs: list[str | None]) -> dict[str, Any]:
    return {"text": text, "source_refs": [r for r in refs if r]}


class _Calls:
    """Runs tools and keeps their records in call order."""

    def __init__(self, run: Runner) -> None:
        self._run = run
        self.records: list[ToolCallRecord] = []

    def __call__(self, name: str, arguments: dict[str, Any]) -> ToolEnvelope:
        envelope = self._run(name, arguments)
        self.records.append(ToolCallRecord(name=name, envelope=envelope))
        return envelope


def chart_view(
    *, technical: dict[str, Any] | None, technical_ref: str | None, chart: dict[str, Any] | None
) -> dict[str, Any]:
    """The Chart Analyst's view: ``{recommendation: pass|reject, trend_direction, trend_quality,
    close, support_levels, resistance_levels, nearest_support, fib_confluence, extension_risk,
    reasons, source_refs}`` from the ``technical_indicators`` data and the chart levels
    (``{support_resistance, support_resistance_ref, fib, fib_ref}``). Prices USD in the bars' units."""
    refs: list[str | None] = [technical_ref]
    if not technical:
        return {
            "recommendation": "reject",
            "reasons": [
                _reason("NO_DATA: no price history or indicators at as_of to read trend and support", [])
            ],
            "source_refs": [],
        }
    chart = chart or {}
    sr, sr_ref = chart.get("support_resistance") or {}, chart.get("support_resistance_ref")
    fib, fib_ref = chart.get("fib") or {}, chart.get("fib_ref")
    refs += [sr_ref, fib_ref]
    ind = technical.get("indicators") or {}
    close = technical.get("close")
    sma50, sma200, adx, atr = ind.get("sma_50"), ind.get("sma_200"), ind.get("adx_14"), ind.get("atr_14")
    direction = "sideways"
    if close is not None and sma200 is not None:
        direction = "up" if close > sma200 else "down"
    quality = "weak" if adx is None or adx < 20 else "strong" if adx > ADX_TRENDING else "moderate"
    supports = [lv for lv in sr.get("support", []) if close is not None and lv["price"] < close]
    resistances = [lv for lv in sr.get("resistance", []) if close is not None and lv["price"] > close]
    nearest = max(supports, key=lambda lv: lv["price"]) if supports else None
    confluence = []
    for label, level in (fib.get("levels") or {}).items():
        for lv in supports:
            if atr and abs(level - lv["price"]) <= 0.5 * atr:
                confluence.append({"price": lv["price"], "fib": label, "fib_price": level})
    extension = "unknown"
    if nearest is not None and atr:
        gap = (close - nearest["price"]) / atr
        extension = "high" if gap > 3 else "moderate" if gap > 1.5 else "low"
    view: dict[str, Any] = {
        "trend_direction": direction,
        "trend_quality": quality,
        "close": close,
        "support_levels": supports,
        "resistance_levels": resistances,
        "nearest_support": nearest,
        "fib_confluence": confluence,
        "extension_risk": extension,
        "source_refs": [r for r in refs if r],
    }
    reasons = []
    if nearest is None:
        reasons.append(_reason(f"no support level below the close {close}", [technical_ref, sr_ref]))
    strong_down = (
        direction == "down"
        and sma50 is not None
        and sma200 is not None
        and sma50 < sma200
        and quality == "strong"
    )
    if strong_down:
        reasons.append(
            _reason(
                f"strong downtrend: close {close} and SMA(50) {sma50} below SMA(200) {sma200}, ADX(14) {adx}",
                [technical_ref],
            )
        )
    view["recommendation"] = "reject" if reasons else "pass"
    view["reasons"] = reasons or [
        _reason(
            f"trend {direction} ({quality}); nearest support {nearest['price'] if nearest else None} "
            f"below the close {close}",
            [technical_ref, sr_ref],
        )
    ]
    return view


def _error_reason(env: ToolEnvelope, what: str) -> dict[str, Any]:
    assert env.error is not None
    return _reason(f"{env.error.code.value}: {what}: {env.error.message}", [env.tool_call_id])


def options_view(
    *, symbol: str, chart: dict[str, Any], calls: Runner, hv_period: int, min_iv_hv: float
) -> dict[str, Any]:
    """The Options Analyst's view given the chart context: ``{recommendation: select|reject,
    iv, hv, iv_hv_ratio, price_scale, max_strike, suggestion, alternatives (≤ 3), failed_counts,
    nearest_misses (≤ 3), reasons, source_refs}``. Runs ``calculate_iv_hv`` and ``filter_options``."""
    view: dict[str, Any] = {"recommendation": "reject", "source_refs": []}
    ivhv = calls("calculate_iv_hv", {"symbol": symbol, "hv_period": hv_period})
    if not ivhv.ok or ivhv.data is None:
        view["reasons"] = [_error_reason(ivhv, "IV against HV")]
        return view
    d = ivhv.data
    view.update(
        iv=d["iv"], hv=d["hv"], iv_hv_ratio=d["iv_hv_ratio"], atm=d["atm"], quote_date=d["quote_date"]
    )
    view["source_refs"].append(ivhv.tool_call_id)
    spot = float(d["underlying_price"])
    close = chart.get("close")
    scale = 1.0
    if close:
        ratio = spot / float(close)
        if abs(ratio - 1.0) > _SAME_UNIT:
            scale = ratio
    view["price_scale"] = {
        "chain_underlying": spot,
        "bars_close": close,
        "factor": round(scale, 6),
        "note": (
            "chain strikes and bar prices are on different share bases (a split between the chain's quote "
            "and the adjusted bars); support levels are converted to the chain's units by this factor"
            if scale != 1.0
            else "chain and bars in the same units"
        ),
    }
    nearest = chart.get("nearest_support")
    max_strike = round(nearest["price"] * scale, 4) if nearest else None
    view["max_strike"] = max_strike
    ratio_v = d["iv_hv_ratio"]
    if ratio_v is None or ratio_v < min_iv_hv:
        view["reasons"] = [
            _reason(
                f"IV {d['iv']} below HV({hv_period}) {d['hv']} (IV/HV {ratio_v} < {min_iv_hv}): "
                "premiums are not rich",
                [ivhv.tool_call_id],
            )
        ]
        return view
    args: dict[str, Any] = {"symbol": symbol, "limit": 4}
    if max_strike is not None:
        args["max_strike"] = max_strike
    flt = calls("filter_options", args)
    if not flt.ok or flt.data is None:
        view["reasons"] = [_error_reason(flt, "CSP screen")]
        return view
    view["source_refs"].append(flt.tool_call_id)
    f = flt.data
    view.update(rules=f["rules"], screened=f["screened"], failed_counts=f["failed_counts"])
    view["nearest_misses"] = f["nearest_misses"][:3]
    if not f["passing"]:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(f["failed_counts"].items(), key=lambda kv: -kv[1]))
        view["reasons"] = [
            _reason(
                f"none of {f['screened']} puts with DTE {f['rules']['dte_min']}-{f['rules']['dte_max']} "
                f"passes the "
                f"CSP rules (failures by rule: {counts})",
                [flt.tool_call_id],
            )
        ]
        return view
    best = f["passing"][0]
    view["recommendation"] = "select"
    view["suggestion"] = best
    view["alternatives"] = f["passing"][1:4]
    view["reasons"] = [
        _reason(
            f"{best['contract']}: strike {best['strike']} at or below support {max_strike}, "
            f"delta {best['delta']}, "
            f"weekly ROC {best['weekly_roc']}, IV/HV {ratio_v}",
            [flt.tool_call_id, ivhv.tool_call_id],
        )
    ]
    return view


def research_view(
    *, expiry: str, earnings: dict[str, Any] | None, earnings_ref: str | None, as_of: date
) -> dict[str, Any]:
    """The Research Analyst's view of the chosen expiry (ISO date): ``{recommendation:
    pass|reject, earnings_risk: low|high|unknown, reasons, source_refs}`` from the research
    stage's ``get_earnings_dates`` entry (module docstring for the rules)."""
    refs = [earnings_ref]
    exp = date.fromisoformat(expiry)
    if not earnings:
        return {
            "recommendation": "pass",
            "earnings_risk": "unknown",
            "reasons": [_reason("earnings not evaluated: no calendar covers the symbol at as_of", [])],
            "source_refs": [],
        }
    nxt = earnings.get("next")
    if nxt and date.fromisoformat(nxt["date"]) <= exp:
        return {
            "recommendation": "reject",
            "earnings_risk": "high",
            "reasons": [_reason(f"earnings on {nxt['date']} fall inside the DTE (expiry {expiry})", refs)],
            "source_refs": [r for r in refs if r],
        }
    checked = earnings.get("checked_through")
    if nxt is None and (checked is None or date.fromisoformat(checked) < exp):
        recent = earnings.get("recent") or []
        if recent:
            expected = date.fromisoformat(recent[0]["date"]) + timedelta(days=QUARTER_DAYS)
            if as_of < expected <= exp:
                return {
                    "recommendation": "reject",
                    "earnings_risk": "high",
                    "reasons": [
                        _reason(
                            f"the next report is not announced at as_of, but the quarterly cadence "
                            f"(last report {recent[0]['date']} + {QUARTER_DAYS} days = {expected}) "
                            "puts one on or before the "
                            f"expiry {expiry}",
                            refs,
                        )
                    ],
                    "source_refs": [r for r in refs if r],
                }
            return {
                "recommendation": "pass",
                "earnings_risk": "low",
                "reasons": [
                    _reason(
                        f"no report announced through {checked}; the cadence "
                        f"(last report {recent[0]['date']} + "
                        f"{QUARTER_DAYS} days = {expected}) puts the next one after the expiry {expiry}",
                        refs,
                    )
                ],
                "source_refs": [r for r in refs if r],
            }
    return {
        "recommendation": "pass",
        "earnings_risk": "low",
        "reasons": [_reason(f"no earnings report through the expiry {expiry}", refs)],
        "source_refs": [r for r in refs if r],
    }


def run_csp_plan(inputs: CspInputs) -> AnalystOutcome[dict[str, Any]]:
    """Chart → options → research with early rejection (module docstring).

    Returns an outcome whose value is the ``csp`` record: ``{status: suggested|rejected,
    rejected_by: chart|options|research|None, reasons: [{text, source_refs}], suggestion,
    alternatives, chart, options, research}``; its tool calls are the options analyst's.
    """
    symbol, as_of, earnings, earnings_ref = inputs.symbol, inputs.as_of, inputs.earnings, inputs.earnings_ref
    calls = _Calls(inputs.run)
    record: dict[str, Any] = {"strategy": "cash-secured put", "symbol": symbol, "as_of": as_of.isoformat()}
    view = chart_view(technical=inputs.technical, technical_ref=inputs.technical_ref, chart=inputs.chart)
    record["chart"] = view
    if view["recommendation"] == "reject":
        record.update(status="rejected", rejected_by="chart", reasons=view["reasons"])
        return AnalystOutcome(value=record, tool_calls=tuple(calls.records))
    opts = options_view(
        symbol=symbol, chart=view, calls=calls, hv_period=inputs.hv_period, min_iv_hv=inputs.min_iv_hv
    )
    record["options"] = opts
    if opts["recommendation"] == "reject":
        record.update(status="rejected", rejected_by="options", reasons=opts["reasons"])
        return AnalystOutcome(value=record, tool_calls=tuple(calls.records))
    research = research_view(
        expiry=opts["suggestion"]["expiry"], earnings=earnings, earnings_ref=earnings_ref, as_of=as_of
    )
    record["research"] = research
    if research["recommendation"] == "reject":
        record.update(status="rejected", rejected_by="research", reasons=research["reasons"])
        return AnalystOutcome(value=record, tool_calls=tuple(calls.records))
    record.update(
        status="suggested",
        rejected_by=None,
        suggestion={**opts["suggestion"], "iv_hv_ratio": opts["iv_hv_ratio"], "hv": opts["hv"]},
        alternatives=opts["alternatives"],
        reasons=view["reasons"] + opts["reasons"] + research["reasons"],
    )
    return AnalystOutcome(value=record, tool_calls=tuple(calls.records))
