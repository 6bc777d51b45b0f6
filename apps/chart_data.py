"""The chart of a finished analysis as data (``GET /console/analyses/{id}/chart.json``), for the
web console's interactive chart: the same bars and layers the PNG draws
(``agents.tools.chart.chart_layers`` with the arguments of
``apps.analysis_chart.chart_arguments``, which ``render_analysis_chart`` renders), plus
what the report holds that a person reads on a price axis: the stop, the option plan's strike
and breakeven, earnings dates and, when the report carries them, forecast price ranges.

Nothing is logged as a tool call: this reads the analysis's cited ``get_history`` result, as
the PNG's render does, and computes the same layers again (milliseconds); the PNG stays what
Markdown reports and digests link to.
"""

from __future__ import annotations

import math
from datetime import date
from typing import Any, Final

import pandas as pd

from agents.data.routing import get_provider
from agents.tools.bars import iso_dates
from agents.tools.chart import RenderInput, chart_layers, option_cone_ends
from agents.tools.registry import ToolContext
from apps.analysis_chart import chart_arguments
from core.display import percent, signed_percent
from core.settings import Settings
from db import repo
from db.engine import get_engine

#: The units every price of the chart data is in.
UNITS: Final = "USD per share, split- and dividend-adjusted to the prices traded on the last bar"


def _price(value: Any) -> float | None:
    """A positive finite price, else ``None`` (a report's missing or null figure)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number > 0 else None


#: The horizon (sessions) whose forecast ranges the chart draws when a report has several: the
#: signal's horizon; else the nearest one.
BAND_HORIZON: Final = 20


def _band(item: Any, *, horizon: Any = None) -> dict[str, Any] | None:
    if not isinstance(item, dict):
        return None
    low, high = _price(item.get("low")), _price(item.get("high"))
    if low is None or high is None or low > high:
        return None
    horizon = item.get("horizon", horizon)
    level = item.get("level", item.get("probability"))
    label = item.get("label") or " ".join(
        part
        for part in (
            percent(level, digits=0) if isinstance(level, int | float) else "",
            "range",
            f"{horizon}d" if horizon is not None else "",
        )
        if part
    )
    return {"label": str(label), "low": low, "high": high, "horizon": horizon}


def risk_bands(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Forecast price ranges of a report as bands ``[{label, low, high, horizon}]`` (USD,
    ``horizon`` in sessions or ``None``), from the report's ``risk`` section when it has one:
    ``ranges`` (a list of ``{low, high}`` with an optional ``label``, ``horizon`` and ``level``,
    a fraction such as 0.9), or ``horizons`` (a list of ``{horizon, ranges: [{probability,
    low, high}]}``, a risk forecast per horizon: the ranges of :data:`BAND_HORIZON`, else of the
    nearest horizon, are drawn); ``[]`` otherwise. Malformed entries are skipped: the chart
    draws what it can read and says nothing it cannot."""
    risk = report.get("risk")
    if not isinstance(risk, dict):
        return []
    bands: list[dict[str, Any]] = []
    ranges = risk.get("ranges")
    for item in ranges if isinstance(ranges, list) else []:
        if (band := _band(item)) is not None:
            bands.append(band)
    horizons = risk.get("horizons")
    forecasts = [h for h in (horizons if isinstance(horizons, list) else []) if isinstance(h, dict)]
    known = [h for h in forecasts if isinstance(h.get("horizon"), int)]
    if known:
        chosen = min(known, key=lambda h: (abs(h["horizon"] - BAND_HORIZON), h["horizon"]))
        for item in chosen.get("ranges") or []:
            if (band := _band(item, horizon=chosen["horizon"])) is not None:
                bands.append(band)
    return bands


def earnings_marks(report: dict[str, Any], *, first: str, last: str) -> dict[str, Any]:
    """The earnings dates of a report's ``earnings`` section against the drawn bars' span
    ``first``..``last`` (ISO dates): ``{marks: [{date, label}], next: {date, days_until} |
    None}``: ``marks`` the reported dates inside the span (each with its EPS surprise when
    known, a fraction), ``next`` the next scheduled date (after the last bar, so not on the
    time axis)."""
    found = report.get("earnings")
    earnings: dict[str, Any] = found if isinstance(found, dict) else {}
    marks = []
    for item in earnings.get("recent") or []:
        day = str(item.get("date") or "")
        if first <= day <= last:
            surprise = item.get("surprise")
            label = "Earnings"
            if isinstance(surprise, int | float):
                label += f" (surprise {signed_percent(surprise, digits=1)})"
            marks.append({"date": day, "label": label})
    upcoming = earnings.get("next") if isinstance(earnings.get("next"), dict) else None
    nxt = (
        {"date": str(upcoming["date"]), "days_until": upcoming.get("days_until")}
        if upcoming and upcoming.get("date")
        else None
    )
    return {"marks": sorted(marks, key=lambda m: m["date"]), "next": nxt}


