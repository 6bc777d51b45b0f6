"""The option plan, deterministic: sell a put (``right="put"``, a cash-secured put) or a call on
shares held (``right="call"``, a covered call). One plan, one set of rules (docs/design.md, "Option
plan"); the analysts never see the pipeline state: they get plain values and a ``run`` callable
that runs a tool by name, and return an :class:`~agents.analysts.outcome.AnalystOutcome` whose
value is the plan's record and whose tool calls the stage records. Every reason cites the tool
calls (or data rows) it rests on.

Steps, the first reject ends the plan (its reasons are the answer):

* **Position** (calls): the shares covered: a given cost basis (100 shares, or ``shares``) or the
  paper portfolio's position; a cost basis on the shares before a split since bought is named as
  such and converted (AAPL's 600 after the 7:1 split of 2014-06-09 is 85.71 on today's shares).
* **Chart**: the six-month zones. Without price history both rights refuse the same way
  (``NO_DATA``; the chain's parity spot is stated when a chain exists). A put needs a support zone
  below the close (the strike is capped at its low) and no strong downtrend; a call's lowest strike
  is the nearest resistance zone's top (or the cost basis when higher).
* **Options**: at-the-money IV against the real-world σ forecast (``calculate_iv_hv``: below
  ``min_iv_forecast`` × σ the premium pays clearly less than the expected move), then the screen
  (``filter_options`` / ``filter_calls``: delta, DTE, strike, yield over the T-bill, liquidity,
  the earnings cutoff) ranked by yield over the T-bill × income per unit of expected move.
* **Research**: the earnings cutoff as it was knowable at ``as_of`` (:func:`earnings_cutoff`) and
  its effect; the pick must end before it.

:func:`finish_plan` then adds, for the contract that stands (the rules' or a model's): ex-dividend
dates and splits before its expiry with the **early-assignment check** of a call, the desk's
context (``get_option_context``) and the **size and risk** against the account
(:mod:`agents.quant.options.sizing`); no contract fitting rejects the plan ("sizing").
"""

from __future__ import annotations

import math
from datetime import date, timedelta
from typing import Any

from agents.analysts.option_common import (
    ADX_TRENDING,
    ANNOUNCED_DAYS,
    CONTRACT_SHARES,
    QUARTER_DAYS,
    QUARTER_MARGIN_DAYS,
    YEAR_DAYS,
    YEAR_MARGIN_DAYS,
    Calls,
    OptionPlanInputs,
    Right,
    Runner,
    error_reason,
    reason,
)
from agents.analysts.option_screen import chain_scale as chain_scale
from agents.analysts.option_screen import failures_by_rule as failures_by_rule
from agents.analysts.option_screen import miss_text as miss_text
from agents.analysts.option_screen import options_view
from agents.analysts.option_sizing import if_called, size_plan
from agents.analysts.outcome import AnalystOutcome
from agents.data.fundamentals.splits import SPLIT_HISTORIES
from core.display import decimal2, money, percent, ratio

# -- position (calls) --------------------------------------------------------------------------


def presplit_basis(*, symbol: str, as_of: date, cost_basis: float, spot: float) -> dict[str, Any] | None:
    """When ``cost_basis`` (USD/share) is on shares before a split since (the split table
    :data:`agents.data.fundamentals.splits.SPLIT_HISTORIES`, ex-date on or before ``as_of``):
    ``{ratio, ex_date, converted, source}`` with the basis on today's shares; else ``None``.

    The basis is read as pre-split when dividing it by the cumulative ratio of the latest splits
    brings it closer to today's ``spot`` (log distance) by more than half a split's log ratio:
    600 against AAPL's 93.70 after the 7:1 split is 6.4 times the spot, 85.71 is 0.91 times it."""
    history = SPLIT_HISTORIES.get(symbol.upper())
    if history is None or cost_basis <= 0 or spot <= 0:
        return None
    past = sorted((s for s in history.splits if s.ex_date <= as_of), key=lambda s: s.ex_date, reverse=True)
    best = None
    raw = abs(math.log(cost_basis / spot))
    ratio = 1.0
    for split in past:
        ratio *= float(split.ratio)
        distance = abs(math.log(cost_basis / ratio / spot))
        if distance < raw - math.log(float(split.ratio)) / 2 and (best is None or distance < best[0]):
            best = (distance, ratio, split)
    if best is None:
        return None
    _, ratio, split = best
    return {
        "ratio": ratio,
        "ex_date": split.ex_date.isoformat(),
        "converted": round(cost_basis / ratio, 2),
        "source": split.source,
    }


