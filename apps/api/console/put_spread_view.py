"""The put credit spread section of the console's analysis page: the view model of a
``put_spread`` analysis, built from the report's stored ``put_spread`` record
(:class:`pipeline.plans.put_spread.models.PutSpreadResult` as JSON, the fields of
``pipeline.plans.put_spread.step``), every number formatted here for the template
(``_put_spread.html``): prices to cents, money with thousands separators, shares as %."""

from __future__ import annotations

import re
from typing import Any

from apps.api.console.screen_view import screen_parts
from pipeline.report_format import money

#: The sizing's ``binding`` (``agents.quant.options.sizing``: the first limit that stopped it) in words.
BINDING = {"gap": "the gap-loss cap", "name_cap": "the per-name cap", "cash": "the account's cash"}


def price(value: Any) -> str:
    """A price or money amount to cents with thousands separators (``1330.3`` → ``"1,330.30"``),
    the report's own :func:`pipeline.report_format.money`; ``"–"`` for a missing or
    non-numeric value."""
    return money(value, missing="–")


def pct(value: Any, digits: int = 1) -> str:
    """A fraction as a percentage (``0.8984`` → ``"89.8 %"``, a no-break space before the sign
    so a line never starts with it); ``"–"`` when missing."""
    try:
        return f"{float(value) * 100:,.{digits}f}\u00a0%"
    except (TypeError, ValueError):
        return "–"


#: The plain space between a number and the unit after it: "22.56 %", "428.60 USD", "24 DTE".
_UNIT_SPACE = re.compile(r"(?<=\d) (?=(?:%|USD\b|DTE\b))")


def keep_units(text: Any) -> str:
    """``text`` (a sentence of the report or a verdict; ``str`` of anything else, ``""`` for
    None) with a no-break space between each number and its unit (``%``, ``USD``, ``DTE``), so a
    narrow screen never wraps "22.56 %" into "22.56" and a line starting with "%"; other
    spaces as they are. Raises nothing."""
    return "" if text is None else _UNIT_SPACE.sub("\u00a0", str(text))


def unique_refs(*groups: Any) -> list[str]:
    """The tool call ids of ``groups`` (lists of ids), each once, in order."""
    seen: list[str] = []
    for group in groups:
        for ref in group or []:
            if isinstance(ref, str) and ref not in seen:
                seen.append(ref)
    return seen


def _leg(role: str, row: dict[str, Any] | None, fill: Any) -> dict[str, str] | None:
    """One leg of the spread for the legs table (``fill`` the price the plan trades it at)."""
    if not row:
        return None
    oi = row.get("open_interest")
    volume = row.get("volume")
    return {
        "role": role,
        "contract": str(row.get("contract") or "–"),
        "strike": price(row.get("strike")),
        "bid_ask": f"{price(row.get('bid'))} / {price(row.get('ask'))}",
        "fill": price(fill),
        "delta": f"{float(row['delta']):.3f}" if row.get("delta") is not None else "–",
        "iv": pct(row.get("iv")),
        "open_interest": f"{int(oi):,}" if oi is not None else "–",
        "volume": f"{int(volume):,}" if volume is not None else "–",
    }


def _verdict(record: dict[str, Any], spread: dict[str, Any] | None, sizing: dict[str, Any]) -> str:
    """The plan's answer in one sentence: the whole trade (every rung of a ladder; the credit,
    max loss and margin in all when it holds more than one spread, as the sizing states them),
    or who refused it and its first reason (as ``pipeline.plans.put_spread.report.headline``
    words it, without Markdown)."""
    symbol = record.get("symbol") or ""
    if record.get("status") == "suggested" and spread:
        n = int(sizing.get("contracts") or 1)
        rungs = [r for r in sizing.get("rungs") or [] if isinstance(r, dict)]
        line = f"Sell {n} put credit spread{'s' if n != 1 else ''} on {symbol}"
        if len(rungs) > 1:  # the whole ladder, then the totals the sizing table states
            one_expiry = {r.get("expiry") for r in rungs} == {spread.get("expiry")}
            if one_expiry:
                line += f", expiry {spread.get('expiry')} ({spread.get('dte')} DTE)"
            line += ": " + ", ".join(
                f"{int(r.get('contracts') or 0)} × the {price(r.get('strike'))} / "
                f"{price(r.get('long_strike'))} put spread"
                + ("" if one_expiry else f", expiry {r.get('expiry')}")
                for r in rungs
            )
        else:
            line += (
                f": short the {price(spread.get('short_strike'))} put, long the "
                f"{price(spread.get('long_strike'))} put, expiry {spread.get('expiry')} "
                f"({spread.get('dte')} DTE)"
            )
        if n > 1 and sizing.get("net_premium") is not None:
            line += (
                f", for a credit of {price(sizing['net_premium'])} USD and a max loss of "
                f"{price(sizing.get('max_loss'))} USD in all (margin {price(sizing.get('collateral'))} USD)"
            )
            if len(rungs) > 1:
                return line + "."
            one = f"{price(spread.get('credit'))} USD and {price(spread.get('max_loss'))} USD a spread"
            return f"{line}: {one}."
        return (
            line + f", for a credit of {price(spread.get('credit'))} USD a spread and a max loss of "
            f"{price(spread.get('max_loss'))} USD a spread."
        )
    first = ((record.get("reasons") or [{}])[0] or {}).get("text") or "no reason recorded"
    by = record.get("rejected_by")
    who = f"rejected by the {by} analyst" if by else "rejected"
    return f"No put credit spread on {symbol}: {who}: {first.rstrip('.')}."


