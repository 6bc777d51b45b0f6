"""agents.quant.indicators: indicator values on real bars, checked against independent computations.

Reference values are computed here, independently of pandas-ta: TA-Lib (C implementation) and
plain numpy/pandas formulas, on OHLC adjusted by hand (not through ``adjusted_ohlc``).

Tolerances. Our outputs are rounded (``DECIMALS``: 4 dp prices/MACD/fractions, 2 dp RSI/ADX,
whole shares for OBV), so the allowed gap is half a unit of the last kept digit plus 1e-9
relative for floating-point noise. That is the *only* slack: pandas-ta seeds its Wilder averages
(RSI, ATR, ADX) and MACD's EMAs differently from TA-Lib, but after ≥ 366 bars of warm-up inside
the 400-bar window the seed's weight is (13/14)^366 ≈ 2e-12, far below the rounding unit (we
measured ≤ 2e-11 raw differences on AAPL). The same holds against TA-Lib on the *full* history,
which is how the tail-window claim is checked.
"""

from __future__ import annotations

import importlib.resources
import math
from collections.abc import Callable
from functools import cache

import numpy as np
import pandas as pd
import pytest
import talib

from agents.quant.indicators import (
    CONTEXT_KEYS,
    DECIMALS,
    INDICATOR_KEYS,
    MIN_BARS,
    TAIL_BARS,
    compute_indicators,
    warm_up,
)


@cache
def _bokeh_bars(ticker: str) -> pd.DataFrame:
    """Real daily bars (Quandl WIKI via bokeh_sampledata) as a provider-contract frame."""
    path = importlib.resources.files("bokeh_sampledata") / "_data/stocks.csv.gz"
    with path.open("rb") as fh:
        raw = pd.read_csv(fh, compression="gzip")
    rows = raw.loc[raw["Ticker"] == ticker]
    return pd.DataFrame(
        {
            "open": rows["Open"].to_numpy(dtype="float64"),
            "high": rows["High"].to_numpy(dtype="float64"),
            "low": rows["Low"].to_numpy(dtype="float64"),
            "close": rows["Close"].to_numpy(dtype="float64"),
            "adj_close": rows["Adj Close"].to_numpy(dtype="float64"),
            "volume": rows["Volume"].to_numpy(dtype="float64"),
        },
        index=pd.DatetimeIndex(pd.to_datetime(rows["Date"]), name="date"),
    )


def _bars(ticker: str, end: str) -> pd.DataFrame:
    return _bokeh_bars(ticker).loc[:end].copy()


def _adjust_by_hand(bars: pd.DataFrame) -> dict[str, np.ndarray]:
    """Back-adjust with adj_close/close, rescaled so the last adjusted close is the raw close."""
    factor = (bars["adj_close"] / bars["close"]).to_numpy()
    factor = factor * (bars["close"].iloc[-1] / bars["adj_close"].iloc[-1])
    return {
        "open": bars["open"].to_numpy() * factor,
        "high": bars["high"].to_numpy() * factor,
        "low": bars["low"].to_numpy() * factor,
        "close": bars["close"].to_numpy() * factor,
        "volume": bars["volume"].to_numpy(),
    }


def _close_enough(key: str, ours: float | str | None, ref: float) -> bool:
    assert isinstance(ours, float), f"{key}: expected a float, got {ours!r}"
    slack = 0.5 * 10.0 ** (-DECIMALS[key]) + 1e-9 * max(1.0, abs(ref))
    return abs(ours - ref) <= slack


def _talib_reference(adj: dict[str, np.ndarray]) -> dict[str, float]:
    """TA-Lib values at the last bar for every indicator TA-Lib has (all but hv_20)."""
    high, low, c = adj["high"], adj["low"], adj["close"]
    macd, signal, hist = talib.MACD(c, fastperiod=12, slowperiod=26, signalperiod=9)
    upper, middle, lower = talib.BBANDS(c, timeperiod=20, nbdevup=2, nbdevdn=2, matype=0)
    return {
        "rsi_14": talib.RSI(c, timeperiod=14)[-1],
        "macd": macd[-1],
        "macd_signal": signal[-1],
        "macd_hist": hist[-1],
        "bb_upper": upper[-1],
        "bb_middle": middle[-1],
        "bb_lower": lower[-1],
        "sma_50": talib.SMA(c, timeperiod=50)[-1],
        "sma_200": talib.SMA(c, timeperiod=200)[-1],
        "ema_21": talib.EMA(c, timeperiod=21)[-1],
        "atr_14": talib.ATR(high, low, c, timeperiod=14)[-1],
        "adx_14": talib.ADX(high, low, c, timeperiod=14)[-1],
    }


