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
* **Earnings** filter the expiries, they do not veto the plan: every put (pick and
  alternatives) whose expiry falls on or after the next earnings date is dropped by the screen,
  the earlier expiries stay (:func:`earnings_cutoff`: the reported date from the calendar, else
  the quarterly cadence, last report + 91 days, less a ±14-day margin, so an expiry inside the
  margin is dropped). The **research** analyst states the date, its source and what was dropped;
  it rejects only a pick that still reaches the date (a model's pick from its own screen). With no
  calendar entry, earnings are "not evaluated": said in the report, never counted as a pass.
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
#: How far a report can land from the cadence's estimate: companies move their report a week or
#: two between quarters, so an expiry within 14 days before the estimate is treated as crossing it.
CADENCE_MARGIN_DAYS = 14
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
    # a zone's "price" is its low (support) / high (resistance); the nearest support is the zone
    # whose top is closest below the close
    nearest = max(supports, key=lambda lv: lv.get("high", lv["price"])) if supports else None
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
            f"trend {direction} ({quality}); nearest support {_level_text(nearest)} below the close {close}"
            + _window_text(sr),
            [technical_ref, sr_ref],
        )
    ]
    return view


def _level_text(level: dict[str, Any] | None) -> str:
    """``"zone 622.5–628.9 (1 touch)"`` for a zone (one price when its low is its high), the
    price for a level, ``"None"`` for none."""
    if level is None:
        return "None"
    if "low" in level and "high" in level and level["low"] != level["high"]:
        t = level.get("touches")
        return f"zone {level['low']}–{level['high']}" + (
            f" ({t} touch{'es' if t != 1 else ''})" if t is not None else ""
        )
    return str(level["price"])


def _window_text(sr: dict[str, Any]) -> str:
    """``" (zones of 2013-12-06..2014-06-06, period 6mo)"`` when the levels state their window."""
    w = sr.get("window")
    if not w:
        return ""
    return (
        f" (zones of {w['start']}..{w['end']}" + (f", period {w['period']}" if w.get("period") else "") + ")"
    )


def _error_reason(env: ToolEnvelope, what: str) -> dict[str, Any]:
    assert env.error is not None
    return _reason(f"{env.error.code.value}: {what}: {env.error.message}", [env.tool_call_id])


def chain_scale(*, spot: float, close: float | None) -> float:
    """Factor from the bars' prices to the chain's strikes: ``spot / close`` (chain underlying
    over the bars' last close, both USD/share) when they differ by more than ``_SAME_UNIT``
    (a split between the chain's quote and the adjusted bars), else 1.0; 1.0 without a close."""
    if close and abs(spot / float(close) - 1.0) > _SAME_UNIT:
        return spot / float(close)
    return 1.0


def screen_into(view: dict[str, Any], env: ToolEnvelope, what: str) -> dict[str, Any] | None:
    """Record a contract screen (``filter_options`` or ``filter_calls``) in ``view``: its
    tool_call_id in ``source_refs``, its rules, counts and (up to 3) nearest misses; return its
    data. On a tool error the reason goes to ``view["reasons"]`` and ``None`` is returned."""
    if not env.ok or env.data is None:
        view["reasons"] = [_error_reason(env, what)]
        return None
    view["source_refs"].append(env.tool_call_id)
    f = env.data
    view.update(rules=f["rules"], screened=f["screened"], failed_counts=f["failed_counts"])
    view["nearest_misses"] = f["nearest_misses"][:3]
    return f


def failures_by_rule(failed_counts: dict[str, int]) -> str:
    """``"delta 12, open_interest 3"``: a screen's failures per rule, most frequent first."""
    return ", ".join(f"{k} {v}" for k, v in sorted(failed_counts.items(), key=lambda kv: -kv[1]))


