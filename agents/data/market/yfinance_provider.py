"""The ``yfinance`` provider: live daily bars and a profile from Yahoo Finance, via ``yfinance``.

Bars come from Yahoo's v8 chart API through ``yfinance.Ticker.history(interval="1d",
auto_adjust=False)``, which returns both the traded ``Close`` and the split/dividend ``Adj
Close``; they are mapped to the ``agents.data.market.base`` contract by the same parser as the
offline providers. The profile (market cap USD, trailing P/E, company name) comes from
``Ticker.info`` (Yahoo's quoteSummary and v7 quote APIs).

Failures are translated into the provider errors the tools understand:

=================================================  ==========================
yfinance / HTTP                                    provider error
=================================================  ==========================
timeout (curl_cffi or requests ``Timeout``)        ``ProviderTimeoutError``
connection refused/reset, HTTP 5xx, "Yahoo down"   ``ProviderConnectionError``
HTTP 429, ``YFRateLimitError``                     ``RateLimitedError``
HTTP 404, ``YFTzMissingError`` ("possibly          ``SymbolNotFoundError``
delisted; no timezone found")
``YFPricesMissingError`` / empty frame             ``NoDataError`` (or
                                                   ``DateOutOfRangeError`` when
                                                   ``end`` precedes the first
                                                   trade date)
anything else                                      ``ProviderError``
=================================================  ==========================

Caveat: ``timeout`` bounds each chart/quote request; yfinance's own preflight requests (cookie,
crumb, exchange time zone) use its internal timeouts (10-30 s) on the first call per process.
"""

from __future__ import annotations

import importlib.metadata
import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from fractions import Fraction
from typing import Any

import pandas as pd
import yfinance as yf
from yfinance.exceptions import (
    YFPricesMissingError,
    YFRateLimitError,
    YFTickerMissingError,
)

from agents.data.market.bars import (
    MAX_DAYS_AFTER_LAST_BAR,
    bars_from_yahoo_frame,
    today_utc,
)
from agents.data.market.base import (
    DateOutOfRangeError,
    NoDataError,
    Profile,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitedError,
    SplitEvent,
    SymbolNotFoundError,
)

DEFAULT_TIMEOUT_SECONDS = 10.0  # 10 s per provider request (docs/design.md, "Market data")
#: How long a ticker's split history is kept per process: splits are announced weeks ahead and
#: one request fetches the whole history (a ``period=max`` chart), so a few hours is fresh.
SPLITS_TTL_SECONDS = 6 * 3600.0

# Exception class names (anywhere in the MRO) that mean "timed out" / "could not connect", for
# both HTTP backends yfinance may use (curl_cffi by default, requests as fallback). Matching by
# name keeps this module independent of which backend is installed.
_TIMEOUT_NAMES = frozenset({"Timeout", "ReadTimeout", "ConnectTimeout", "TimeoutError"})
_CONNECTION_NAMES = frozenset(
    {"ConnectionError", "ConnectionRefusedError", "ConnectionResetError", "RemoteDisconnected", "ProxyError"}
)

# yfinance's default (hide_exceptions=True) logs failures and returns an empty frame, which would
# make a timeout or a rate limit look like "no data". We need the exception to map it; this is a
# process-wide yfinance setting; every yfinance user of the product (this provider, the
# fundamentals adapter, the news provider) imports this module first so that it holds for all.
yf.config.debug.hide_exceptions = False


def _yfinance_version() -> str:
    try:
        return f"yfinance {importlib.metadata.version('yfinance')}"
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - imported above
        return "yfinance"


def _class_names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _http_status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def translate_error(exc: BaseException, *, symbol: str) -> ProviderError:
    """Map an exception raised inside yfinance (or its HTTP backend) to a provider error.

    Args:
        exc: what yfinance raised.
        symbol: the ticker, for the message.
    Returns:
        The provider error to raise (see the module table). ``YFPricesMissingError`` becomes
        ``NoDataError``; callers that know more (first trade date) refine it.
    """
    if isinstance(exc, ProviderError):
        return exc
    names = _class_names(exc)
    status = _http_status(exc)
    if isinstance(exc, YFRateLimitError) or status == 429:
        return RateLimitedError(f"{symbol}: Yahoo Finance rate limit hit (HTTP 429): {exc}")
    if names & _TIMEOUT_NAMES:
        return ProviderTimeoutError(f"{symbol}: Yahoo Finance request timed out: {exc}")
    if isinstance(exc, YFPricesMissingError):
        return NoDataError(f"{symbol}: Yahoo Finance returned no bars: {exc}")
    if isinstance(exc, YFTickerMissingError) or status == 404:
        return SymbolNotFoundError(f"{symbol}: unknown to Yahoo Finance or delisted: {exc}")
    if names & _CONNECTION_NAMES or (status is not None and status >= 500) or "CURRENTLY DOWN" in str(exc):
        return ProviderConnectionError(f"{symbol}: cannot reach Yahoo Finance: {exc}")
    return ProviderError(f"{symbol}: Yahoo Finance request failed ({type(exc).__name__}): {exc}")


