"""The put credit spread's headline and Markdown section, from the JSON of its record."""

from __future__ import annotations

from typing import Any

from pipeline.plans.option.report import across, authors
from pipeline.report_format import fmt, money, pct, refs

SECTION = "Put credit spread"


def _pair(rn: Any, rw: Any) -> str:
    return f"{pct(rn, 1)} / {pct(rw, 1)}"


def what_to_sell(record: dict[str, Any]) -> str:
    """``"3 GOOG160115P00725000 / GOOG160115P00700000"``, or with a ladder ``"4 spreads across 2
    strike pairs: 2 × A / B, 2 × C / B"``."""
    sizing = record.get("sizing") or {}
    s = record.get("spread") or {}
    rungs = sizing.get("rungs") or []
    n = sizing.get("contracts") or 1
    if len(rungs) > 1:
        return f"{n} spreads {across(rungs, ('strike', 'long_strike'))}: " + ", ".join(
            f"{r['contracts']} × {r['contract']} / {r['long_contract']}" for r in rungs
        )
    return f"{n} {s.get('short')} / {s.get('long')}"


def totals(record: dict[str, Any]) -> str:
    """The whole position's figures when it holds more than one spread, as the sizing table
    states them: ``"credit 563.50 USD, max loss 4,436.50 USD and margin 5,000.00 USD in all"``;
    ``""`` for one spread or before sizing."""
    sizing = record.get("sizing") or {}
    if (sizing.get("contracts") or 0) > 1 and sizing.get("net_premium") is not None:
        return (
            f"credit {money(sizing['net_premium'])} USD, max loss {money(sizing.get('max_loss'))} USD "
            f"and margin {money(sizing.get('collateral'))} USD in all"
        )
    return ""


def _first(record: dict[str, Any]) -> str:
    """``"the first rung, "`` before a ladder's first spread, ``"each, "`` before the spread of a
    position of several alike, ``""`` for one spread."""
    if not totals(record):
        return ""
    return "the first rung, " if len((record.get("sizing") or {}).get("rungs") or []) > 1 else "each, "


def headline(record: dict[str, Any] | None) -> str | None:
    """``**Put credit spread: sell N short / long**`` with the whole position when it holds more
    than one spread (credit, max loss and margin in all, as the sizing table states them), then
    the spread's (a ladder's first rung's) strikes, expiry, credit, width, max loss, return on
    risk and POP; or ``**No put credit spread**: rejected by ...: <first reason>``. Money to
    cents, every figure the one the section prints."""
    if not record or not record.get("status"):
        return None
    if record["status"] == "rejected":
        first = (record.get("reasons") or [{}])[0].get("text", "")
        by = record.get("rejected_by")
        return f"**No put credit spread**: rejected by the {by} analyst: {first} (see {SECTION})."
    s = record.get("spread") or {}
    whole = totals(record)
    line = f"**{SECTION}: sell {what_to_sell(record)}**: " + (f"{whole}; " if whole else "")
    return (
        line
        + _first(record)
        + (
            f"the {money(s.get('short_strike'))} / {money(s.get('long_strike'))} spread, last trading day "
            f"{s.get('last_trading_day')} ({s.get('dte')} DTE), credit {money(s.get('credit'))} USD on a "
            f"width of {money(s.get('width'))}, max loss {money(s.get('max_loss'))} USD a spread: "
            f"{pct(s.get('return_on_risk'))} on the risk in {s.get('dte')} days; POP "
            f"{pct(s.get('pop_rn'), 1)} (risk-neutral) / {pct(s.get('pop_rw'), 1)} (real-world) "
            f"(see {SECTION})."
        )
    )