def options_view(
    *,
    symbol: str,
    chart: dict[str, Any],
    calls: Runner,
    hv_period: int,
    min_iv_hv: float,
    expiry_before: str | None = None,
) -> dict[str, Any]:
    """The Options Analyst's view given the chart context: ``{recommendation: select|reject,
    iv, hv, iv_hv_ratio, price_scale, max_strike, suggestion, alternatives (≤ 3), failed_counts,
    nearest_misses (≤ 3), reasons, source_refs}``. Runs ``calculate_iv_hv`` and ``filter_options``
    (with ``expiry_before``, ISO date, the earnings cutoff: later expiries are screened out)."""
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
    scale = chain_scale(spot=spot, close=close)
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
    # the strike cap is the support zone's low (``price`` of a zone; a level's own price)
    max_strike = round(nearest.get("low", nearest["price"]) * scale, 4) if nearest else None
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
    if expiry_before is not None:
        args["expiry_before"] = expiry_before
    flt = calls("filter_options", args)
    f = screen_into(view, flt, "CSP screen")
    if f is None:
        return view
    if not f["passing"]:
        counts = failures_by_rule(f["failed_counts"])
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
            f"{best['contract']}: strike {best['strike']} at or below "
            + ("the support zone's low" if nearest and "low" in nearest else "support")
            + f" {max_strike}, "
            f"delta {best['delta']}, "
            + (
                f"net weekly ROC {best['net_weekly_roc']} sold at {best['fill']} (mid {best['mid']}), "
                if best.get("fill") is not None
                else f"weekly ROC {best['weekly_roc']}, "
            )
            + f"IV/HV {ratio_v}",
            [flt.tool_call_id, ivhv.tool_call_id],
        )
    ]
    return view


def earnings_cutoff(*, earnings: dict[str, Any] | None, as_of: date) -> dict[str, Any] | None:
    """The first expiry day a CSP may not reach because of earnings, from the research stage's
    ``get_earnings_dates`` entry: ``{first_excluded (ISO), earnings_date (ISO), source, margin_days,
    text}``; ``None`` when the entry cannot say (earnings not evaluated).

    Sources, in order: the **reported calendar** (an announced next report: expiries on or after
    its day are excluded); the **quarterly cadence** (nothing announced: last report + 91 days,
    less :data:`CADENCE_MARGIN_DAYS`, but not before the day after the calendar's
    ``checked_through``, through which it vouches there is no report); the calendar's
    ``checked_through`` alone (no past report to count from).
    """
    if not earnings:
        return None
    nxt = earnings.get("next")
    if nxt:
        return {
            "first_excluded": nxt["date"],
            "earnings_date": nxt["date"],
            "source": "reported calendar",
            "margin_days": 0,
            "text": f"next earnings {nxt['date']} (reported calendar)",
        }
    checked = earnings.get("checked_through")
    floor = date.fromisoformat(checked) + timedelta(days=1) if checked else as_of + timedelta(days=1)
    recent = earnings.get("recent") or []
    if recent:
        expected = date.fromisoformat(recent[0]["date"]) + timedelta(days=QUARTER_DAYS)
        first = max(expected - timedelta(days=CADENCE_MARGIN_DAYS), floor)
        return {
            "first_excluded": first.isoformat(),
            "earnings_date": expected.isoformat(),
            "source": "estimated from the quarterly cadence",
            "margin_days": CADENCE_MARGIN_DAYS,
            "text": (
                f"next earnings estimated {expected} (last report {recent[0]['date']} + {QUARTER_DAYS} days, "
                f"±{CADENCE_MARGIN_DAYS} days"
                + (f"; none announced through {checked}" if checked else "")
                + ")"
            ),
        }
    if checked:
        return {
            "first_excluded": floor.isoformat(),
            "earnings_date": None,
            "source": "calendar checked through",
            "margin_days": 0,
            "text": f"no report announced through {checked} and no past report to estimate the next",
        }
    return None


