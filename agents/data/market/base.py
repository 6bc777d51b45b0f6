"""The market-data provider interface and its errors.

A provider returns daily OHLCV bars as a pandas DataFrame with this contract (``BARS_COLUMNS``):

* index: ``DatetimeIndex`` named ``date``, tz-naive, normalised to midnight, strictly ascending,
  one row per trading day (exchange-local date);
* columns ``open, high, low, close`` (raw, as traded, USD), ``adj_close`` (split- and
  dividend-adjusted close, USD) and ``volume`` (shares, as reported), all float64;
* no NaN in ``close``/``adj_close``; no row after the requested ``end`` date.

Split/dividend adjustment of OHLC is done by :func:`adjusted_ohlc` (factor ``adj_close/close``),
so indicators never see a split as a crash (AAPL 2:1 on 2005-02-28).

The contract every data source keeps (bars here; fundamentals, news and option chains in their
packages; ``docs/architecture.md`` "Data sources"): *no data* is an answer, not a failure — an
empty list or frame, ``None``, or a permanent error of this module (``transient = False``:
``SymbolNotFoundError``, ``DateOutOfRangeError``, ``NoDataError``) that the tools report as its
``code``; an *infrastructure failure* raises a transient error (``transient = True``:
``ProviderTimeoutError``, ``ProviderConnectionError``, ``RateLimitedError``) that the tool
registry turns into the envelope's ``NETWORK_ERROR`` / ``RATE_LIMITED`` with that code's
``retry_hint``, and that a pipeline stage retries later. Which provider serves which kind of data
is the routing table's choice (:mod:`agents.data.routing`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from fractions import Fraction
from typing import Protocol, runtime_checkable

import numpy as np
import pandas as pd

BARS_COLUMNS: tuple[str, ...] = ("open", "high", "low", "close", "adj_close", "volume")


class ProviderError(Exception):
    """Base class. ``code`` is the error code the tool envelope reports."""

    code = "INTERNAL_ERROR"
    transient = False


class SymbolNotFoundError(ProviderError):
    """The provider has no such symbol (→ ``INVALID_SYMBOL``, permanent)."""

    code = "INVALID_SYMBOL"


class DateOutOfRangeError(ProviderError):
    """``as_of``/``end`` lies outside the data the provider holds for the symbol (permanent)."""

    code = "DATE_OUT_OF_RANGE"


class NoDataError(ProviderError):
    """The provider answered but returned no bars (may succeed on a later iteration)."""

    code = "NO_DATA"


class ProviderTimeoutError(ProviderError):
    """A request timed out (→ ``NETWORK_ERROR``; retried inside the tool call)."""

    code = "NETWORK_ERROR"
    transient = True


class ProviderConnectionError(ProviderError):
    """Connection refused/reset (→ ``NETWORK_ERROR``; retried at task level, not in the tool)."""

    code = "NETWORK_ERROR"
    transient = True


class RateLimitedError(ProviderError):
    """The vendor's rate limit was hit (→ ``RATE_LIMITED``; the task retries later)."""

    code = "RATE_LIMITED"
    transient = True


@dataclass(frozen=True)
class Profile:
    """Static facts a provider may know about a symbol; ``None`` where it does not (never invented).

    market_cap: USD; pe_ratio: trailing price/earnings; name: company name.
    """

    market_cap: float | None = None
    pe_ratio: float | None = None
    name: str | None = None
    source_ref: str | None = None


@runtime_checkable
class MarketDataProvider(Protocol):
    """What every market-data provider implements (embedded, csv, yfinance, plug-ins).

    Chosen by ``FINAGENT_DATA_PROVIDER`` through :func:`agents.data.routing.get_provider`; the
    errors follow the module contract (permanent = no data, transient = infrastructure failure).
    """

    name: str

    def bars(self, *, symbol: str, start: date | None, end: date) -> pd.DataFrame:
        """Daily bars for ``symbol`` with ``start <= date <= end`` (``start=None``: from the first).

        Returns a frame following the module contract. Raises ``SymbolNotFoundError``,
        ``DateOutOfRangeError`` (``end`` before the first bar or after the last available day
        by more than a few days), ``NoDataError``, ``ProviderTimeoutError``, ``RateLimitedError``.
        """
        ...

    def latest_date(self, *, symbol: str) -> date:
        """The last date with a bar for ``symbol`` (the default ``as_of``)."""
        ...

    def symbols(self) -> list[str]:
        """Symbols this provider can serve offline; may be empty for online providers."""
        ...

    def profile(self, *, symbol: str) -> Profile:
        """Market cap, P/E, name where known; fields the source lacks are ``None``."""
        ...

    def source_ref(self, *, symbol: str) -> str:
        """A human-readable citation of the data source, e.g. ``bokeh_sampledata:stocks.csv.gz#AAPL``."""
        ...


@dataclass(frozen=True)
class SplitEvent:
    """One stock split as a source reports it: from ``ex_date`` (exchange-local day) on, each
    old share is ``ratio`` new shares (4 for 4-for-1, 3/2 for 3-for-2, 1/10 for a 1-for-10
    reverse split)."""

    ex_date: date
    ratio: Fraction


@runtime_checkable
class SplitHistorySource(Protocol):
    """A provider that reports every split of any ticker it serves (yfinance: Yahoo's split
    history), so prices at a past ``as_of`` can be put on the shares traded then
    (:mod:`agents.data.fundamentals.share_basis`) for tickers no table lists."""

    def split_events(self, *, symbol: str) -> tuple[SplitEvent, ...]:
        """Every split of ``symbol`` the source knows, oldest first (``()``: none).

        Raises the module's errors (``SymbolNotFoundError``, ``ProviderTimeoutError``, ...)."""
        ...

    def split_source_ref(self, *, symbol: str) -> str:
        """The citation of that history, e.g. ``Yahoo Finance split history NVDA (yfinance 1.7.0)``."""
        ...


