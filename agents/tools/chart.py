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
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, model_validator

from agents.tools.bars import adjusted_bars, bars_header, period_start
from agents.tools.chart_levels import (
    BASE_MIN_BARS,
    BASE_RANGE_ATR,
    CLUSTER_ATR,
    FIB_RATIOS,
    GAP_MIN_ATR,
    PROXIMITY_ATR,
    RECENCY_HALF_LIFE,
    TRENDLINE_MAX_RESIDUAL_ATR,
    TRENDLINE_MIN_PIVOTS,
    TRENDLINE_MIN_R2,
    ZONE_HALF_LIFE,
    ZONE_TOUCH_ATR,
    ZONE_WIDTH_ATR,
    _r,
    atr_wilder,
    fib_levels,
    fitted_trendline,
    major_swing,
    support_resistance,
    support_resistance_zones,
    swing_points,
    trendline,
)
from agents.tools.chart_render import (
    DPI,
    EVENTS_AFTER_EXPIRY,
    FIGSIZE,
    LABEL_GAP_PX,
    LABEL_POINTS,
    PAYOFF_PANEL,
    PLOT_RIGHT,
    PLOT_RIGHT_OPTION,
    ChartEvent,
    ChartPayoff,
    OptionOverlay,
    draw_option,
    option_cone_ends,
    render_png,
    spread_labels,
)
from agents.tools.envelope import ErrorCode
from agents.tools.fields import HistoryRef, Period, Symbol
from agents.tools.history import cited_history
from agents.tools.registry import ToolContext, ToolInputError, ToolOutput, register

#: The chart tools and, re-exported, the computations (:mod:`agents.tools.chart_levels`) and the
#: rendering (:mod:`agents.tools.chart_render`) they use.
__all__ = [
    "BASE_MIN_BARS",
    "BASE_RANGE_ATR",
    "CLUSTER_ATR",
    "DPI",
    "EVENTS_AFTER_EXPIRY",
    "FIB_RATIOS",
    "FIGSIZE",
    "GAP_MIN_ATR",
    "LABEL_GAP_PX",
    "LABEL_POINTS",
    "PAYOFF_PANEL",
    "PLOT_RIGHT",
    "PLOT_RIGHT_OPTION",
    "PROXIMITY_ATR",
    "RECENCY_HALF_LIFE",
    "TRENDLINE_MAX_RESIDUAL_ATR",
    "TRENDLINE_MIN_PIVOTS",
    "TRENDLINE_MIN_R2",
    "ZONE_HALF_LIFE",
    "ZONE_TOUCH_ATR",
    "ZONE_WIDTH_ATR",
    "ChartEvent",
    "ChartLayers",
    "ChartPayoff",
    "FibInput",
    "OptionOverlay",
    "RenderInput",
    "SupportResistanceInput",
    "SwingInput",
    "TrendlineInput",
    "atr_wilder",
    "calculate_fib_levels",
    "calculate_swing_points",
    "calculate_trendline",
    "chart_layers",
    "draw_option",
    "fib_levels",
    "find_support_resistance",
    "fitted_trendline",
    "load_chart_bars",
    "major_swing",
    "option_cone_ends",
    "render_chart",
    "render_png",
    "spread_labels",
    "support_resistance",
    "support_resistance_zones",
    "swing_points",
    "trendline",
    "window_bars",
]


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
