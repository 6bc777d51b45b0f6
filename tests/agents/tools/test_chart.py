"""Chart tools on real AAPL bars: swing points, fib levels, S/R zones, trendlines, PNG."""

from __future__ import annotations

import itertools
import math
import time
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from agents.data.market.base import adjusted_ohlc
from agents.data.market.embedded import EmbeddedProvider
from agents.tools.bars import fetch_bars, period_start
from agents.tools.catalog import run_tool
from agents.tools.chart import fib_levels, support_resistance, swing_points, trendline
from agents.tools.registry import ToolContext
from core.settings import Settings, get_settings

AS_OF = date(2013, 3, 1)


def _ctx(tmp_path: Path, analysis_id: str | None = None) -> ToolContext:
    return ToolContext(
        settings=Settings(service_state_dir=tmp_path / "state"),
        as_of=AS_OF,
        provider=EmbeddedProvider(),
        analysis_id=analysis_id,
    )


def _bars(period: str = "6mo") -> pd.DataFrame:
    raw = fetch_bars(
        provider=EmbeddedProvider(),
        symbol="AAPL",
        start=period_start(period=period, as_of=AS_OF),
        end=AS_OF,
        settings=get_settings(),
    )
    return adjusted_ohlc(raw)


def test_swing_points_follow_the_seed_definition_on_real_bars(tmp_path: Path) -> None:
    env = run_tool(
        name="calculate_swing_points", arguments={"symbol": "AAPL", "lookback": 5}, ctx=_ctx(tmp_path)
    )
    assert env.ok and env.data
    points = env.data["swing_points"]
    bars = _bars()
    assert env.data["bars_used"] == len(bars) and env.data["date"] == "2013-03-01"
    assert points and all(5 <= p["index"] < len(bars) - 5 for p in points)
    # brute force, exactly as the definition reads (docs/design.md, "Swing points")
    highs, lows = bars["high"].tolist(), bars["low"].tolist()
    expected = []
    for i in range(5, len(bars) - 5):
        if highs[i] == max(highs[i - 5 : i + 6]):
            expected.append(("high", i))
        if lows[i] == min(lows[i - 5 : i + 6]):
            expected.append(("low", i))
    assert [(p["type"], p["index"]) for p in points] == expected
    top = max((p for p in points if p["type"] == "high"), key=lambda p: p["price"])
    assert top["price"] == pytest.approx(bars["high"].max(), abs=1e-4)


def test_too_few_bars_gives_no_swings_with_a_reason(tmp_path: Path) -> None:
    env = run_tool(
        name="calculate_swing_points",
        arguments={"symbol": "AAPL", "period": "5d", "lookback": 5},
        ctx=_ctx(tmp_path),
    )
    assert env.data and env.data["swing_points"] == [] and "not enough bars" in env.data["null_reason"]


def test_fib_levels_match_the_seed_formulas() -> None:
    up = fib_levels(110.0, 100.0, "up")
    assert up == {
        "0%": 110.0,
        "23.6%": 107.64,
        "38.2%": 106.18,
        "50%": 105.0,
        "61.8%": 103.82,
        "78.6%": 102.14,
        "100%": 100.0,
    }
    down = fib_levels(110.0, 100.0, "down")
    assert down["0%"] == 100.0 and down["61.8%"] == 106.18 and down["100%"] == 110.0


def test_fib_levels_from_real_bars_use_the_window_extremes(tmp_path: Path) -> None:
    env = run_tool(name="calculate_fib_levels", arguments={"symbol": "AAPL"}, ctx=_ctx(tmp_path))
    assert env.ok and env.data
    bars = _bars()
    d = env.data
    assert d["swing_high"] == pytest.approx(bars["high"].max(), abs=1e-4)
    assert d["swing_low"] == pytest.approx(bars["low"].min(), abs=1e-4)
    # AAPL fell from its Sept 2012 high to the Mar 2013 low: the high came first → "down"
    assert d["swing_high_date"] == "2012-09-21" and d["direction"] == "down"
    assert d["levels"]["50%"] == pytest.approx((d["swing_high"] + d["swing_low"]) / 2, abs=1e-3)