def research_view(
    *,
    expiry: str,
    earnings: dict[str, Any] | None,
    earnings_ref: str | None,
    as_of: date,
    dropped: int | None = None,
) -> dict[str, Any]:
    """The Research Analyst's view of the chosen expiry (ISO date): ``{recommendation:
    pass|reject|not_evaluated, earnings_risk: low|high|unknown, cutoff, reasons, source_refs}``
    from the research stage's ``get_earnings_dates`` entry (module docstring for the rules);
    ``dropped``: puts the screen excluded for reaching the earnings date (stated when given)."""
    refs = [earnings_ref]
    exp = date.fromisoformat(expiry)
    cutoff = earnings_cutoff(earnings=earnings, as_of=as_of)
    if cutoff is None:
        return {
            "recommendation": "not_evaluated",
            "earnings_risk": "unknown",
            "cutoff": None,
            "reasons": [
                _reason("earnings not evaluated: no calendar covers the symbol at as_of; check the date", [])
            ],
            "source_refs": [],
        }
    cited = [r for r in refs if r]
    first = date.fromisoformat(cutoff["first_excluded"])
    if exp >= first:
        if cutoff["source"] == "reported calendar":
            text = f"earnings on {cutoff['earnings_date']} fall inside the DTE (expiry {expiry})"
        else:
            text = f"{cutoff['text']}: the expiry {expiry} is on or after {first}, inside the margin"
        return {
            "recommendation": "reject",
            "earnings_risk": "high",
            "cutoff": cutoff,
            "reasons": [_reason(text, refs)],
            "source_refs": cited,
        }
    dropped_text = f" ({dropped} puts dropped)" if dropped else ""
    return {
        "recommendation": "pass",
        "earnings_risk": "low",
        "cutoff": cutoff,
        "reasons": [
            _reason(
                f"{cutoff['text']}: expiries on or after {first} excluded{dropped_text}; "
                f"the expiry {expiry} ends before",
                refs,
            )
        ],
        "source_refs": cited,
    }


def events_view(*, symbol: str, expiry: str, as_of: date, calls: Runner) -> dict[str, Any]:
    """``{dividend: flagged|clear|not_evaluated, split: noticed|none|not_evaluated, events,
    reasons}``: ex-dividend dates and splits after ``as_of`` through ``expiry``
    (``get_corporate_events``). Never a rejection: the flag is for the seller to weigh."""
    days = (date.fromisoformat(expiry) - as_of).days
    env = calls("get_corporate_events", {"symbol": symbol, "days": max(days, 1)})
    if not env.ok or env.data is None:
        return {
            "dividend": "not_evaluated",
            "split": "not_evaluated",
            "events": [],
            "reasons": [_error_reason(env, "ex-dividend dates not evaluated")],
        }
    d = env.data
    if not d["evaluated"]:
        return {
            "dividend": "not_evaluated",
            "split": "not_evaluated",
            "events": d["events"],
            "reasons": [
                _reason(
                    "ex-dividend dates not evaluated: the factor file vouches only through "
                    f"{d['covered_through']}, "
                    f"before the expiry {expiry}",
                    [env.tool_call_id],
                )
            ],
        }
    divs = [e for e in d["events"] if e["kind"] == "dividend"]
    splits = [e for e in d["events"] if e["kind"] == "split"]
    reasons = []
    if divs:
        listed = ", ".join(f"{e['ex_date']} ({e['amount']} USD/share)" for e in divs)
        reasons.append(
            _reason(
                f"ex-dividend {listed} before the expiry {expiry}: an in-the-money call may be assigned "
                "the day before it",
                [env.tool_call_id],
            )
        )
    else:
        reasons.append(
            _reason(
                f"no ex-dividend date from {as_of} through the expiry {expiry} (checked through "
                f"{d['covered_through']})",
                [env.tool_call_id],
            )
        )
    for e in splits:
        reasons.append(
            _reason(
                f"split {e['ratio']}:1 on {e['ex_date']} before the expiry: the contract and its strike are "
                "adjusted (shares × ratio, strike ÷ ratio)",
                [env.tool_call_id],
            )
        )
    return {
        "dividend": "flagged" if divs else "clear",
        "split": "noticed" if splits else "none",
        "events": d["events"],
        "reasons": reasons,
    }


#: A cash-secured put's collateral per contract: the strike × 100 shares.
_SHARES = 100


