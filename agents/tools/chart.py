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
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, model_validator

from agents.tools.bars import adjusted_bars, bars_header, iso_dates
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
    """``{symbol, history_ref?, period?, num_levels}``."""

    num_levels: int = Field(default=5, ge=1, le=20, description="Levels per side (default 5)")


@register(
    name="find_support_resistance",
    description=(
        "Support and resistance levels: swing highs/lows clustered within one ATR(14), weighted by recency "
        "and proximity; always the nearest support below and resistance above the close."
    ),
    input_model=SupportResistanceInput,
)
def find_support_resistance(params: SupportResistanceInput, ctx: ToolContext) -> ToolOutput:
    """Support and resistance zones (see :func:`support_resistance`). Returns data ``{symbol, date, bars_used,
    support, resistance, current_price}``."""
    bars, refs = load_chart_bars(params, ctx)
    levels = support_resistance(bars, params.num_levels)
    data = {
        **bars_header(params.symbol, bars),
        **levels,
    }
    summary = (
        f"{params.symbol} {data['date']}: support {[lv['price'] for lv in levels['support']]}, "
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


class RenderInput(_BarsInput):
    """``{symbol, history_ref?, period?, support_levels?, resistance_levels?, fib_levels?,
    trendlines?, auto_annotate}``."""

    support_levels: list[float] | None = Field(default=None, max_length=20, description="USD prices")
    resistance_levels: list[float] | None = Field(default=None, max_length=20, description="USD prices")
    fib_levels: dict[str, float] | None = Field(
        default=None, description="label → USD (calculate_fib_levels)"
    )
    trendlines: list[Literal["support", "resistance"]] | None = Field(
        default=None, max_length=2, description="Trendlines to fit and draw"
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
) -> None:
    """Candlesticks + volume (mplfinance, Agg backend) with support (green), resistance (red),
    Fibonacci (blue, dashed) horizontal lines, trendlines (orange) and ``marks`` (label → price,
    e.g. a plan's strike and breakeven; purple, dotted), each level labelled with its kind and
    price at the right edge, and a legend; saved as PNG at ``path``."""
    # lazy: matplotlib/mplfinance only when a chart is drawn (kept out of tool registration)
    import matplotlib

    matplotlib.use("Agg")
    # mplfinance's "yahoo" style asks for a semibold font DejaVu lacks: one stderr line per call.
    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)
    import matplotlib.pyplot as plt
    import mplfinance as mpf  # type: ignore[import-untyped]
    from matplotlib.lines import Line2D

    marks = marks or {}
    frame = bars.rename(columns=str.capitalize)[["Open", "High", "Low", "Close", "Volume"]]
    levels = [*support, *resistance, *fibs.values(), *marks.values()]
    colors = (
        ["tab:green"] * len(support)
        + ["tab:red"] * len(resistance)
        + ["tab:blue"] * len(fibs)
        + ["tab:purple"] * len(marks)
    )
    styles = ["-"] * (len(support) + len(resistance)) + ["--"] * len(fibs) + [":"] * len(marks)
    labels = (
        [f"S {p:,.2f}" for p in support]
        + [f"R {p:,.2f}" for p in resistance]
        + [f"Fib {k} {p:,.2f}" for k, p in fibs.items()]
        + [f"{k} {p:,.2f}" for k, p in marks.items()]
    )
    kwargs: dict[str, Any] = {}
    if levels:
        kwargs["hlines"] = {"hlines": levels, "colors": colors, "linestyle": styles, "linewidths": 0.8}
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
    with _RENDER_LOCK:
        fig, _axes = mpf.plot(
            frame,
            type="candle",
            style="yahoo",
            volume=True,
            title=f"{symbol} {frame.index[0].date()}..{frame.index[-1].date()} (adjusted)",
            figsize=(10, 6),
            returnfig=True,
            warn_too_much_data=10_000,
            **kwargs,
        )
        ax = _axes[0]
        low, high = ax.get_ylim()
        # labels inside the plot at the right edge, nudged apart so close levels stay readable
        gap = (high - low) * 0.04
        placed: list[float] = []
        shown = sorted(
            (item for item in zip(levels, labels, colors, strict=True) if low <= item[0] <= high),
            key=lambda item: item[0],
        )
        for price, text, color in shown:
            y = max(price, placed[-1] + gap) if placed else price
            placed.append(y)
            ax.text(
                len(frame) - 1, y, text, color=color, fontsize=7, va="center", ha="right",
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.75, "pad": 0.5},
            )  # fmt: skip
        legend: list[tuple[str, Literal["-", "--", ":"], str, object]] = [
            ("tab:green", "-", "support", support),
            ("tab:red", "-", "resistance", resistance),
            ("tab:blue", "--", "Fibonacci retracement", fibs),
            ("tab:orange", "-", "trendline", lines),
            ("tab:purple", ":", " / ".join(marks), marks),
        ]
        handles = [
            Line2D([], [], color=c, linestyle=st, label=lb) for c, st, lb, present in legend if present
        ]
        if handles:
            ax.legend(handles=handles, loc="best", fontsize=7, framealpha=0.8)
        try:
            fig.savefig(path, format="png", dpi=100)
        finally:
            plt.close(fig)


