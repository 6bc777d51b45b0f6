"""The printout of a walk-forward risk evaluation (:func:`apps.risk_eval.summarise`): the
targets, then one section per horizon, as Markdown (percentages to one decimal, 95 % intervals
clustered by date in brackets). Split from :mod:`apps.risk_eval`, which computes the summary."""

from __future__ import annotations

import math
from typing import Any


def _pct(value: float | None, digits: int = 1) -> str:
    return (
        "–"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else f"{100 * value:.{digits}f}"
    )


def _interval(block: dict[str, Any] | None, digits: int = 1) -> str:
    if not block or block.get("pooled") is None:
        return "–"
    ci = "" if block.get("low") is None else f" [{_pct(block['low'], digits)}, {_pct(block['high'], digits)}]"
    return f"{_pct(block['pooled'], digits)}{ci}"


def _horizon_markdown(h: str, b: dict[str, Any]) -> list[str]:
    """The section of horizon ``h`` (sessions, as a string) of :func:`summarise`'s ``b``: the VaR
    exceptions with the Kupiec and Christoffersen tests, the ranges' coverage by earnings, the PIT
    histogram, the variance losses against HV20 and EWMA, and the price levels' probabilities."""
    lines: list[str] = []
    lines += [
        "",
        f"## {h} session{'s' if h != '1' else ''} ({b['rows']:,} forecasts, {b['names']} names, "
        f"{b['dates']} dates {b['first']} .. {b['last']}; Newey–West lags {b['lags']})",
        "",
    ]
    lines += [
        "| VaR | exceptions % [CI] | expected | Kupiec pooled p | names passing Kupiec "
        "| names passing Christoffersen |",
        "|---|---|---|---|---|---|",
    ]
    for level, v in b["var"].items():
        if v["names"]:
            per_name = (
                f"{_pct(v['kupiec_pass_share'], 0)} % of {v['names']} | "
                f"{_pct(v['christoffersen_pass_share'], 0)} % |"
            )
        else:
            per_name = "n/a: under 20 non-overlapping windows a name | n/a |"
        lines.append(
            f"| {level} % | {_interval(v, 2)} | {_pct(v['expected'])} | "
            f"{v['kupiec_pooled_p']:.3g} | {per_name}"
        )
    if b["var"]["95"]["names"]:
        every = "every origin" if h == "1" else f"one origin in {h} (non-overlapping windows)"
        lines.append(f"\nPer-name tests on {every}.")
    be = b["ranges_by_earnings"]
    lines += [
        "",
        "| range | all % [CI] | spanning a report | no report | no calendar |",
        "|---|---|---|---|---|",
    ]
    for level in ("50", "80", "95"):
        cells = [
            _interval((be[key] or {}).get(level)) if be[key] else "–"
            for key in ("spans_a_report", "no_report", "no_calendar")
        ]
        lines.append(f"| {level} % | {_interval(b['ranges'][level])} | " + " | ".join(cells) + " |")
    rows_e = be["rows"]
    lines.append(
        f"\nRows: {rows_e['spans_a_report']:,} spanning a report, {rows_e['no_report']:,} without, "
        f"{rows_e['no_calendar']:,} of names without calendar."
    )
    pit = b["pit"]
    shares = " ".join(_pct(x["share"], 1) for x in pit["bins"])
    lines += [
        "",
        f"PIT histogram (% per tenth, 10 each if calibrated): {shares}; χ² = {pit['chi2']:.1f} "
        f"(p = {pit['chi2_p']:.2g}, treats stock-days as independent), KS = {pit['ks']:.3f}.",
    ]
    v = b["variance"]
    q, m = v["qlike"], v["mse"]
    lines += [
        "",
        "| σ² loss | model | HV20 | EWMA | model vs HV20 | DM t | model vs EWMA | DM t |",
        "|---|---|---|---|---|---|---|---|",
        f"| QLIKE | {q['model']:.4f} | {q['hv20']:.4f} | {q['ewma']:.4f} | {_pct(q['vs_hv20'])} % | "
        f"{q['dm_t_hv20']:.2f} | {_pct(q['vs_ewma'])} % | {q['dm_t_ewma']:.2f} |",
        f"| MSE ×1e6 | {m['model'] * 1e6:.4g} | {m['hv20'] * 1e6:.4g} | {m['ewma'] * 1e6:.4g} | "
        f"{_pct(m['vs_hv20'])} % | {m['dm_t_hv20']:.2f} | {_pct(m['vs_ewma'])} % | "
        f"{m['dm_t_ewma']:.2f} |",
    ]
    if b["levels"]:
        lines += [
            "",
            "| level | P(below): mean p / observed / ECE | P(touch, closes): mean p / observed / ECE | "
            "touched intraday |",
            "|---|---|---|---|",
        ]
        for lv in b["levels"].values():
            bl, tc = lv["below"], lv["touch"]
            lines.append(
                f"| {lv['label']} | {_pct(bl['mean_p'])} / {_pct(bl['observed'])} / {bl['ece']:.3f} | "
                f"{_pct(tc['mean_p'])} / {_pct(tc['observed'])} / {tc['ece']:.3f} | "
                f"{_pct(lv['touch_intraday_observed'])} |"
            )
    return lines


def markdown(summary: dict[str, Any]) -> str:
    """The printout of :func:`summarise`: targets, then one section per horizon."""
    p = summary["period"]
    lines = [
        f"# Risk forecasts, walk-forward {p['from']} .. {p['to']}",
        "",
        f"Model: {summary['model']['label']} ({summary['model']['version']}). "
        f"{summary['scored_symbols']} of {summary['symbols']} names scored; {summary['scoring']}.",
    ]
    if summary["reserved"]:
        lines += ["", "**This period overlaps the reserved hold-out (2016-01-01 .. 2017-09-01).**"]
    if summary["skipped"]:
        lines += ["", "Skipped: " + "; ".join(f"{k}: {v}" for k, v in summary["skipped"].items())]
    nc = summary["earnings_calendar"]["not_covered"]
    lines += ["", f"No earnings calendar coverage ({len(nc)} names): {', '.join(nc) or 'none'}."]
    if summary.get("targets"):
        lines += [
            "",
            "## Targets",
            "",
            "| target | wanted | result % [95 % CI, by date] | met |",
            "|---|---|---|---|",
        ]
        for t in summary["targets"]:
            ci = "" if t["low"] is None else f" [{_pct(t['low'], 2)}, {_pct(t['high'], 2)}]"
            lines.append(
                f"| {t['name']} | {t['target']} | {_pct(t['value'], 2)}{ci} | {'yes' if t['met'] else 'NO'} |"
            )
    for h, b in summary["horizons"].items():
        lines += _horizon_markdown(h, b)
    basel = summary.get("basel")
    if basel and basel["blocks"]:
        z, e = basel["shares"], basel["expected_shares"]
        lines += [
            "",
            f"## Basel traffic light (99 % 1-day VaR, blocks of {basel['window']} sessions per name)",
            "",
            f"{basel['blocks']} blocks: green {_pct(z['green'])} %, yellow {_pct(z['yellow'])} %, red "
            f"{_pct(z['red'])} % (a right VaR gives {_pct(e['green'])} / {_pct(e['yellow'])} / "
            f"{_pct(e['red'], 2)} %).",
        ]
    return "\n".join(lines) + "\n"