def position_view(
    *,
    symbol: str,
    as_of: date,
    cost_basis: float | None,
    shares: int | None,
    spot: float | None,
    calls: Runner,
) -> dict[str, Any]:
    """``{recommendation: pass|reject, shares, contracts, cost_basis, source, presplit?, reasons}``:
    the given cost basis (``shares`` or 100 shares assumed), else the paper portfolio's position
    (``get_portfolio``). A given basis on pre-split shares (:func:`presplit_basis`, against the
    chain's ``spot``) is converted, and its shares multiplied by the split."""
    if cost_basis is not None:
        n = shares or CONTRACT_SHARES
        assumed = "given" if shares else "assumed"
        view: dict[str, Any] = {
            "recommendation": "pass",
            "shares": n,
            "contracts": n // CONTRACT_SHARES,
            "cost_basis": cost_basis,
            "source": f"given cost basis ({n} shares {assumed})",
        }
        reasons = [reason(f"{n} shares at the given cost basis {money(cost_basis)}", [])]
        pre = presplit_basis(symbol=symbol, as_of=as_of, cost_basis=cost_basis, spot=spot) if spot else None
        if pre is not None:
            ratio = pre["ratio"]
            n_now = round(n * ratio)
            ratio_text = f"{ratio:g}:1"
            view.update(
                shares=n_now,
                contracts=n_now // CONTRACT_SHARES,
                cost_basis=pre["converted"],
                given_cost_basis=cost_basis,
                presplit=pre,
            )
            reasons = [
                reason(
                    f"your cost basis {money(cost_basis)} is on pre-split shares: {symbol} split "
                    f"{ratio_text} on {pre['ex_date']}; on today's shares it is {money(pre['converted'])} "
                    f"(and the {n} shares {assumed} are {n_now}) ({pre['source']})",
                    [],
                )
            ]
        if view["contracts"] < 1:
            view["recommendation"] = "reject"
            reasons = [
                reason(
                    f"{view['shares']} shares cover no contract (a covered call needs {CONTRACT_SHARES})", []
                )
            ]
        view["reasons"] = reasons
        return view
    env = calls("get_portfolio", {})
    if not env.ok or env.data is None:
        return {"recommendation": "reject", "reasons": [error_reason(env, "paper portfolio")]}
    held = [p for p in env.data["portfolio"]["positions"] if p["symbol"] == symbol]
    n = int(held[0]["quantity"]) if held else 0
    if n < CONTRACT_SHARES:
        return {
            "recommendation": "reject",
            "shares": n,
            "reasons": [
                reason(
                    f"the paper portfolio holds {n} shares of {symbol} (a covered call needs "
                    f"{CONTRACT_SHARES}) and no cost basis was given",
                    [env.tool_call_id],
                )
            ],
        }
    basis = float(held[0]["avg_price"])
    return {
        "recommendation": "pass",
        "shares": n,
        "contracts": n // CONTRACT_SHARES,
        "cost_basis": basis,
        "source": "paper portfolio",
        "reasons": [
            reason(
                f"{n} shares of {symbol} at an average {money(basis)} in the paper portfolio",
                [env.tool_call_id],
            )
        ],
    }


# -- chart ---------------------------------------------------------------------------------------


def _level_text(level: dict[str, Any] | None) -> str:
    """``"zone 622.50–628.90 (1 touch)"`` for a zone (one price when its low is its high), the
    price for a level (USD to the cent), ``"None"`` for none."""
    if level is None:
        return "None"
    if "low" in level and "high" in level and level["low"] != level["high"]:
        t = level.get("touches")
        return f"zone {money(level['low'])}–{money(level['high'])}" + (
            f" ({t} touch{'es' if t != 1 else ''})" if t is not None else ""
        )
    return money(level["price"])


