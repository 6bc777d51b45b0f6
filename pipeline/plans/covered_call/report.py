"""The "Covered call" report section (docs/options.md, "Covered calls")."""

from __future__ import annotations

from typing import Any

from pipeline.report import _fmt, _refs


def section(cc: dict[str, Any] | None) -> list[str]:
    """Markdown lines: the suggested call with its numbers and up to 3 alternatives, or the
    rejecting analyst; then every reason with its citations. ``[]`` without a record."""
    if not cc:
        return []
    lines = ["## Covered call", ""]
    pos = cc.get("position") or {}
    if pos.get("cost_basis") is not None:
        lines += [
            f"Shares covered: {pos.get('shares')} at cost basis {_fmt(pos['cost_basis'])} "
            f"({pos.get('source')}).",
            "",
        ]
    s = cc.get("suggestion")
    if cc.get("status") == "suggested" and s:
        refs = (cc.get("options") or {}).get("source_refs") or []
        lines += [f"**Sell {pos.get('contracts', 1)} {s['contract']}**: call, strike {_fmt(s['strike'])}, "
                  f"expiry {s['expiry']} ({s['dte']} DTE) {_refs(refs)}", ""]  # fmt: skip
        rows = [
            ("bid / ask / mid", f"{_fmt(s.get('bid'))} / {_fmt(s.get('ask'))} / {_fmt(s.get('mid'))}"),
            ("delta (BSM at the IV)", _fmt(s.get("delta"))),
            ("IV (from the mid) / IV/HV", f"{_fmt(s.get('iv'))} / {_fmt(s.get('iv_hv_ratio'))}"),
            ("fill (sold at) / net premium",
             f"{_fmt(s.get('fill'))} / {_fmt(s.get('net_premium'))} USD (after fees)"),
            ("net ROC on the shares, weekly / annualised",
             f"{_fmt(s.get('net_weekly_roc'))} / {_fmt(s.get('net_annualized_roc'))}"),
            ("strike above the spot / if called away (per contract)",
             f"{_fmt(s.get('strike_distance'))} / {_fmt(s.get('called_away_return'))} USD"),
            ("spread, volume, open interest",
             f"{_fmt(s.get('spread_pct'))}, {_fmt(s.get('volume'))}, {_fmt(s.get('open_interest'))}"),
        ]  # fmt: skip
        lines += ["| field | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows), ""]
        alts = cc.get("alternatives") or []
        if alts:
            lines += [
                "Alternatives:",
                "",
                "| contract | expiry | strike | DTE | bid / ask | delta | net premium | net weekly ROC |",
                "|---|---|---|---|---|---|---|---|",
            ]
            for a in alts:
                lines.append(
                    f"| {a['contract']} | {a['expiry']} | {_fmt(a['strike'])} | {a['dte']} | "
                    f"{_fmt(a.get('bid'))} / "
                    f"{_fmt(a.get('ask'))} | {_fmt(a.get('delta'))} | {_fmt(a.get('net_premium'))} | "
                    f"{_fmt(a.get('net_weekly_roc'))} |"
                )
            lines.append("")
        lines += ["Reasons:", ""]
    else:
        lines += [f"**Rejected by the {cc.get('rejected_by')} analyst.**", "", "Rejection reasons:", ""]
    for r in cc.get("reasons") or []:
        lines.append(f"- {r['text']} {_refs(r.get('source_refs') or [])}".rstrip())
    lines.append("")
    return lines
