"""Bars for the tools: the cached fetch, period windows, resampling and adjusted bars.

Not a tool module: the market, chart, sandbox, quote and paper-account tools all read bars
through here, so no tool imports another for them.

Point in time: every bar comes from ``provider.bars(end=ctx.as_of)``; nothing after ``as_of``.
Prices are USD on the shares traded at ``as_of``: a source that divided a later split out of its
prices (stocknet's CSVs, Yahoo's ``Close``) is multiplied back in :func:`fetch_bars`
(:mod:`agents.data.fundamentals.share_basis`). Adjusted prices are split- and dividend-adjusted
and expressed in the prices traded on the last bar (``agents.data.market.base.adjusted_ohlc``),
so a 2:1 split is not a crash.
"""

from __future__ import annotations

import logging
import threading
import weakref
from datetime import date, timedelta
from typing import Any

import numpy as np
import pandas as pd
from dateutil.relativedelta import relativedelta

from agents.data.fundamentals.earnings import CalendarUnavailableError, default_calendar
from agents.data.fundamentals.share_basis import ShareBasis, rebase, source_share_basis
from agents.data.fundamentals.trailing import Price, trailing_values
from agents.data.market import shared
from agents.data.market.base import (
    MarketDataProvider,
    ProviderError,
    RateLimitedError,
    adjusted_arrays,
    adjusted_ohlc,
    point_in_time_adj_close,
)
from agents.data.market.clock import market_today
from agents.tools.envelope import ErrorCode
from agents.tools.registry import ToolContext, ToolInputError, ToolOutput
from core.display import signed_percent
from core.settings import Settings

# Pandas resample rules for the daily-derived intervals (each bar is relabelled with its last
# trading day in _resample).
_RESAMPLE = {"1wk": "W-FRI", "1mo": "ME", "3mo": "QE"}
TRADING_DAYS_PER_YEAR = 252  # NYSE average; the 52-week window of get_stock_data
_CALENDAR_LOOKBACK_52W = timedelta(days=371)  # 52 weeks + a week of holidays/weekend slack

_CACHE_MAX = 256  # bars frames per process; ~100 KB each, bounded so a long-lived worker stays small
# Keyed by id(provider), with a weak reference to check identity on a hit: a provider that was
# garbage-collected can leave its id to a new one, which must not see the old one's bars.
_cache: dict[tuple[int, str, date | None, date], tuple[weakref.ref[Any], pd.DataFrame]] = {}
# The share basis of (provider, symbol, as_of), the same for every window ending at that as_of:
# an analysis asks for several windows, each of which would otherwise re-read the bars around
# every later split. Only a basis that was told is kept (a provider error may be transient).
_basis_cache: dict[tuple[int, str, date], tuple[weakref.ref[Any], ShareBasis]] = {}
_cache_lock = threading.Lock()

logger = logging.getLogger("finagent.tools")


def fetch_bars(
    *, provider: MarketDataProvider, symbol: str, start: date | None, end: date, settings: Settings
) -> pd.DataFrame:
    """``provider.bars`` on the shares traded at ``end``, with a small per-process cache keyed by
    (provider, symbol, start, end). ``settings``: the caller's (the shared cache's Redis and
    the provider's rate limit).

    The source's bars are multiplied back by the later splits it had divided out (prices ×
    factor, volume ÷ factor: :func:`agents.data.fundamentals.share_basis.source_share_basis`),
    one factor for the whole window, so ratios and indicator signs are as before and USD levels
    are those of ``end``; :func:`share_basis_of` tells what was done. For a remote provider
    (``provider.remote`` true, e.g. yfinance) the window is also looked up in the Redis cache
    shared by all workers, and a fetch first takes a token from the shared rate limit
    (``agents.data.market.shared``).

    The frame is shared: callers must not modify it. Errors are the provider's (see
    ``agents.data.market.base``) and are not cached.

    Raises:
        RateLimitedError: the shared rate limit is exhausted (the task retries later).
    """
    key = (id(provider), symbol, start, end)
    hit = _cached(_cache, key, provider)
    if hit is not None:
        return hit
    frame = _as_of_shares(
        _source_bars(provider, symbol, start, end, settings=settings),
        provider=provider,
        symbol=symbol,
        end=end,
        settings=settings,
    )
    _keep(_cache, key, provider, frame)
    return frame