CASES = [
    ("AAPL", "2003-06-30"),
    ("AAPL", "2005-03-15"),  # 12 trading days after the 2:1 split of 2005-02-28
    ("AAPL", "2008-10-15"),  # crash: high volatility
    ("AAPL", "2013-03-01"),  # last bar of the data set
    ("IBM", "2009-03-09"),
    ("MSFT", "2011-12-30"),
]


@pytest.fixture(scope="module", autouse=True)
def _compiled() -> None:
    warm_up()


def test_keys_are_exactly_the_documented_ones() -> None:
    assert INDICATOR_KEYS == (
        "rsi_14",
        "macd",
        "macd_signal",
        "macd_hist",
        "bb_upper",
        "bb_middle",
        "bb_lower",
        "sma_50",
        "sma_200",
        "ema_21",
        "atr_14",
        "adx_14",
        "obv",
        "hv_20",
    )
    out = compute_indicators(bars=_bars("AAPL", "2013-03-01"))
    assert tuple(out) == INDICATOR_KEYS + CONTEXT_KEYS


@pytest.mark.parametrize(("ticker", "end"), CASES)
def test_indicators_match_talib_on_the_same_window(ticker: str, end: str) -> None:
    # given real bars and TA-Lib on the same 400-bar window, adjusted by hand
    bars = _bars(ticker, end)
    adj = _adjust_by_hand(bars.iloc[-TAIL_BARS:])
    ref = _talib_reference(adj)

    # when
    out = compute_indicators(bars=bars)

    # then every TA-Lib indicator agrees within rounding
    for key, value in ref.items():
        assert _close_enough(key, out[key], value), (key, out[key], value)
    # OBV: pandas-ta's first bar contributes 0 where TA-Lib starts at +volume[0]
    obv_ref = talib.OBV(adj["close"], adj["volume"])[-1] - adj["volume"][0]
    assert _close_enough("obv", out["obv"], obv_ref)


@pytest.mark.parametrize(("ticker", "end"), CASES)
def test_tail_window_agrees_with_full_history(ticker: str, end: str) -> None:
    # given TA-Lib on every bar up to `end` (up to 3,270 bars), not just the tail
    bars = _bars(ticker, end)
    assert len(bars) > TAIL_BARS
    ref = _talib_reference(_adjust_by_hand(bars))

    out = compute_indicators(bars=bars)

    # then the 400-bar tail loses nothing visible after rounding (OBV is window-defined: skipped)
    for key, value in ref.items():
        assert _close_enough(key, out[key], value), (key, out[key], value)


@pytest.mark.parametrize(("ticker", "end"), CASES)
def test_plain_formulas_sma_hv_52w_and_context(ticker: str, end: str) -> None:
    bars = _bars(ticker, end)
    adj = _adjust_by_hand(bars)
    close = pd.Series(adj["close"])

    out = compute_indicators(bars=bars)

    assert _close_enough("sma_50", out["sma_50"], close.rolling(50).mean().iloc[-1])
    assert _close_enough("sma_200", out["sma_200"], close.rolling(200).mean().iloc[-1])
    assert _close_enough("bb_middle", out["bb_middle"], close.iloc[-20:].mean())
    # HV: sample std of the last 20 log returns, annualised with 252 days, as a fraction
    returns = [math.log(close.iloc[i] / close.iloc[i - 1]) for i in range(len(close) - 20, len(close))]
    mean = sum(returns) / 20
    hv = math.sqrt(sum((r - mean) ** 2 for r in returns) / 19) * math.sqrt(252)
    assert _close_enough("hv_20", out["hv_20"], hv)
    # 52-week range: adjusted intraday high/low over the last 252 bars
    assert _close_enough("high_52w", out["high_52w"], adj["high"][-252:].max())
    assert _close_enough("low_52w", out["low_52w"], adj["low"][-252:].min())
    assert isinstance(out["close"], float)
    assert isinstance(out["high_52w"], float)
    assert out["pct_from_52w_high"] == round(out["close"] / out["high_52w"] - 1, 4)
    # the adjusted last close is the traded close (adjusted_ohlc rescales to the last bar)
    assert _close_enough("close", out["close"], bars["close"].iloc[-1])
    assert out["date"] == end
    assert out["bars_used"] == TAIL_BARS


def test_values_are_rounded_as_documented() -> None:
    out = compute_indicators(bars=_bars("AAPL", "2008-10-15"))
    for key, dp in DECIMALS.items():
        value = out[key]
        assert isinstance(value, float), key
        assert round(value, dp) == value, (key, value)
        assert not (value == 0 and math.copysign(1.0, value) < 0), f"{key} is -0.0"
    assert isinstance(out["bars_used"], int)


