"""The csp plan's report: its "Cash-secured put" Markdown section (docs/design.md, "CSP
output"), written from the JSON of its result part as every other report section is written
from the JSON report (``pipeline.report``)."""

from __future__ import annotations

from typing import Any

from pipeline.report import _fmt, _pct, _refs


def _neg(value: Any) -> Any:
    return -value if isinstance(value, int | float) else value


def fill_rows(rows: list[dict[str, Any]]) -> list[str]:
    """The alternatives' table of a record ranked at a realistic fill: one row per put (prices USD
    per share, net premium USD per contract after fees, ROC in %, time decay USD a day per contract,
    the ±1σ move to expiry against the strike's distance below the spot, USD)."""
    lines = [
        "| contract | expiry | strike | DTE | bid / ask | spread | OI | delta | IV | fill | net premium "
        "| net weekly ROC | decay/day | ±1σ move vs distance |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['contract']} | {r['expiry']} | {_fmt(r['strike'])} | {r['dte']} | {_fmt(r['bid'])} / "
            f"{_fmt(r['ask'])} | {_pct(r.get('spread_pct'), 1)} | {_fmt(r.get('open_interest'))} | "
            f"{_fmt(r.get('delta'))} | {_pct(r.get('iv'), 1)} | {_fmt(r.get('fill'))} | "
            f"{_fmt(r.get('net_premium'))} | {_pct(r.get('net_weekly_roc'))} | "
            f"{_fmt(_neg(r.get('theta_per_contract')))} | {_fmt(r.get('expected_move'))} vs "
            f"{_fmt(r.get('strike_distance'))} |"
        )
    return lines


def contract_rows(rows: list[dict[str, Any]]) -> list[str]:
    """The alternatives' table: one row per put (prices USD per share, premium and collateral
    USD per contract, IV/POP/ROC in %)."""
    if rows and all(r.get("fill") is not None for r in rows):
        return fill_rows(rows)
    lines = [
        "| contract | expiry | strike | DTE | bid / ask / mid | delta | IV | POP | breakeven | premium "
        "| collateral | weekly ROC | annualised ROC |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['contract']} | {r['expiry']} | {_fmt(r['strike'])} | {r['dte']} | {_fmt(r['bid'])} / "
            f"{_fmt(r['ask'])} / {_fmt(r['mid'])} | {_fmt(r.get('delta'))} | {_pct(r.get('iv'), 1)} | "
            f"{_pct(r.get('pop'), 1)} | {_fmt(r.get('breakeven'))} | {_fmt(r.get('premium'))} | "
            f"{_fmt(r.get('collateral'))} | {_pct(r.get('weekly_roc'))} | "
            f"{_pct(r.get('annualized_roc'), 1)} |"
        )
    return lines


def authors(csp: dict[str, Any]) -> list[str]:
    """Which author decided each analyst's step (``decided_by`` of an LLM-session run) and, for
    every step whose model was asked, why it was not followed (its record's ``error``) and the
    statements grounding dropped."""
    decided = csp.get("decided_by")
    if not decided:
        return []
    records = {step: (csp.get(step) or {}).get("llm") or {} for step in decided}
    parts = [
        f"{step}: {who}"
        + (f" ({records[step].get('model')})" if who == "llm" and records[step].get("model") else "")
        for step, who in decided.items()
    ]
    lines = [f"- Decided by: {', '.join(parts)}."]
    for step, llm in records.items():
        if llm.get("error") and llm.get("source") != "skipped":
            lines.append(f"- {step.capitalize()} analyst LLM not followed: {llm['error']}")
        dropped = (llm.get("grounding") or {}).get("dropped") or []
        if dropped:
            lines.append(
                f"- Dropped from the {step} analyst (numbers matching no cited tool output): "
                + "; ".join(f"{d['text']!r} ({', '.join(d['numbers'])})" for d in dropped)
            )
    return [*lines, ""]