@pytest.mark.parametrize(
    "arguments",
    [{"swing_high": 100, "swing_low": 110, "direction": "up"}, {"swing_high": 100}, {}],
)
def test_fib_input_errors(tmp_path: Path, arguments: dict) -> None:
    env = run_tool(name="calculate_fib_levels", arguments=arguments, ctx=_ctx(tmp_path))
    assert env.error and env.error.code == "INVALID_INPUT"


def test_support_resistance_of_aapl_on_2012_06_29() -> None:
    """The levels a trader draws on AAPL's last six months to 2012-06-29 (close 584.00), checked
    by hand against the bars: the 2012-06-28 low 565.61 is the nearest support; the swing lows
    548.50 (06-04) and 555.00 (04-24) with the 548.21 high of 03-01 are one level (mean 550.57);
    516.22 (03-06), 522.18 (05-18) and the 526.29 high (02-15) another (521.56); the June highs
    581.50, 588.50, 590.00 and today's 584.00 are the nearest resistance (586.00); the 644.00
    high of 2012-04-10 is resistance too. ATR(14) 11.08 is the cluster tolerance."""
    raw = fetch_bars(
        provider=EmbeddedProvider(),
        symbol="AAPL",
        start=period_start(period="6mo", as_of=date(2012, 6, 29)),
        end=date(2012, 6, 29),
        settings=get_settings(),
    )
    out = support_resistance(adjusted_ohlc(raw), 4)
    assert out["current_price"] == pytest.approx(584.0)
    assert out["atr_14"] == pytest.approx(11.08, abs=0.01) and out["tolerance"] == out["atr_14"]
    supports = [lv["price"] for lv in out["support"]]
    assert supports[:3] == [565.61, 550.57, 521.56]
    assert [lv["price"] for lv in out["resistance"]] == [586.0, 644.0]
    assert out["nearest_support"]["price"] == 565.61 and out["nearest_resistance"]["price"] == 586.0
    assert all(p < 584.0 for p in supports)
    # no two levels of a side closer than the tolerance (the old 566.89 / 572.96 / 579.06 triple)
    assert all(abs(a - b) > out["tolerance"] for a, b in itertools.pairwise(supports))
    assert out["support"][1]["touches"] == 3 and out["support"][1]["last_touch"] == "2012-06-04"


def test_support_resistance_on_a_hand_built_series() -> None:
    idx = pd.date_range("2020-01-01", periods=4, freq="D")
    bars = pd.DataFrame(
        {
            "high": [100.8, 100.5, 120.0, 110.0],
            "low": [100.0, 99.9, 119.5, 109.0],
            "close": [100, 100, 119, 109.5],
        },
        index=idx,
    )
    out = support_resistance(bars, 2)
    # true ranges 0.8, 0.6, 20, 10 → ATR (mean, < 15 bars) 7.85 = tolerance. Too few bars for
    # swings: every high and low is a candidate; 99.9..100.8 is one level (two bars, mean 100.3),
    # 109/110 another (109.5, at the close → resistance), 119.5/120 a third (119.75).
    assert out["atr_14"] == pytest.approx(7.85)
    assert out["support"] == [
        {"price": 100.3, "kind": "support", "strength": "moderate", "touches": 2, "last_touch": "2020-01-02",
         "score": out["support"][0]["score"]}
    ]  # fmt: skip
    assert [lv["price"] for lv in out["resistance"]] == [109.5, 119.75]


def test_trendline_is_a_least_squares_fit_through_swing_points(tmp_path: Path) -> None:
    env = run_tool(
        name="calculate_trendline", arguments={"symbol": "AAPL", "type": "support"}, ctx=_ctx(tmp_path)
    )
    assert env.ok and env.data
    line = env.data["trendline"]
    bars = _bars()
    lows = [p for p in swing_points(bars, 5) if p["type"] == "low"]
    x = np.array([(pd.Timestamp(p["date"]) - pd.Timestamp(lows[0]["date"])).days for p in lows], dtype=float)
    y = np.array([p["price"] for p in lows])
    slope, intercept = np.polyfit(x, y, 1)
    r2 = np.corrcoef(x, y)[0, 1] ** 2
    assert line["points"] == len(lows)
    assert line["slope_per_day"] == pytest.approx(slope, abs=1e-4)
    assert line["intercept"] == pytest.approx(intercept, abs=1e-4)
    assert line["r_squared"] == pytest.approx(r2, abs=1e-4)
    assert line["direction"] == "falling" and line["slope_per_day"] < 0  # AAPL, autumn 2012 to Mar 2013


