"""Chart tools (docs/design.md, "Chart tools"): swing points, Fibonacci levels, support and
resistance zones, trendlines, and a candlestick chart rendered with mplfinance.

Every tool reads daily bars either from an earlier ``get_history`` call (``history_ref``; bars
after ``as_of`` are dropped) or, without it, ``period`` of bars from the provider ending at
``ctx.as_of``. Prices are split/dividend-adjusted and expressed in the prices traded on the last
bar (:func:`agents.data.market.base.adjusted_ohlc`), USD, so levels compare with today's price and
a split inside the window is not a false swing. Behaviour and output shapes follow
docs/design.md, "Chart tools"; the definitions of ``calculate_trendline`` and ``render_chart`` are
documented on each function here.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, model_validator

from agents.tools.bars import adjusted_bars, bars_header, iso_dates, period_start
from agents.tools.envelope import ErrorCode
from agents.tools.fields import HistoryRef, Period, Symbol
from agents.tools.history import cited_history
from agents.tools.registry import ToolContext, ToolInputError, ToolOutput, register

#: Fibonacci retracement ratios (docs/design.md, "Fibonacci levels"), label → ratio.
FIB_RATIOS: dict[str, float] = {
    "0%": 0.0,
    "23.6%": 0.236,
    "38.2%": 0.382,
    "50%": 0.5,
    "61.8%": 0.618,
    "78.6%": 0.786,
    "100%": 1.0,
}
_RENDER_LOCK = threading.Lock()  # pyplot state is process-global


def _r(value: float, digits: int = 4) -> float:
    return round(float(value), digits)


class _BarsInput(BaseModel):
    """Where the bars come from: ``history_ref`` (a ``get_history`` call) or ``period``."""

    model_config = ConfigDict(extra="forbid")

    symbol: Symbol = Field(description="Stock ticker, e.g. AAPL")
    history_ref: HistoryRef | None = Field(
        default=None, description="tool_call_id of a get_history call (daily bars)"
    )
    period: Period = Field(default="6mo", description="Bars to load when history_ref is not given")


def load_chart_bars(params: _BarsInput, ctx: ToolContext) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """Adjusted bars (``open, high, low, close, volume``; DatetimeIndex) and the refs they came from.

    Looked up once per context and (symbol, history_ref, period) in ``ctx.memo``: the chart
    tools of one stage share the adjusted frame (callers must not modify it).

    Raises:
        ToolInputError: ``history_ref`` is not a successful ``get_history`` of ``symbol``, or no bars.
    """
    key = f"chart_bars:{params.symbol}:{params.history_ref}:{params.period}"
    if key not in ctx.memo:
        ctx.memo[key] = _load_chart_bars(params, ctx)
    found: tuple[pd.DataFrame, tuple[str, ...]] = ctx.memo[key]
    return found


def _load_chart_bars(params: _BarsInput, ctx: ToolContext) -> tuple[pd.DataFrame, tuple[str, ...]]:
    refs: tuple[str, ...] = ()
    raw: pd.DataFrame | None = None
    if params.history_ref:
        cited = cited_history(ctx, params.history_ref)
        if cited is None or cited.symbol != params.symbol:
            raise ToolInputError(
                f"history_ref {params.history_ref!r} is not a successful get_history call for {params.symbol}"
            )
        if cited.interval != "1d":
            raise ToolInputError("chart tools need daily bars (get_history interval 1d)")
        if cited.bars is None:
            raise ValueError("history result has no bars")
        raw = cited.bars[cited.bars.index <= pd.Timestamp(ctx.as_of)]
        refs = (params.history_ref,)
    return adjusted_bars(raw, symbol=params.symbol, period=params.period, ctx=ctx), refs


def window_bars(bars: pd.DataFrame, period: str, ctx: ToolContext) -> pd.DataFrame:
    """The bars from :func:`agents.tools.bars.period_start` of ``period`` before ``ctx.as_of`` on
    (a longer cited history cut to the stated window); all of them when that leaves fewer than 2."""
    start = period_start(period=period, as_of=ctx.as_of)
    if start is None:  # "max": every bar
        return bars
    cut = bars[bars.index >= pd.Timestamp(start)]
    return cut if len(cut) >= 2 else bars


# --------------------------------------------------------------------------- pure computations


def swing_points(bars: pd.DataFrame, lookback: int = 5) -> list[dict[str, Any]]:
    """Swing points (docs/design.md, "Swing points"): bar ``i`` is a swing high when its high is the max of
    the ``2*lookback+1`` highs centred on it (a swing low likewise with lows); the first and last
    ``lookback`` bars are never swings. A bar can be both. Ordered by index, high before low.

    Returns ``[{type: "high"|"low", price (USD, 4 dp), index (bar position), date (ISO)}]``;
    empty when there are fewer than ``2*lookback+1`` bars.
    """
    n = len(bars)
    if n < 2 * lookback + 1:
        return []
    window = 2 * lookback + 1
    highs = bars["high"].to_numpy(dtype="float64")
    lows = bars["low"].to_numpy(dtype="float64")
    # the centred rolling max/min (pandas' rolling(window, center=True)) as numpy windows:
    # window j spans bars j .. j + 2*lookback, centred on bar j + lookback; a NaN in a window
    # makes its max NaN and the comparison false, as in pandas
    inner = slice(lookback, n - lookback)
    is_high = np.zeros(n, dtype=bool)
    is_low = np.zeros(n, dtype=bool)
    is_high[inner] = np.lib.stride_tricks.sliding_window_view(highs, window).max(axis=1) == highs[inner]
    is_low[inner] = np.lib.stride_tricks.sliding_window_view(lows, window).min(axis=1) == lows[inner]
    dates = iso_dates(bars.index)
    out: list[dict[str, Any]] = []
    for i in np.flatnonzero(is_high | is_low).tolist():
        if is_high[i]:
            out.append({"type": "high", "price": _r(highs[i]), "index": i, "date": dates[i]})
        if is_low[i]:
            out.append({"type": "low", "price": _r(lows[i]), "index": i, "date": dates[i]})
    return out


def fib_levels(swing_high: float, swing_low: float, direction: Literal["up", "down"]) -> dict[str, float]:
    """Fibonacci levels (docs/design.md, "Fibonacci levels"): ``up`` retraces down from the high
    (``high − diff·r``), ``down`` retraces up from the low (``low + diff·r``); USD, 4 dp."""
    diff = swing_high - swing_low
    if direction == "up":
        return {label: _r(swing_high - diff * ratio) for label, ratio in FIB_RATIOS.items()}
    return {label: _r(swing_low + diff * ratio) for label, ratio in FIB_RATIOS.items()}


def major_swing(bars: pd.DataFrame) -> tuple[float, str, float, str, Literal["up", "down"]]:
    """The window's highest high and lowest low with their dates, and the move's direction:
    ``up`` when the low came first (so the retracement is measured down from the high)."""
    hi_at = bars.index[int(bars["high"].to_numpy().argmax())]
    lo_at = bars.index[int(bars["low"].to_numpy().argmin())]
    direction: Literal["up", "down"] = "up" if lo_at <= hi_at else "down"
    return (
        float(bars["high"].max()),
        hi_at.date().isoformat(),
        float(bars["low"].min()),
        lo_at.date().isoformat(),
        direction,
    )


#: Cluster tolerance in ATR(14): swing prices within one average daily range of a level's mean
#: are the same level (a trader's "zone"); 1 % of price (the original rule) is too tight on a volatile
#: stock (AAPL 2012: ATR 10 USD on 584 = 1.8 %) and too wide on a quiet one.
CLUSTER_ATR = 1.0
#: Recency half-life of a touch, in bars: a touch half a year (126 trading days) old counts half.
RECENCY_HALF_LIFE = 126
#: Proximity scale, in ATR(14): a level 10 ATR away from the close scores half as much as one at it.
PROXIMITY_ATR = 10.0


def atr_wilder(bars: pd.DataFrame, period: int = 14) -> float:
    """ATR(period) at the last bar: Wilder's smoothing (EWM with alpha 1/period) of the true range
    max(high − low, |high − previous close|, |low − previous close|) (Wilder 1978); the mean true
    range when there are fewer than ``period`` + 1 bars. USD."""
    high = bars["high"].to_numpy(dtype="float64")
    low = bars["low"].to_numpy(dtype="float64")
    prev = np.concatenate(([np.nan], bars["close"].to_numpy(dtype="float64")[:-1]))
    # NaN-skipping max of the three, as pandas' max(axis=1): the first bar's is high − low
    with np.errstate(invalid="ignore"):
        true_range = pd.Series(np.fmax(np.fmax(high - low, np.abs(high - prev)), np.abs(low - prev)))
    if len(bars) <= period:
        return float(true_range.mean())
    return float(true_range.ewm(alpha=1.0 / period, adjust=False).mean().iloc[-1])


def support_resistance(bars: pd.DataFrame, num_levels: int = 5) -> dict[str, Any]:
    """Support and resistance levels a trader would draw (our method,
    docs/design.md, "Support and resistance"; a 1 % touch count ranked year-old lows above nearby
    ones):

    1. Candidates: swing highs and lows (:func:`swing_points`, lookback 5) plus the window's
       highest high and lowest low (an extreme at the window's edge is a level too) and the high
       and low of the last 5 bars (not yet confirmable as swings); with too few bars for swings,
       every bar's high and low.
    2. Clusters: candidates sorted by price join a level while within ``CLUSTER_ATR`` × ATR(14)
       of its mean; the level's price is the mean, ``touches`` its number of candidates.
    3. Score: Σ over touches of 2^(−age/``RECENCY_HALF_LIFE``) (age in bars from the last bar),
       × 1 / (1 + |price − close| / (``PROXIMITY_ATR`` × ATR)): recent and near levels first.
    4. Per side (below / above the last close): the nearest level always, then the best scores,
       at most ``num_levels``, listed nearest first.

    Strength by touches: ``strong`` ≥ 3, ``moderate`` 2, ``weak`` 1.

    Returns ``{support: [{price (USD, 2 dp), kind, strength, touches, last_touch (ISO), score}],
    resistance: [...], nearest_support, nearest_resistance (the level or null: none below/above
    the close in the window), current_price, atr_14, tolerance (USD)}``.
    """
    current = float(bars["close"].iloc[-1])
    atr = atr_wilder(bars)
    tol = CLUSTER_ATR * atr
    n = len(bars)
    points = swing_points(bars, 5)
    candidates: list[tuple[float, int]] = [(p["price"], p["index"]) for p in points]
    hi_i, lo_i = int(bars["high"].to_numpy().argmax()), int(bars["low"].to_numpy().argmin())
    candidates += [(float(bars["high"].iloc[hi_i]), hi_i), (float(bars["low"].iloc[lo_i]), lo_i)]
    # the last 5 bars cannot be confirmed swings yet; their low and high are the pullback a trader
    # sees on the chart today (AAPL 2012-06-28's 565.61)
    tail = bars.iloc[-5:]
    t_hi, t_lo = int(tail["high"].to_numpy().argmax()), int(tail["low"].to_numpy().argmin())
    candidates += [
        (float(tail["high"].iloc[t_hi]), n - len(tail) + t_hi),
        (float(tail["low"].iloc[t_lo]), n - len(tail) + t_lo),
    ]
    if not points:
        candidates += [(float(v), i) for i, v in enumerate(bars["high"])]
        candidates += [(float(v), i) for i, v in enumerate(bars["low"])]
    candidates = sorted(set(candidates))
    clusters: list[list[tuple[float, int]]] = []
    for price, index in candidates:
        if clusters:
            members = clusters[-1]
            mean = sum(p for p, _ in members) / len(members)
            if price - mean <= tol:
                members.append((price, index))
                continue
        clusters.append([(price, index)])
    dates = iso_dates(bars.index)
    levels: list[dict[str, Any]] = []
    for members in clusters:
        price = sum(p for p, _ in members) / len(members)
        recency = sum(2.0 ** (-(n - 1 - i) / RECENCY_HALF_LIFE) for _, i in members)
        proximity = 1.0 / (1.0 + abs(price - current) / (PROXIMITY_ATR * atr)) if atr > 0 else 1.0
        touches = len({i for _, i in members})
        levels.append(
            {
                "price": round(price, 2),
                "kind": "support" if price < current else "resistance",
                "strength": "strong" if touches >= 3 else "moderate" if touches == 2 else "weak",
                "touches": touches,
                "last_touch": dates[max(i for _, i in members)],
                "score": round(recency * proximity, 4),
            }
        )

    def pick(side: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not side:
            return []
        nearest = min(side, key=lambda lv: abs(lv["price"] - current))
        best = sorted((lv for lv in side if lv is not nearest), key=lambda lv: -lv["score"])
        chosen = [nearest, *best[: num_levels - 1]]
        return sorted(chosen, key=lambda lv: abs(lv["price"] - current))

    support = pick([lv for lv in levels if lv["kind"] == "support"])
    resistance = pick([lv for lv in levels if lv["kind"] == "resistance"])
    return {
        "support": support,
        "resistance": resistance,
        "nearest_support": support[0] if support else None,
        "nearest_resistance": resistance[0] if resistance else None,
        "current_price": _r(current),
        "atr_14": _r(atr),
        "tolerance": _r(tol),
    }


#: Zone width, in ATR(14): pivots within three quarters of an average daily range of a zone's lowest member
#: are one zone (a trader's band, not one price).
ZONE_WIDTH_ATR = 0.75
#: A bar's low (or high) within this many ATR(14) outside a zone is a test of it, and widens it.
ZONE_TOUCH_ATR = 0.1
#: A gap is an opening beyond the previous bar's range by at least this many ATR(14).
GAP_MIN_ATR = 1.0
#: A base: at least this many consecutive bars whose whole range stays inside ``BASE_RANGE_ATR``.
BASE_MIN_BARS = 10
BASE_RANGE_ATR = 2.5
#: Zone recency half-life, in bars (a quarter): the zones are read on one six-month window.
ZONE_HALF_LIFE = 63


def _zone_candidates(bars: pd.DataFrame, atr: float, lookback: int) -> list[tuple[float, int, str]]:
    """(price USD, bar index, source) of every zone candidate: swing lows/highs (``swing``), the
    unconfirmed low/high of the last ``lookback`` + 1 bars (``recent``), the window's extremes
    (``extreme``), both edges of gaps of at least ``GAP_MIN_ATR`` (``gap``) and the low and high
    of bases (``base``)."""
    highs = bars["high"].to_numpy(dtype="float64")
    lows = bars["low"].to_numpy(dtype="float64")
    n = len(bars)
    out: list[tuple[float, int, str]] = [
        (p["price"], p["index"], "swing") for p in swing_points(bars, lookback)
    ]
    tail = max(0, n - lookback - 1)
    t_lo = tail + int(lows[tail:].argmin())
    t_hi = tail + int(highs[tail:].argmax())
    out += [(float(lows[t_lo]), t_lo, "recent"), (float(highs[t_hi]), t_hi, "recent")]
    lo_i, hi_i = int(lows.argmin()), int(highs.argmax())
    out += [(float(lows[lo_i]), lo_i, "extreme"), (float(highs[hi_i]), hi_i, "extreme")]
    for i in range(1, n):
        if lows[i] - highs[i - 1] >= GAP_MIN_ATR * atr:  # gap up: its top edge is support
            out += [(float(lows[i]), i, "gap"), (float(highs[i - 1]), i - 1, "gap")]
        elif lows[i - 1] - highs[i] >= GAP_MIN_ATR * atr:  # gap down: its bottom edge is resistance
            out += [(float(highs[i]), i, "gap"), (float(lows[i - 1]), i - 1, "gap")]
    i = 0
    while i < n:
        j, top, bottom = i, highs[i], lows[i]
        while j + 1 < n and max(top, highs[j + 1]) - min(bottom, lows[j + 1]) <= BASE_RANGE_ATR * atr:
            j += 1
            top, bottom = max(top, highs[j]), min(bottom, lows[j])
        if j - i + 1 >= BASE_MIN_BARS:
            b_lo = i + int(lows[i : j + 1].argmin())
            b_hi = i + int(highs[i : j + 1].argmax())
            out += [(float(lows[b_lo]), b_lo, "base"), (float(highs[b_hi]), b_hi, "base")]
            i = j + 1
        else:
            i += 1
    return [(round(p, 4), k, src) for p, k, src in out]


def support_resistance_zones(bars: pd.DataFrame, num_zones: int = 5, lookback: int = 3) -> dict[str, Any]:
    """Support and resistance **zones** (price bands) of one window of bars (our method,
    docs/design.md, "Support and resistance zones"):

    1. Candidates (:func:`_zone_candidates`): swing points (``lookback``), the last bars'
       unconfirmed low/high, the window's extremes, gap edges (≥ ``GAP_MIN_ATR`` × ATR(14)) and the
       low and high of bases (≥ ``BASE_MIN_BARS`` bars inside ``BASE_RANGE_ATR`` × ATR).
    2. Zones, densest first: the band [p, p + ``ZONE_WIDTH_ATR`` × ATR] holding the most
       recency weight 2^(−age/``ZONE_HALF_LIFE``) of the remaining candidates becomes a zone; its
       candidates are removed; repeat.
    3. Tests: a bar whose low or high lies within ``ZONE_TOUCH_ATR`` × ATR of a zone tests it
       and widens it to that price; zones that then overlap are merged; ``touches`` counts test
       episodes (runs of consecutive bars with a low or high inside the zone).
    4. Score: Σ over the episodes' last bars of 2^(−age/``ZONE_HALF_LIFE``), × 1 / (1 +
       distance / (10 × ATR)). Kind: ``support`` when the zone's low is below the close and its
       middle is too (a zone around the close whose middle is below it is support), else
       ``resistance``. Per side: the ``num_zones`` nearest zones, nearest first (a seller's
       strike is set against the zones next to the price; ``score`` says which ones matter).

    Returns ``{support: [{low, high, price (the zone's low for support, high for resistance: the
    edge a strike is capped at), kind, strength, touches, sources, last_touch (ISO), score}],
    resistance, nearest_support, nearest_resistance, current_price, atr_14, zone_width (USD),
    window: {start, end, bars}}``. Prices USD in the bars' units, 2 dp.
    """
    current = float(bars["close"].iloc[-1])
    atr = atr_wilder(bars)
    n = len(bars)
    width, touch = ZONE_WIDTH_ATR * atr, ZONE_TOUCH_ATR * atr
    highs = bars["high"].to_numpy(dtype="float64")
    lows = bars["low"].to_numpy(dtype="float64")
    dates = iso_dates(bars.index)

    def weight(i: int) -> float:
        return float(2.0 ** (-(n - 1 - i) / ZONE_HALF_LIFE))

    remaining = sorted(set(_zone_candidates(bars, atr, lookback)))
    bands: list[list[tuple[float, int, str]]] = []
    while remaining:
        best_start, best_w = 0, -1.0
        for s, (p, _, _) in enumerate(remaining):
            w = sum(weight(k) for q, k, _ in remaining[s:] if q <= p + width)
            if w > best_w + 1e-12:
                best_start, best_w = s, w
        p0 = remaining[best_start][0]
        members = [c for c in remaining if p0 <= c[0] <= p0 + width]
        bands.append(members)
        remaining = [c for c in remaining if c not in members]
    # the tests widen a band to the prices that tested it; bands that then overlap are one zone
    spans: list[tuple[float, float, list[tuple[float, int, str]]]] = []
    for members in bands:
        b_lo, b_hi = min(c[0] for c in members), max(c[0] for c in members)
        near = [float(v) for v in np.concatenate((lows, highs)) if b_lo - touch <= v <= b_hi + touch]
        spans.append((min([b_lo, *near]), max([b_hi, *near]), members))
    spans.sort(key=lambda sp: sp[0])
    merged: list[tuple[float, float, list[tuple[float, int, str]]]] = []
    for lo, hi, members in spans:
        if merged and lo <= merged[-1][1]:
            m_lo, m_hi, m_members = merged[-1]
            merged[-1] = (m_lo, max(m_hi, hi), m_members + members)
        else:
            merged.append((lo, hi, members))
    zones: list[dict[str, Any]] = []
    for lo, hi, members in merged:
        tested = sorted(
            {k for k in range(n) if lo <= lows[k] <= hi or lo <= highs[k] <= hi} | {c[1] for c in members}
        )
        episodes = [k for j, k in enumerate(tested) if j + 1 == len(tested) or tested[j + 1] != k + 1]
        mid = (lo + hi) / 2
        kind = "support" if lo < current and mid < current else "resistance"
        distance = max(0.0, lo - current, current - hi)
        proximity = 1.0 / (1.0 + distance / (PROXIMITY_ATR * atr)) if atr > 0 else 1.0
        touches = len(episodes)
        zones.append(
            {
                "low": round(lo, 2),
                "high": round(hi, 2),
                "price": round(lo if kind == "support" else hi, 2),
                "kind": kind,
                "strength": "strong" if touches >= 3 else "moderate" if touches == 2 else "weak",
                "touches": touches,
                "sources": sorted({c[2] for c in members}),
                "last_touch": dates[tested[-1]],
                "score": round(sum(weight(k) for k in episodes) * proximity, 4),
            }
        )

    def pick(side: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not side:
            return []
        key = (
            (lambda z: current - z["high"])
            if side[0]["kind"] == "support"
            else (lambda z: z["low"] - current)
        )
        return sorted(side, key=key)[:num_zones]

    support = pick([z for z in zones if z["kind"] == "support"])
    resistance = pick([z for z in zones if z["kind"] == "resistance"])
    return {
        "method": "zones",
        "support": support,
        "resistance": resistance,
        "nearest_support": support[0] if support else None,
        "nearest_resistance": resistance[0] if resistance else None,
        "current_price": _r(current),
        "atr_14": _r(atr),
        "zone_width": _r(width),
        "window": {"start": dates[0], "end": dates[-1], "bars": n},
    }


def trendline(
    bars: pd.DataFrame, kind: Literal["support", "resistance"], lookback: int = 5
) -> dict[str, Any]:
    """Least-squares line through the swing lows (``support``) or swing highs (``resistance``).

    x is calendar days since the first swing point used, y the swing price (USD). Returns
    ``{type, points, slope_per_day (USD/calendar day, 4 dp), slope_pct_per_day (slope / line
    value at the last bar, fraction, 6 dp), intercept (USD at the first point), r_squared (0..1,
    4 dp; None when all prices are equal), start: {date, price}, end: {date, price} (the line at
    the last bar's date), direction rising|falling|flat (|slope_pct_per_day| < 0.0001 → flat)}``.

    Raises:
        ValueError: fewer than two swing points of that type.
    """
    wanted = "low" if kind == "support" else "high"
    points = [p for p in swing_points(bars, lookback) if p["type"] == wanted]
    if len(points) < 2:
        raise ValueError(f"{len(points)} swing {wanted}s with lookback {lookback}; a trendline needs 2")
    first = pd.Timestamp(points[0]["date"])
    x = np.array([(pd.Timestamp(p["date"]) - first).days for p in points], dtype=float)
    y = np.array([p["price"] for p in points], dtype=float)
    slope, intercept = np.polyfit(x, y, 1)
    fitted = slope * x + intercept
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = None if ss_tot == 0 else max(0.0, 1.0 - float(((y - fitted) ** 2).sum()) / ss_tot)
    last_date = bars.index[-1]
    end_value = float(slope * (last_date - first).days + intercept)
    pct = slope / end_value if end_value else 0.0
    return {
        "type": kind,
        "points": len(points),
        "slope_per_day": _r(slope),
        "slope_pct_per_day": _r(pct, 6),
        "intercept": _r(intercept),
        "r_squared": None if r2 is None else _r(r2),
        "start": {"date": points[0]["date"], "price": _r(intercept)},
        "end": {"date": last_date.date().isoformat(), "price": _r(end_value)},
        "direction": "flat" if abs(pct) < 1e-4 else ("rising" if slope > 0 else "falling"),
        "swing_dates": [p["date"] for p in points],
    }


#: A trendline is drawn only when it fits its pivots: at least 4 of them (any 3 noisy points
#: can line up), r² ≥ ``TRENDLINE_MIN_R2`` ...
TRENDLINE_MIN_PIVOTS = 4
TRENDLINE_MIN_R2 = 0.8
#: ... and every pivot within this many ATR(14) of the line.
TRENDLINE_MAX_RESIDUAL_ATR = 1.0


def fitted_trendline(
    bars: pd.DataFrame, kind: Literal["support", "resistance"], lookback: int = 5
) -> dict[str, Any] | None:
    """The trendline a chart may draw: the least-squares line (:func:`trendline`) through the
    longest run of the most recent swing pivots (at least ``TRENDLINE_MIN_PIVOTS``) that fits them, r² ≥
    ``TRENDLINE_MIN_R2`` and every pivot within ``TRENDLINE_MAX_RESIDUAL_ATR`` × ATR(14) of the
    line, and that is not broken at the last bar (a support line ends below the close, a resistance
    line above it); ``None`` when no run fits (no line rather than a bad one). The line dict gains
    ``max_residual_atr``."""
    wanted = "low" if kind == "support" else "high"
    pivots = [p for p in swing_points(bars, lookback) if p["type"] == wanted]
    atr = atr_wilder(bars)
    close = float(bars["close"].iloc[-1])
    for first in range(0, len(pivots) - TRENDLINE_MIN_PIVOTS + 1):
        run = pivots[first:]
        t0 = pd.Timestamp(run[0]["date"])
        x = np.array([(pd.Timestamp(p["date"]) - t0).days for p in run], dtype=float)
        y = np.array([p["price"] for p in run], dtype=float)
        slope, intercept = np.polyfit(x, y, 1)
        resid = np.abs(y - (slope * x + intercept))
        ss_tot = float(((y - y.mean()) ** 2).sum())
        r2 = 1.0 - float((resid**2).sum()) / ss_tot if ss_tot > 0 else 0.0
        if r2 < TRENDLINE_MIN_R2 or atr <= 0 or float(resid.max()) > TRENDLINE_MAX_RESIDUAL_ATR * atr:
            continue
        end_value = float(slope * (bars.index[-1] - t0).days + intercept)
        if (kind == "support") != (end_value <= close):
            continue  # broken: the price is on its other side
        return {
            "type": kind,
            "points": len(run),
            "slope_per_day": _r(slope),
            "intercept": _r(intercept),
            "r_squared": _r(r2),
            "max_residual_atr": _r(float(resid.max()) / atr),
            "start": {"date": run[0]["date"], "price": _r(intercept)},
            "end": {"date": bars.index[-1].date().isoformat(), "price": _r(end_value)},
            "direction": "flat" if abs(slope / end_value) < 1e-4 else ("rising" if slope > 0 else "falling"),
            "swing_dates": [p["date"] for p in run],
        }
    return None


# --------------------------------------------------------------------------- tools


class SwingInput(_BarsInput):
    """``{symbol, history_ref?, period?, lookback}``."""

    lookback: int = Field(default=5, ge=1, le=50, description="Bars on each side of a swing (default 5)")


@register(
    name="calculate_swing_points",
    description="Swing highs and lows (a bar's high/low is the extreme of lookback bars on each side).",
    input_model=SwingInput,
)
def calculate_swing_points(params: SwingInput, ctx: ToolContext) -> ToolOutput:
    """Swing points over adjusted daily bars. Returns data ``{symbol, date, bars_used,
    lookback, swing_points: [{type, price, index, date}], null_reason?}``."""
    bars, refs = load_chart_bars(params, ctx)
    points = swing_points(bars, params.lookback)
    data: dict[str, Any] = {
        **bars_header(params.symbol, bars),
        "lookback": params.lookback,
        "swing_points": points,
    }
    if len(bars) < 2 * params.lookback + 1:
        data["null_reason"] = f"not enough bars ({len(bars)}) for lookback {params.lookback}"
    highs = sum(p["type"] == "high" for p in points)
    summary = f"{params.symbol} {data['date']}: {highs} swing highs, {len(points) - highs} swing lows"
    return ToolOutput(data=data, summary=summary, source_refs=refs, symbol=params.symbol)


class FibInput(BaseModel):
    """``{swing_high, swing_low, direction}`` or ``{symbol, history_ref?|period?}``."""

    model_config = ConfigDict(extra="forbid")

    symbol: Symbol | None = Field(default=None, description="Ticker: take the swing from its bars")
    history_ref: HistoryRef | None = Field(default=None, description="tool_call_id of get_history")
    period: Period = Field(default="6mo", description="Bars to load when history_ref is not given")
    swing_high: float | None = Field(default=None, gt=0, description="Swing high, USD")
    swing_low: float | None = Field(default=None, gt=0, description="Swing low, USD")
    direction: Literal["up", "down"] | None = Field(
        default=None, description="up: retrace down from the high; down: retrace up from the low"
    )

    @model_validator(mode="after")
    def _one_source(self) -> FibInput:
        given = (self.swing_high, self.swing_low, self.direction)
        if all(v is not None for v in given):
            if self.swing_high <= self.swing_low:  # type: ignore[operator]
                raise ValueError("swing_high must be above swing_low")
            return self
        if any(v is not None for v in given):
            raise ValueError("give swing_high, swing_low and direction together (or none of them)")
        if self.symbol is None:
            raise ValueError("give swing_high/swing_low/direction, or a symbol to take the swing from")
        return self


@register(
    name="calculate_fib_levels",
    description=(
        "Fibonacci retracement levels (0, 23.6, 38.2, 50, 61.8, 78.6, 100 %) from a swing high/low, "
        "or from the highest high and lowest low of a symbol's bars."
    ),
    input_model=FibInput,
)
def calculate_fib_levels(params: FibInput, ctx: ToolContext) -> ToolOutput:
    """Returns data ``{levels: {"0%": USD, ...}, swing_high, swing_low, direction}`` plus,
    from bars, ``{symbol, date, swing_high_date, swing_low_date, current_price, bars_used}``."""
    refs: tuple[str, ...] = ()
    extra: dict[str, Any] = {}
    if params.symbol is not None and params.swing_high is None:
        bars, refs = load_chart_bars(
            _BarsInput(symbol=params.symbol, history_ref=params.history_ref, period=params.period), ctx
        )
        high, high_date, low, low_date, direction = major_swing(bars)
        if high <= low:
            raise ToolInputError("the bars have no range (high == low)")
        extra = {
            "symbol": params.symbol,
            "date": bars.index[-1].date().isoformat(),
            "swing_high_date": high_date,
            "swing_low_date": low_date,
            "current_price": _r(bars["close"].iloc[-1]),
            "bars_used": len(bars),
        }
    else:
        high, low, direction = params.swing_high, params.swing_low, params.direction  # type: ignore[assignment]
    data = {
        "levels": fib_levels(high, low, direction),
        "swing_high": _r(high),
        "swing_low": _r(low),
        "direction": direction,
        **extra,
    }
    summary = f"fib {direction} {low:.2f}..{high:.2f}: 61.8% at {data['levels']['61.8%']:.2f}"
    return ToolOutput(data=data, summary=summary, source_refs=refs, symbol=params.symbol)


class SupportResistanceInput(_BarsInput):
    """``{symbol, history_ref?, period?, num_levels, method}``."""

    num_levels: int = Field(default=5, ge=1, le=20, description="Levels per side (default 5)")
    method: Literal["levels", "zones"] = Field(
        default="levels",
        description="levels: ATR clusters of swing points (one price each); zones: price bands from "
        "swing points, gaps and bases on exactly the `period` window (also when history_ref is given)",
    )


@register(
    name="find_support_resistance",
    description=(
        "Support and resistance levels: swing highs/lows clustered within one ATR(14), weighted by recency "
        "and proximity; always the nearest support below and resistance above the close."
    ),
    input_model=SupportResistanceInput,
)
def find_support_resistance(params: SupportResistanceInput, ctx: ToolContext) -> ToolOutput:
    """Support and resistance: ``method`` ``levels`` (:func:`support_resistance`, on all the bars
    loaded) or ``zones`` (:func:`support_resistance_zones`, on the last ``period`` of them; the
    output's ``window`` states it). Returns data ``{symbol, date, bars_used, support, resistance,
    current_price, ...}``."""
    bars, refs = load_chart_bars(params, ctx)
    if params.method == "zones":
        bars = window_bars(bars, params.period, ctx)
        levels = support_resistance_zones(bars, params.num_levels)
        levels["window"]["period"] = params.period
    else:
        levels = support_resistance(bars, params.num_levels)
    data = {
        **bars_header(params.symbol, bars),
        **levels,
    }
    summary = (
        f"{params.symbol} {data['date']}{' zones' if params.method == 'zones' else ''}: "
        f"support {[lv['price'] for lv in levels['support']]}, "
        f"resistance {[lv['price'] for lv in levels['resistance']]}"
    )
    return ToolOutput(data=data, summary=summary, source_refs=refs, symbol=params.symbol)


class TrendlineInput(_BarsInput):
    """``{symbol, history_ref?, period?, type, lookback}``."""

    type: Literal["support", "resistance"] = Field(
        default="support", description="support: through swing lows; resistance: through swing highs"
    )
    lookback: int = Field(default=5, ge=1, le=50, description="Swing detection lookback")


@register(
    name="calculate_trendline",
    description=(
        "Least-squares trendline through swing lows (support) or swing highs (resistance): "
        "slope in USD per calendar day, r², and the line's value at the last bar."
    ),
    input_model=TrendlineInput,
)
def calculate_trendline(params: TrendlineInput, ctx: ToolContext) -> ToolOutput:
    """See :func:`trendline`. Returns data ``{symbol, date, bars_used, trendline: {...}}``.

    Raises:
        ToolInputError: fewer than two swing points of the requested type.
    """
    bars, refs = load_chart_bars(params, ctx)
    try:
        line = trendline(bars, params.type, params.lookback)
    except ValueError as exc:
        raise ToolInputError(str(exc), code=ErrorCode.NO_DATA) from None
    data = {
        **bars_header(params.symbol, bars),
        "trendline": line,
    }
    summary = (
        f"{params.symbol} {params.type} trendline {line['direction']}: {line['slope_per_day']:+.4f} USD/day, "
        f"r²={line['r_squared']}"
    )
    return ToolOutput(data=data, summary=summary, source_refs=refs, symbol=params.symbol)


class ChartEvent(BaseModel):
    """A day to mark with a vertical line: ``{date (ISO), label}`` (an earnings estimate, an
    ex-dividend date, a split)."""

    model_config = ConfigDict(extra="forbid")

    date: Annotated[str, Field(pattern=r"^\d{4}-\d{2}-\d{2}$")]
    label: Annotated[str, Field(max_length=60)]


class ChartPayoff(BaseModel):
    """The position whose P&L at expiry the chart's side panel draws, in the bars' units:
    ``kind`` (short_put, covered_call, put_spread), ``strike`` (and ``long_strike`` of a spread),
    ``spot`` (today's price), ``net`` (net premium received, USD a contract), ``multiplier``
    (shares a contract covers, in the bars' shares: 100 × a split factor), ``contracts``."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["short_put", "covered_call", "put_spread"]
    strike: Annotated[float, Field(gt=0)]
    long_strike: Annotated[float, Field(gt=0)] | None = None
    spot: Annotated[float, Field(gt=0)]
    net: float
    multiplier: Annotated[float, Field(gt=0)] = 100.0
    contracts: Annotated[int, Field(ge=1, le=10_000)] = 1

    def pnl(self, price: float) -> float:
        """USD at expiry for all contracts at the underlying ``price`` (bars' units)."""
        m = self.multiplier
        if self.kind == "short_put":
            one = self.net - max(self.strike - price, 0.0) * m
        elif self.kind == "covered_call":
            one = (price - self.spot) * m + self.net - max(price - self.strike, 0.0) * m
        else:
            low = self.long_strike or 0.0
            one = self.net - (max(self.strike - price, 0.0) - max(low - price, 0.0)) * m
        return one * self.contracts


class OptionOverlay(BaseModel):
    """What an option plan adds to its chart: ``expiry`` (the last trading day, ISO), ``sigma``
    (the real-world σ a year, fraction) and ``spot`` (bars' units) for the ±1σ cone to expiry,
    ``events`` and the ``payoff`` at expiry."""

    model_config = ConfigDict(extra="forbid")

    expiry: Annotated[str, Field(pattern=r"^\d{4}-\d{2}-\d{2}$")]
    sigma: Annotated[float, Field(gt=0, lt=5)]
    spot: Annotated[float, Field(gt=0)]
    events: list[ChartEvent] = Field(default_factory=list, max_length=12)
    payoff: ChartPayoff | None = None


class RenderInput(_BarsInput):
    """``{symbol, history_ref?, period?, levels, context?, support_levels?, resistance_levels?,
    fib_levels?, trendlines?, auto_annotate, marks?, option?}``."""

    levels: Literal["levels", "zones"] = Field(
        default="levels",
        description="levels: support/resistance lines; zones: shaded support/resistance zones computed on "
        "exactly the `period` window (find_support_resistance method zones), no Fibonacci levels",
    )
    context: Period | None = Field(
        default=None,
        description="With zones: draw this longer period of bars for context (the zones stay those of "
        "`period`; the window's start is marked)",
    )
    support_levels: list[float] | None = Field(default=None, max_length=20, description="USD prices")
    resistance_levels: list[float] | None = Field(default=None, max_length=20, description="USD prices")
    fib_levels: dict[str, float] | None = Field(
        default=None, description="label → USD (calculate_fib_levels)"
    )
    trendlines: list[Literal["support", "resistance"]] | None = Field(
        default=None, max_length=2, description="Trendlines to fit and draw (only where the pivots fit)"
    )
    auto_annotate: bool = Field(
        default=True, description="Compute S/R, fib levels and both trendlines when not given"
    )
    marks: dict[str, Annotated[float, Field(gt=0)]] | None = Field(
        default=None,
        max_length=10,
        description="Prices to mark as horizontal lines, label → USD in the bars' units (e.g. a plan's "
        "suggested strike and its breakeven)",
    )
    option: OptionOverlay | None = Field(
        default=None,
        description="An option plan's overlay: its expiry, the ±1σ cone to it, event days and a "
        "payoff-at-expiry panel",
    )


#: Figure size (inches) and resolution of a rendered chart: 1100 × 620 px.
FIGSIZE = (11.0, 6.2)
DPI = 100
#: The plot area ends at this fraction of the figure's width; the labels sit in the margin to
#: its right, so they never cover a candle. With an option overlay the plot ends earlier and the
#: payoff panel takes the figure's right edge.
PLOT_RIGHT = 0.76
PLOT_RIGHT_OPTION = 0.58
PAYOFF_PANEL = (0.78, 0.975)
#: Event days drawn after the expiry: up to this many sessions past it (an earnings estimate
#: just after the expiry is the reason the expiry was chosen).
EVENTS_AFTER_EXPIRY = 30
#: Label text size (points) and the vertical room one label needs (pixels): 7 pt at 100 dpi is
#: 9.7 px of glyphs; 13 px leaves a line's leading between two labels.
LABEL_POINTS = 7
LABEL_GAP_PX = 13.0


def spread_labels(ys: list[float], *, gap: float, low: float, high: float) -> list[float]:
    """Label positions for the wanted positions ``ys`` (any order; same units as ``gap``): each
    label moves as little as a forward and a backward pass allow so that no two are closer than
    ``gap`` (never: the passes keep every neighbour ``gap`` apart) and all stay inside [``low``,
    ``high``] when there is room (when there is not, they keep the ``gap`` and run past ``high``).
    Returned in the order of ``ys``. ``render_png`` works in data units with ``gap`` = the data
    height of :data:`LABEL_GAP_PX` on the final axes, so the labels never collide on the image."""
    order = sorted(range(len(ys)), key=lambda i: ys[i])
    placed = [max(ys[i], low) for i in order]
    for k in range(1, len(placed)):
        placed[k] = max(placed[k], placed[k - 1] + gap)
    if placed and placed[-1] > high:
        placed[-1] = max(high, low + gap * (len(placed) - 1))
        for k in range(len(placed) - 2, -1, -1):
            placed[k] = min(placed[k], placed[k + 1] - gap)
    out = [0.0] * len(ys)
    for k, i in enumerate(order):
        out[i] = placed[k]
    return out


def render_png(
    bars: pd.DataFrame,
    *,
    symbol: str,
    path: Path,
    support: list[float],
    resistance: list[float],
    fibs: dict[str, float],
    lines: list[dict[str, Any]],
    marks: dict[str, float] | None = None,
    zones: list[dict[str, Any]] | None = None,
    window_start: str | None = None,
    option: OptionOverlay | None = None,
) -> None:
    """Candlesticks + volume (mplfinance, Agg backend, prices on the left axis) with support
    (green) and resistance (red) lines or ``zones`` (shaded bands ``{low, high, kind, touches}``),
    Fibonacci levels (blue, dashed), trendlines (orange) and ``marks`` (label → price, e.g. a
    plan's strike and breakeven; purple, dotted). Every level is labelled with its kind and
    price in a right margin outside the plot, joined to its price at the plot's edge by a leader
    line; the labels are spread (:func:`spread_labels`) so none overlaps another.
    ``window_start`` (ISO): a vertical line where the levels' window begins (bars before it are
    context). ``option``: an option plan's overlay (:func:`draw_option`). Saved as PNG at ``path``
    (``FIGSIZE`` at ``DPI``)."""
    # lazy: matplotlib/mplfinance only when a chart is drawn (kept out of tool registration)
    import matplotlib

    matplotlib.use("Agg")
    # mplfinance's "yahoo" style asks for a semibold font DejaVu lacks: one stderr line per call.
    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)
    import matplotlib.pyplot as plt
    import mplfinance as mpf  # type: ignore[import-untyped]
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.transforms import blended_transform_factory

    marks = marks or {}
    zones = zones or []
    frame = bars.rename(columns=str.capitalize)[["Open", "High", "Low", "Close", "Volume"]]
    # (price, label, colour, style) of every horizontal line
    hl: list[tuple[float, str, str, Literal["-", "--", ":"]]] = (
        [(p, f"S {p:,.2f}", "tab:green", "-") for p in support]
        + [(p, f"R {p:,.2f}", "tab:red", "-") for p in resistance]
        + [(p, f"Fib {k} {p:,.2f}", "tab:blue", "--") for k, p in fibs.items()]
        + [(p, f"{k} {p:,.2f}", "tab:purple", ":") for k, p in marks.items()]
    )
    kwargs: dict[str, Any] = {}
    if hl:
        kwargs["hlines"] = {
            "hlines": [h[0] for h in hl],
            "colors": [h[2] for h in hl],
            "linestyle": [h[3] for h in hl],
            "linewidths": 0.9,
        }
    if lines:
        kwargs["alines"] = {
            "alines": [
                [
                    (pd.Timestamp(ln["start"]["date"]), ln["start"]["price"]),
                    (pd.Timestamp(ln["end"]["date"]), ln["end"]["price"]),
                ]
                for ln in lines
            ],
            "colors": ["tab:orange"] * len(lines),
            "linewidths": 1.2,
        }
    style = mpf.make_mpf_style(base_mpf_style="yahoo", y_on_right=False)
    with _RENDER_LOCK:
        fig, _axes = mpf.plot(
            frame,
            type="candle",
            style=style,
            volume=True,
            title=f"{symbol} {frame.index[0].date()}..{frame.index[-1].date()} (adjusted)",
            figsize=FIGSIZE,
            returnfig=True,
            warn_too_much_data=10_000,
            **kwargs,
        )
        right = PLOT_RIGHT_OPTION if option is not None else PLOT_RIGHT
        for axis in fig.axes:  # make room for the label margin on the right
            pos = axis.get_position()
            axis.set_position((pos.x0, pos.y0, right - pos.x0, pos.height))
        ax = _axes[0]
        if option is not None:
            draw_option(fig, list(_axes), pd.DatetimeIndex(frame.index), option)
        # the zones and marks stay in view: widen the price axis to hold them
        lo, hi = ax.get_ylim()
        wanted = [z["low"] for z in zones] + [z["high"] for z in zones] + list(marks.values())
        if option is not None:  # the cone's ends stay in view
            wanted += list(option_cone_ends(option, pd.DatetimeIndex(frame.index)))
        if wanted:
            pad = (hi - lo) * 0.03
            ax.set_ylim(min(lo, min(wanted) - pad), max(hi, max(wanted) + pad))
        lo, hi = ax.get_ylim()
        items: list[tuple[float, str, str]] = [(h[0], h[1], h[2]) for h in hl if lo <= h[0] <= hi]
        for z in zones:
            color = "tab:green" if z["kind"] == "support" else "tab:red"
            ax.axhspan(z["low"], z["high"], color=color, alpha=0.18, lw=0)
            edge = z["low"] if z["kind"] == "support" else z["high"]
            ax.axhline(edge, color=color, lw=0.6, alpha=0.7)
            if lo <= edge <= hi:
                t = z.get("touches")
                items.append(
                    (
                        edge,
                        f"{'S' if z['kind'] == 'support' else 'R'} "
                        + (
                            f"{z['low']:,.2f}"
                            if z["low"] == z["high"]
                            else f"{z['low']:,.2f}–{z['high']:,.2f}"
                        )
                        + (f" ({t}×)" if t is not None else ""),
                        color,
                    )
                )
        if window_start is not None:
            first = int(np.searchsorted(frame.index.values, np.datetime64(window_start)))
            if 0 < first < len(frame):
                ax.axvline(first - 0.5, color="grey", lw=0.8, ls="--")
                ax.text(first - 0.3, hi, " levels' window", fontsize=7, color="grey", va="top")
        # labels in the right margin, spread in data units by the data height of LABEL_GAP_PX on
        # the axes as placed (the figure's size and the axes' share of it are fixed: no draw-time
        # transform is needed), leader lines to the price
        height_px = FIGSIZE[1] * DPI * ax.get_position().height
        gap = (hi - lo) * LABEL_GAP_PX / height_px
        label_y = spread_labels([p for p, _, _ in items], gap=gap, low=lo, high=hi)
        trans = blended_transform_factory(ax.transAxes, ax.transData)
        for (price, text, color), y_label in zip(items, label_y, strict=True):
            ax.annotate(
                text,
                xy=(1.0, price),
                xycoords=trans,
                xytext=(1.06, y_label),
                textcoords=trans,
                fontsize=LABEL_POINTS,
                color=color,
                va="center",
                ha="left",
                annotation_clip=False,
                arrowprops={"arrowstyle": "-", "color": color, "lw": 0.6, "shrinkA": 0, "shrinkB": 1},
            )
        legend_items: list[Any] = []
        if support or any(z["kind"] == "support" for z in zones):
            legend_items.append(Patch(color="tab:green", alpha=0.4, label="support"))
        if resistance or any(z["kind"] == "resistance" for z in zones):
            legend_items.append(Patch(color="tab:red", alpha=0.4, label="resistance"))
        if fibs:
            legend_items.append(Line2D([], [], color="tab:blue", ls="--", label="Fibonacci retracement"))
        if lines:
            legend_items.append(Line2D([], [], color="tab:orange", label="trendline (fits its pivots)"))
        if marks:
            legend_items.append(Line2D([], [], color="tab:purple", ls=":", label=" / ".join(marks)))
        if legend_items:
            ax.legend(handles=legend_items, loc="upper left", fontsize=7, framealpha=0.8)
        try:
            fig.savefig(path, format="png", dpi=DPI)
        finally:
            plt.close(fig)


def _future_x(index: pd.DatetimeIndex, day: str) -> float | None:
    """The x position (candles are 0..n-1) of ``day``: the first bar on or after it inside the
    drawn bars, else the last bar plus the sessions after it (exchange calendar); ``None`` before
    the first bar."""
    from agents.data.market_calendar import sessions_between

    when = pd.Timestamp(day)
    if when < index[0]:
        return None
    if when <= index[-1]:
        return float(np.searchsorted(index.values, np.datetime64(when)))
    return float(len(index) - 1 + sessions_between(index[-1].date(), when.date()))


def option_cone_ends(option: OptionOverlay, index: pd.DatetimeIndex) -> tuple[float, float]:
    """The ±1σ cone's prices at the expiry: spot × e^(±σ√(sessions/252)), the bars' units."""
    from agents.data.market_calendar import sessions_between

    h = sessions_between(index[-1].date(), pd.Timestamp(option.expiry).date())
    width = option.sigma * float(np.sqrt(max(h, 0) / 252.0))
    return option.spot * float(np.exp(-width)), option.spot * float(np.exp(width))


def draw_option(fig: Any, axes: list[Any], index: pd.DatetimeIndex, option: OptionOverlay) -> None:
    """Draw an option plan's overlay on a rendered candlestick figure: the x axis runs on to the
    expiry (one step per exchange session), the ±1σ cone of the real-world σ from the last close
    to the expiry (shaded, purple), a vertical line at the expiry and at each event day (earnings
    estimate, ex-dividend dates, splits; labelled at the top), and a payoff-at-expiry panel to
    the right of the labels sharing the price axis (P&L in USD of all the contracts at each price
    at expiry, zero dashed)."""
    from agents.data.market_calendar import sessions_between

    ax = axes[0]
    n = len(index)
    h = sessions_between(index[-1].date(), pd.Timestamp(option.expiry).date())
    steps = np.arange(0, h + 1, dtype="float64")
    width = option.sigma * np.sqrt(steps / 252.0)
    xs = n - 1 + steps
    up, down = option.spot * np.exp(width), option.spot * np.exp(-width)
    ax.fill_between(xs, down, up, color="tab:purple", alpha=0.12, lw=0)
    ax.plot(xs, up, color="tab:purple", lw=0.7, ls="--")
    ax.plot(xs, down, color="tab:purple", lw=0.7, ls="--")
    right = float(n - 1 + h + 2)
    event_x = [x for e in option.events if (x := _future_x(index, e.date)) is not None]
    if event_x:
        right = max(right, min(max(event_x), n - 1 + h + EVENTS_AFTER_EXPIRY) + 2)
    for axis in axes:
        lo_x, _ = axis.get_xlim()
        axis.set_xlim(lo_x, max(right, n + 1))
    top = ax.get_ylim()[1]
    ax.axvline(n - 1 + h, color="tab:purple", lw=1.0)
    ax.text(n - 1 + h, top, f" expiry {option.expiry}", fontsize=LABEL_POINTS, color="tab:purple",
            rotation=90, va="top", ha="right")  # fmt: skip
    for event in option.events:
        x = _future_x(index, event.date)
        if x is None or x > right:
            continue
        ax.axvline(x, color="tab:gray", lw=0.8, ls=":")
        ax.text(x, top, f" {event.label} {event.date}", fontsize=LABEL_POINTS - 1, color="tab:gray",
                rotation=90, va="top", ha="right")  # fmt: skip
    if option.payoff is None:
        return
    pos = ax.get_position()
    panel = fig.add_axes((PAYOFF_PANEL[0], pos.y0, PAYOFF_PANEL[1] - PAYOFF_PANEL[0], pos.height), sharey=ax)
    lo, hi = ax.get_ylim()
    prices = np.linspace(lo, hi, 200)
    pnl = np.array([option.payoff.pnl(float(p)) for p in prices])
    panel.plot(pnl, prices, color="tab:purple", lw=1.2)
    panel.axvline(0.0, color="black", lw=0.6, ls="--")
    panel.fill_betweenx(prices, 0.0, pnl, where=pnl >= 0, color="tab:green", alpha=0.15, lw=0)
    panel.fill_betweenx(prices, 0.0, pnl, where=pnl < 0, color="tab:red", alpha=0.15, lw=0)
    panel.set_title(f"P&L at expiry, {option.payoff.contracts} x the pick", fontsize=LABEL_POINTS)
    panel.tick_params(axis="both", labelsize=LABEL_POINTS - 1)
    panel.tick_params(axis="y", labelleft=False)
    panel.set_xlabel("USD", fontsize=LABEL_POINTS)
    panel.grid(alpha=0.3)


@dataclass(frozen=True)
class ChartLayers:
    """What a chart of :class:`RenderInput` draws, computed once for the PNG (:func:`render_chart`)
    and the web console's interactive chart: ``drawn`` the bars shown (adjusted, USD),
    ``level_bars`` the bars the levels were computed on, ``support``/``resistance`` prices,
    ``fibs`` label → price, ``lines`` the fitted trendlines (:func:`fitted_trendline` dicts),
    ``marks`` label → price, ``zones`` (:func:`support_resistance_zones` rows), ``window``
    the zones' window (or ``None``), ``refs`` the cited history call."""

    drawn: pd.DataFrame
    level_bars: pd.DataFrame
    support: list[float]
    resistance: list[float]
    fibs: dict[str, float]
    lines: list[dict[str, Any]]
    marks: dict[str, float]
    zones: list[dict[str, Any]]
    window: dict[str, Any] | None
    refs: tuple[str, ...]


def chart_layers(params: RenderInput, ctx: ToolContext) -> ChartLayers:
    """The layers of a chart (:class:`ChartLayers`), as :func:`render_chart` documents them.

    Raises ``ToolInputError`` as :func:`load_chart_bars` does."""
    bars, refs = load_chart_bars(params, ctx)
    support = list(params.support_levels or [])
    resistance = list(params.resistance_levels or [])
    fibs = dict(params.fib_levels or {})
    kinds = list(params.trendlines or [])
    zones: list[dict[str, Any]] = []
    window: dict[str, Any] | None = None
    drawn = bars
    if params.levels == "zones":
        level_bars = window_bars(bars, params.period, ctx)
        drawn = window_bars(bars, params.context, ctx) if params.context else level_bars
        if len(drawn) < len(level_bars):
            drawn = level_bars
        if params.auto_annotate and params.support_levels is None and params.resistance_levels is None:
            found = support_resistance_zones(level_bars, 4)
            zones = [*found["support"], *found["resistance"]]
            window = {**found["window"], "period": params.period}
        if params.auto_annotate and params.trendlines is None:
            kinds = ["support", "resistance"]
    elif params.auto_annotate:
        level_bars = bars
        if params.support_levels is None and params.resistance_levels is None:
            levels = support_resistance(bars, 3)
            support = [lv["price"] for lv in levels["support"]]
            resistance = [lv["price"] for lv in levels["resistance"]]
        if params.fib_levels is None:
            high, _, low, _, direction = major_swing(bars)
            if high > low:
                fibs = fib_levels(high, low, direction)
        if params.trendlines is None:
            kinds = ["support", "resistance"]
    else:
        level_bars = bars
    lines: list[dict[str, Any]] = []
    for kind in kinds:
        line = fitted_trendline(level_bars, kind)
        if line is not None:
            lines.append(line)
    return ChartLayers(
        drawn=drawn,
        level_bars=level_bars,
        support=support,
        resistance=resistance,
        fibs=fibs,
        lines=lines,
        marks=dict(params.marks or {}),
        zones=zones,
        window=window,
        refs=refs,
    )


@register(
    name="render_chart",
    description=(
        "Render a candlestick chart (PNG) with support/resistance (lines or zones), Fibonacci levels, "
        "trendlines that fit their pivots and marked prices; returns the file path and size."
    ),
    input_model=RenderInput,
)
def render_chart(params: RenderInput, ctx: ToolContext) -> ToolOutput:
    """Write ``settings.service.state_dir/charts/<name>.png``: ``<name>`` is the analysis id inside an
    analysis, else ``render_chart_<digest of symbol, as_of and arguments>``.

    With ``levels="zones"`` the zones are :func:`support_resistance_zones` of the ``period``
    window, the drawn bars that window (or ``context``, longer); trendlines are
    :func:`fitted_trendline` (none where the pivots do not fit).

    Returns data ``{symbol, date, bars_used, path, bytes, width_px, height_px, render_ms,
    annotations: {support, resistance, zones?, window?, fib_levels, marks, trendlines}}``.
    """
    layers = chart_layers(params, ctx)
    drawn, level_bars, window, refs = layers.drawn, layers.level_bars, layers.window, layers.refs
    support, resistance, fibs, lines, zones = (
        layers.support,
        layers.resistance,
        layers.fibs,
        layers.lines,
        layers.zones,
    )
    if ctx.analysis_id:
        name = ctx.analysis_id
    else:
        key = json.dumps([params.model_dump(mode="json"), ctx.as_of.isoformat()], sort_keys=True)
        name = "render_chart_" + hashlib.sha256(key.encode()).hexdigest()[:12]
    charts = Path(ctx.settings.service.state_dir) / "charts"
    charts.mkdir(parents=True, exist_ok=True)
    path = charts / f"{name}.png"
    started = time.perf_counter()
    marks = layers.marks
    render_png(
        drawn,
        symbol=params.symbol,
        path=path,
        support=support,
        resistance=resistance,
        fibs=fibs,
        lines=lines,
        marks=marks,
        zones=zones,
        window_start=window["start"] if window and len(drawn) > len(level_bars) else None,
        option=params.option,
    )
    render_ms = round((time.perf_counter() - started) * 1000.0, 1)
    data = {
        **bars_header(params.symbol, drawn),
        "path": str(path),
        "bytes": path.stat().st_size,
        "width_px": int(FIGSIZE[0] * DPI),
        "height_px": int(FIGSIZE[1] * DPI),
        "render_ms": render_ms,
        "annotations": {
            "support": support,
            "resistance": resistance,
            "fib_levels": fibs,
            "marks": marks,
            "option": params.option.model_dump(mode="json") if params.option is not None else None,
            "trendlines": [
                {k: ln[k] for k in ("type", "start", "end", "slope_per_day", "r_squared", "max_residual_atr")}
                for ln in lines
            ],
        },
    }
    if params.levels == "zones":
        data["annotations"]["zones"] = [
            {k: z[k] for k in ("kind", "low", "high", "touches", "strength")} for z in zones
        ]
        data["annotations"]["window"] = window
    summary = f"{params.symbol} chart {data['date']}: {path.name} ({data['bytes']} bytes, {render_ms} ms)"
    return ToolOutput(data=data, summary=summary, source_refs=refs, symbol=params.symbol)
