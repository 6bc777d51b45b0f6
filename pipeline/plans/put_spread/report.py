"""The put credit spread's headline and Markdown section, from the JSON of its record."""

from __future__ import annotations

from typing import Any

from pipeline.plans.option.report import authors
from pipeline.report_format import fmt, pct, refs

SECTION = "Put credit spread"


def _pair(rn: Any, rw: Any) -> str:
    return f"{pct(rn, 1)} / {pct(rw, 1)}"


def what_to_sell(record: dict[str, Any]) -> str:
    """``"3 GOOG160115P00725000 / GOOG160115P00700000"``, or the ladder's rungs."""
    sizing = record.get("sizing") or {}
    s = record.get("spread") or {}
    rungs = sizing.get("rungs") or []
    n = sizing.get("contracts") or 1
    if len(rungs) > 1:
        return f"{n} spreads: " + ", ".join(
            f"{r['contracts']} × {r['contract']} / {r['long_contract']}" for r in rungs
        )
    return f"{n} {s.get('short')} / {s.get('long')}"


def headline(record: dict[str, Any] | None) -> str | None:
    """``**Put credit spread: sell N short / long**`` with the credit, max loss, yield and POP, or
    ``**No put credit spread**: rejected by ...: <first reason>``."""
    if not record or not record.get("status"):
        return None
    if record["status"] == "rejected":
        first = (record.get("reasons") or [{}])[0].get("text", "")
        by = record.get("rejected_by")
        return f"**No put credit spread**: rejected by the {by} analyst: {first} (see {SECTION})."
    s = record.get("spread") or {}
    return (
        f"**{SECTION}: sell {what_to_sell(record)}**: last trading day {s.get('last_trading_day')} "
        f"({s.get('dte')} DTE), credit {fmt(s.get('credit'))} USD on a width of {fmt(s.get('width'))}, "
        "max loss "
        f"{fmt(s.get('max_loss'))} USD a spread: {pct(s.get('return_on_risk'), 1)} on the risk in "
        f"{s.get('dte')} "
        f"days; POP {pct(s.get('pop_rn'), 1)} (risk-neutral) / {pct(s.get('pop_rw'), 1)} (real-world) "
        f"(see {SECTION})."
    )


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
            ("sell / buy", f"{s['short']} at {fmt(s['short_fill'])} / {s['long']} at "
            f"{fmt(s['long_fill'])}"),
            ("strikes / width", f"{fmt(s['short_strike'])} / {fmt(s['long_strike'])} / {fmt(s['width'])}"),
            ("credit / income (USD a spread)", f"{fmt(s['credit'])} / {fmt(s['income'])}"),
            ("max loss (USD a spread) / return on risk", f"{fmt(s['max_loss'])} / "
            f"{pct(s.get('return_on_risk'))}"),
            ("income yield a year on the max loss / T-bill", f"{pct(s.get('excess_yield'))} / "
            f"{pct(s.get('tbill_yield'))}"),
            ("breakeven at expiry", fmt(s.get("breakeven"))),
            ("POP (risk-neutral / real-world)", _pair(s.get("pop_rn"), s.get("pop_rw"))),
            ("P(max loss: below the long strike)", _pair(s.get("p_max_loss_rn"), s.get("p_max_loss_rw"))),
            ("P(touch the short strike)", _pair(s.get("p_touch_short_rn"), s.get("p_touch_short_rw"))),
            ("income per unit of the ±1σ move", f"{fmt(s.get('premium_per_move'))} "
            f"(±{fmt(s.get('expected_move'))})"),
        ]  # fmt: skip
        lines += [
            f"**Sell {what_to_sell(record)}**: expiry {s['expiry']} (last trading day "
            f"{s.get('last_trading_day')}, "
            f"{s['dte']} DTE) {refs(cited)}",
            "",
            "| field | value |",
            "|---|---|",
            *(f"| {k} | {v} |" for k, v in rows),
            "",
        ]
        sizing = record.get("sizing") or {}
        one = sizing.get("per_contract") or {}
        if sizing.get("rungs"):
            lines += [
                "Size and risk:",
                "",
                "| | per spread | in all |",
                "|---|---|---|",
                f"| spreads | 1 | {fmt(sizing.get('contracts'))} |",
                f"| margin (width × 100) | {fmt(round(float(s['width']) * 100, 2))} | "
                f"{fmt(sizing.get('collateral'))} |",
                f"| max loss | {fmt(one.get('max_loss'))} | {fmt(sizing.get('max_loss'))} |",
                f"| P&L on a −2σ move | {fmt(one.get('pnl_down_2sigma'))} | "
                f"{fmt(sizing.get('pnl_down_2sigma'))} |",
                f"| P&L on a −20 % gap | {fmt(one.get('pnl_gap'))} | {fmt(sizing.get('pnl_gap'))} |",
                "",
            ]
        alts = record.get("alternatives") or []
        if alts:
            lines += [
                "Alternatives:",
                "",
                "| short / long | DTE | credit | max loss | yield over T-bill | POP rn / rw |",
                "|---|---|---|---|---|---|",
                *(
                    f"| {a['short']} / {a['long']} | {a['dte']} | {fmt(a['credit'])} | "
                    f"{fmt(a['max_loss'])} | "
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