def size_suggestion(
    *,
    symbol: str,
    as_of: date,
    suggestion: dict[str, Any],
    price_factor: float,
    run: Runner,
    max_collateral_pct: float,
    check_events: bool,
) -> AnalystOutcome[dict[str, Any]]:
    """Sizing, assignment plan and event notices of a suggested put against the paper portfolio
    (``get_portfolio``) and, with ``check_events``, ``get_corporate_events``.

    Contracts n = the largest whole number with n × collateral ≤ min(cash, ``max_collateral_pct``
    × total value) and (shares already held in ``symbol`` at market + n × collateral) ≤
    ``max_collateral_pct`` × total value (concentration after assignment). Assignment: n × 100
    shares at a cost basis of strike − fill + fee/100 (the breakeven at the fill), USD/share.
    Returns an outcome whose value is ``{sizing: {...}, events: {...} | None}``; ``sizing.contracts``
    0 means the put does not fit the account (the plan is then rejected by ``sizing``).
    """
    calls = _Calls(run)
    out: dict[str, Any] = {"sizing": None, "events": None}
    env = calls("get_portfolio", {})
    if not env.ok or env.data is None:
        out["sizing"] = {"contracts": None, "reasons": [_error_reason(env, "paper portfolio")]}
        return AnalystOutcome(value=out, tool_calls=tuple(calls.records))
    pf = env.data["portfolio"]
    cash, total = float(pf["cash"]), float(pf["total_value"])
    strike = float(suggestion["strike"])
    collateral = strike * _SHARES
    held = sum(float(p["market_value"]) for p in pf["positions"] if p["symbol"] == symbol)
    limit = max_collateral_pct * total
    by_cash = int(min(cash, limit) // collateral) if collateral > 0 else 0
    by_concentration = int(max(0.0, limit - held) // collateral) if collateral > 0 else 0
    n = max(0, min(by_cash, by_concentration))
    fill = suggestion.get("fill")
    net = suggestion.get("net_premium")
    basis = round(strike - float(net) / _SHARES, 4) if net is not None else suggestion.get("breakeven")
    sizing = {
        "contracts": n,
        "collateral_per_contract": round(collateral, 2),
        "cash": cash,
        "total_value": total,
        "max_collateral_pct": max_collateral_pct,
        "held_market_value": round(held, 2),
        "by_cash": by_cash,
        "by_concentration": by_concentration,
        "assignment": {
            "shares": n * _SHARES,
            "cost_basis": basis,
            "cost_basis_bars_units": round(float(basis) / price_factor, 4) if basis is not None else None,
            "capital": round(n * collateral, 2),
        },
    }
    cite: list[str | None] = [env.tool_call_id]
    if n == 0:
        text = (
            f"no contract fits: collateral {collateral:,.2f} USD against cash {cash:,.2f} and "
            f"{max_collateral_pct:.0%} of the account {total:,.2f}"
            + (f" less {held:,.2f} already in {symbol}" if held else "")
        )
    else:
        text = (
            f"size {n} contract{'s' if n != 1 else ''}: collateral {n * collateral:,.2f} USD within cash "
            f"{cash:,.2f} and {max_collateral_pct:.0%} of the account {total:,.2f}; if assigned, "
            f"{n * _SHARES} shares at a cost basis of {basis} (strike − net premium per share"
            + (f", sold at {fill}" if fill is not None else "")
            + ")"
        )
    sizing["reasons"] = [_reason(text, cite)]
    out["sizing"] = sizing
    if check_events:
        events = events_view(symbol=symbol, expiry=suggestion["expiry"], as_of=as_of, calls=calls)
        out["events"] = events
    return AnalystOutcome(value=out, tool_calls=tuple(calls.records))


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
    cutoff = earnings_cutoff(earnings=earnings, as_of=as_of)
    opts = options_view(
        symbol=symbol,
        chart=view,
        calls=calls,
        hv_period=inputs.hv_period,
        min_iv_hv=inputs.min_iv_hv,
        expiry_before=cutoff["first_excluded"] if cutoff else None,
    )
    record["options"] = opts
    if opts["recommendation"] == "reject":
        record.update(status="rejected", rejected_by="options", reasons=opts["reasons"])
        return AnalystOutcome(value=record, tool_calls=tuple(calls.records))
    research = research_view(
        expiry=opts["suggestion"]["expiry"],
        earnings=earnings,
        earnings_ref=earnings_ref,
        as_of=as_of,
        dropped=opts.get("failed_counts", {}).get("earnings"),
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