def adjusted_ohlc(bars: pd.DataFrame) -> pd.DataFrame:
    """Split- and dividend-adjusted OHLC, expressed in the prices traded on the last bar.

    Each of open/high/low/close is multiplied by ``adj_close/close`` (back-adjustment), then the
    whole series is rescaled so that the last bar's adjusted close equals its raw close. The
    rescale matters for point-in-time work: a source's ``Adj Close`` also folds in dividends and
    splits that happened *after* the last bar (e.g. stocknet's 2017 adjustment of 2012 prices);
    dividing that constant out keeps every ratio between bars and makes indicator levels
    (SMA, Bollinger, ATR) directly comparable with the last bar's ``close``. That close is the
    price traded on ``as_of`` only when the source's ``close`` is as traded; a source that divides
    later splits out of ``close`` (stocknet, Yahoo) is put back on the traded basis before this,
    in :func:`agents.tools.bars.fetch_bars`.

    Args:
        bars: frame following the module contract (at least one row).
    Returns:
        A new frame with columns ``open, high, low, close, volume``: prices in USD as of the last
        bar, comparable across splits; volume as reported (not split-adjusted).
    Raises:
        ValueError: empty frame, or a close / adjusted close that is zero, negative or NaN.
    Source: Yahoo's "Adj Close" ratio method (as yfinance ``auto_adjust``), rescaled to the
    last bar as CRSP-style cumulative adjustment factors are.
    """
    return float_frame(adjusted_arrays(bars), index=bars.index)


def float_frame(columns: dict[str, np.ndarray], *, index: pd.Index) -> pd.DataFrame:
    """``pd.DataFrame(columns, index=index)``: the same frame (columns in order, values and
    dtypes), built from one two-dimensional float64 array when every column is float64 (one
    block, as pandas would consolidate them): pandas' per-column construction from a dict cost
    ~15 times more (~0.7 against ~0.05 ms for 1,250 bars)."""
    arrays = list(columns.values())
    if not arrays or any(a.dtype != np.float64 or a.ndim != 1 for a in arrays):
        return pd.DataFrame(columns, index=index)
    block = np.empty((len(arrays[0]), len(arrays)), dtype=np.float64, order="F")
    for j, values in enumerate(arrays):
        block[:, j] = values
    return pd.DataFrame(block, index=index, columns=pd.Index(list(columns)), copy=False)


def adjusted_arrays(bars: pd.DataFrame) -> dict[str, np.ndarray]:
    """:func:`adjusted_ohlc`'s columns as numpy arrays (``open, high, low, close``: float64 USD as
    of the last bar; ``volume`` as reported), without building the frame: the same arithmetic,
    so the same floats. Raises ``ValueError`` as :func:`adjusted_ohlc` does."""
    if bars.empty:
        raise ValueError("no bars to adjust")
    # numpy arrays rather than Series arithmetic: the same float operations, so the same
    # numbers, at a fraction of pandas' per-operation overhead (this runs several times per
    # analysis: indicators, quote, chart levels).
    close = bars["close"].to_numpy(dtype=np.float64)
    adj = bars["adj_close"].to_numpy(dtype=np.float64)
    # NaN fails both comparisons, so "not (x > 0)" also rejects NaN.
    if not (bool((close > 0).all()) and bool((adj > 0).all())):
        raise ValueError("close and adj_close must be positive and not NaN to compute the adjustment")
    factor = (adj / close) * (float(close[-1]) / float(adj[-1]))
    return {
        "open": bars["open"].to_numpy(dtype=np.float64) * factor,
        "high": bars["high"].to_numpy(dtype=np.float64) * factor,
        "low": bars["low"].to_numpy(dtype=np.float64) * factor,
        "close": close * factor,
        "volume": bars["volume"].to_numpy(),
    }


def point_in_time_adj_close(bars: pd.DataFrame) -> pd.DataFrame:
    """``bars`` with ``adj_close`` rescaled so the last bar's adjusted close equals its close.

    A source's adjusted close is computed at the source's vintage: it also folds in splits and
    dividends after the last bar (bokeh_sampledata's 2012 AAPL closes near 600 USD carry an
    ``Adj Close`` near 75 because of the 2014 7:1 split). Those later events scale every bar by
    one constant, so dividing it out leaves the adjusted close as it stood on ``as_of``: only
    the corporate actions up to then, in the prices traded that day (the same rescale as
    :func:`adjusted_ohlc` applies to OHLC). Returns a new frame; empty stays empty.
    """
    if bars.empty:
        return bars
    last_close, last_adj = float(bars["close"].iloc[-1]), float(bars["adj_close"].iloc[-1])
    if not (last_close > 0 and last_adj > 0):
        return bars  # nothing sound to rescale by; the provider contract rejects such bars anyway
    factor = last_close / last_adj
    if not all(dtype == np.float64 for dtype in bars.dtypes):
        return bars.assign(adj_close=bars["adj_close"] * factor)
    # the contract's all-float64 frame: one copy of its values with the column multiplied, the
    # same floats and frame as assign() (which cost ~10 times more: a copy, then a column set)
    values = bars.to_numpy(dtype=np.float64, copy=True)
    column = bars.columns.get_loc("adj_close")
    values[:, column] = values[:, column] * factor
    out = pd.DataFrame(values, index=bars.index, columns=bars.columns, copy=False)
    return out.__finalize__(bars)  # type: ignore[operator]  # attrs and flags, as assign() keeps them