def test_split_does_not_look_like_a_crash() -> None:
    # given AAPL bars ending 12 trading days after the 2:1 split of 2005-02-28
    bars = _bars("AAPL", "2005-03-15")
    raw_close = bars["close"].to_numpy()
    split_day = bars.index.get_loc(pd.Timestamp("2005-02-28"))
    raw_drop = raw_close[split_day] / raw_close[split_day - 1] - 1
    raw_rsi = talib.RSI(raw_close, timeperiod=14)[-1]
    raw_vs_sma50 = raw_close[-1] / talib.SMA(raw_close, timeperiod=50)[-1]
    raw_returns = np.diff(np.log(raw_close[-21:]))
    raw_hv = raw_returns.std(ddof=1) * math.sqrt(252)
    raw_from_high = raw_close[-1] / bars["high"].to_numpy()[-252:].max() - 1
    # the unadjusted series shows a crash, so each check below would catch a missing adjustment
    assert raw_drop < -0.45
    assert raw_rsi < 30
    assert raw_vs_sma50 < 0.7
    assert raw_hv > 1.0
    assert raw_from_high < -0.45

    # when
    out = compute_indicators(bars=bars)

    # then nothing collapses
    assert isinstance(out["rsi_14"], float)
    assert out["rsi_14"] > 30
    assert isinstance(out["close"], float)
    assert isinstance(out["sma_50"], float)
    assert 0.8 < out["close"] / out["sma_50"] < 1.25
    assert isinstance(out["hv_20"], float)
    assert out["hv_20"] < 1.0
    assert isinstance(out["pct_from_52w_high"], float)
    assert out["pct_from_52w_high"] > -0.25
    # and the last close is the post-split traded price, not the back-adjusted one
    assert out["close"] == bars["close"].iloc[-1]


def test_insufficient_history_gives_none_never_a_value() -> None:
    out = compute_indicators(bars=_bokeh_bars("AAPL").iloc[:100])
    assert out["sma_200"] is None
    assert out["high_52w"] is None
    assert out["low_52w"] is None
    assert out["pct_from_52w_high"] is None
    assert out["bars_used"] == 100
    for key in ("rsi_14", "macd", "sma_50", "adx_14", "hv_20", "obv"):
        assert isinstance(out[key], float), key


@pytest.mark.parametrize("key", sorted(MIN_BARS))
def test_min_bars_boundary(key: str) -> None:
    bars = _bokeh_bars("MSFT")
    need = MIN_BARS[key]
    if need > 2:  # one bar fewer is still a valid input (two bars at least)
        assert compute_indicators(bars=bars.iloc[: need - 1])[key] is None
    assert isinstance(compute_indicators(bars=bars.iloc[:need])[key], float)


def test_two_bars_is_the_minimum() -> None:
    out = compute_indicators(bars=_bokeh_bars("IBM").iloc[:2])
    assert out["obv"] is not None
    assert all(out[k] is None for k in INDICATOR_KEYS if k != "obv")
    assert out["bars_used"] == 2


def test_nan_volume_gives_obv_none() -> None:
    bars = _bars("AAPL", "2004-12-31")
    bars.iloc[-5, bars.columns.get_loc("volume")] = np.nan
    out = compute_indicators(bars=bars)
    assert out["obv"] is None
    assert out["rsi_14"] is not None


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda b: b.iloc[:1], "at least 2 bars"),
        (lambda b: b.iloc[:0], "at least 2 bars"),
        (lambda b: b.assign(close=b["close"].where(b.index != b.index[-3])), "NaN"),
        (lambda b: b.assign(low=b["low"].where(b.index != b.index[10], 0.0)), "non-positive"),
        (lambda b: b.assign(adj_close=-b["adj_close"]), "non-positive"),
        (lambda b: b.drop(columns=["adj_close"]), "lack columns"),
        (lambda b: b.iloc[::-1], "ascending"),
        (lambda b: b.assign(volume=-b["volume"]), "negative volume"),
    ],
)
def test_invalid_bars_raise_value_error(mutate: Callable[[pd.DataFrame], pd.DataFrame], message: str) -> None:
    bars = mutate(_bars("AAPL", "2002-12-31"))
    with pytest.raises(ValueError, match=message):
        compute_indicators(bars=bars)


def test_warm_up_runs_on_real_data() -> None:
    assert warm_up() is None


def test_dollar_volume_is_the_mean_traded_value_of_twenty_sessions() -> None:
    bars = _bars("AAPL", "2005-03-15")  # spans the 2:1 split: traded value needs no adjustment
    expected = float((bars["close"].iloc[-20:] * bars["volume"].iloc[-20:]).mean())
    got = compute_indicators(bars=bars)["dollar_volume_20"]
    assert got == round(expected)
    assert compute_indicators(bars=bars.iloc[-19:])["dollar_volume_20"] is None