@contextmanager
def _translated(symbol: str) -> Iterator[None]:
    try:
        yield
    except ProviderError:
        raise
    except Exception as exc:
        raise translate_error(exc, symbol=symbol) from exc


def _finite_float(value: Any) -> float | None:
    """A finite number from Yahoo's JSON, else ``None`` (Yahoo sends "Infinity", strings, null)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _first_trade_date(ticker: yf.Ticker) -> date | None:
    """The exchange-local first trade date from the chart metadata of the last request, if any."""
    try:
        first = ticker.history_metadata.get("firstTradeDate")
    except Exception:  # metadata is a nicety for the error message, never a reason to fail
        return None
    if isinstance(first, pd.Timestamp):
        return first.date()
    if isinstance(first, int | float) and math.isfinite(first):
        return pd.Timestamp(int(first), unit="s", tz="UTC").date()
    return None


class YFinanceProvider:
    """Live daily bars and profiles from Yahoo Finance via ``yfinance`` (``name = "yfinance"``).

    Args:
        timeout: seconds per Yahoo request (``FINAGENT_DATA_TOOL_TIMEOUT``, default 10 s).
        session: HTTP session handed to ``yfinance.Ticker`` (a curl_cffi or requests
            ``Session``); ``None`` keeps yfinance's own browser-impersonating session. Tests
            pass a session that routes Yahoo's hosts to a local server.

    Prices are USD for US listings (Yahoo's ``currency`` for others). ``symbols()`` is empty:
    the provider serves any symbol Yahoo knows, online only.
    """

    #: Fetches go through the shared Redis bar cache and rate limit (agents.data.market.shared).
    remote = True

    name = "yfinance"

    def __init__(self, *, timeout: float = DEFAULT_TIMEOUT_SECONDS, session: Any | None = None) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive seconds")
        self.timeout = timeout
        self._session = session
        self._splits: dict[str, tuple[float, tuple[SplitEvent, ...]]] = {}
        self._splits_lock = threading.Lock()

    @staticmethod
    def _yahoo_symbol(symbol: str) -> str:
        # Yahoo spells share classes with a dash (BRK-B); the product with a dot (BRK.B).
        return symbol.replace(".", "-")

    def _ticker(self, symbol: str) -> yf.Ticker:
        return yf.Ticker(self._yahoo_symbol(symbol), session=self._session)

    def yahoo_symbol(self, symbol: str) -> str:
        """``symbol`` as Yahoo spells it (share classes with a dash: ``BRK.B`` → ``BRK-B``)."""
        return self._yahoo_symbol(symbol)

    def yahoo_ticker(self, symbol: str) -> yf.Ticker:
        """A ``yfinance.Ticker`` on this provider's HTTP session, for the Yahoo endpoints other
        modules read (the option chains of ``agents.data.options.yahoo``). Raises nothing."""
        return self._ticker(symbol)

    def bars(self, *, symbol: str, start: date | None, end: date) -> pd.DataFrame:
        """Daily bars for ``symbol`` with ``start <= date <= end`` (contract frame, USD).

        ``start=None`` fetches the whole history (Yahoo's ``period=max``).

        Raises:
            DateOutOfRangeError: ``end`` after today (UTC), before the first trade date, or more
                than ``MAX_DAYS_AFTER_LAST_BAR`` days after the last bar Yahoo has.
            SymbolNotFoundError, NoDataError, ProviderTimeoutError, ProviderConnectionError,
            RateLimitedError, ProviderError: see the module table.
            ValueError: ``start`` after ``end``.
        """
        if start is not None and start > end:
            raise ValueError(f"start {start.isoformat()} is after end {end.isoformat()}")
        today = today_utc()
        if end > today:
            raise DateOutOfRangeError(
                f"{symbol}: requested end {end.isoformat()} is in the future "
                f"(today is {today.isoformat()} UTC); Yahoo Finance serves dates up to today"
            )

        ticker = self._ticker(symbol)
        # yfinance's ``end`` is exclusive; ours is inclusive.
        window: dict[str, Any] = {"end": (end + timedelta(days=1)).isoformat()}
        if start is None:
            window["period"] = "max"
        else:
            window["start"] = start.isoformat()
        try:
            with _translated(symbol):
                raw = ticker.history(
                    interval="1d",
                    auto_adjust=False,
                    back_adjust=False,
                    actions=False,
                    repair=False,
                    timeout=self.timeout,
                    **window,
                )
        except NoDataError:
            self._raise_if_before_first_trade(ticker=ticker, symbol=symbol, end=end)
            raise

        frame = bars_from_yahoo_frame(raw=raw, date_column=None).frame
        mask = frame.index <= pd.Timestamp(end)
        if start is not None:
            mask &= frame.index >= pd.Timestamp(start)
        frame = frame.loc[mask].copy()
        if frame.empty:
            self._raise_if_before_first_trade(ticker=ticker, symbol=symbol, end=end)
            raise NoDataError(f"{symbol}: Yahoo Finance returned no bars up to {end.isoformat()}")

        first_bar: date = frame.index[0].date()
        last_bar: date = frame.index[-1].date()
        if end > last_bar + timedelta(days=MAX_DAYS_AFTER_LAST_BAR):
            first = _first_trade_date(ticker) or first_bar
            raise DateOutOfRangeError(
                f"{symbol}: requested end {end.isoformat()} is more than {MAX_DAYS_AFTER_LAST_BAR} days "
                f"after the last bar; available {first.isoformat()}..{last_bar.isoformat()}"
            )
        return frame

    @staticmethod
    def _raise_if_before_first_trade(*, ticker: yf.Ticker, symbol: str, end: date) -> None:
        first = _first_trade_date(ticker)
        if first is not None and end < first:
            raise DateOutOfRangeError(
                f"{symbol}: requested end {end.isoformat()} is before the first trade date; "
                f"available {first.isoformat()}..today"
            )

    def latest_date(self, *, symbol: str) -> date:
        """Date of the most recent daily bar Yahoo has for ``symbol`` (looks back one month).

        Raises:
            NoDataError: no bar in the last month (halted or delisted); plus the errors of
                :meth:`bars`.
        """
        ticker = self._ticker(symbol)
        with _translated(symbol):
            raw = ticker.history(
                period="1mo",
                interval="1d",
                auto_adjust=False,
                actions=False,
                repair=False,
                timeout=self.timeout,
            )
        frame = bars_from_yahoo_frame(raw=raw, date_column=None).frame
        if frame.empty:
            raise NoDataError(f"{symbol}: Yahoo Finance has no bar in the last month")
        last: date = frame.index[-1].date()
        return last

    def symbols(self) -> list[str]:
        """Always ``[]``: an online provider has no offline list."""
        return []

    def profile(self, *, symbol: str) -> Profile:
        """Market cap (USD), trailing P/E and name from ``Ticker.info``; ``None`` where absent.

        Raises:
            SymbolNotFoundError, ProviderTimeoutError, ProviderConnectionError,
            RateLimitedError, ProviderError: see the module table.
        """
        ticker = self._ticker(symbol)
        with _translated(symbol):
            info = ticker.info or {}
        name = info.get("longName") or info.get("shortName")
        return Profile(
            market_cap=_finite_float(info.get("marketCap")),
            pe_ratio=_finite_float(info.get("trailingPE")),
            name=name if isinstance(name, str) and name.strip() else None,
            source_ref=f"Yahoo Finance quote API {self._yahoo_symbol(symbol)} ({_yfinance_version()})",
        )

    def split_events(self, *, symbol: str) -> tuple[SplitEvent, ...]:
        """Every split of ``symbol`` Yahoo reports, oldest first: ``yfinance.Ticker.splits``
        (the ``events=split`` of a ``period=max`` chart request; ratio = numerator/denominator,
        e.g. 4.0 for NVDA's 4-for-1 of 2021-07-20), kept per process for
        :data:`SPLITS_TTL_SECONDS`.

        Raises:
            SymbolNotFoundError, ProviderTimeoutError, ProviderConnectionError,
            RateLimitedError, ProviderError: see the module table.
        """
        with self._splits_lock:
            kept = self._splits.get(symbol)
        if kept is not None and time.monotonic() - kept[0] < SPLITS_TTL_SECONDS:
            return kept[1]
        ticker = self._ticker(symbol)
        with _translated(symbol):
            series = ticker.splits
        events: list[SplitEvent] = []
        for when, ratio in series.items() if series is not None else ():
            value = _finite_float(ratio)
            if value is None or value <= 0 or value == 1:
                continue  # Yahoo lists no-op rows for some symbols; a split changes the count
            day = when.date() if isinstance(when, pd.Timestamp) else pd.Timestamp(when).date()
            # Yahoo sends numerator/denominator as floats (4.0 / 1.0; 3/2 as 1.5): a ratio of
            # small integers, which limit_denominator recovers exactly
            events.append(SplitEvent(ex_date=day, ratio=Fraction(value).limit_denominator(1000)))
        history = tuple(sorted(events, key=lambda e: e.ex_date))
        with self._splits_lock:
            self._splits[symbol] = (time.monotonic(), history)
        return history

    def split_source_ref(self, *, symbol: str) -> str:
        """E.g. ``Yahoo Finance split history NVDA (yfinance 1.7.0)``."""
        return f"Yahoo Finance split history {self._yahoo_symbol(symbol)} ({_yfinance_version()})"

    def source_ref(self, *, symbol: str) -> str:
        """E.g. ``Yahoo Finance chart API v8/finance/chart/AAPL (yfinance 1.7.0)``."""
        return (
            f"Yahoo Finance chart API v8/finance/chart/{self._yahoo_symbol(symbol)} ({_yfinance_version()})"
        )