def _window_text(sr: dict[str, Any]) -> str:
    """``" (zones of 2013-12-06..2014-06-06, period 6mo)"`` when the levels state their window."""
    w = sr.get("window")
    if not w:
        return ""
    return (
        f" (zones of {w['start']}..{w['end']}" + (f", period {w['period']}" if w.get("period") else "") + ")"
    )


def no_history_view(*, symbol: str, as_of: date, calls: Runner) -> dict[str, Any]:
    """The one refusal of both rights without price history: the plan needs the bars for
    support/resistance, HV and the real-world forecast. When a chain is quoted on ``as_of`` its
    spot (the chain's own, or put-call parity when it has none) is stated and cited."""
    text = (
        f"NO_DATA: no price history of {symbol} up to {as_of}: the option plans need it for support "
        "and resistance, HV and the real-world forecast of the strike's probabilities"
    )
    env = calls("get_option_chain", {"symbol": symbol, "dte_min": 0, "dte_max": 60, "right": "both"})
    refs: list[str | None] = []
    if env.ok and env.data is not None:
        d = env.data
        text += (
            f"; the chain quoted on {d['quote_date']} prices {symbol} at {money(d['underlying_price'])} "
            f"({d['underlying_source']})"
        )
        refs.append(env.tool_call_id)
    return {
        "recommendation": "reject",
        "reasons": [reason(text, refs)],
        "source_refs": [r for r in refs if r],
    }


def chart_view(
    *, right: Right, technical: dict[str, Any] | None, technical_ref: str | None, chart: dict[str, Any] | None
) -> dict[str, Any]:
    """The chart analyst's view from the ``technical_indicators`` data and the chart levels.

    Put: ``{recommendation, trend_direction, trend_quality, close, support_levels,
    resistance_levels, nearest_support, fib_confluence, extension_risk, reasons, source_refs}``;
    rejects without a support below the close or in a strong downtrend (close and SMA(50) below
    SMA(200), ADX(14) > 25). Call: ``{recommendation: pass, close, resistance_levels,
    nearest_resistance, reasons, source_refs}``. ``technical`` ``None`` is handled by the caller
    (:func:`no_history_view`). Prices USD in the bars' units."""
    assert technical is not None
    chart = chart or {}
    sr, sr_ref = chart.get("support_resistance") or {}, chart.get("support_resistance_ref")
    close = technical.get("close")
    if right == "call":
        above = [
            z for z in sr.get("resistance", []) if close is not None and z.get("high", z["price"]) > close
        ]
        near = min(above, key=lambda z: z.get("low", z["price"])) if above else None
        text = (
            f"nearest resistance {_level_text(near)} above the close {money(close)}" + _window_text(sr)
            if near
            else f"no resistance zone above the close {money(close)} in the window" + _window_text(sr)
        )
        return {
            "recommendation": "pass",
            "close": close,
            "resistance_levels": above,
            "nearest_resistance": near,
            "reasons": [reason(text, [technical_ref, sr_ref])],
            "source_refs": [r for r in (technical_ref, sr_ref) if r],
        }
    fib, fib_ref = chart.get("fib") or {}, chart.get("fib_ref")
    ind = technical.get("indicators") or {}
    sma50, sma200, adx, atr = ind.get("sma_50"), ind.get("sma_200"), ind.get("adx_14"), ind.get("atr_14")
    direction = "sideways"
    if close is not None and sma200 is not None:
        direction = "up" if close > sma200 else "down"
    quality = "weak" if adx is None or adx < 20 else "strong" if adx > ADX_TRENDING else "moderate"
    supports = [lv for lv in sr.get("support", []) if close is not None and lv["price"] < close]
    resistances = [lv for lv in sr.get("resistance", []) if close is not None and lv["price"] > close]
    # a zone's "price" is its low (support); the nearest support is the zone whose top is closest
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
        "source_refs": [r for r in (technical_ref, sr_ref, fib_ref) if r],
    }
    reasons = []
    if nearest is None:
        reasons.append(reason(f"no support level below the close {money(close)}", [technical_ref, sr_ref]))
    strong_down = (
        direction == "down"
        and sma50 is not None
        and sma200 is not None
        and sma50 < sma200
        and quality == "strong"
    )
    if strong_down:
        reasons.append(
            reason(
                f"strong downtrend: close {money(close)} and SMA(50) {money(sma50)} below SMA(200) "
                f"{money(sma200)}, ADX(14) {decimal2(adx)}",
                [technical_ref],
            )
        )
    view["recommendation"] = "reject" if reasons else "pass"
    view["reasons"] = reasons or [
        reason(
            f"trend {direction} ({quality}); nearest support {_level_text(nearest)} below the close "
            f"{money(close)}" + _window_text(sr),
            [technical_ref, sr_ref],
        )
    ]
    return view