@register(
    name="render_chart",
    description=(
        "Render a candlestick chart (PNG) with support/resistance, Fibonacci levels and trendlines; "
        "returns the file path and size."
    ),
    input_model=RenderInput,
)
def render_chart(params: RenderInput, ctx: ToolContext) -> ToolOutput:
    """Write ``settings.service.state_dir/charts/<name>.png``: ``<name>`` is the analysis id inside an
    analysis, else ``render_chart_<digest of symbol, as_of and arguments>``.

    Returns data ``{symbol, date, bars_used, path, bytes, width_px, height_px, render_ms,
    annotations: {support, resistance, fib_levels, trendlines}}``.
    """
    bars, refs = load_chart_bars(params, ctx)
    support = list(params.support_levels or [])
    resistance = list(params.resistance_levels or [])
    fibs = dict(params.fib_levels or {})
    kinds = list(params.trendlines or [])
    if params.auto_annotate:
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
    lines: list[dict[str, Any]] = []
    close = float(bars["close"].iloc[-1])
    for kind in kinds:
        try:
            line = trendline(bars, kind)
        except ValueError:
            continue  # fewer than two swing points: nothing to draw
        # a "resistance" line that ends below the close (or a support above it) was broken: the
        # price is on its other side, so it is no longer that kind of level
        if (kind == "resistance") == (line["end"]["price"] >= close):
            lines.append(line)
    if ctx.analysis_id:
        name = ctx.analysis_id
    else:
        key = json.dumps([params.model_dump(mode="json"), ctx.as_of.isoformat()], sort_keys=True)
        name = "render_chart_" + hashlib.sha256(key.encode()).hexdigest()[:12]
    charts = Path(ctx.settings.service.state_dir) / "charts"
    charts.mkdir(parents=True, exist_ok=True)
    path = charts / f"{name}.png"
    started = time.perf_counter()
    marks = dict(params.marks or {})
    render_png(
        bars,
        symbol=params.symbol,
        path=path,
        support=support,
        resistance=resistance,
        fibs=fibs,
        lines=lines,
        marks=marks,
    )
    render_ms = round((time.perf_counter() - started) * 1000.0, 1)
    data = {
        **bars_header(params.symbol, bars),
        "path": str(path),
        "bytes": path.stat().st_size,
        "width_px": 1000,
        "height_px": 600,
        "render_ms": render_ms,
        "annotations": {
            "support": support,
            "resistance": resistance,
            "fib_levels": fibs,
            "marks": marks,
            "trendlines": [
                {k: ln[k] for k in ("type", "start", "end", "slope_per_day", "r_squared")} for ln in lines
            ],
        },
    }
    summary = f"{params.symbol} chart {data['date']}: {path.name} ({data['bytes']} bytes, {render_ms} ms)"
    return ToolOutput(data=data, summary=summary, source_refs=refs, symbol=params.symbol)
