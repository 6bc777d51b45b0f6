"""Baseline signals on real bars: checked against TA-Lib (an independent implementation) and
against a pass over the bars up to each date only (point in time)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import talib

from agents.quant.baselines import BASELINES, baseline_frame, signal_at


def _closes(stocknet_dir: Path, symbol: str) -> pd.Series:
    # read with the csv module: independent of the product's parsers
    with (stocknet_dir / f"{symbol}.csv").open() as fh:
        rows = [r for r in csv.DictReader(fh) if r["Adj Close"] not in ("", "null")]
    index = pd.DatetimeIndex([r["Date"] for r in rows])
    return pd.Series([float(r["Adj Close"]) for r in rows], index=index)


def _expected(close: np.ndarray, position: int) -> dict[str, str | None]:
    c = close[: position + 1]
    sma50, sma200 = talib.SMA(c, 50)[-1], talib.SMA(c, 200)[-1]
    macd, signal, _ = talib.MACD(c, fastperiod=12, slowperiod=26, signalperiod=9)
    rsi = talib.RSI(c, 14)[-1]

    def sign(v: float) -> str | None:
        return None if np.isnan(v) else "BUY" if v > 0 else "SELL" if v < 0 else "HOLD"

    return {
        "buy_and_hold": "BUY",
        "sma_50_200": sign(sma50 - sma200),
        "macd_12_26_9": sign(macd[-1] - signal[-1]),
        "rsi_14_30_70": None if np.isnan(rsi) else "BUY" if rsi < 30 else "SELL" if rsi > 70 else "HOLD",
    }


@pytest.mark.shared_data
@pytest.mark.parametrize("symbol", ["AAPL", "XOM", "GE"])
def test_baselines_agree_with_talib_on_bars_up_to_each_date(stocknet_dir: Path, symbol: str) -> None:
    close = _closes(stocknet_dir, symbol)
    frame = baseline_frame(close)
    values = close.to_numpy()
    checked = 0
    for position in range(250, len(close), 37):
        expected = _expected(values, position)
        for name in BASELINES:
            got = signal_at(frame, name=name, position=position)
            exp = expected[name]
            if name == "rsi_14_30_70" and exp is not None:
                # pandas-ta and TA-Lib seed Wilder's RSI differently; after 250 bars they agree to
                # 1e-6, so only a value within that of 30 or 70 could differ
                rsi = talib.RSI(values[: position + 1], 14)[-1]
                if min(abs(rsi - 30), abs(rsi - 70)) < 1e-6:
                    continue
            assert (got.signal if got else None) == exp, (symbol, close.index[position], name)
            checked += 1
    assert checked > 100
    # both directions occur on real data: the rules are not constants
    assert set(frame["sma_50_200"].dropna()) == {"BUY", "SELL"}
    assert set(frame["macd_12_26_9"].dropna()) == {"BUY", "SELL"}


@pytest.mark.shared_data
def test_the_full_history_pass_equals_a_pass_over_the_bars_up_to_the_date(stocknet_dir: Path) -> None:
    close = _closes(stocknet_dir, "MSFT")
    full = baseline_frame(close)
    for position in (210, 400, 777, len(close) - 1):
        sliced = baseline_frame(close.iloc[: position + 1])
        for name in BASELINES:
            assert signal_at(full, name=name, position=position) == signal_at(sliced, name=name, position=-1)


@pytest.mark.shared_data
def test_undefined_rules_give_no_signal_and_scores_follow_the_signal(stocknet_dir: Path) -> None:
    frame = baseline_frame(_closes(stocknet_dir, "AAPL").iloc[:60])  # fewer bars than SMA(200) needs
    assert signal_at(frame, name="sma_50_200", position=-1) is None
    bh = signal_at(frame, name="buy_and_hold", position=0)
    assert bh is not None and (bh.signal, bh.score) == ("BUY", 1.0)
    with pytest.raises(KeyError):
        signal_at(frame, name="kdj", position=0)