# -- research: earnings ------------------------------------------------------------------------


def earnings_cutoff(*, earnings: dict[str, Any] | None, as_of: date) -> dict[str, Any] | None:
    """The first last-trading-day an option may not reach because of earnings, as knowable at
    ``as_of`` (no hindsight), from the research stage's ``get_earnings_dates`` entry:
    ``{first_excluded (ISO), earnings_date (ISO), source, margin_days, text}``; ``None`` when the
    entry cannot say (earnings not evaluated).

    In order: an **announced** report (the calendar's next report within :data:`ANNOUNCED_DAYS`
    of ``as_of``: dates are announced two to four weeks ahead, so a later one in the calendar was
    not known yet); else the **same quarter a year before** + 364 days less 7; else the **last
    report** + 91 days less 14 (margins: the module constants). The calendar's later rows and its
    ``checked_through`` are not used: they were scraped after the fact.
    """
    if not earnings:
        return None
    nxt = earnings.get("next")
    if nxt and (date.fromisoformat(nxt["date"]) - as_of).days <= ANNOUNCED_DAYS:
        return {
            "first_excluded": nxt["date"],
            "earnings_date": nxt["date"],
            "source": "announced",
            "margin_days": 0,
            "text": f"next earnings {nxt['date']} (announced)",
        }
    recent = sorted((r["date"] for r in earnings.get("recent") or []), reverse=True)
    if not recent:
        return None
    last = date.fromisoformat(recent[0])
    # the fourth report back is the same quarter a year before the next one when the four are
    # about a quarter apart (three gaps, 250-300 days in all)
    base = date.fromisoformat(recent[3]) if len(recent) >= 4 else None
    if base is not None and 250 <= (last - base).days <= 300:
        expected, margin = base + timedelta(days=YEAR_DAYS), YEAR_MARGIN_DAYS
        how = f"the report a year before, {recent[3]}, + {YEAR_DAYS} days"
    else:
        expected, margin = last + timedelta(days=QUARTER_DAYS), QUARTER_MARGIN_DAYS
        how = f"last report {recent[0]} + {QUARTER_DAYS} days"
    while expected <= as_of:  # a report overdue by the estimate is still to come: from tomorrow
        expected += timedelta(days=7)
    first = max(expected - timedelta(days=margin), as_of + timedelta(days=1))
    return {
        "first_excluded": first.isoformat(),
        "earnings_date": expected.isoformat(),
        "source": "estimated from past reports",
        "margin_days": margin,
        "text": (
            f"next earnings estimated {expected} ({how}, −{margin} days margin; nothing announced by {as_of})"
        ),
    }