def _cap(share: Any, usd: Any) -> str:
    """``"20 % of the account (20,000.00 USD)"``."""
    return f"{pct(share, 0)} of the account ({price(usd)} USD)"


def _sizing(sizing: dict[str, Any], refs: list[str], width: Any) -> dict[str, Any] | None:
    """The size against the account: spreads, margin and its share of the account, the caps
    (per-name share of the account, loss on a −20 % gap) and which one binds, the totals;
    ``width`` the spread's width (USD a share: one spread's margin is width × 100)."""
    if not sizing:
        return None
    limits = sizing.get("limits") or {}
    one = sizing.get("per_contract") or {}
    binding = BINDING.get(str(sizing.get("binding")), str(sizing.get("binding") or "none"))
    rungs = [
        {
            "contracts": int(r.get("contracts") or 0),
            "short": str(r.get("contract") or "–"),
            "long": str(r.get("long_contract") or "–"),
            "strikes": f"{price(r.get('strike'))} / {price(r.get('long_strike'))}",
            "expiry": str(r.get("expiry") or "–"),
            "credit": price(r.get("net_premium")),
            "margin": price(r.get("collateral")),
            "max_loss": price(r.get("max_loss")),
        }
        for r in sizing.get("rungs") or []
    ]
    return {
        "contracts": int(sizing.get("contracts") or 0),
        "margin": price(sizing.get("collateral")),
        "share_of_account": pct(sizing.get("share_of_account")),
        "account_source": sizing.get("account_source") or "",
        "name_cap": _cap(limits.get("name_cap_pct"), limits.get("name_cap_usd")),
        "gap_cap": _cap(limits.get("gap_cap_pct"), limits.get("gap_cap_usd")),
        "fits": {
            "cash": limits.get("by_cash"),
            "name": limits.get("by_name_cap"),
            "gap": limits.get("by_gap"),
        },
        "binding": binding,
        "credit": price(sizing.get("net_premium")),
        "max_loss": price(sizing.get("max_loss")),
        "pnl_down_2sigma": price(sizing.get("pnl_down_2sigma")),
        "pnl_gap": price(sizing.get("pnl_gap")),
        "one_margin": price(float(width) * 100) if isinstance(width, (int, float)) else "–",
        "one_max_loss": price(one.get("max_loss")),
        "one_pnl_down_2sigma": price(one.get("pnl_down_2sigma")),
        "one_pnl_gap": price(one.get("pnl_gap")),
        "rungs": rungs,
        "refs": refs,
    }


