"""The scorecard's risk tables: how the risk forecasts of stored analyses held once their windows
ended, the same tables as the model's backtest (docs/evaluation.md, "Risk").

For every stored report with a ``risk`` object (``pipeline.report_risk.risk_json``) and each of
its horizons h whose window has ended in the data (h bars after ``as_of``), the realised simple
total return of the adjusted close from the ``as_of`` close to the close h sessions later
(:func:`realised_return`, ``apps.scorecard.forward_return``'s close entry: the forecast's
own convention)
is compared with the forecast:

* **ranges**: the share of realised returns inside the 50/80/95 % ranges (``low_return`` ..
  ``high_return``), with a 95 % interval clustered by date (:func:`agents.quant.risk.backtest.
  clustered_rate`, ``h − 1`` Newey–West lags for overlapping windows);
* **VaR exceptions**: the share of returns below ``−var_95`` (``−var_99``), expected 5 % (1 %);
* **where the returns fell**: the share in each of the seven bins the 50/80/95 % ranges cut
  (below the 95 % range, between the 95 % and 80 % lows, …, above the 95 % range), against the
  2.5 / 7.5 / 15 / 50 / 15 / 7.5 / 2.5 % a right forecast gives: a coarse PIT histogram (the
  stored report keeps the ranges, not the whole distribution). :func:`risk_svg` draws it.

A few dozen analyses give wide intervals; the tables print the count of rows and dates beside
each rate.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any, Final

import numpy as np
import pandas as pd

from core.display import rate_interval

#: The seven bins the 50/80/95 % ranges cut, and the share a right forecast puts in each.
BIN_LABELS: Final = ("< 95 %", "95–80 %", "80–50 %", "inside 50 %", "50–80 %", "80–95 %", "> 95 %")
BIN_EXPECTED: Final = (0.025, 0.075, 0.15, 0.5, 0.15, 0.075, 0.025)
PERCENTS: Final = ("50", "80", "95")


def _band(h: dict[str, Any], percent: str) -> dict[str, Any]:
    return next(r for r in h["ranges"] if round(float(r["probability"]) * 100) == int(percent))


def realised_return(closes: pd.Series, *, as_of: Any, horizon: int) -> float | None:
    """The simple return from the close of the last bar on or before ``as_of`` to the close
    ``horizon`` bars later (``closes``: adjusted closes, ascending ``DatetimeIndex``); ``None``
    while the data holds fewer bars after it (``apps.scorecard.forward_return``'s close
    entry)."""
    position = int(closes.index.searchsorted(pd.Timestamp(as_of), side="right")) - 1
    if position < 0 or position + horizon >= len(closes):
        return None
    return float(closes.iloc[position + horizon]) / float(closes.iloc[position]) - 1.0


def risk_rows(
    entries: dict[str, dict[str, Any]], closes_of: Callable[[str], pd.Series | None]
) -> pd.DataFrame:
    """One row per (analysis, horizon) whose window has ended: ``analysis_id, symbol, as_of,
    horizon, realised, in_50, in_80, in_95, exc_95, exc_99, bin`` (``bin`` 0..6 in
    :data:`BIN_LABELS`). ``entries``: :func:`db.backtest_repo.report_risks`; ``closes_of``: a
    symbol's adjusted closes (``apps.scorecard.PriceBook.closes``). Reports whose risk object
    cannot be read are skipped."""
    rows: list[dict[str, Any]] = []
    for analysis_id, entry in entries.items():
        closes = closes_of(entry["symbol"])
        if closes is None:
            continue
        as_of = pd.Timestamp(entry["as_of"]).date()
        for h in entry["risk"].get("horizons") or []:
            try:
                horizon = int(h["horizon"])
                bands = {p: _band(h, p) for p in PERCENTS}
                var_95, var_99 = float(h["var_95"]), float(h["var_99"])
            except (KeyError, TypeError, ValueError, StopIteration):
                continue
            ret = realised_return(closes, as_of=as_of, horizon=horizon)
            if ret is None or not np.isfinite(ret):
                continue
            cuts = [bands[p]["low_return"] for p in ("95", "80", "50")]
            cuts += [bands[p]["high_return"] for p in ("50", "80", "95")]
            row = {"analysis_id": analysis_id, "symbol": entry["symbol"], "as_of": as_of, "horizon": horizon}
            row |= {f"in_{p}": bands[p]["low_return"] <= ret <= bands[p]["high_return"] for p in PERCENTS}
            row |= {"realised": ret, "exc_95": ret < -var_95, "exc_99": ret < -var_99}
            row["bin"] = int(np.searchsorted(np.asarray(cuts, dtype=float), ret, side="left"))
            rows.append(row)
    return pd.DataFrame(rows)


def risk_tables(rows: pd.DataFrame) -> dict[str, Any]:
    """Per horizon ``{rows, analyses, dates, first, last, ranges: {"50": rate, ...}, var: {"95":
    rate, "99": rate}, bins: [share, ...], expected: [...]}`` with each rate
    :func:`~agents.quant.risk.backtest.clustered_rate`'s ``{rate, low, high, ...}`` (fractions).
    Empty without rows."""
    from agents.quant.risk.backtest import clustered_rate

    out: dict[str, Any] = {}
    if rows.empty:
        return out
    for h in sorted({int(x) for x in rows["horizon"]}):
        sub = rows[rows["horizon"] == h]
        dates = pd.to_datetime(sub["as_of"]).to_numpy()
        lags = max(h - 1, 0)

        def rate(
            column: str, dates: Any = dates, sub: pd.DataFrame = sub, lags: int = lags
        ) -> dict[str, Any]:
            found = clustered_rate(dates, sub[column].to_numpy(dtype=float), maxlags=lags)
            return {k: found.get(k) for k in ("rate", "low", "high", "n_rows", "n_dates")}

        counts = np.bincount(sub["bin"].to_numpy(dtype=int), minlength=len(BIN_LABELS))
        out[str(h)] = {
            "rows": len(sub),
            "analyses": int(sub["analysis_id"].nunique()),
            "dates": int(sub["as_of"].nunique()),
            "first": str(min(sub["as_of"])),
            "last": str(max(sub["as_of"])),
            "ranges": {p: rate(f"in_{p}") for p in PERCENTS},
            "var": {level: rate(f"exc_{level}") for level in ("95", "99")},
            "bins": (counts / counts.sum()).round(4).tolist(),
            "expected": list(BIN_EXPECTED),
        }
    return dict(sorted(out.items(), key=lambda item: int(item[0])))


def _rate_text(r: dict[str, Any]) -> str:
    if r.get("rate") is None:
        return "n/a"
    return rate_interval(r)


def risk_markdown(tables: dict[str, Any] | None) -> list[str]:
    """The scorecard's "Risk forecasts of stored analyses" section (empty without matured
    windows): per horizon the range coverage, the VaR exceptions and where the returns fell."""
    if not tables:
        return []
    lines = [
        "## Risk forecasts of stored analyses",
        "",
        "How the reports' ranges and VaRs held once their windows ended (95 % intervals clustered by "
        'date; the model\'s own backtest is docs/evaluation.md, "Risk").',
        "",
        "| horizon | windows (analyses, dates) | 50 % range held | 80 % range held | 95 % range held "
        "| VaR(95 %) exceeded (5 % expected) | VaR(99 %) exceeded (1 % expected) |",
        "|---|---|---|---|---|---|---|",
    ]
    for h, t in tables.items():
        lines.append(
            f"| {h} | {t['rows']} ({t['analyses']}, {t['dates']}) | "
            + " | ".join(_rate_text(t["ranges"][p]) for p in PERCENTS)
            + f" | {_rate_text(t['var']['95'])} | {_rate_text(t['var']['99'])} |"
        )
    lines += [
        "",
        "Where the realised returns fell among the ranges (observed share / a right forecast's):",
        "",
    ]
    lines += ["| horizon | " + " | ".join(BIN_LABELS) + " |", "|---|" + "---|" * len(BIN_LABELS)]
    for h, t in tables.items():
        cells = [f"{o * 100:.1f} / {e * 100:.1f} %" for o, e in zip(t["bins"], t["expected"], strict=True)]
        lines.append(f"| {h} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def risk_svg(tables: dict[str, Any] | None) -> str:
    """An inline SVG (no script, no external resource) of the binned PIT histogram per horizon:
    a bar per bin at its observed share, a tick at the share a right forecast gives; ``""``
    without tables. 130 px per horizon."""
    if not tables:
        return ""
    width, left, row_h, bar_w, gap = 640, 70, 130, 60, 10
    height = 30 + row_h * len(tables)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'viewBox="0 0 {width} {height}" aria-labelledby="risk-pit-title">',
        '<title id="risk-pit-title">Where realised returns fell among the forecast ranges, per horizon: '
        "bars observed, ticks expected</title>",
    ]
    for i, (h, t) in enumerate(tables.items()):
        top = 20 + i * row_h
        base = top + 95
        parts.append(f'<text x="4" y="{top + 50}" font-size="12">{html.escape(h)} sessions</text>')
        parts.append(f'<text x="4" y="{top + 66}" font-size="10">{t["rows"]} windows</text>')
        for j, (observed, expected) in enumerate(zip(t["bins"], t["expected"], strict=True)):
            x = left + j * (bar_w + gap)
            bar = min(observed * 140, 95.0)  # a share above 0.68 is drawn at the top
            tick = min(expected * 140, 95.0)
            parts.append(
                f'<rect x="{x}" y="{base - bar:.1f}" width="{bar_w}" height="{bar:.1f}" fill="#3b6ea5">'
                f"<title>{html.escape(BIN_LABELS[j])}: {observed * 100:.1f} % observed, "
                f"{expected * 100:.1f} % expected</title></rect>"
            )
            parts.append(
                f'<line x1="{x - 3}" x2="{x + bar_w + 3}" y1="{base - tick:.1f}" y2="{base - tick:.1f}" '
                'stroke="#b03a2e" stroke-width="2"/>'
            )
            parts.append(
                f'<text x="{x + bar_w / 2}" y="{base + 14}" font-size="10" text-anchor="middle">'
                f"{html.escape(BIN_LABELS[j])}</text>"
            )
    parts.append("</svg>")
    return "".join(parts)


__all__ = ["BIN_EXPECTED", "BIN_LABELS", "risk_markdown", "risk_rows", "risk_svg", "risk_tables"]