def research_view(
    *, expiry: str, noun: str, earnings: dict[str, Any] | None, earnings_ref: str | None, as_of: date,
    dropped: int | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The research analyst's view of the chosen contract's last trading day (ISO):
    ``{recommendation: pass|reject|not_evaluated, earnings_risk, cutoff, reasons, source_refs}``;
    ``dropped``: contracts the screen excluded for reaching the earnings date."""
    exp = date.fromisoformat(expiry)
    cutoff = earnings_cutoff(earnings=earnings, as_of=as_of)
    if cutoff is None:
        return {
            "recommendation": "not_evaluated",
            "earnings_risk": "unknown",
            "cutoff": None,
            "reasons": [
                reason("earnings not evaluated: no calendar covers the symbol at as_of; check the date", [])
            ],
            "source_refs": [],
        }
    cited = [earnings_ref] if earnings_ref else []
    first = date.fromisoformat(cutoff["first_excluded"])
    if exp >= first:
        return {
            "recommendation": "reject",
            "earnings_risk": "high",
            "cutoff": cutoff,
            "reasons": [
                reason(f"{cutoff['text']}: the last trading day {expiry} is on or after {first}", cited)
            ],
            "source_refs": cited,
        }
    dropped_text = f" ({dropped} {noun}s dropped)" if dropped else ""
    return {
        "recommendation": "pass",
        "earnings_risk": "low",
        "cutoff": cutoff,
        "reasons": [
            reason(
                f"{cutoff['text']}: last trading days on or after {first} excluded{dropped_text}; "
                f"{expiry} ends before",
                cited,
            )
        ],
        "source_refs": cited,
    }


def run_option_plan(inputs: OptionPlanInputs) -> AnalystOutcome[dict[str, Any]]:
    """Position (calls) → chart → options → research with early rejection (module docstring).

    Returns an outcome whose value is the plan's record: ``{strategy, symbol, as_of, right,
    position?, chart, options, research, status: suggested|rejected, rejected_by:
    position|chart|options|research|None, reasons, suggestion, alternatives}``; its tool calls are
    the analysts'. :func:`finish_plan` adds events, context and sizing to a suggestion.
    """
    symbol, as_of = inputs.symbol, inputs.as_of
    calls = Calls(inputs.run)
    record: dict[str, Any] = {
        "strategy": inputs.strategy,
        "symbol": symbol,
        "as_of": as_of.isoformat(),
        "right": inputs.right,
    }

    def done(status: str, by: str | None, reasons: list[dict[str, Any]]) -> AnalystOutcome[dict[str, Any]]:
        record.update(status=status, rejected_by=by, reasons=reasons)
        return AnalystOutcome(value=record, tool_calls=tuple(calls.records))

    if not inputs.technical:
        view = no_history_view(symbol=symbol, as_of=as_of, calls=calls)
        record["chart"] = view
        return done("rejected", "chart", view["reasons"])
    cost_basis = None
    position_reasons: list[dict[str, Any]] = []
    if inputs.right == "call":
        spot = _spot_of(inputs, calls)
        position = position_view(
            symbol=symbol,
            as_of=as_of,
            cost_basis=inputs.cost_basis,
            shares=inputs.shares,
            spot=spot,
            calls=calls,
        )
        record["position"] = position
        if position["recommendation"] == "reject":
            return done("rejected", "position", position["reasons"])
        cost_basis = float(position["cost_basis"])
        position_reasons = position["reasons"]
    view = chart_view(
        right=inputs.right, technical=inputs.technical, technical_ref=inputs.technical_ref, chart=inputs.chart
    )
    record["chart"] = view
    if view["recommendation"] == "reject":
        return done("rejected", "chart", view["reasons"])
    cutoff = earnings_cutoff(earnings=inputs.earnings, as_of=as_of)
    opts = options_view(
        inputs=inputs,
        chart=view,
        calls=calls,
        cost_basis=cost_basis,
        expiry_before=cutoff["first_excluded"] if cutoff else None,
    )
    record["options"] = opts
    if opts["recommendation"] == "reject":
        return done("rejected", "options", opts["reasons"])
    pick = opts["suggestion"]
    research = research_view(
        expiry=pick["last_trading_day"],
        noun=inputs.noun,
        earnings=inputs.earnings,
        earnings_ref=inputs.earnings_ref,
        as_of=as_of,
        dropped=opts.get("failed_counts", {}).get("earnings"),
    )
    record["research"] = research
    if research["recommendation"] == "reject":
        return done("rejected", "research", research["reasons"])
    record.update(
        suggestion={**pick, "iv_hv_ratio": opts["iv_hv_ratio"], "hv": opts["hv"]},
        alternatives=opts["alternatives"],
    )
    return done("suggested", None, position_reasons + view["reasons"] + opts["reasons"] + research["reasons"])


def _spot_of(inputs: OptionPlanInputs, calls: Runner) -> float | None:
    """The chain's spot for the pre-split check of a given cost basis (``None`` without one)."""
    if inputs.cost_basis is None:
        return None
    env = calls("get_option_chain", {"symbol": inputs.symbol, "dte_min": 0, "dte_max": 60, "right": "call"})
    if not env.ok or env.data is None:
        return None
    return float(env.data["underlying_price"])


