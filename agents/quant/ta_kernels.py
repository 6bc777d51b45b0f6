"""pandas-ta's indicator formulas on numpy arrays, for the value at the last bar only.

Why our own code instead of calling pandas-ta: pandas-ta builds and combines a dozen pandas
``Series`` per indicator (validation, ``concat``, ``.apply``, naming), and that per-call
machinery, not the arithmetic, was the cost: ``compute_indicators`` took ≈ 6.5 ms CPU per call
on 400 bars, a third of a pipeline stage's CPU (``bench/stage_profile.py``, 2026-11-23). The
same formulas on numpy arrays, with the exponential recursions run by ``scipy.signal.lfilter``
(compiled) in a worker, or the same recursion in Python where scipy is not loaded, take a
fraction of that. TA-Lib would be as fast but is not a runtime dependency,
and its seeds differ from pandas-ta's on short histories (see :mod:`agents.quant.indicators`).

Every function reproduces pandas-ta 0.4.71b0 with ``talib=False`` (``rsi``, ``ema``, ``macd``,
``sma``, ``bbands`` with ``ddof=0``, ``atr``, ``adx``, ``obv``) step by step, cited per
function; ``tests/agents/test_ta_kernels.py`` checks them against pandas-ta on real bars to
1e-9. Inputs are float64 arrays without NaN (``agents.quant.indicators`` validates bars first), oldest
first; outputs are the unrounded value at the last element, or ``None`` when pandas-ta would
give ``None``/NaN there.
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
from numpy.typing import NDArray

Array = NDArray[np.float64]


def _ewm(values: Array, alpha: float) -> Array:
    """``pd.Series(values).ewm(alpha=alpha, adjust=False).mean()`` as an array.

    Leading NaNs stay NaN and the recursion ``yₜ = (1 − α)·yₜ₋₁ + α·xₜ`` starts at the first
    value (pandas' ``adjust=False`` definition), run by :func:`_recursion`. A NaN after the
    first value (pandas then decays the old weight across the gap) is rare here (a zero
    denominator in ADX), so that case is handed to pandas itself rather than re-implemented.
    """
    out = np.full(values.shape, np.nan)
    valid = np.flatnonzero(~np.isnan(values))
    if valid.size == 0:
        return out
    start = int(valid[0])
    tail = values[start:]
    if np.isnan(tail).any():
        return np.asarray(pd.Series(values).ewm(alpha=alpha, adjust=False).mean(), dtype=np.float64)
    out[start:] = _recursion(tail, alpha)
    return out


def _recursion(tail: Array, alpha: float) -> Array:
    """``yₜ = α·xₜ + (1 − α)·yₜ₋₁`` over ``tail`` from ``y₋₁ = x₀``, bit for bit the same two
    ways: ``scipy.signal.lfilter`` (compiled, ~20 µs for 500 values) when the process has
    imported it already, as a worker does at start (``tasks.app``), else a Python loop
    (~0.1-0.2 ms): importing scipy.signal costs ~0.4 s, more than a CLI analysis computes with
    it. Both evaluate ``α·x + (1 − α)·y`` per step in the same float order (lfilter's transposed
    direct form II with the state ``(1 − α)·x₀``), so the choice never changes a digit
    (``tests/agents/test_ta_kernels.py``)."""
    signal = sys.modules.get("scipy.signal")
    if signal is not None:
        filtered, _ = signal.lfilter([alpha], [1.0, alpha - 1.0], tail, zi=[(1.0 - alpha) * tail[0]])
        return np.asarray(filtered, dtype=np.float64)
    keep = 1.0 - alpha
    y = float(tail[0])
    out: list[float] = []
    append = out.append
    for x in tail.tolist():
        y = alpha * x + keep * y
        append(y)
    return np.array(out, dtype=np.float64)


def _ema_presma(values: Array, length: int) -> Array:
    """pandas-ta ``ema(presma=True)``: the first ``length`` values are replaced by NaN except
    the ``length``-th, which becomes their mean (NaNs skipped); then ``ewm(span=length,
    adjust=False)``, i.e. α = 2 / (length + 1). Source: ``pandas_ta/overlap/ema.py``."""
    seeded = values.astype(np.float64, copy=True)
    seeded[length - 1] = np.nanmean(values[:length])
    seeded[: length - 1] = np.nan
    return _ewm(seeded, 2.0 / (length + 1.0))


def _last(values: Array) -> float | None:
    """The last element as a float, ``None`` when NaN."""
    last = float(values[-1])
    return None if np.isnan(last) else last


def rsi(close: Array, length: int = 14) -> float | None:
    """RSI at the last bar: ``100 · RMA(gains) / (RMA(gains) + |RMA(losses)|)``, RMA = Wilder's
    ``ewm(alpha=1/length, adjust=False)`` from the first difference (``pandas_ta/momentum/rsi.py``)."""
    diff = np.concatenate(([np.nan], np.diff(close)))
    gains = np.where(diff < 0, 0.0, diff)
    losses = np.where(diff > 0, 0.0, diff)
    up = _ewm(gains, 1.0 / length)
    down = _ewm(losses, 1.0 / length)
    with np.errstate(invalid="ignore", divide="ignore"):  # a flat window: 0/0 is NaN, as in pandas
        return _last(100.0 * up / (up + np.abs(down)))


def ema(close: Array, length: int) -> float | None:
    """EMA(length) at the last bar, SMA-seeded (``pandas_ta/overlap/ema.py``, ``presma=True``)."""
    return _last(_ema_presma(close, length))


def macd(
    close: Array, fast: int = 12, slow: int = 26, signal: int = 9
) -> tuple[float | None, float | None, float | None]:
    """(MACD, signal, histogram) at the last bar (``pandas_ta/momentum/macd.py``): EMA(fast) −
    EMA(slow), the signal an SMA-seeded EMA(signal) of MACD from its first valid value, the
    histogram MACD − signal unrounded."""
    line = _ema_presma(close, fast) - _ema_presma(close, slow)
    first = int(np.flatnonzero(~np.isnan(line))[0])
    sig = np.full(line.shape, np.nan)
    sig[first:] = _ema_presma(line[first:], signal)
    return _last(line), _last(sig), _last(line - sig)


def sma(close: Array, length: int) -> float | None:
    """Mean of the last ``length`` closes (``pandas_ta/overlap/sma.py``)."""
    return float(np.mean(close[-length:]))


def bbands(close: Array, length: int = 20, std: float = 2.0) -> tuple[float, float, float]:
    """(upper, middle, lower) Bollinger bands at the last bar: SMA(length) ± ``std`` × the
    population std (ddof=0) of the last ``length`` closes (``pandas_ta/volatility/bbands.py``)."""
    window = close[-length:]
    mid = float(np.mean(window))
    dev = float(np.std(window, ddof=0))
    return mid + std * dev, mid, mid - std * dev


def _true_range(high: Array, low: Array, close: Array) -> Array:
    """pandas-ta ``true_range(prenan=False)``: max of |high − low| (plus machine epsilon
    everywhere when any range is zero: ``non_zero_range``), |high − prev close|,
    |prev close − low|; the first bar has no previous close, so its range is high − low."""
    hl = high - low
    if bool((hl == 0).any()):
        hl = hl + sys.float_info.epsilon
    prev = np.concatenate(([np.nan], close[:-1]))
    stacked = np.abs(np.vstack((hl, high - prev, prev - low)))
    return np.asarray(np.nanmax(stacked, axis=0), dtype=np.float64)


def _atr_series(high: Array, low: Array, close: Array, length: int, *, prenan: bool) -> Array:
    """pandas-ta ``atr`` (``pandas_ta/volatility/atr.py``, ``talib=False``): true range, the
    ``length``-th value replaced by the mean of the first ``length`` (NaN skipped; with
    ``prenan`` the first bar's range is NaN), the values before it NaN, then Wilder's RMA."""
    tr = _true_range(high, low, close)
    if prenan:
        tr[0] = np.nan
    seed = np.nanmean(tr[:length])
    tr[: length - 1] = np.nan
    tr[length - 1] = seed
    return _ewm(tr, 1.0 / length)


def atr(high: Array, low: Array, close: Array, length: int = 14) -> float | None:
    """ATR(length) at the last bar, Wilder smoothing, SMA-seeded (``pandas_ta/volatility/atr.py``)."""
    return _last(_atr_series(high, low, close, length, prenan=False))


def adx(high: Array, low: Array, close: Array, length: int = 14) -> float | None:
    """ADX(length) at the last bar (``pandas_ta/trend/adx.py``, default mode): +DM/−DM from the
    up and down moves, each RMA-smoothed and scaled by 100 / ATR(length, prenan), DX =
    100·|+DI − −DI| / (+DI + −DI), ADX = RMA(DX).

    pandas-ta calls its ATR here without ``talib=False``, so with TA-Lib installed its ATR (and
    therefore DX) starts one bar later; this function always follows pandas-ta's own ATR, so the
    value does not depend on what else is installed. The difference decays as (13/14)ⁿ: ≈ 1e-11
    at 400 bars.
    """
    scale = 100.0 / _atr_series(high, low, close, length, prenan=True)
    up = np.concatenate(([np.nan], np.diff(high)))
    down = np.concatenate(([np.nan], -np.diff(low)))
    with np.errstate(invalid="ignore"):
        pos = np.where((up > down) & (up > 0), up, 0.0)
        neg = np.where((down > up) & (down > 0), down, 0.0)
    pos[0] = neg[0] = np.nan  # pandas: False * NaN is NaN on the first bar
    eps = sys.float_info.epsilon  # pandas-ta's ``zero``: |x| < eps becomes 0
    pos = np.where(np.abs(pos) < eps, 0.0, pos)
    neg = np.where(np.abs(neg) < eps, 0.0, neg)
    plus = scale * _ewm(pos, 1.0 / length)
    minus = scale * _ewm(neg, 1.0 / length)
    with np.errstate(invalid="ignore", divide="ignore"):
        dx = 100.0 * np.abs(plus - minus) / (plus + minus)
    return _last(_ewm(dx, 1.0 / length))


def obv(close: Array, volume: Array) -> float:
    """On-Balance Volume at the last bar: Σ sign(closeₜ − closeₜ₋₁)·volumeₜ over the 2nd..last
    bar, the first contributing nothing (``pandas_ta/volume/obv.py``, ``signed_series`` with no
    initial value)."""
    return float(np.sum(np.sign(np.diff(close)) * volume[1:]))
