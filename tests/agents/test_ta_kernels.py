"""``agents.quant.ta_kernels`` against pandas-ta itself (``talib=False``, TA-Lib switched off inside
pandas-ta so its ADX does not borrow TA-Lib's ATR), on real bars (Quandl WIKI via the
``bokeh_sampledata`` dependency), at every window length from each indicator's minimum to 120
bars and at 400 bars, at several end dates: the unrounded values agree to 1e-9."""

from __future__ import annotations

import importlib.resources
import sys
from collections.abc import Iterator
from functools import cache

import numpy as np
import pandas as pd
import pandas_ta as ta
import pytest
from pandas_ta.maps import Imports

from agents.data.market.base import adjusted_ohlc
from agents.quant import ta_kernels as kernels

TOL = 1e-9


@cache
def _adjusted(ticker: str) -> pd.DataFrame:
    """Real adjusted daily bars of ``ticker`` (``open, high, low, close, volume``)."""
    path = importlib.resources.files("bokeh_sampledata") / "_data/stocks.csv.gz"
    with path.open("rb") as fh:
        raw = pd.read_csv(fh, compression="gzip")
    rows = raw.loc[raw["Ticker"] == ticker]
    bars = pd.DataFrame(
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
    return adjusted_ohlc(bars)


def _windows() -> Iterator[tuple[str, int, int]]:
    """(ticker, end row, window length): short windows at the start of a listing and at a
    later date, and the 400-bar window compute_indicators uses, for three tickers."""
    for ticker, end in (("AAPL", 3000), ("IBM", 1500), ("MSFT", 2000)):
        for length in (*range(28, 121, 7), 400):
            yield ticker, end, length
    for length in range(2, 40):
        yield "GOOG", length, length  # the first bars of GOOG's listing (2004)


@pytest.fixture(autouse=True)
def _pandas_ta_without_talib(monkeypatch: pytest.MonkeyPatch) -> None:
    """pandas-ta's own code path everywhere (its ADX ignores ``talib=False`` for its ATR)."""
    monkeypatch.setitem(Imports, "talib", False)


def _last(value: pd.Series | None) -> float | None:
    if value is None or np.isnan(value.iloc[-1]):
        return None
    return float(value.iloc[-1])


def _same(ours: float | None, ref: float | None) -> bool:
    if ref is None or ours is None:
        return ours is ref
    return abs(ours - ref) <= TOL


@pytest.mark.parametrize(("ticker", "end", "length"), list(_windows()))
def test_kernels_equal_pandas_ta(ticker: str, end: int, length: int) -> None:
    window = _adjusted(ticker).iloc[max(end - length, 0) : end]
    close, high, low, volume = window["close"], window["high"], window["low"], window["volume"]
    c, h, lo, v = (s.to_numpy(dtype=np.float64) for s in (close, high, low, volume))
    n = len(window)
    pairs: list[tuple[str, float | None, float | None]] = [
        ("obv", kernels.obv(c, v), _last(ta.obv(close, volume, talib=False))),
    ]
    if n >= 15:
        pairs.append(("rsi", kernels.rsi(c, 14), _last(ta.rsi(close, length=14, talib=False))))
        ref_atr = _last(ta.atr(high, low, close, length=14, talib=False))
        pairs.append(("atr", kernels.atr(h, lo, c, 14), ref_atr))
    if n >= 21:
        pairs.append(("ema", kernels.ema(c, 21), _last(ta.ema(close, length=21, talib=False))))
    if n >= 20:
        bb = ta.bbands(close, length=20, lower_std=2.0, upper_std=2.0, ddof=0, talib=False)
        assert bb is not None
        ours_bb = kernels.bbands(c, 20, 2.0)
        for i, prefix in enumerate(("BBU_", "BBM_", "BBL_")):
            column = next(col for col in bb.columns if str(col).startswith(prefix))
            pairs.append((prefix, ours_bb[i], _last(bb[column])))
    if n >= 28:
        ref_adx = ta.adx(high, low, close, length=14, talib=False)
        assert ref_adx is not None
        pairs.append(("adx", kernels.adx(h, lo, c, 14), _last(ref_adx["ADX_14"])))
    if n >= 34:
        ref_macd = ta.macd(close, fast=12, slow=26, signal=9, talib=False)
        assert ref_macd is not None
        ours_macd = kernels.macd(c, 12, 26, 9)
        for i, name in enumerate(("MACD_12_26_9", "MACDs_12_26_9", "MACDh_12_26_9")):
            pairs.append((name, ours_macd[i], _last(ref_macd[name])))
    if n >= 50:
        pairs.append(("sma50", kernels.sma(c, 50), _last(ta.sma(close, length=50, talib=False))))
    bad = [(name, ours, ref) for name, ours, ref in pairs if not _same(ours, ref)]
    assert not bad, bad


def test_ewm_gap_is_pandas() -> None:
    """A NaN after the start (a zero DX denominator) follows pandas' own ewm."""
    values = np.array([np.nan, 1.0, 2.0, np.nan, 4.0, 3.0])
    ref = pd.Series(values).ewm(alpha=0.25, adjust=False).mean().to_numpy()
    np.testing.assert_allclose(kernels._ewm(values, 0.25), ref, rtol=0, atol=TOL)


@pytest.mark.parametrize("ticker", ["AAPL", "IBM", "GOOG"])
def test_the_recursion_gives_the_same_bits_with_and_without_scipy(
    ticker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The EMA recursion runs in scipy's lfilter where scipy.signal is loaded (a worker) and in
    Python elsewhere (the CLI): every indicator must come out identical to the last bit."""
    import scipy.signal  # noqa: F401  # loaded: the compiled path

    from agents.quant.indicators import compute_indicators

    bars = _adjusted(ticker).iloc[-400:].assign(adj_close=lambda f: f["close"])
    closes = bars["close"].to_numpy(dtype=np.float64)
    compiled = {alpha: kernels._recursion(closes, alpha) for alpha in (1 / 14, 2 / 13, 2 / 27, 0.2, 2 / 3)}
    with_scipy = compute_indicators(bars=bars)
    monkeypatch.delitem(sys.modules, "scipy.signal")  # the Python path
    for alpha, expected in compiled.items():
        assert np.array_equal(kernels._recursion(closes, alpha), expected), alpha
    assert compute_indicators(bars=bars) == with_scipy
