"""Market-data tools: ``get_stock_data`` (seed 001 StockDataTool) and ``get_history`` (seed 002).

Point in time: every bar comes from ``provider.bars(end=ctx.as_of)``; nothing after ``as_of``.
Prices are USD. Adjusted prices are split- and dividend-adjusted and expressed in the prices
traded on the last bar (``agents.providers.base.adjusted_ohlc``), so a 2:1 split is not a crash.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import weakref
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any, Literal

import numpy as np
import pandas as pd
from dateutil.relativedelta import relativedelta
from pydantic import BaseModel, ConfigDict, Field, field_validator

from agents.providers.base import (
    MarketDataProvider,
    RateLimitedError,
    adjusted_ohlc,
    point_in_time_adj_close,
)
from agents.tools.registry import ToolContext, ToolInputError, ToolOutput, register
from pipeline.core.tickers import InvalidTickerError, normalize_ticker

Period = Literal["1d", "5d", "1mo", "3mo", "6mo", "1y", "2y", "5y", "10y", "ytd", "max"]
Interval = Literal["1m", "2m", "5m", "15m", "30m", "60m", "90m", "1h", "1d", "5d", "1wk", "1mo", "3mo"]
INTRADAY: frozenset[str] = frozenset({"1m", "2m", "5m", "15m", "30m", "60m", "90m", "1h"})
# Pandas resample rules for the daily-derived intervals (each bar is relabelled with its last
# trading day in _resample).
_RESAMPLE = {"1wk": "W-FRI", "1mo": "ME", "3mo": "QE"}
TRADING_DAYS_PER_YEAR = 252  # NYSE average; the 52-week window of get_stock_data
_CALENDAR_LOOKBACK_52W = timedelta(days=371)  # 52 weeks + a week of holidays/weekend slack

_CACHE_MAX = 256  # bars frames per process; ~100 KB each, bounded so a long-lived worker stays small
# Keyed by id(provider), with a weak reference to check identity on a hit: a provider that was
# garbage-collected can leave its id to a new one, which must not see the old one's bars.
_cache: dict[tuple[int, str, date | None, date], tuple[weakref.ref[Any], pd.DataFrame]] = {}
_cache_lock = threading.Lock()

logger = logging.getLogger("finagent.tools")


def _symbol(value: str) -> str:
    try:
        return normalize_ticker(value)
    except InvalidTickerError as exc:
        raise ValueError(str(exc)) from None


def _symbols(values: list[str]) -> list[str]:
    """Validator body for a ``symbols`` list field: each ticker normalised by :func:`_symbol`,
    duplicates dropped, first-seen order kept (``["aapl", "AAPL", "msft"]`` → ``["AAPL", "MSFT"]``).

    Raises:
        ValueError: a ticker is invalid (pydantic turns it into a validation error).
    """
    return list(dict.fromkeys(_symbol(v) for v in values))


def fetch_bars(*, provider: MarketDataProvider, symbol: str, start: date | None, end: date) -> pd.DataFrame:
    """``provider.bars`` with a small per-process cache keyed by (provider, symbol, start, end).

    For a remote provider (``provider.remote`` true, e.g. yfinance) the window is also looked up
    in the Redis cache shared by all workers, and a fetch first takes a token from the shared
    rate limit (``agents.providers.shared``).

    The frame is shared: callers must not modify it. Errors are the provider's (see
    ``agents.providers.base``) and are not cached.

    Raises:
        RateLimitedError: the shared rate limit is exhausted (the task retries later).
    """
    key = (id(provider), symbol, start, end)
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None and hit[0]() is provider:
        return hit[1]
    frame = (
        _fetch_remote(provider=provider, symbol=symbol, start=start, end=end)
        if getattr(provider, "remote", False)
        else provider.bars(symbol=symbol, start=start, end=end)
    )
    with _cache_lock:
        if len(_cache) >= _CACHE_MAX:
            _cache.pop(next(iter(_cache)))
        _cache[key] = (weakref.ref(provider), frame)
    return frame


def _fetch_remote(
    *, provider: MarketDataProvider, symbol: str, start: date | None, end: date
) -> pd.DataFrame:
    from agents.providers import shared
    from pipeline.core.settings import get_settings

    settings = get_settings()
    redis_url = settings.shared_redis_url
    key = shared.cache_key(provider=provider.name, symbol=symbol, start=start, end=end)
    if redis_url:
        cached = shared.get_cached_bars(redis_url=redis_url, key=key)
        if cached is not None:
            return cached
    if settings.provider_rate_limit:
        wait = shared.take_token(
            name=provider.name,
            rate=settings.provider_rate_limit,
            burst=settings.provider_rate_burst,
            redis_url=redis_url,
        )
        if wait > 0:
            raise RateLimitedError(f"{provider.name} rate limit reached; a token frees in {wait:.1f}s")
    frame = provider.bars(symbol=symbol, start=start, end=end)
    if redis_url:
        shared.put_cached_bars(redis_url=redis_url, key=key, frame=frame, ttl=settings.bars_cache_ttl)
    return frame


def _r(value: float, digits: int = 4) -> float:
    return round(float(value), digits)


class StockDataInput(BaseModel):
    """``{symbol}`` (seed 001)."""

    model_config = ConfigDict(extra="forbid")

    symbol: str = Field(description="Stock ticker, e.g. AAPL")

    _norm = field_validator("symbol")(classmethod(lambda cls, v: _symbol(v)))


@register(
    name="get_stock_data",
    description=(
        "Latest quote as of the analysis date: price, change, change_percent (fraction), volume, "
        "52-week high/low, market cap and P/E where the provider has them."
    ),
    input_model=StockDataInput,
)
def get_stock_data(params: StockDataInput, ctx: ToolContext) -> ToolOutput:
    """Seed-001 StockDataTool output for ``params.symbol`` at ``ctx.as_of``.

    Returns data ``{symbol, date, current_price, previous_close, change, change_percent, volume,
    market_cap, pe_ratio, 52w_high, 52w_low, currency, null_reasons, source}``; ``current_price``
    is the close traded on ``date`` (the last bar ≤ as_of); ``previous_close``, ``change`` and the
    52-week range use adjusted prices on that basis; ``change_percent`` is a fraction
    (0.0145 = 1.45 %). market_cap / pe_ratio are null with a reason when the source lacks them.
    """
    bars = fetch_bars(
        provider=ctx.provider, symbol=params.symbol, start=ctx.as_of - _CALENDAR_LOOKBACK_52W, end=ctx.as_of
    )
    adj = adjusted_ohlc(bars)
    last = bars.iloc[-1]
    price = float(last["close"])
    data: dict[str, Any] = {
        "symbol": params.symbol,
        "date": bars.index[-1].date().isoformat(),
        "current_price": _r(price),
        "previous_close": None,
        "change": None,
        "change_percent": None,
        "volume": int(last["volume"]),
        "market_cap": None,
        "pe_ratio": None,
        "52w_high": _r(adj["high"].tail(TRADING_DAYS_PER_YEAR).max()),
        "52w_low": _r(adj["low"].tail(TRADING_DAYS_PER_YEAR).min()),
        "currency": "USD",
        "bars_in_52w_window": int(min(len(adj), TRADING_DAYS_PER_YEAR)),
        "null_reasons": {},
        "source": ctx.provider.source_ref(symbol=params.symbol),
    }
    if len(adj) >= 2:
        prev = float(adj["close"].iloc[-2])
        data["previous_close"] = _r(prev)
        data["change"] = _r(price - prev)
        data["change_percent"] = _r((price - prev) / prev, 6)
    else:
        data["null_reasons"]["change"] = "only one bar at or before as_of"
    profile = ctx.provider.profile(symbol=params.symbol)
    for field_name in ("market_cap", "pe_ratio"):
        value = getattr(profile, field_name)
        if value is None:
            data["null_reasons"][field_name] = f"not provided by the {ctx.provider.name} data source"
        else:
            data[field_name] = value
    change = data["change"]
    summary = f"{params.symbol} {data['date']}: price ${price:,.2f}" + (
        f", change {change:+.2f} ({data['change_percent']:+.2%})" if change is not None else ""
    )
    return ToolOutput(data=data, summary=summary, symbol=params.symbol)


class HistoryInput(BaseModel):
    """``{symbol, period, interval?}`` with seed 002's periods and intervals."""

    model_config = ConfigDict(extra="forbid")

    symbol: str = Field(description="Stock ticker, e.g. AAPL")
    period: Period = Field(default="1y", description="How far back from the analysis date")
    interval: Interval = Field(default="1d", description="Bar size (providers here serve daily data)")

    _norm = field_validator("symbol")(classmethod(lambda cls, v: _symbol(v)))