def _cached[T](store: dict[Any, tuple[weakref.ref[Any], T]], key: Any, provider: object) -> T | None:
    """``store[key]``'s value when it was kept for this very ``provider`` (not a later object
    that reuses a collected provider's id), else ``None``."""
    with _cache_lock:
        hit = store.get(key)
    return hit[1] if hit is not None and hit[0]() is provider else None


def _keep[T](store: dict[Any, tuple[weakref.ref[Any], T]], key: Any, provider: object, value: T) -> None:
    """Keep ``value`` under ``key`` for ``provider``, dropping the oldest entry past
    :data:`_CACHE_MAX`."""
    with _cache_lock:
        if len(store) >= _CACHE_MAX:
            store.pop(next(iter(store)))
        store[key] = (weakref.ref(provider), value)


def _source_bars(
    provider: MarketDataProvider, symbol: str, start: date | None, end: date, *, settings: Settings
) -> pd.DataFrame:
    """The source's own bars (no share-basis change): remote ones through the shared cache."""
    if getattr(provider, "remote", False):
        return _fetch_remote(provider=provider, symbol=symbol, start=start, end=end, settings=settings)
    return provider.bars(symbol=symbol, start=start, end=end)


def _as_of_shares(
    frame: pd.DataFrame, *, provider: MarketDataProvider, symbol: str, end: date, settings: Settings
) -> pd.DataFrame:
    """``frame`` on the shares traded at ``end`` (:func:`fetch_bars`), the basis kept in its
    ``attrs`` when something was done or could not be told."""
    key = (id(provider), symbol, end)
    basis = _cached(_basis_cache, key, provider)
    if basis is None:
        remote = bool(getattr(provider, "remote", False))
        basis = source_share_basis(
            provider,
            symbol,
            end,
            bars=lambda sym, start, stop: _source_bars(provider, sym, start, stop, settings=settings),
            # an online series reaches today: asking its last bar would cost a request
            last=date.today() if remote else None,
        )
        if basis.reason is None:
            _keep(_basis_cache, key, provider, basis)
    if basis.factor == 1 and basis.reason is None:
        return frame
    out = rebase(frame, basis)
    if out is frame:
        out = frame.copy(deep=False)
    out.attrs["share_basis"] = basis
    return out


def share_basis_of(frame: pd.DataFrame) -> ShareBasis:
    """What :func:`fetch_bars` did to ``frame``'s share basis (a trivial basis when nothing)."""
    basis = frame.attrs.get("share_basis")
    return basis if isinstance(basis, ShareBasis) else ShareBasis()


def _fetch_remote(
    *, provider: MarketDataProvider, symbol: str, start: date | None, end: date, settings: Settings
) -> pd.DataFrame:
    redis_url = settings.service.shared_redis_url
    key = shared.cache_key(provider=provider.name, symbol=symbol, start=start, end=end)
    if redis_url:
        cached = shared.get_cached_bars(redis_url=redis_url, key=key)
        if cached is not None:
            return cached
    if settings.data.provider_rate_limit:
        wait = shared.take_token(
            name=provider.name,
            rate=settings.data.provider_rate_limit,
            burst=settings.data.provider_rate_burst,
            redis_url=redis_url,
        )
        if wait > 0:
            raise RateLimitedError(f"{provider.name} rate limit reached; a token frees in {wait:.1f}s")
    frame = provider.bars(symbol=symbol, start=start, end=end)
    if redis_url:
        shared.put_cached_bars(redis_url=redis_url, key=key, frame=frame, ttl=settings.data.bars_cache_ttl)
    return frame