def _sizing_lines(record: dict[str, Any], width: Any) -> list[str]:
    """Size and risk (one spread, the first rung's, and in all), then the ladder's rungs."""
    sizing = record.get("sizing") or {}
    one = sizing.get("per_contract") or {}
    if not sizing.get("rungs"):
        return []
    s = record.get("spread") or {}
    lines = [
        "Size and risk:",
        "",
        f"| | per spread ({s.get('short')} / {s.get('long')}) | in all |",
        "|---|---|---|",
        f"| spreads | 1 | {fmt(sizing.get('contracts'))} |",
        f"| credit | {money(s.get('credit'))} | {money(sizing.get('net_premium'))} |",
        f"| margin (width × 100) | {money(float(width) * 100)} | {money(sizing.get('collateral'))} |",
        f"| max loss | {money(one.get('max_loss'))} | {money(sizing.get('max_loss'))} |",
        f"| P&L on a −2σ move | {money(one.get('pnl_down_2sigma'))} | "
        f"{money(sizing.get('pnl_down_2sigma'))} |",
        f"| P&L on a −20 % gap | {money(one.get('pnl_gap'))} | {money(sizing.get('pnl_gap'))} |",
        "",
    ]
    if len(sizing["rungs"]) > 1:
        lines += [
            "Ladder:",
            "",
            "| spreads | short / long | strikes | expiry | credit | margin | max loss |",
            "|---|---|---|---|---|---|---|",
            *(
                f"| {r['contracts']} | {r['contract']} / {r.get('long_contract')} | {money(r['strike'])} / "
                f"{money(r.get('long_strike'))} | {r['expiry']} | {money(r['net_premium'])} | "
                f"{money(r['collateral'])} | {money(r['max_loss'])} |"
                for r in sizing["rungs"]
            ),
            "",
        ]
    return lines


def section(record: dict[str, Any] | None) -> list[str]:
    """The section: the spread (both legs, credit, width, max loss, yields, probabilities), size
    and risk with its ladder, the alternatives, every reason with its citations."""
    if not record:
        return []
    lines = [f"## {SECTION}", "", *authors(record)]
    options = record.get("options") or {}
    s = record.get("spread")
    if record.get("status") == "suggested" and s:
        cited = [*(options.get("source_refs") or []), *(options.get("spread_refs") or [])]
        rows = [
            ("sell / buy", f"{s['short']} at {money(s['short_fill'])} / {s['long']} at "
            f"{money(s['long_fill'])}"),
            ("strikes / width", f"{money(s['short_strike'])} / {money(s['long_strike'])} / "
            f"{money(s['width'])}"),
            ("credit / income (USD a spread)", f"{money(s['credit'])} / {money(s['income'])}"),
            ("max loss (USD a spread) / return on risk", f"{money(s['max_loss'])} / "
            f"{pct(s.get('return_on_risk'))}"),
            ("income yield a year on the max loss / T-bill", f"{pct(s.get('excess_yield'))} / "
            f"{pct(s.get('tbill_yield'))}"),
            ("breakeven at expiry", money(s.get("breakeven"))),
            ("POP (risk-neutral / real-world)", _pair(s.get("pop_rn"), s.get("pop_rw"))),
            ("P(max loss: below the long strike)", _pair(s.get("p_max_loss_rn"), s.get("p_max_loss_rw"))),
            ("P(touch the short strike)", _pair(s.get("p_touch_short_rn"), s.get("p_touch_short_rw"))),
            ("income per unit of the ±1σ move", f"{fmt(s.get('premium_per_move'))} "
            f"(±{money(s.get('expected_move'))})"),
        ]  # fmt: skip
        lines += [
            # the whole position as the headline states it, then the (first) spread's expiry
            f"**Sell {what_to_sell(record)}**: "
            + (f"{totals(record)}; " if totals(record) else "")
            + _first(record)
            + f"the {money(s['short_strike'])} / {money(s['long_strike'])} spread, expiry {s['expiry']} "
            f"(last trading day {s.get('last_trading_day')}, {s['dte']} DTE) {refs(cited)}",
            "",
            "| field | value |",
            "|---|---|",
            *(f"| {k} | {v} |" for k, v in rows),
            "",
        ]
        lines += _sizing_lines(record, s["width"])
        alts = record.get("alternatives") or []
        if alts:
            lines += [
                "Alternatives:",
                "",
                "| short / long | DTE | credit | max loss | yield over T-bill | POP rn / rw |",
                "|---|---|---|---|---|---|",
                *(
                    f"| {a['short']} / {a['long']} | {a['dte']} | {money(a['credit'])} | "
                    f"{money(a['max_loss'])} | "
                    f"{pct(a.get('excess_yield'), 1)} | {_pair(a.get('pop_rn'), a.get('pop_rw'))} |"
                    for a in alts
                ),
                "",
            ]
        lines += ["Reasons:", ""]
    else:
        lines += [f"**Rejected by the {record.get('rejected_by')} analyst.**", "", "Rejection reasons:", ""]
    lines += [f"- {r['text']} {refs(r.get('source_refs'))}".rstrip() for r in record.get("reasons") or []]
    return [*lines, ""]