def test_trendline_exact_on_a_straight_line() -> None:
    idx = pd.bdate_range("2020-01-01", periods=60)
    t = np.arange(60, dtype=float)
    wave = np.sin(t / 3.0) * 2.0
    close = 100 + 0.5 * t + wave
    bars = pd.DataFrame({"high": close + 1, "low": close - 1, "close": close}, index=idx)
    line = trendline(bars, "resistance", lookback=2)
    assert line["points"] >= 2 and line["slope_per_day"] > 0 and line["direction"] == "rising"


def test_trendline_needs_two_swing_points(tmp_path: Path) -> None:
    env = run_tool(
        name="calculate_trendline",
        arguments={"symbol": "AAPL", "period": "1mo", "lookback": 10},
        ctx=_ctx(tmp_path),
    )
    assert env.error and env.error.code == "NO_DATA" and "a trendline needs 2" in env.error.message


def test_render_chart_writes_a_png_under_the_state_dir(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, analysis_id="an-123")
    started = time.perf_counter()
    env = run_tool(name="render_chart", arguments={"symbol": "AAPL"}, ctx=ctx)
    first = time.perf_counter() - started
    assert env.ok and env.data
    path = Path(env.data["path"])
    assert path == tmp_path / "state" / "charts" / "an-123.png"
    blob = path.read_bytes()
    assert blob[:8] == b"\x89PNG\r\n\x1a\n" and len(blob) == env.data["bytes"] > 20_000
    ann = env.data["annotations"]
    assert ann["resistance"] and ann["fib_levels"]["50%"]
    # AAPL's falling highs of late 2012 fit a resistance line; its lows fit none, so none is drawn
    assert [ln["type"] for ln in ann["trendlines"]] == ["resistance"]
    assert ann["trendlines"][0]["r_squared"] >= 0.8 and ann["trendlines"][0]["max_residual_atr"] <= 1.0
    started = time.perf_counter()
    again = run_tool(name="render_chart", arguments={"symbol": "AAPL", "period": "1y"}, ctx=ctx)
    second = time.perf_counter() - started
    assert again.ok and again.data and again.data["bars_used"] > 240
    # the times are printed, not asserted (a loaded machine makes any bound flaky; bench/ measures)
    print(f"render_chart: first {first * 1000:.0f} ms (imports), warm {second * 1000:.0f} ms")