def iso_dates(index: pd.Index) -> list[str]:
    """The calendar day of each bar as ISO 8601 ``YYYY-MM-DD`` strings, in the index's own
    time zone (a tz-aware bar stamped 2012-06-29 00:00 New York is ``2012-06-29``), as
    ``[ts.date().isoformat() for ts in index]`` gives them, without creating a ``Timestamp`` per
    bar (0.6 → 0.03 ms on 500 bars; that loop ran four times per analysis).

    An index of another type (Timestamps in an object index) is converted first; one that
    holds no dates raises pandas' ``TypeError``/``ValueError``.
    """
    if not isinstance(index, pd.DatetimeIndex):
        index = pd.DatetimeIndex(index)
    local = index.tz_localize(None) if index.tz is not None else index
    days: list[int] = local.to_numpy(dtype="datetime64[ns]").astype("datetime64[D]").astype("int64").tolist()
    known = _ISO_DAYS.get
    return [known(day) or _ISO_DAYS.setdefault(day, str(np.datetime64(day, "D"))) for day in days]


#: Day number since 1970-01-01 → ISO string, filled by :func:`iso_dates` (one entry per
#: calendar day ever seen: ~250 per year of bars; formatting each day once made the call 3×
#: cheaper than numpy's ``datetime_as_string`` on 500 bars).
_ISO_DAYS: dict[int, str] = {}


def _r(value: float, digits: int = 4) -> float:
    return round(float(value), digits)