# -- after the pick: events, context, size and risk ------------------------------------------------


def events_view(
    *, symbol: str, suggestion: dict[str, Any], right: Right, as_of: date, calls: Runner
) -> dict[str, Any]:
    """``{dividend: flagged|clear|not_evaluated, split: noticed|none|not_evaluated, events,
    early_assignment, reasons}``: ex-dividend dates and splits after ``as_of`` through the pick's
    last trading day (``get_corporate_events``) and, for a call, the early-assignment check of
    each ex-dividend date. Never a rejection: the seller weighs it (a likely assignment is said)."""
    last = suggestion.get("last_trading_day") or suggestion["expiry"]
    days = (date.fromisoformat(last) - as_of).days
    args: dict[str, Any] = {"symbol": symbol, "days": max(days, 1)}
    if right == "call":
        args["contract"] = suggestion["contract"]
    env = calls("get_corporate_events", args)
    if not env.ok or env.data is None:
        return {
            "dividend": "not_evaluated",
            "split": "not_evaluated",
            "events": [],
            "reasons": [error_reason(env, "ex-dividend dates not evaluated")],
        }
    d = env.data
    if not d["evaluated"]:
        return {
            "dividend": "not_evaluated",
            "split": "not_evaluated",
            "events": d["events"],
            "reasons": [
                reason(
                    f"ex-dividend dates not evaluated: the factor file vouches only through "
                    f"{d['covered_through']}, "
                    f"before the last trading day {last}",
                    [env.tool_call_id],
                )
            ],
        }
    divs = [e for e in d["events"] if e["kind"] == "dividend"]
    splits = [e for e in d["events"] if e["kind"] == "split"]
    checks = d.get("early_assignment") or []
    reasons = []
    if not divs:
        reasons.append(
            reason(
                f"no ex-dividend date from {as_of} through the last trading day {last} "
                f"(checked through {d['covered_through']})",
                [env.tool_call_id],
            )
        )
    for e in divs:
        check = next((c for c in checks if c["ex_date"] == e["ex_date"]), None)
        if right == "put" or check is None:
            text = f"ex-dividend {e['ex_date']} ({money(e['amount'])} USD/share) before {last}"
            if right == "put":
                text += ": the stock drops by the dividend that day, nearer the strike"
        elif check["threshold"] is None:
            text = (
                f"ex-dividend {e['ex_date']} ({money(check['dividend'])} USD/share): the call keeps more "
                "time value than "
                "the dividend at any price, so early assignment does not pay its holder"
            )
        else:
            text = (
                f"ex-dividend {e['ex_date']} ({money(check['dividend'])} USD/share): the call's time value "
                f"now is {money(check['time_value_now'])}; on {check['eve']} it falls below the dividend "
                f"above {money(check['threshold'])}, "
                f"where early assignment is likely (P above it: {percent(check['p_above_rn'], digits=1)} "
                f"risk-neutral, {percent(check['p_above_rw'], digits=1)} real-world)"
                + ("; expect to lose the shares and the dividend the day before" if check["likely"] else "")
            )
        reasons.append(reason(text, [env.tool_call_id]))
    for e in splits:
        reasons.append(
            reason(
                f"split {ratio(e['ratio'])}:1 on {e['ex_date']} before the expiry: the contract is adjusted "
                "(shares × "
                "ratio, strike ÷ ratio)",
                [env.tool_call_id],
            )
        )
    return {
        "dividend": "flagged" if divs else "clear",
        "split": "noticed" if splits else "none",
        "events": d["events"],
        "early_assignment": checks,
        "reasons": reasons,
        "source_refs": [env.tool_call_id],
    }


