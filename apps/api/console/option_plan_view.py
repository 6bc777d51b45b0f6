"""The answer of a csp or covered-call analysis for the console's Answer card: the option plan's
verdict in one full sentence, built from the report's stored ``csp`` / ``covered_call`` record
(:class:`pipeline.plans.option.models.OptionPlanResult` as JSON), not from the stored headline,
which lists shorten. Prices to cents with thousands separators, shares of the account in %
(the formatting of :mod:`apps.api.console.put_spread_view`)."""

from __future__ import annotations

from typing import Any

from apps.api.console.put_spread_view import pct, price, unique_refs

#: The plan's noun per right (a record stored before ``right`` existed is a put).
NOUNS = {"put": "cash-secured put", "call": "covered call"}


def _right(record: dict[str, Any], kind: str) -> str:
    right = record.get("right")
    if right in NOUNS:
        return str(right)
    return "call" if kind == "covered_call" or record.get("strategy") == "covered call" else "put"


def _trade(record: dict[str, Any], right: str, symbol: str) -> str:
    """The sentence of a suggested plan: contracts, contract, strike, expiry and DTE, the fill and
    the premium (a contract and in all), then the size (a put's collateral and its share of the
    account, a call's shares covered); a ladder names every rung and the premium in all before
    the first rung's own strike, fill and premium a contract."""
    s = record.get("suggestion") or {}
    sizing = record.get("sizing") or {}
    rungs = [r for r in sizing.get("rungs") or [] if isinstance(r, dict)]
    n = int(sizing.get("contracts") or (record.get("position") or {}).get("contracts") or 1)
    noun = NOUNS[right]
    one = s.get("net_premium") if s.get("net_premium") is not None else s.get("premium")
    sold = f" sold at {price(s['fill'])}" if s.get("fill") is not None else ""
    pick = f"the {price(s.get('strike'))} {right} {s.get('contract')}"
    if len(rungs) > 1:  # the whole ladder and its total first, then the first rung's own figures
        line = f"Sell {n} {noun}s on {symbol} in a ladder of " + ", ".join(
            f"{int(r.get('contracts') or 0)} × {r.get('contract')} "
            f"({price(r.get('strike'))}, {r.get('expiry')})"
            for r in rungs
        )
        if sizing.get("net_premium") is not None:
            line += f", for a premium of {price(sizing['net_premium'])} USD in all"
        line += f"; the first rung, {pick}, expiry {s.get('expiry')} ({s.get('dte')} DTE)"
        if one is not None:
            line += f",{sold} for {price(one)} USD a contract"
    else:
        line = (
            f"Sell {n} {noun}{'s' if n != 1 else ''} on {symbol}: {pick}, expiry {s.get('expiry')} "
            f"({s.get('dte')} DTE)"
        )
        if one is not None:
            line += f",{sold} for a premium of {price(one)} USD a contract"
            if n > 1 and sizing.get("net_premium") is not None:
                line += f" ({price(sizing['net_premium'])} USD in all)"
    if right == "put" and sizing.get("collateral") is not None:
        line += f"; collateral {price(sizing['collateral'])} USD"
        if sizing.get("share_of_account") is not None:
            line += f", {pct(sizing['share_of_account'])} of the account"
    elif right == "call":
        line += f"; covering {n * 100:,} shares"
    return line + "."


def option_verdict(record: dict[str, Any], *, kind: str = "csp", symbol: str = "") -> dict[str, Any]:
    """The Answer card of an option plan's analysis from its stored record (``kind`` the analysis
    type, ``csp`` or ``covered_call``; ``symbol`` when the record names none).

    Returns ``{"verdict": str, "verdict_refs": [tool_call_id, ...]}``: a suggested plan's trade
    ("Sell 2 cash-secured puts on AAPL: the 587.50 put AAPL…, expiry 2014-07-03 (24 DTE), sold at
    4.30 for a premium of 428.60 USD a contract (857.20 USD in all); collateral 117,500.00 USD,
    58.8 % of the account."), citing the options analyst's calls and the portfolio calls its
    reasons cite; a refusal's one sentence ("No covered call on AAPL: rejected by the options
    analyst: <first reason>."), citing that reason's calls. Raises nothing on missing fields."""
    right = _right(record, kind)
    who = str(record.get("symbol") or symbol)
    reasons = [r for r in record.get("reasons") or [] if isinstance(r, dict)]
    if record.get("status") == "suggested" and record.get("suggestion"):
        cited = unique_refs(*(r.get("source_refs") for r in reasons))
        portfolio = [ref for ref in cited if ref.startswith("get_portfolio_")]
        return {
            "verdict": _trade(record, right, who),
            "verdict_refs": unique_refs((record.get("options") or {}).get("source_refs"), portfolio),
        }
    first = str((reasons[0] if reasons else {}).get("text") or "no reason recorded")
    by = record.get("rejected_by")
    why = f"rejected by the {by} analyst" if by else "rejected"
    return {
        "verdict": f"No {NOUNS[right]} on {who}: {why}: {first.rstrip('.')}.",
        "verdict_refs": unique_refs(reasons[0].get("source_refs")) if reasons else [],
    }
