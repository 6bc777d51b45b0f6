"""Daily bars → the arrays every risk model reads: returns of the adjusted close and a range-based
daily variance, validated.

Input contract (the market-data contract of :mod:`agents.data.market.base`): a DataFrame with a
``DatetimeIndex`` (ascending, one row per session) and the columns ``open, high, low, close,
adj_close`` (USD; ``volume`` is not read). ``open..close`` are the prices as the source holds
them (raw or split-adjusted); ``adj_close`` also takes out dividends. A series with closes only
(a portfolio's value) may omit ``open, high, low`` (then the range variance is the squared
close-to-close return, ``PreparedBars.range_based`` is False) and ``adj_close`` (then it is the
close).

Definitions (``i`` a session, ``f_i = adj_close_i / close_i``):

* adjusted O, H, L, C: ``open_i · f_i`` etc. (so ``C_i = adj_close_i``): the open, high and low are
  put on the adjusted close's basis before any ratio is taken (a dividend or split is not a move);
* ``log_ret_i = ln(C_i / C_{i−1})`` and ``simple_ret_i = C_i / C_{i−1} − 1`` (fractions; NaN at
  the first session);
* ``range_var_i``: Garman–Klass (1980) ``0.5 (ln H/L)² − (2 ln 2 − 1) (ln C/O)²`` on the adjusted
  prices, plus the overnight gap ``(ln O_i / C_{i−1})²`` (Garman–Klass measures the open-to-close
  part of the day only). A high below the open or close (or a low above them), which some sources
  print, is widened to them first. NaN at the first session.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Final

import numpy as np
import pandas as pd

#: Columns read from the bars (lower case, as the market-data contract names them).
PRICE_COLUMNS: Final = ("open", "high", "low", "close", "adj_close")
#: Columns without which nothing can be computed.
REQUIRED_COLUMNS: Final = ("close",)
#: How many calendar days after the last bar an ``as_of`` may lie and still be answered with the
#: last bar (a weekend plus a holiday, or the longest modern closure: 2001-09-11..16); later than
#: that the data stopped and a forecast from stale prices would mislead. The same rule as the
#: market-data providers (agents.data.market.bars).
MAX_DAYS_AFTER_LAST_BAR: Final = 7
_GK_CO: Final = 2.0 * math.log(2.0) - 1.0


class RiskInputError(ValueError):
    """Bars, an ``as_of`` or an argument the risk models cannot use; the message says what and where."""


@dataclass(frozen=True)
class PreparedBars:
    """Validated daily arrays up to the forecast origin, oldest first (module docstring).

    ``dates``: ``datetime64[D]`` sessions; ``close``: the close as given (USD, the basis levels
    are stated in); ``adj_close``: USD; ``log_ret``, ``simple_ret``, ``range_var``: fractions
    (NaN at index 0). ``requested_as_of``: the date asked for (the origin is the last session on
    or before it). ``range_based``: the range variance comes from open, high and low (False: a
    close-only series, where it is the squared close-to-close return).
    """

    dates: np.ndarray
    close: np.ndarray
    adj_close: np.ndarray
    adj_high: np.ndarray
    adj_low: np.ndarray
    log_ret: np.ndarray
    simple_ret: np.ndarray
    range_var: np.ndarray
    requested_as_of: date
    range_based: bool = True

    @property
    def origin(self) -> date:
        """The last session used: the forecast origin (the ``as_of`` of the forecast)."""
        return pd.Timestamp(self.dates[-1]).date()

    def __len__(self) -> int:
        return len(self.dates)


def prepare_bars(bars: pd.DataFrame, *, as_of: date | None = None, min_bars: int = 2) -> PreparedBars:
    """Validate ``bars`` and compute the arrays of the module docstring from the sessions on or
    before ``as_of`` (None: the last bar). Rows after ``as_of`` are never read.

    Args:
        bars: daily bars (module docstring); at least ``min_bars`` sessions up to ``as_of``.
        as_of: the forecast date; a day that is not a session (a weekend) uses the session before.
        min_bars: the fewest sessions the caller's model needs.
    Returns:
        :class:`PreparedBars`.
    Raises:
        RiskInputError: not a DataFrame with a DatetimeIndex, a missing column, an unsorted or
            duplicated index, a NaN, infinite, zero or negative price on or before ``as_of``,
            ``as_of`` before the first bar or more than :data:`MAX_DAYS_AFTER_LAST_BAR` days after
            the last, fewer than ``min_bars`` sessions.
    """
    if not isinstance(bars, pd.DataFrame):
        raise RiskInputError(f"bars must be a pandas DataFrame, got {type(bars).__name__}")
    if not isinstance(bars.index, pd.DatetimeIndex):
        raise RiskInputError("bars must have a DatetimeIndex (one row per session)")
    if "close" not in bars.columns:
        raise RiskInputError(f"bars lack the close column; need {list(PRICE_COLUMNS)} (or close only)")
    partial = [c for c in ("open", "high", "low") if c in bars.columns]
    if partial and len(partial) < 3:
        missing = sorted({"open", "high", "low"} - set(partial))
        raise RiskInputError(f"bars have {partial} but lack {missing}: give open, high and low, or none")
    range_based = bool(partial)
    columns = [c for c in PRICE_COLUMNS if c in bars.columns]
    if len(bars) == 0:
        raise RiskInputError("bars are empty")
    index = bars.index.tz_localize(None) if bars.index.tz is not None else bars.index
    # each stamp's calendar day, as index.normalize() gives it, without the frequency that
    # normalize() infers for its result (~0.1 ms of a forecast, none of it read here)
    days = index.to_numpy().astype("datetime64[D]")
    if len(days) > 1 and not bool(np.all(days[1:] > days[:-1])):
        raise RiskInputError("bars' dates must be strictly ascending with one row per session")
    first, last = pd.Timestamp(days[0]).date(), pd.Timestamp(days[-1]).date()
    wanted = last if as_of is None else as_of
    if wanted < first:
        raise RiskInputError(f"as_of {wanted.isoformat()} is before the first bar {first.isoformat()}")
    if wanted > last + timedelta(days=MAX_DAYS_AFTER_LAST_BAR):
        raise RiskInputError(
            f"as_of {wanted.isoformat()} is beyond the data: the last bar is {last.isoformat()} "
            f"(at most {MAX_DAYS_AFTER_LAST_BAR} days later is answered with it)"
        )
    end = int(np.searchsorted(days, np.datetime64(wanted, "D"), side="right"))
    if end < min_bars:
        raise RiskInputError(
            f"{end} session(s) up to {wanted.isoformat()}; the risk model needs at least {min_bars}"
        )
    prices = {c: bars[c].to_numpy(dtype=np.float64, na_value=np.nan)[:end] for c in columns}
    for name, values in prices.items():
        bad = ~(np.isfinite(values) & (values > 0))
        if bad.any():
            where = pd.Timestamp(days[int(np.argmax(bad))]).date().isoformat()
            raise RiskInputError(
                f"{int(bad.sum())} {name} value(s) are NaN, infinite, zero or negative (first on {where}); "
                "drop or repair those rows before forecasting"
            )
    c = prices.get("adj_close", prices["close"])
    factor = c / prices["close"]
    o = prices["open"] * factor if range_based else c
    h = np.maximum.reduce([prices["high"] * factor, o, c]) if range_based else c
    lo = np.minimum.reduce([prices["low"] * factor, o, c]) if range_based else c
    log_ret = np.full(end, np.nan)
    log_ret[1:] = np.log(c[1:] / c[:-1])
    simple_ret = np.full(end, np.nan)
    simple_ret[1:] = c[1:] / c[:-1] - 1.0
    gk = 0.5 * np.log(h / lo) ** 2 - _GK_CO * np.log(c / o) ** 2
    range_var = np.full(end, np.nan)
    if range_based:
        range_var[1:] = np.maximum(gk[1:], 0.0) + np.log(o[1:] / c[:-1]) ** 2
    else:
        range_var[1:] = log_ret[1:] ** 2
    return PreparedBars(
        dates=days[:end],
        close=prices["close"],
        adj_close=c,
        adj_high=h,
        adj_low=lo,
        log_ret=log_ret,
        simple_ret=simple_ret,
        range_var=range_var,
        requested_as_of=wanted,
        range_based=range_based,
    )