def put_spread_view(
    record: dict[str, Any], *, screen: dict[str, Any] | None = None, screen_ref: str | None = None
) -> dict[str, Any]:
    """The put-spread section of an analysis page from the report's ``put_spread`` record and the
    stored result ``screen`` of the ``filter_options`` call ``screen_ref`` its short puts came
    from (``None`` when there is none).

    Returns ``{status, rejected_by, verdict, verdict_refs, spread, legs, probabilities,
    real_world, sizing, alternatives, reasons, refs, ladder, screen, slice, screen_ref}``
    (``ladder``, ``screen``, ``slice``: the short puts' screen,
    :func:`apps.api.console.screen_view.screen_parts`, its prices as stored, for the template's
    own formatting as in the csp section); ``verdict`` one sentence (the trade,
    or "No put credit spread on SYMBOL: rejected by the X analyst: <first reason>."),
    ``verdict_refs`` the tool calls it rests on; ``spread`` the chosen (or, when a later
    analyst refused it, the weighed) spread's strikes, expiry and DTE, credit, width, max loss,
    breakeven, return on risk and yields (``None`` when the plan refused before choosing one);
    ``legs`` the sold and the bought put; ``probabilities`` rows ``(label, risk-neutral,
    real-world)``; ``real_world`` the source of the real-world model (the risk forecast);
    ``sizing`` see :func:`_sizing` (``None`` before sizing); ``alternatives`` the next spreads
    by the plan's ranking; ``reasons`` the record's ``{text, source_refs}``; ``refs`` the chain
    calls the spread cites (the screen, the IV/HV call, the long puts' greeks). Every figure is
    a string: prices and USD to cents with thousands separators, shares and probabilities as %.
    Raises nothing on missing fields (they show as "–")."""
    options = record.get("options") or {}
    spread = record.get("spread") or None
    sizing = record.get("sizing") or {}
    reasons = [
        {"text": str(r.get("text") or ""), "source_refs": list(r.get("source_refs") or [])}
        for r in record.get("reasons") or []
        if isinstance(r, dict)
    ]
    chain_refs = unique_refs(options.get("source_refs"), options.get("spread_refs"))
    cited = unique_refs(*(r["source_refs"] for r in reasons))
    portfolio_refs = [ref for ref in cited if ref.startswith("get_portfolio_")]
    suggested = record.get("status") == "suggested" and spread is not None
    view: dict[str, Any] = {
        "status": record.get("status"),
        "rejected_by": record.get("rejected_by"),
        "verdict": _verdict(record, spread, sizing),
        "verdict_refs": chain_refs if suggested else (reasons[0]["source_refs"] if reasons else []),
        "spread": None,
        "legs": [],
        "probabilities": [],
        "real_world": (options.get("real_world") or {}).get("source")
        or (options.get("real_world") or {}).get("error"),
        "sizing": _sizing(sizing, portfolio_refs, (spread or {}).get("width")),
        "alternatives": [],
        "reasons": reasons,
        "refs": chain_refs,
        **screen_parts(screen),
        "screen_ref": screen_ref,
    }
    if spread:
        view["spread"] = {
            "short": str(spread.get("short") or "–"),
            "long": str(spread.get("long") or "–"),
            "short_strike": price(spread.get("short_strike")),
            "long_strike": price(spread.get("long_strike")),
            "width": price(spread.get("width")),
            "expiry": str(spread.get("expiry") or "–"),
            "last_trading_day": str(spread.get("last_trading_day") or spread.get("expiry") or "–"),
            "dte": spread.get("dte"),
            "credit": price(spread.get("credit")),
            "income": price(spread.get("income")),
            "max_loss": price(spread.get("max_loss")),
            "breakeven": price(spread.get("breakeven")),
            "return_on_risk": pct(spread.get("return_on_risk")),
            "excess_yield": pct(spread.get("excess_yield")),
            "tbill_yield": pct(spread.get("tbill_yield"), 2),
            "expected_move": price(spread.get("expected_move")),
        }
        view["legs"] = [
            leg
            for leg in (
                _leg("sell", record.get("suggestion"), spread.get("short_fill")),
                _leg("buy", record.get("long"), spread.get("long_fill")),
            )
            if leg
        ]
        view["probabilities"] = [
            ("Keeps the credit at expiry (POP: above the breakeven)", pct(spread.get("pop_rn")),
             pct(spread.get("pop_rw"))),
            ("Max loss (below the long strike)", pct(spread.get("p_max_loss_rn")),
             pct(spread.get("p_max_loss_rw"))),
            ("Touches the short strike before expiry", pct(spread.get("p_touch_short_rn")),
             pct(spread.get("p_touch_short_rw"))),
        ]  # fmt: skip
    view["alternatives"] = _alternatives(record)
    return view


def _alternatives(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's alternative spreads as the section's table prints them: legs, strikes to
    cents, expiry and DTE, credit and max loss (USD), yield over the T-bill and POP in %."""
    return [
        {
            "short": str(a.get("short") or "–"),
            "long": str(a.get("long") or "–"),
            "strikes": f"{price(a.get('short_strike'))} / {price(a.get('long_strike'))}",
            "expiry": str(a.get("expiry") or "–"),
            "dte": a.get("dte"),
            "credit": price(a.get("credit")),
            "max_loss": price(a.get("max_loss")),
            "excess_yield": pct(a.get("excess_yield")),
            "pop_pair": f"{pct(a.get('pop_rn'))} / {pct(a.get('pop_rw'))}",
        }
        for a in record.get("alternatives") or []
        if isinstance(a, dict)
    ]