def context_view(
    *, symbol: str, suggestion: dict[str, Any], earnings_date: str | None, calls: Runner
) -> dict[str, Any]:
    """The desk's context (``get_option_context`` on the pick's expiry and the earnings estimate):
    ``{hv_cone, iv_rank, iv_rank_note, skew, earnings_move, term, reasons, source_refs}``; a tool
    error is a reason, never a rejection."""
    args: dict[str, Any] = {"symbol": symbol, "expiry": suggestion["expiry"]}
    if earnings_date:
        args["earnings_date"] = earnings_date
    env = calls("get_option_context", args)
    if not env.ok or env.data is None:
        return {"reasons": [error_reason(env, "option context")], "source_refs": []}
    d = env.data
    view = {k: d.get(k) for k in ("hv_cone", "iv_rank", "iv_rank_note", "skew", "earnings_move", "term")}
    parts = []
    cone = d.get("hv_cone") or {}
    if cone:
        parts.append(
            "HV "
            + ", ".join(
                f"{w}d {percent(c['hv'], digits=1)} (range {percent(c['min'], digits=1)}–"
                f"{percent(c['max'], digits=1)})"
                for w, c in cone.items()
                if c is not None
            )
        )
    rank = d.get("iv_rank")
    parts.append(
        f"IV rank {percent(rank['rank'], digits=0)}, percentile {percent(rank['percentile'], digits=0)} "
        f"{d['iv_rank_note']}"
        if rank
        else d["iv_rank_note"]
    )
    if d.get("skew"):
        sk = d["skew"]
        parts.append(
            f"put skew {percent(sk['skew'])} (25-delta put IV {percent(sk['iv_25d'])} vs "
            f"{percent(sk['iv_50d'])} at the money)"
        )
    move = d.get("earnings_move")
    if move and move.get("sigma") is not None:
        parts.append(
            f"the chain prices a ±{percent(move['expected_abs_move'], digits=1)} move "
            f"({money(move['expected_abs_move_usd'])} USD) for the report on {earnings_date} (IV "
            f"{percent(move['before']['iv'])} to {move['before']['last_trading_day']}, "
            f"{percent(move['after']['iv'])} to {move['after']['last_trading_day']})"
        )
    view["reasons"] = [reason("context: " + "; ".join(parts), [env.tool_call_id])]
    view["source_refs"] = [env.tool_call_id]
    return view


def finish_plan(*, inputs: OptionPlanInputs, record: dict[str, Any]) -> AnalystOutcome[dict[str, Any]]:
    """Complete a suggested record in place (events, context, size and risk; module docstring)
    and return it with the tool calls made; a record that is not a suggestion is returned as is.
    No contract fitting the account rejects the record (``rejected_by`` ``sizing``)."""
    calls = Calls(inputs.run)
    s = record.get("suggestion")
    if record.get("status") != "suggested" or not s:
        return AnalystOutcome(value=record, tool_calls=())
    extra_reasons: list[dict[str, Any]] = []
    basis = (record.get("position") or {}).get("cost_basis")
    if inputs.right == "call" and basis:
        s["if_called"] = if_called(suggestion=s, cost_basis=float(basis))
    if inputs.check_events:
        events = events_view(
            symbol=inputs.symbol, suggestion=s, right=inputs.right, as_of=inputs.as_of, calls=calls
        )
        record["events"] = {k: events.get(k) for k in ("dividend", "split", "events", "early_assignment")}
        extra_reasons += events["reasons"]
    cutoff = (record.get("research") or {}).get("cutoff") or {}
    context = context_view(
        symbol=inputs.symbol, suggestion=s, earnings_date=cutoff.get("earnings_date"), calls=calls
    )
    record["context"] = {k: v for k, v in context.items() if k != "reasons"}
    extra_reasons += context["reasons"]
    candidates = (record.get("options") or {}).get("candidates") or [s, *(record.get("alternatives") or [])]
    if candidates[0].get("contract") != s.get("contract"):
        candidates = [s, *[c for c in candidates if c.get("contract") != s.get("contract")]]
    sizing = size_plan(inputs=inputs, record=record, candidates=candidates, calls=calls)
    record["sizing"] = sizing
    if (record.get("options") or {}).get("candidates") is not None:
        record["options"] = {k: v for k, v in record["options"].items() if k != "candidates"}
    if sizing.get("contracts") == 0:
        record.update(status="rejected", rejected_by="sizing", reasons=sizing["reasons"])
    else:
        record["reasons"] = [*record["reasons"], *sizing["reasons"], *extra_reasons]
    return AnalystOutcome(value=record, tool_calls=tuple(calls.records))