def analysis_chart_data(*, analysis_id: str, settings: Settings) -> dict[str, Any]:
    """The chart of finished analysis ``analysis_id`` as JSON-ready data:

    ``{symbol, as_of, analysis_type, units, history_ref, bars: [{time, open, high, low, close,
    volume}], levels: [{kind, label, price}], zones: [{kind, low, high}], trendlines: [{type,
    start: {date, price}, end: {date, price}}], window_start, bands: [...], option, earnings:
    {marks, next}}``: ``time`` an ISO date; prices USD (:data:`UNITS`); ``kind`` one of ``support``,
    ``resistance``, ``fib``, ``stop`` (the report's stop loss), ``mark`` (the plan's, e.g.
    ``CSP strike`` and ``breakeven``); ``bands`` from :func:`risk_bands`, plus an option plan's
    ±1σ cone at its expiry (``agents.tools.chart.option_cone_ends``, as the PNG draws it);
    ``option`` ``{expiry, events: [{date, label}]}`` of an option plan, else ``None``;
    ``earnings`` from :func:`earnings_marks`.

    Raises ``KeyError`` for an unknown analysis or one without price history (the caller
    checks tenancy and that it is finished), ``ToolInputError`` when the cited history cannot
    be read."""
    engine = get_engine(settings.service.effective_database_url)
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    if row is None:
        raise KeyError(f"no analysis {analysis_id}")
    state = row.get("state") or {}
    report = row.get("report_json") or {}
    arguments = chart_arguments(row)
    ctx = ToolContext(
        settings=settings,
        as_of=date.fromisoformat(str(state["as_of"])),
        provider=get_provider(settings=settings),
        analysis_id=analysis_id,
        symbol=row["symbol"],
        stage="chart",
        iteration=int(state.get("iteration") or 0),
        load_result=lambda ref: repo.get_tool_result(
            engine=engine, tool_call_id=ref, analysis_id=analysis_id
        ),
    )
    params = RenderInput.model_validate(arguments)
    layers = chart_layers(params, ctx)
    frame = layers.drawn
    days = iso_dates(frame.index)
    bars = [
        {
            "time": day,
            "open": round(float(o), 4),
            "high": round(float(h), 4),
            "low": round(float(lo), 4),
            "close": round(float(c), 4),
            "volume": int(v) if v == v else None,  # NaN volume: unknown
        }
        for day, o, h, lo, c, v in zip(
            days, frame["open"], frame["high"], frame["low"], frame["close"], frame["volume"], strict=True
        )
    ]
    levels = [{"kind": "support", "label": "Support", "price": float(p)} for p in layers.support]
    levels += [{"kind": "resistance", "label": "Resistance", "price": float(p)} for p in layers.resistance]
    levels += [{"kind": "fib", "label": f"Fib {k}", "price": float(p)} for k, p in layers.fibs.items()]
    stop = _price((report.get("stop_loss") or {}).get("value"))
    if stop is not None:
        levels.append({"kind": "stop", "label": "Stop", "price": stop})
    levels += [{"kind": "mark", "label": k, "price": float(p)} for k, p in layers.marks.items()]
    bands = risk_bands(report)
    option = None
    if params.option is not None:  # an option plan: the ±1σ cone's ends at expiry, its days
        low, high = option_cone_ends(params.option, pd.DatetimeIndex(frame.index))
        bands.append({"label": f"±1σ by expiry {params.option.expiry}", "low": round(low, 4),
                      "high": round(high, 4), "horizon": None})  # fmt: skip
        option = {
            "expiry": params.option.expiry,
            "events": [{"date": e.date, "label": e.label} for e in params.option.events],
        }
    window_start = (
        layers.window["start"] if layers.window and len(layers.drawn) > len(layers.level_bars) else None
    )
    return {
        "symbol": row["symbol"],
        "as_of": str(state["as_of"]),
        "analysis_type": state.get("analysis_type") or "composite",
        "units": UNITS,
        "history_ref": arguments["history_ref"],
        "bars": bars,
        "levels": levels,
        "zones": [
            {"kind": z["kind"], "low": float(z["low"]), "high": float(z["high"])} for z in layers.zones
        ],
        "trendlines": [{k: line[k] for k in ("type", "start", "end")} for line in layers.lines],
        "window_start": window_start,
        "bands": bands,
        "option": option,
        "earnings": earnings_marks(report, first=days[0], last=days[-1])
        if days
        else {"marks": [], "next": None},
    }