def period_start(*, period: str, as_of: date) -> date | None:
    """First calendar date of ``period`` ending at ``as_of`` (``None`` for ``max``).

    ``1d``/``5d`` are counted in trading bars by :func:`get_history`, so they map to a calendar
    window wide enough to hold them (10 and 14 days).
    """
    spans: dict[str, relativedelta | timedelta] = {
        "1d": timedelta(days=10),
        "5d": timedelta(days=14),
        "1mo": relativedelta(months=1),
        "3mo": relativedelta(months=3),
        "6mo": relativedelta(months=6),
        "1y": relativedelta(years=1),
        "2y": relativedelta(years=2),
        "5y": relativedelta(years=5),
        "10y": relativedelta(years=10),
    }
    if period == "max":
        return None
    if period == "ytd":
        return date(as_of.year, 1, 1)
    return as_of - spans[period]


#: How daily bars combine into one longer bar (OHLCV convention).
_BAR_AGG: dict[str, str] = {
    "open": "first",
    "high": "max",
    "low": "min",
    "close": "last",
    "adj_close": "last",
    "volume": "sum",
}


def _resample(bars: pd.DataFrame, interval: str) -> pd.DataFrame:
    if interval == "1d":
        return bars
    if interval == "5d":
        groups = (pd.Series(range(len(bars)), index=bars.index) // 5).to_numpy()
        grouped = bars.groupby(groups)
        out = grouped.agg(_BAR_AGG)
        out.index = pd.DatetimeIndex(grouped.apply(lambda g: g.index[-1]), name="date")
        return out
    rule = _RESAMPLE[interval]
    # Label each bar with its last trading day, not the calendar period end pandas uses (a week
    # of as_of 2012-07-17 would otherwise be stamped 2012-07-20, after as_of).
    out = (
        bars.assign(_last=bars.index)
        .resample(rule)
        .agg({**_BAR_AGG, "_last": "last"})
        .dropna(subset=["close"])
    )
    out.index = pd.DatetimeIndex(out.pop("_last"), name="date")
    return out


@register(
    name="get_history",
    description=(
        "Daily OHLCV bars with adjusted close up to the analysis date (seed-002 periods and intervals)."
    ),
    input_model=HistoryInput,
)
def get_history(params: HistoryInput, ctx: ToolContext) -> ToolOutput:
    """Bars for ``params.period`` ending at ``ctx.as_of``.

    Returns data ``{symbol, period, interval, count, first_date, last_date, history: [{timestamp,
    open, high, low, close, volume, adjusted_close}], source}``: timestamps are ISO dates of the
    bar (the period's last trading day for 5d/1wk/1mo/3mo, never after ``as_of``), prices raw
    USD as traded, ``adjusted_close`` split/dividend-adjusted as it stood on ``as_of``
    (:func:`agents.providers.base.point_in_time_adj_close`: equal to the close on the last bar;
    later splits and dividends are not in it).

    Raises:
        ToolInputError: an intraday interval (the providers here serve daily bars).
    """
    if params.interval in INTRADAY:
        raise ToolInputError(
            f"interval {params.interval!r} is intraday; the {ctx.provider.name} provider serves daily bars "
            "only (use 1d, 5d, 1wk, 1mo or 3mo)"
        )
    bars = _history_window(ctx=ctx, symbol=params.symbol, period=params.period, interval=params.interval)
    # Column lists (not itertuples): plain Python floats/ints, and ~10x faster on 500 bars.
    columns = {name: bars[name].tolist() for name in ("open", "high", "low", "close", "adj_close", "volume")}
    stamps = [ts.date().isoformat() for ts in bars.index]
    history = [
        {
            "timestamp": stamp,
            "open": float(o),
            "high": float(h),
            "low": float(lo),
            "close": float(c),
            "volume": int(v),
            "adjusted_close": float(a),
        }
        for stamp, o, h, lo, c, a, v in zip(
            stamps,
            *(columns[k] for k in ("open", "high", "low", "close", "adj_close", "volume")),
            strict=True,
        )
    ]
    data = {
        "symbol": params.symbol,
        "period": params.period,
        "interval": params.interval,
        "count": len(history),
        "first_date": history[0]["timestamp"] if history else None,
        "last_date": history[-1]["timestamp"] if history else None,
        "history": history,
        "source": ctx.provider.source_ref(symbol=params.symbol),
    }
    summary = (
        f"{params.symbol} {params.period}/{params.interval}: {len(history)} bars "
        f"{data['first_date']}..{data['last_date']}"
    )
    return ToolOutput(data=data, summary=summary, symbol=params.symbol)


def _history_window(*, ctx: ToolContext, symbol: str, period: str, interval: str) -> pd.DataFrame:
    """The bars ``get_history`` serves for ``(symbol, period, interval)`` at ``ctx.as_of``."""
    start = period_start(period=period, as_of=ctx.as_of)
    bars = point_in_time_adj_close(
        fetch_bars(provider=ctx.provider, symbol=symbol, start=start, end=ctx.as_of)
    )
    if period == "1d":
        bars = bars.tail(1)
    elif period == "5d":
        bars = bars.tail(5)
    return _resample(bars, interval)


def history_frame(data: dict[str, Any]) -> pd.DataFrame:
    """Rebuild a provider-contract bar frame from a ``get_history`` result ``data``.

    Raises:
        ValueError: ``data`` has no bars.
    """
    rows = data.get("history") or []
    if not rows:
        raise ValueError("history result has no bars")
    frame = pd.DataFrame(rows)
    frame.index = pd.DatetimeIndex(pd.to_datetime(frame.pop("timestamp")), name="date")
    frame = frame.rename(columns={"adjusted_close": "adj_close"})
    return frame[["open", "high", "low", "close", "adj_close", "volume"]].astype("float64")


# --------------------------------------------------------------------------------------------
# Cited histories without reloading them (docs/benchmarks.md, recommendation 2)
# --------------------------------------------------------------------------------------------

_HISTORY_KEYS = ("open", "high", "low", "close", "adjusted_close", "volume")
_FRAME_COLUMNS = ("open", "high", "low", "close", "adj_close", "volume")
#: The index unit ``history_frame`` gets from ``pd.to_datetime`` of ISO dates.
_STAMP_UNIT = pd.DatetimeIndex(pd.to_datetime(["2000-01-03"])).unit


def _digest(days: np.ndarray, columns: list[np.ndarray]) -> str:
    """sha256 over the bar dates (days since the epoch) and the six value columns (float64)."""
    h = hashlib.sha256(np.ascontiguousarray(days, dtype="int64").tobytes())
    for column in columns:
        h.update(np.ascontiguousarray(column, dtype="float64").tobytes())
    return h.hexdigest()[:32]


def history_check(data: dict[str, Any]) -> dict[str, Any]:
    """What a later stage needs to rebuild the bars of a ``get_history`` result ``data`` from the
    provider and prove they are the same: ``{symbol, period, interval, digest}``.

    The digest covers every bar's date and its six values exactly as stored (~0.3 ms for 500
    bars); see :func:`cited_history`.
    """
    rows = data.get("history") or []
    days = np.array([r["timestamp"] for r in rows], dtype="datetime64[D]").astype("int64")
    columns = [np.array([float(r[k]) for r in rows], dtype="float64") for k in _HISTORY_KEYS]
    return {
        "symbol": data.get("symbol"),
        "period": data.get("period"),
        "interval": data.get("interval", "1d"),
        "digest": _digest(days, columns),
    }


def _as_history_frame(bars: pd.DataFrame) -> pd.DataFrame:
    """Provider bars in exactly the form :func:`history_frame` rebuilds from the stored result:
    dates at midnight (``pd.to_datetime`` unit), float64 columns, volume truncated like the
    ``int(volume)`` of ``get_history``."""
    index = pd.DatetimeIndex(bars.index)
    if index.tz is not None:
        index = index.tz_localize(None)
    index = pd.DatetimeIndex(index.normalize(), name="date").as_unit(_STAMP_UNIT)
    values = {name: bars[name].to_numpy(dtype="float64", copy=True) for name in _FRAME_COLUMNS}
    values["volume"] = np.trunc(values["volume"])
    return pd.DataFrame(values, index=index)


def _frame_digest(frame: pd.DataFrame) -> str:
    days = frame.index.to_numpy().astype("datetime64[D]").astype("int64")
    return _digest(days, [frame[name].to_numpy() for name in _FRAME_COLUMNS])


@dataclass(frozen=True)
class CitedHistory:
    """The bars of a cited ``get_history`` call: its ``symbol``, ``interval`` and ``bars`` (the
    :func:`history_frame` form; ``None`` when the call returned no bars). ``rebuilt`` tells
    whether they came from the provider (digest checked) rather than the stored result."""

    symbol: str | None
    interval: str
    bars: pd.DataFrame | None
    rebuilt: bool = False


def _rebuild(ctx: ToolContext, history_ref: str) -> CitedHistory | None:
    """The bars of ``history_ref`` rebuilt through :func:`fetch_bars` when the context holds its
    check (``ctx.history_checks``) and the rebuilt bars have the same digest; else ``None``.

    Only for local providers (embedded, csv): for a remote one (``provider.remote``) a rebuild
    could cost a network fetch and a rate-limit token, which a database read never does.
    """
    check = ctx.history_checks.get(history_ref)
    if not check or getattr(ctx.provider, "remote", False) or check.get("interval", "1d") != "1d":
        return None
    try:
        bars = _history_window(
            ctx=ctx, symbol=str(check["symbol"]), period=str(check["period"]), interval="1d"
        )
        frame = _as_history_frame(bars)
    except Exception as exc:  # any doubt: the stored result is the truth
        logger.debug("history %s: rebuild failed (%s); loading the stored result", history_ref, exc)
        return None
    if frame.empty or _frame_digest(frame) != check.get("digest"):
        logger.info("history %s: rebuilt bars differ from the stored result; loading it", history_ref)
        return None
    return CitedHistory(symbol=check["symbol"], interval="1d", bars=frame, rebuilt=True)


def cited_history(ctx: ToolContext, history_ref: str) -> CitedHistory | None:
    """The bars of the ``get_history`` call ``history_ref``, or ``None`` when it is not a
    successful ``get_history`` call.

    Looked up once per context (``ctx.memo``): a call made in this context; else the bars
    rebuilt from the provider when ``ctx.history_checks`` proves them identical to the stored
    result (no 70 KB reload from the database); else the stored result (``ctx.result_data``).
    Callers must not modify ``bars``.
    """
    key = f"history:{history_ref}"
    if key in ctx.memo:
        return ctx.memo[key]
    found = None if history_ref in ctx.results else _rebuild(ctx, history_ref)
    if found is None:
        data = ctx.result_data(history_ref)
        if data is not None and "history" in data:
            found = CitedHistory(
                symbol=data.get("symbol"),
                interval=str(data.get("interval", "1d")),
                bars=history_frame(data) if data.get("history") else None,
            )
    ctx.memo[key] = found
    return found


def history_values(ctx: ToolContext, history_ref: str) -> list[float] | None:
    """Every numeric value of the stored ``get_history`` result ``history_ref`` (what
    ``pipeline.grounding.numeric_values`` yields for it: ``count`` and each bar's six values)
    from bars rebuilt and digest-checked by :func:`cited_history`; ``None`` when they were not
    rebuilt (the caller then indexes the stored result itself)."""
    found = cited_history(ctx, history_ref)
    if found is None or not found.rebuilt or found.bars is None:
        return None
    values = found.bars.to_numpy(dtype="float64").ravel()
    return [float(len(found.bars)), *values[np.isfinite(values)].tolist()]