def period_start(*, period: str, as_of: date) -> date | None:
    """First calendar date of ``period`` ending at ``as_of`` (``None`` for ``max``).

    ``1d``/``5d`` are counted in trading bars by ``get_history`` (:func:`history_window`), so they
    map to a calendar window wide enough to hold them (10 and 14 days).
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


def history_window(*, ctx: ToolContext, symbol: str, period: str, interval: str) -> pd.DataFrame:
    """The bars ``get_history`` serves for ``(symbol, period, interval)`` at ``ctx.as_of`` (shared:
    callers must not modify them, :func:`_window`)."""
    return _window(ctx, symbol, period, interval)[1]


def history_window_basis(
    *, ctx: ToolContext, symbol: str, period: str, interval: str
) -> tuple[pd.DataFrame, tuple[list[float], float] | None]:
    """:func:`history_window`'s bars, and for daily bars the source's adjusted closes of the
    same bars with the point-in-time factor (``adj_close`` = source × factor, as
    :func:`agents.data.market.base.point_in_time_adj_close` computes it), else ``None``. The
    source's values are the same for every analysis date, so storage can share them
    (``db.blobs``: a tool row's ``storage_basis``)."""
    raw, bars, rescaled = _window(ctx, symbol, period, interval)
    if interval != "1d" or bars.empty or not rescaled:
        return bars, None
    last_close, last_adj = float(raw["close"].iloc[-1]), float(raw["adj_close"].iloc[-1])
    source = raw["adj_close"].tolist()
    return bars, (source[len(source) - len(bars) :], last_close / last_adj)


#: Windows :func:`_window` keeps per process: an analysis reads the same window in several
#: tools and stages (the research stage's history again in the technical tools, the risk
#: forecast's again in ``risk_levels``).
_WINDOW_MAX = 64
_window_cache: dict[tuple[int, str, str, str, date], tuple[weakref.ref[Any], tuple[Any, ...]]] = {}


def _window(
    ctx: ToolContext, symbol: str, period: str, interval: str
) -> tuple[pd.DataFrame, pd.DataFrame, bool]:
    """``(the source's bars from fetch_bars, the window get_history serves, whether its adjusted
    close was rescaled)`` for ``(symbol, period, interval)`` at ``ctx.as_of``, kept per process
    for :data:`_WINDOW_MAX` windows keyed by the provider (as :func:`fetch_bars`, whose cached
    frame it is derived from) and those four values: the same frames, made once. A kept window
    is served only while ``fetch_bars`` still serves the very frame it was made from (a frame
    fetched again, after that cache dropped it, makes a new window), so it is never staler than
    ``fetch_bars``. Shared frames: callers must not modify them. Provider errors are not kept."""
    key = (id(ctx.provider), symbol, period, interval, ctx.as_of)
    start = period_start(period=period, as_of=ctx.as_of)
    raw = fetch_bars(provider=ctx.provider, symbol=symbol, start=start, end=ctx.as_of, settings=ctx.settings)
    hit = _cached(_window_cache, key, ctx.provider)
    if hit is not None and hit[0] is raw:
        return hit
    bars = point_in_time_adj_close(raw)
    rescaled = bars is not raw
    if period == "1d":
        bars = bars.tail(1)
    elif period == "5d":
        bars = bars.tail(5)
    out = (raw, _resample(bars, interval), rescaled)
    with _cache_lock:
        if len(_window_cache) >= _WINDOW_MAX:
            _window_cache.pop(next(iter(_window_cache)))
        _window_cache[key] = (weakref.ref(ctx.provider), out)
    return out


def stock_data(*, ctx: ToolContext, symbol: str) -> ToolOutput:
    """The ``get_stock_data`` result for one (already normalised) ``symbol`` at ``ctx.as_of``:
    the tool itself and ``get_quotes`` (one entry per symbol) both call this, so they never
    disagree.

    Returns data ``{symbol, date, current_price, previous_close, change, change_percent, volume,
    market_cap, pe_ratio, 52w_high, 52w_low, currency, null_reasons, source, market_clock}``;
    ``market_clock`` is the data source's "today" (:mod:`agents.data.market.clock`: ``{day, basis,
    source, note}``, e.g. the embedded data's last day 2013-03-01); ``current_price``
    is the close traded on ``date`` (the last bar ≤ as_of, on the shares of that day: see
    :func:`fetch_bars`), ``volume`` that day's shares; ``previous_close``, ``change`` and the
    52-week range use adjusted prices on that basis; ``split_basis`` (only when the source's prices
    were multiplied back, or their basis could not be checked) is
    :meth:`agents.data.fundamentals.share_basis.ShareBasis.as_dict`; ``change_percent`` is a fraction
    (0.0145 = 1.45 %). market_cap / pe_ratio are null with a reason when the source lacks them;
    a missing pe_ratio is the earnings calendar's trailing P/E when it covers the symbol and date
    (:mod:`agents.data.fundamentals.trailing`), cited in ``field_sources``.
    Provider errors (INVALID_SYMBOL, NO_DATA, ...) propagate.
    """
    bars = fetch_bars(
        provider=ctx.provider,
        symbol=symbol,
        start=ctx.as_of - _CALENDAR_LOOKBACK_52W,
        end=ctx.as_of,
        settings=ctx.settings,
    )
    adj = adjusted_arrays(bars)  # adjusted_ohlc's columns, without building its frame
    last = bars.iloc[-1]
    price = float(last["close"])
    data: dict[str, Any] = {
        "symbol": symbol,
        "date": bars.index[-1].date().isoformat(),
        "current_price": _r(price),
        "previous_close": None,
        "change": None,
        "change_percent": None,
        "volume": int(last["volume"]),
        "market_cap": None,
        "pe_ratio": None,
        "52w_high": _r(adj["high"][-TRADING_DAYS_PER_YEAR:].max()),
        "52w_low": _r(adj["low"][-TRADING_DAYS_PER_YEAR:].min()),
        "currency": "USD",
        "bars_in_52w_window": int(min(len(bars), TRADING_DAYS_PER_YEAR)),
        "null_reasons": {},
        "source": ctx.provider.source_ref(symbol=symbol),
    }
    if len(bars) >= 2:
        prev = float(adj["close"][-2])
        data["previous_close"] = _r(prev)
        data["change"] = _r(price - prev)
        data["change_percent"] = _r((price - prev) / prev, 6)
    else:
        data["null_reasons"]["change"] = "only one bar at or before as_of"
    profile = ctx.provider.profile(symbol=symbol)
    for field_name in ("market_cap", "pe_ratio"):
        value = getattr(profile, field_name)
        if value is None:
            data["null_reasons"][field_name] = f"not provided by the {ctx.provider.name} data source"
        else:
            data[field_name] = value
    basis = share_basis_of(bars)
    if basis.factor != 1 or basis.reason is not None:
        # said only when the source's prices were changed or could not be checked, so quotes of
        # sources already as traded read as before
        data["split_basis"] = basis.as_dict()
    if data["pe_ratio"] is None:
        _calendar_pe(
            data, symbol=symbol, ctx=ctx, close=price, day=bars.index[-1].date(), basis_reason=basis.reason
        )
    try:  # what "today" is for this data, so a report can say how old its data is
        data["market_clock"] = market_today(provider=ctx.provider, symbols=[symbol]).as_dict()
    except ProviderError:
        data["market_clock"] = None
    change = data["change"]
    summary = f"{symbol} {data['date']}: price ${price:,.2f}" + (
        f", change {change:+.2f} ({signed_percent(data['change_percent'])})" if change is not None else ""
    )
    return ToolOutput(data=data, summary=summary, symbol=symbol)


def _calendar_pe(
    data: dict[str, Any], *, symbol: str, ctx: ToolContext, close: float, day: date, basis_reason: str | None
) -> None:
    """Fill ``data["pe_ratio"]`` with the earnings calendar's trailing P/E at ``ctx.as_of``
    (:mod:`agents.data.fundamentals.trailing`: four reported quarters on the share basis of ``close``)
    and cite it in ``data["field_sources"]``; otherwise extend the null reason with the
    calendar's. The calendar is a dependency, so this works with the embedded data offline."""
    try:
        calendar = default_calendar()
        price = Price(
            close=close,
            day=day,
            ref=f"{ctx.provider.source_ref(symbol=symbol)}@{day.isoformat()}",
            basis_reason=basis_reason,
        )
        got = trailing_values(calendar, symbol, ctx.as_of, price=price)
    except CalendarUnavailableError:
        return
    if got is None:
        return
    value = got.values.values.get("pe_ratio")
    if value is None:
        why = got.values.reasons.get("pe_ratio")
        if why:
            data["null_reasons"]["pe_ratio"] += f"; earnings calendar: {why}"
        return
    data["pe_ratio"] = value
    data["null_reasons"].pop("pe_ratio", None)
    data.setdefault("field_sources", {})["pe_ratio"] = got.values.ref


def adjusted_bars(raw: pd.DataFrame | None, *, symbol: str, period: str, ctx: ToolContext) -> pd.DataFrame:
    """Adjusted bars (:func:`agents.data.market.base.adjusted_ohlc`: ``open, high, low, close,
    volume``, USD in last-bar prices; DatetimeIndex) from ``raw``, the provider-contract bars of a
    cited ``get_history`` call already cut at ``ctx.as_of``, or, when ``raw`` is ``None``, from
    ``period`` (e.g. ``"6mo"``) of bars fetched from ``ctx.provider`` ending at ``ctx.as_of``.

    Raises:
        ToolInputError: ``NO_DATA`` when there are no bars; provider errors pass through.
    """
    if raw is None:
        start = period_start(period=period, as_of=ctx.as_of)
        raw = fetch_bars(
            provider=ctx.provider, symbol=symbol, start=start, end=ctx.as_of, settings=ctx.settings
        )
    if raw.empty:
        raise ToolInputError(f"no bars for {symbol} up to {ctx.as_of}", code=ErrorCode.NO_DATA)
    return adjusted_ohlc(raw)


def bars_header(symbol: str, bars: pd.DataFrame) -> dict[str, Any]:
    """The leading keys of a bar tool's data: ``{symbol, date (ISO date of the last bar),
    bars_used (number of bars)}``. ``bars`` must be non-empty with a DatetimeIndex."""
    return {"symbol": symbol, "date": bars.index[-1].date().isoformat(), "bars_used": len(bars)}
