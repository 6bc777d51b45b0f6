"""Pure computations of the chart tools (:mod:`agents.tools.chart`): swing points, Fibonacci
levels, support/resistance levels and zones, and trendlines, on split/dividend-adjusted daily bars
(USD). Behaviour and output shapes follow docs/design.md, "Chart tools"."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pandas as pd

from agents.tools.bars import iso_dates

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


def _r(value: float, digits: int = 4) -> float:
    return round(float(value), digits)


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


_Candidate = tuple[float, int, str]


def _recency_weight(i: int, n: int) -> float:
    """The recency weight of bar ``i`` of ``n``: 2^(−age/``ZONE_HALF_LIFE``), age in bars from the last."""
    return float(2.0 ** (-(n - 1 - i) / ZONE_HALF_LIFE))


def _densest_bands(candidates: list[_Candidate], width: float, n: int) -> list[list[_Candidate]]:
    """The candidates (price USD, bar index of ``n``, source) as bands, densest first: the band
    [p, p + ``width``] (USD) holding the most recency weight of the remaining candidates is
    taken with its members, then the next, until none remain."""
    remaining = sorted(set(candidates))
    bands: list[list[_Candidate]] = []
    while remaining:
        best_start, best_w = 0, -1.0
        for s, (p, _, _) in enumerate(remaining):
            w = sum(_recency_weight(k, n) for q, k, _ in remaining[s:] if q <= p + width)
            if w > best_w + 1e-12:
                best_start, best_w = s, w
        p0 = remaining[best_start][0]
        members = [c for c in remaining if p0 <= c[0] <= p0 + width]
        bands.append(members)
        remaining = [c for c in remaining if c not in members]
    return bands


def _tested_spans(
    bands: list[list[_Candidate]], lows: np.ndarray, highs: np.ndarray, touch: float
) -> list[tuple[float, float, list[_Candidate]]]:
    """``(low, high, members)`` of the zones, lowest first: each band widened to the bars' lows
    and highs ``(n,)`` within ``touch`` (USD) outside it (the prices that tested it), and bands
    that then overlap merged into one."""
    spans: list[tuple[float, float, list[_Candidate]]] = []
    for members in bands:
        b_lo, b_hi = min(c[0] for c in members), max(c[0] for c in members)
        near = [float(v) for v in np.concatenate((lows, highs)) if b_lo - touch <= v <= b_hi + touch]
        spans.append((min([b_lo, *near]), max([b_hi, *near]), members))
    spans.sort(key=lambda sp: sp[0])
    merged: list[tuple[float, float, list[_Candidate]]] = []
    for lo, hi, members in spans:
        if merged and lo <= merged[-1][1]:
            m_lo, m_hi, m_members = merged[-1]
            merged[-1] = (m_lo, max(m_hi, hi), m_members + members)
        else:
            merged.append((lo, hi, members))
    return merged


def _zone_entry(
    span: tuple[float, float, list[_Candidate]],
    lows: np.ndarray,
    highs: np.ndarray,
    dates: list[str],
    *,
    current: float,
    atr: float,
) -> dict[str, Any]:
    """One zone of :func:`support_resistance_zones` (its docstring has the fields and rules) from
    its ``span`` (low, high USD, member candidates), the bars' lows, highs ``(n,)`` and ISO
    ``dates``, the close ``current`` (USD) and ATR(14) ``atr`` (USD; 0: no proximity discount)."""
    lo, hi, members = span
    n = len(lows)
    tested = sorted(
        {k for k in range(n) if lo <= lows[k] <= hi or lo <= highs[k] <= hi} | {c[1] for c in members}
    )
    episodes = [k for j, k in enumerate(tested) if j + 1 == len(tested) or tested[j + 1] != k + 1]
    mid = (lo + hi) / 2
    kind = "support" if lo < current and mid < current else "resistance"
    distance = max(0.0, lo - current, current - hi)
    proximity = 1.0 / (1.0 + distance / (PROXIMITY_ATR * atr)) if atr > 0 else 1.0
    touches = len(episodes)
    return {
        "low": round(lo, 2),
        "high": round(hi, 2),
        "price": round(lo if kind == "support" else hi, 2),
        "kind": kind,
        "strength": "strong" if touches >= 3 else "moderate" if touches == 2 else "weak",
        "touches": touches,
        "sources": sorted({c[2] for c in members}),
        "last_touch": dates[tested[-1]],
        "score": round(sum(_recency_weight(k, n) for k in episodes) * proximity, 4),
    }


def _nearest_zones(side: list[dict[str, Any]], current: float, num_zones: int) -> list[dict[str, Any]]:
    """The ``num_zones`` zones of one ``side`` (all support or all resistance) nearest the close
    ``current`` (USD), nearest first: by the gap below it to a support's high, above it to a
    resistance's low."""
    if not side:
        return []
    key = (lambda z: current - z["high"]) if side[0]["kind"] == "support" else (lambda z: z["low"] - current)
    return sorted(side, key=key)[:num_zones]


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
    bands = _densest_bands(_zone_candidates(bars, atr, lookback), width, n)
    zones = [
        _zone_entry(span, lows, highs, dates, current=current, atr=atr)
        for span in _tested_spans(bands, lows, highs, touch)
    ]
    support = _nearest_zones([z for z in zones if z["kind"] == "support"], current, num_zones)
    resistance = _nearest_zones([z for z in zones if z["kind"] == "resistance"], current, num_zones)
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