def test_render_chart_from_a_history_ref_with_explicit_annotations(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    hist = run_tool(name="get_history", arguments={"symbol": "AAPL", "period": "3mo"}, ctx=ctx)
    env = run_tool(
        name="render_chart",
        arguments={
            "symbol": "AAPL",
            "history_ref": hist.tool_call_id,
            "support_levels": [440.0],
            "resistance_levels": [520.0],
            "fib_levels": {"50%": 480.0},
            "trendlines": [],
        },
        ctx=ctx,
    )
    assert env.ok and env.data and hist.tool_call_id in env.source_refs
    assert env.data["annotations"]["support"] == [440.0] and env.data["annotations"]["trendlines"] == []
    assert Path(env.data["path"]).parent == tmp_path / "state" / "charts"
    assert Path(env.data["path"]).read_bytes()[:4] == b"\x89PNG"


def test_history_ref_of_another_symbol_is_refused(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    hist = run_tool(name="get_history", arguments={"symbol": "MSFT", "period": "3mo"}, ctx=ctx)
    env = run_tool(
        name="find_support_resistance",
        arguments={"symbol": "AAPL", "history_ref": hist.tool_call_id},
        ctx=ctx,
    )
    assert env.error and env.error.code == "INVALID_INPUT"


def _pandas_swings(bars: pd.DataFrame, lookback: int) -> list[tuple[str, int]]:
    """The swing-point definition written with pandas' centred rolling windows (the reference)."""
    window = 2 * lookback + 1
    is_high = bars["high"].rolling(window, center=True).max() == bars["high"]
    is_low = bars["low"].rolling(window, center=True).min() == bars["low"]
    out = []
    for i in range(lookback, len(bars) - lookback):
        if is_high.iloc[i]:
            out.append(("high", i))
        if is_low.iloc[i]:
            out.append(("low", i))
    return out


def _pandas_atr(bars: pd.DataFrame, period: int = 14) -> float:
    prev = bars["close"].shift(1)
    tr = pd.concat(
        [bars["high"] - bars["low"], (bars["high"] - prev).abs(), (bars["low"] - prev).abs()], axis=1
    ).max(axis=1)
    if len(bars) <= period:
        return float(tr.mean())
    return float(tr.ewm(alpha=1.0 / period, adjust=False).mean().iloc[-1])


@pytest.mark.parametrize("symbol", ["AAPL", "GOOG"])
def test_swings_and_atr_match_the_pandas_definitions_on_real_bars(symbol: str) -> None:
    from agents.tools.chart import atr_wilder, swing_points

    bars = adjusted_ohlc(EmbeddedProvider().bars(symbol=symbol, start=date(2008, 1, 2), end=date(2013, 3, 1)))
    for end in (8, 11, 15, 60, 250, 400, len(bars)):
        window = bars.iloc[max(0, end - 400) : end].copy()
        for gap in (False, True):
            if gap:  # a missing high: no swing around it, and the ATR skips it like pandas
                window.iloc[len(window) // 2, window.columns.get_loc("high")] = np.nan
            assert [(p["type"], p["index"]) for p in swing_points(window, 5)] == _pandas_swings(window, 5)
            ours, reference = atr_wilder(window), _pandas_atr(window)
            assert ours == reference or (np.isnan(ours) and np.isnan(reference))


def test_render_input_marks_are_labelled_positive_prices() -> None:
    from pydantic import ValidationError

    from agents.tools.chart import RenderInput

    params = RenderInput(symbol="AAPL", marks={"CSP strike": 88.57, "breakeven": 87.99})
    assert list((params.marks or {}).items()) == [("CSP strike", 88.57), ("breakeven", 87.99)]
    with pytest.raises(ValidationError):
        RenderInput(symbol="AAPL", marks={"strike": 0.0})
    with pytest.raises(ValidationError):
        RenderInput(symbol="AAPL", csp_strike=88.57)  # the plan-specific argument is gone: marks


# --------------------------------------------------------------------------- zones (csp plan)


def _zones(stocknet: Path | None, symbol: str, as_of: date) -> dict:
    from agents.data.market.csv_folder import CsvFolderProvider
    from agents.tools.chart import support_resistance_zones

    provider = CsvFolderProvider(data_dir=stocknet) if stocknet is not None else EmbeddedProvider()
    raw = fetch_bars(
        provider=provider,
        symbol=symbol,
        start=period_start(period="6mo", as_of=as_of),
        end=as_of,
        settings=get_settings(),
    )
    return support_resistance_zones(adjusted_ohlc(raw), 5)


def test_zones_aapl_2014_06_06_support_low_is_the_june_2_swing_low(stocknet_dir: Path) -> None:
    """stocknet AAPL, six months to 2014-06-06 (close 92.2243 in the file, 645.57 on the shares
    traded that day: the bars are ×7). The pullback's low is 88.928574 on 2014-06-02 (file),
    = 622.50 traded; the lows around it, 89.111427 (05-28) and 89.842857 (05-30) = 623.78 and
    628.90, are the zone's tests. The support zone nearest the close must start exactly there,
    not at a cluster mean (the old 626.28)."""
    out = _zones(stocknet_dir, "AAPL", date(2014, 6, 6))
    assert out["current_price"] == pytest.approx(645.57)
    assert out["window"] == {"start": "2013-12-06", "end": "2014-06-06", "bars": 125}
    nearest = out["nearest_support"]
    assert nearest["low"] == pytest.approx(88.928574 * 7, abs=0.01)  # 622.50
    assert nearest["price"] == nearest["low"]
    assert nearest["high"] == pytest.approx(89.842857 * 7, abs=0.01)  # 628.90
    assert nearest["high"] < out["current_price"]
    # every zone is a band below (support) or above (resistance) the close
    assert all(z["low"] <= z["high"] < 645.57 or z["low"] < 645.57 for z in out["support"])
    assert all(z["high"] > 645.57 for z in out["resistance"])


def test_zones_goog_2015_12_24_the_december_base_and_the_earnings_gap(stocknet_dir: Path) -> None:
    """GOOG, six months to 2015-12-24 (close 748.40): the lows 737.43 (11-19), 737.63 (11-24),
    737.00 (12-09), 736.75 (12-11) and 738.15 (12-18) are one zone whose low is 736.75 (the
    12-14 spike to 724.17 is not part of it); the 2015-10-23 earnings gap (10-22 high 657.80,
    10-23 low 701.50) leaves the zone of its top edge and the base after it (lows 701.26 10-26,
    704.55, 703.08), 701.26 its low."""
    out = _zones(stocknet_dir, "GOOG", date(2015, 12, 24))
    nearest = out["nearest_support"]
    assert nearest["low"] == pytest.approx(736.75)
    for low in (737.43, 737.63, 737.00, 736.75, 738.15):
        assert nearest["low"] <= low <= nearest["high"]
    assert nearest["touches"] >= 4 and nearest["strength"] == "strong"
    gap = [z for z in out["support"] if z["low"] <= 701.5 <= z["high"]]
    assert len(gap) == 1 and gap[0]["low"] == pytest.approx(701.26) and "gap" in gap[0]["sources"]
    assert gap[0]["high"] < 724.17  # the 12-14 spike belongs to neither zone


def test_zones_aapl_2012_06_29_embedded() -> None:
    """AAPL (bokeh sample data), six months to 2012-06-29, close 584.00: the June pullback lows
    565.61 (06-28), 565.50 (06-06), 566.70 (06-12) lie in one support zone; the 06-04 swing low
    548.50 in another below it; the June highs 588.50 (06-11) and 590.00 (06-19) in the
    resistance zone over the close; the 2012-04-10 high 644.00 is the window's top."""
    out = _zones(None, "AAPL", date(2012, 6, 29))
    assert out["current_price"] == pytest.approx(584.0)
    sup, res = out["support"], out["resistance"]

    def zone_of(zones: list[dict], price: float) -> dict:
        hits = [z for z in zones if z["low"] <= price <= z["high"]]
        assert len(hits) == 1, (price, zones)
        return hits[0]

    june = zone_of(sup, 565.61)
    assert zone_of(sup, 565.50) is june and zone_of(sup, 566.70) is june
    assert zone_of(sup, 548.50)["high"] < june["low"]
    top = zone_of(res, 590.0)
    assert zone_of(res, 588.50) is top and top["high"] == pytest.approx(590.0)
    assert all(z["high"] > 584.0 for z in res)


def test_zones_tool_states_its_one_window(tmp_path: Path) -> None:
    """With a two-year history the zones use the stated period only (the row's arguments)."""
    ctx = _ctx(tmp_path)
    hist = run_tool(name="get_history", arguments={"symbol": "AAPL", "period": "2y"}, ctx=ctx)
    env = run_tool(
        name="find_support_resistance",
        arguments={"symbol": "AAPL", "history_ref": hist.tool_call_id, "method": "zones", "period": "3mo"},
        ctx=ctx,
    )
    assert env.ok and env.data
    window = env.data["window"]
    assert window["period"] == "3mo" and window["end"] == "2013-03-01" and window["start"] >= "2012-12-01"
    assert env.data["bars_used"] == window["bars"] < hist.data["count"]  # the history is longer


def test_spread_labels_never_overlap() -> None:
    from agents.tools.chart import spread_labels

    out = spread_labels([100.0, 101.0, 102.0, 300.0], gap=13.0, low=0.0, high=400.0)
    assert out[3] == 300.0 and out[0] == 100.0
    ordered = sorted(out)
    assert all(b - a >= 13.0 - 1e-9 for a, b in itertools.pairwise(ordered))
    top = spread_labels([395.0, 396.0, 397.0], gap=13.0, low=0.0, high=400.0)
    assert max(top) <= 400.0 and all(b - a >= 13.0 - 1e-9 for a, b in itertools.pairwise(sorted(top)))


def test_trendline_only_where_the_pivots_fit() -> None:
    from agents.tools.chart import fitted_trendline

    idx = pd.bdate_range("2021-01-04", periods=60)
    # a clean rising zig-zag: lows on a straight line, a support line fits
    base = np.arange(60) * 0.5 + 100 + 3 * np.sin(np.arange(60) / 2.0)
    bars = pd.DataFrame({"open": base, "high": base + 1, "low": base - 1, "close": base}, index=idx)
    line = fitted_trendline(bars, "support")
    assert line is not None and line["r_squared"] >= 0.8 and line["points"] >= 4
    # pivots scattered at random around a flat level: no line
    rng = np.random.default_rng(7)
    noisy = 100 + rng.normal(0, 5, 60)
    bars = pd.DataFrame({"open": noisy, "high": noisy + 1, "low": noisy - 1, "close": noisy}, index=idx)
    assert fitted_trendline(bars, "support") is None


def test_spread_labels_never_collide_on_any_input() -> None:
    """Seeded random clusters of up to 14 labels, anywhere in or out of the range: every pair of
    labels ends at least the gap apart, and inside the range whenever the range can hold them."""
    import random

    from agents.tools.chart import spread_labels

    rng = random.Random(20151224)
    for _ in range(500):
        n = rng.randint(1, 14)
        low, high = 0.0, rng.uniform(50.0, 400.0)
        centre = rng.uniform(-50.0, high + 50.0)
        ys = [centre + rng.gauss(0.0, rng.choice((0.5, 5.0, 50.0))) for _ in range(n)]
        gap = 13.0
        out = spread_labels(ys, gap=gap, low=low, high=high)
        ordered = sorted(out)
        assert all(b - a >= gap - 1e-9 for a, b in itertools.pairwise(ordered)), (ys, out)
        if gap * (n - 1) <= high - low:
            assert low - 1e-9 <= min(out) and max(out) <= high + 1e-9, (ys, out)
        # labels keep their order: the leader lines never cross
        assert [i for i, _ in sorted(enumerate(out), key=lambda t: (t[1], t[0]))] == [
            i for i, _ in sorted(enumerate(ys), key=lambda t: (t[1], t[0]))
        ]


def test_render_chart_draws_an_option_overlay(tmp_path: Path) -> None:
    """The expiry, the ±1σ cone, an event and a payoff panel: the PNG is written and the
    annotations carry the overlay; the payoff's P&L is the short put's, by hand."""
    from agents.tools.chart import ChartPayoff, OptionOverlay, option_cone_ends

    overlay = {
        "expiry": "2013-03-15",
        "sigma": 0.25,
        "spot": 430.0,
        "events": [{"date": "2013-03-12", "label": "earnings (estimated)"}],
        "payoff": {"kind": "short_put", "strike": 410.0, "spot": 430.0, "net": 519.35, "contracts": 2},
    }
    env = run_tool(
        name="render_chart",
        arguments={"symbol": "AAPL", "period": "6mo", "levels": "zones", "option": overlay},
        ctx=_ctx(tmp_path),
    )
    assert env.ok and env.data, env.error
    assert Path(env.data["path"]).stat().st_size > 10_000
    assert env.data["annotations"]["option"]["expiry"] == "2013-03-15"
    payoff = ChartPayoff(**overlay["payoff"])
    assert payoff.pnl(420.0) == pytest.approx(2 * 519.35)
    assert payoff.pnl(400.0) == pytest.approx(2 * (519.35 - 10 * 100))
    lo, hi = option_cone_ends(OptionOverlay(**overlay), pd.DatetimeIndex([pd.Timestamp("2013-03-01")]))
    h = 10  # sessions 2013-03-04 .. 03-15
    assert hi == pytest.approx(430.0 * math.exp(0.25 * math.sqrt(h / 252)))
    assert lo == pytest.approx(430.0 * math.exp(-0.25 * math.sqrt(h / 252)))