def section(csp: dict[str, Any] | None) -> list[str]:
    """The "Cash-secured put" section (docs/design.md, "CSP output") of a record (the JSON of a
    :class:`~core.parts.CspResult`, ``None``: no section): the suggested contract and up to 3
    alternatives, or which analyst rejected and why; every reason with its citations. Prices
    USD per share, premium and collateral USD per contract (100 shares), IV/POP/ROC in %."""
    if not csp:
        return []
    lines = ["## Cash-secured put", ""]
    options = csp.get("options") or {}
    lines += authors(csp)
    if csp.get("status") == "suggested":
        s = csp["suggestion"]
        lines += [
            f"**Sell {(csp.get('sizing') or {}).get('contracts') or 1} {s['contract']}**: put, "
            f"strike {_fmt(s['strike'])}, expiry {s['expiry']} "
            f"({s['dte']} DTE) {_refs(csp['options'].get('source_refs'))}",
            "",
            "| field | value |",
            "|---|---|",
            f"| bid / ask / mid | {_fmt(s['bid'])} / {_fmt(s['ask'])} / {_fmt(s['mid'])} |",
            f"| delta (BSM at the IV) | {_fmt(s.get('delta'))} |",
            f"| IV (from the mid) | {_pct(s.get('iv'), 1)} |",
            f"| IV/HV (at the money) | {_fmt(s.get('iv_hv_ratio'))} (HV {_pct(s.get('hv'), 1)}) |",
            f"| probability of profit | {_pct(s.get('pop'), 1)} |",
            f"| breakeven | {_fmt(s.get('breakeven'))} |",
            f"| premium (per contract) | {_fmt(s.get('premium'))} USD |",
            f"| collateral (per contract) | {_fmt(s.get('collateral'))} USD |",
            f"| ROC weekly / annualised | {_pct(s.get('weekly_roc'))} / {_pct(s.get('annualized_roc'), 1)} |",
            f"| spread, volume, open interest | {_pct(s.get('spread_pct'), 1)}, {_fmt(s.get('volume'))}, "
            f"{_fmt(s.get('open_interest'))} |",
        ]
        if s.get("fill") is not None:  # records ranked at a realistic fill (older ones have none)
            lines += [
                f"| fill (sold at) / net premium | {_fmt(s['fill'])} / {_fmt(s.get('net_premium'))} USD "
                f"(after fees) |",
                f"| net ROC weekly / annualised | {_pct(s.get('net_weekly_roc'))} / "
                f"{_pct(s.get('net_annualized_roc'), 1)} |",
                # theta is the holder's daily loss; the seller earns it
                f"| time decay earned a day (−theta, per contract) | "
                f"{_fmt(_neg(s.get('theta_per_contract')))} USD |",
                f"| expected move to expiry (±1σ) vs strike distance | ±{_fmt(s.get('expected_move'))} vs "
                f"{_fmt(s.get('strike_distance'))} ({_fmt(s.get('distance_sigma'))}σ) |",
            ]
        if s.get("source_iv") is not None:
            lines.append(
                f"| chain's own IV / delta (difference) | {_fmt(s.get('source_iv'))} / "
                f"{_fmt(s.get('source_delta'))} "
                f"({_fmt(s.get('iv_diff'))} / {_fmt(s.get('delta_diff'))}) |"
            )
        lines.append("")
        if csp.get("alternatives"):
            lines += ["Alternatives:", "", *contract_rows(csp["alternatives"]), ""]
    else:
        lines += [f"**Rejected by the {csp.get('rejected_by')} analyst.**", ""]
    lines.append("Reasons:" if csp.get("status") == "suggested" else "Rejection reasons:")
    lines.append("")
    lines += [f"- {r['text']} {_refs(r.get('source_refs'))}" for r in csp.get("reasons") or []]
    lines.append("")
    scale = options.get("price_scale") or {}
    if scale.get("factor") not in (None, 1.0):
        lines += [
            f"Units: the chain's underlying is {_fmt(scale.get('chain_underlying'))} and the bars' close "
            f"{_fmt(scale.get('bars_close'))}; {scale.get('note')} (factor {_fmt(scale.get('factor'))}).",
            "",
        ]
    misses = options.get("nearest_misses") or []
    if csp.get("status") != "suggested" and misses:
        lines += ["Nearest misses (rules failed):", ""]
        lines += [
            f"- {m['contract']} strike {_fmt(m['strike'])}, {m['dte']} DTE, delta {_fmt(m.get('delta'))}, "
            f"weekly ROC {_pct(m.get('weekly_roc'))}, spread {_pct(m.get('spread_pct'), 1)}, volume "
            f"{_fmt(m.get('volume'))}, OI {_fmt(m.get('open_interest'))}: {', '.join(m.get('failed') or [])}"
            for m in misses
        ]
        lines.append("")
    return lines
