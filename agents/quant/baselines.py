"""Baseline strategies for the scorecard, as the TradingAgents paper compared against them
(Xiao et al., "TradingAgents: Multi-Agents LLM Financial Trading Framework", 2024, section 5:
buy-and-hold, MACD, KDJ&RSI, ZMR, SMA): a signal per (symbol, date) from the adjusted closes up
to that date, with pandas-ta.

=================  ===============================================================  =====
name               rule at the close of ``as_of``                                   source
=================  ===============================================================  =====
``buy_and_hold``   always BUY                                                       —
``sma_50_200``     BUY if SMA(50) > SMA(200) (golden-cross state), SELL if below    Murphy 1999, ch. 9
``macd_12_26_9``   BUY if MACD(12,26) > its signal EMA(9), SELL if below             Appel 2005
``rsi_14_30_70``   BUY if RSI(14) < 30 (oversold), SELL if > 70, else HOLD          Wilder 1978
=================  ===============================================================  =====

Each signal comes with a ``score`` (+1 BUY, 0 HOLD, −1 SELL) so the scorecard can rank it like
the pipeline's score; a baseline has no confidence. A rule whose indicator is undefined at the
date (fewer than 200 bars for the SMA(200)) gives no signal there (``None``), never a guess.

Point in time: the indicators are causal (the value at a bar uses that bar and earlier ones
only), and a Yahoo-style adjusted close series rescales every bar before a later split or
dividend by the same factor, so the series up to ``as_of`` equals the series as it stood on
``as_of`` times a constant; SMA and MACD crossovers and RSI are unchanged by a constant factor.
So one pass over a symbol's whole history, read at each ``as_of``, gives the same signals as a
pass over the bars up to each ``as_of``; the tests check this against slices.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

import pandas as pd

Signal = Literal["BUY", "HOLD", "SELL"]

BASELINES: Final = ("buy_and_hold", "sma_50_200", "macd_12_26_9", "rsi_14_30_70")
RSI_OVERSOLD: Final = 30.0
RSI_OVERBOUGHT: Final = 70.0
_SCORE: Final[dict[str, float]] = {"BUY": 1.0, "HOLD": 0.0, "SELL": -1.0}


@dataclass(frozen=True)
class BaselineSignal:
    """One baseline's signal at one date: ``signal`` and ``score`` (+1/0/−1)."""

    name: str
    signal: Signal
    score: float


def _sign_signal(value: float) -> Signal | None:
    if pd.isna(value):
        return None
    return "BUY" if value > 0 else "SELL" if value < 0 else "HOLD"


def baseline_frame(close: pd.Series) -> pd.DataFrame:
    """Signals of every baseline at every bar of ``close`` (adjusted closes, USD, ascending
    ``DatetimeIndex``): a frame indexed like ``close`` with one column per :data:`BASELINES`
    name holding ``"BUY"``/``"HOLD"``/``"SELL"`` or ``None`` where the rule is undefined.

    Raises ``ValueError`` for an empty or unsorted series."""
    if close.empty or not close.index.is_monotonic_increasing:
        raise ValueError("baseline_frame needs a non-empty close series in ascending date order")
    # lazy: pandas-ta imports numba (seconds); only the scorecard needs it
    import pandas_ta as ta

    close = close.astype(float)
    sma_50 = ta.sma(close, length=50, talib=False)
    sma_200 = ta.sma(close, length=200, talib=False)
    macd = ta.macd(close, fast=12, slow=26, signal=9, talib=False)
    rsi = ta.rsi(close, length=14, talib=False)
    out = pd.DataFrame(index=close.index)
    out["buy_and_hold"] = "BUY"
    cross = (
        (sma_50 - sma_200)
        if sma_50 is not None and sma_200 is not None
        else pd.Series(float("nan"), index=close.index)
    )
    out["sma_50_200"] = [_sign_signal(v) for v in cross]
    if macd is not None:
        line = macd[next(c for c in macd.columns if c.startswith("MACD_"))]
        signal = macd[next(c for c in macd.columns if c.startswith("MACDs_"))]
        out["macd_12_26_9"] = [_sign_signal(v) for v in (line - signal)]
    else:
        out["macd_12_26_9"] = None
    if rsi is not None:
        out["rsi_14_30_70"] = [
            None if pd.isna(v) else "BUY" if v < RSI_OVERSOLD else "SELL" if v > RSI_OVERBOUGHT else "HOLD"
            for v in rsi
        ]
    else:
        out["rsi_14_30_70"] = None
    return out


def signal_at(frame: pd.DataFrame, *, name: str, position: int) -> BaselineSignal | None:
    """The signal of baseline ``name`` at row ``position`` of :func:`baseline_frame`'s result,
    ``None`` where the rule is undefined. Raises ``KeyError`` for an unknown baseline."""
    if name not in BASELINES:
        raise KeyError(f"unknown baseline {name!r}; one of {', '.join(BASELINES)}")
    value = frame[name].iloc[position]
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return None
    return BaselineSignal(name=name, signal=value, score=_SCORE[value])
