"""PNG rendering of the chart tools (:mod:`agents.tools.chart`): the option overlay's models
(events, payoff at expiry, ±1σ cone) and the candlestick chart drawn with mplfinance, with levels,
zones, trendlines and labels kept in the right margin."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

_RENDER_LOCK = threading.Lock()  # pyplot state is process-global


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


#: A horizontal line of the chart: (price in the bars' units, label, colour, line style).
_HLine = tuple[float, str, str, Literal["-", "--", ":"]]
#: A label of the right margin: (price in the bars' units, text, colour).
_Label = tuple[float, str, str]


def _horizontal_lines(
    support: list[float], resistance: list[float], fibs: dict[str, float], marks: dict[str, float]
) -> list[_HLine]:
    """Every horizontal line of :func:`render_png`, with its label (price to 2 dp): support
    (green), resistance (red), Fibonacci levels (blue, dashed), then ``marks`` (purple, dotted)."""
    return (
        [(p, f"S {p:,.2f}", "tab:green", "-") for p in support]
        + [(p, f"R {p:,.2f}", "tab:red", "-") for p in resistance]
        + [(p, f"Fib {k} {p:,.2f}", "tab:blue", "--") for k, p in fibs.items()]
        + [(p, f"{k} {p:,.2f}", "tab:purple", ":") for k, p in marks.items()]
    )


def _line_kwargs(hl: list[_HLine], lines: list[dict[str, Any]]) -> dict[str, Any]:
    """mplfinance's ``hlines`` for ``hl`` and ``alines`` for the trendlines ``lines`` (``{start,
    end: {date (ISO), price}}``; orange), each only when there are some."""
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
    return kwargs


def _fit_price_axis(
    ax: Any,
    zones: list[dict[str, Any]],
    marks: dict[str, float],
    option: OptionOverlay | None,
    index: pd.Index,
) -> tuple[float, float]:
    """Widen the price axis ``ax`` to hold the zones' edges, the ``marks`` and the option's ±1σ
    cone at its expiry (``index``: the bars' dates; 3 % of the axis' height beyond the
    outermost), never narrowing it.
    Returns the axis' final ``(low, high)`` in the bars' units."""
    lo, hi = ax.get_ylim()
    wanted = [z["low"] for z in zones] + [z["high"] for z in zones] + list(marks.values())
    if option is not None:  # the cone's ends stay in view
        wanted += list(option_cone_ends(option, pd.DatetimeIndex(index)))
    if wanted:
        pad = (hi - lo) * 0.03
        ax.set_ylim(min(lo, min(wanted) - pad), max(hi, max(wanted) + pad))
    lo, hi = ax.get_ylim()
    return lo, hi


def _zone_label(z: dict[str, Any]) -> str:
    """``"S 10.00–10.50 (3×)"``: a zone's kind, its band (one price when low equals high, 2 dp)
    and its tests when known."""
    t = z.get("touches")
    return (
        f"{'S' if z['kind'] == 'support' else 'R'} "
        + (f"{z['low']:,.2f}" if z["low"] == z["high"] else f"{z['low']:,.2f}–{z['high']:,.2f}")
        + (f" ({t}×)" if t is not None else "")
    )


def _draw_zones(ax: Any, zones: list[dict[str, Any]], lo: float, hi: float) -> list[_Label]:
    """Shade each zone (``{low, high, kind, touches}``: green support, red resistance) on ``ax``
    with a line at its edge a strike is set against (a support's low, a resistance's high).
    Returns the labels of the edges inside [``lo``, ``hi``]."""
    items: list[_Label] = []
    for z in zones:
        color = "tab:green" if z["kind"] == "support" else "tab:red"
        ax.axhspan(z["low"], z["high"], color=color, alpha=0.18, lw=0)
        edge = z["low"] if z["kind"] == "support" else z["high"]
        ax.axhline(edge, color=color, lw=0.6, alpha=0.7)
        if lo <= edge <= hi:
            items.append((edge, _zone_label(z), color))
    return items


def _draw_margin_labels(ax: Any, items: list[_Label], lo: float, hi: float) -> None:
    """Write the labels ``items`` in the right margin of ``ax`` (price axis [``lo``, ``hi``]),
    spread in data units by the data height of ``LABEL_GAP_PX`` on the axes as placed (the
    figure's size and the axes' share of it are fixed: no draw-time transform is needed), each
    joined to its price at the plot's edge by a leader line."""
    from matplotlib.transforms import blended_transform_factory

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


def _draw_legend(
    ax: Any,
    *,
    support: list[float],
    resistance: list[float],
    zones: list[dict[str, Any]],
    fibs: dict[str, float],
    lines: list[dict[str, Any]],
    marks: dict[str, float],
) -> None:
    """A legend (upper left) naming what is drawn: support, resistance (lines or zones),
    Fibonacci retracement, trendlines and the marks' names; none when nothing is."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

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

    marks = marks or {}
    zones = zones or []
    frame = bars.rename(columns=str.capitalize)[["Open", "High", "Low", "Close", "Volume"]]
    hl = _horizontal_lines(support, resistance, fibs, marks)
    kwargs = _line_kwargs(hl, lines)
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
        lo, hi = _fit_price_axis(ax, zones, marks, option, frame.index)
        items: list[_Label] = [(h[0], h[1], h[2]) for h in hl if lo <= h[0] <= hi]
        items += _draw_zones(ax, zones, lo, hi)
        if window_start is not None:
            first = int(np.searchsorted(frame.index.values, np.datetime64(window_start)))
            if 0 < first < len(frame):
                ax.axvline(first - 0.5, color="grey", lw=0.8, ls="--")
                ax.text(first - 0.3, hi, " levels' window", fontsize=7, color="grey", va="top")
        _draw_margin_labels(ax, items, lo, hi)
        _draw_legend(
            ax, support=support, resistance=resistance, zones=zones, fibs=fibs, lines=lines, marks=marks
        )
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
