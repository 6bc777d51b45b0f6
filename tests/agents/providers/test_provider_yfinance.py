"""YFinanceProvider through the real yfinance code path, against a local Yahoo stand-in.

No internet: a ``ThreadingHTTPServer`` on 127.0.0.1 plays Yahoo. The provider gets a
``requests.Session`` whose transport adapter rewrites every ``https://<yahoo host>/path`` to
``http://127.0.0.1:<port>/path``, so yfinance runs its whole normal flow (cookie, crumb, exchange
time zone lookup, chart request, JSON parsing, DataFrame building) over real HTTP and our code
maps the result. The chart and quote bodies are real recorded Yahoo responses (see
``fixtures/README.md``); error answers (404, 429, a hang) are the shapes Yahoo sends, without prices.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pandas as pd
import pytest
import yfinance as yf
from yfinance import cache as yf_cache

from agents.data.market.base import (
    BARS_COLUMNS,
    DateOutOfRangeError,
    MarketDataProvider,
    NoDataError,
    ProviderConnectionError,
    ProviderTimeoutError,
    RateLimitedError,
    SymbolNotFoundError,
    adjusted_ohlc,
)
from agents.data.market.yfinance_provider import YFinanceProvider
from tests.support.yahoo_http import (
    EMPTY_QUOTE,
    EMPTY_TIMESERIES,
    QUOTE_BODY,
    SUMMARY_NOT_FOUND,
    QuietHandler,
    reset_yfinance,
    session_for,
    start_server,
)

FIXTURES = Path(__file__).parent / "fixtures"
CHART_BODY: dict[str, Any] = json.loads(
    (FIXTURES / "yahoo_chart_AAPL_2020-08-31_2020-11-07.json").read_text()
)["response"]["bodyJson"]
CHART_NOT_FOUND = {
    "chart": {
        "result": None,
        "error": {"code": "Not Found", "description": "No data found, symbol may be delisted"},
    }
}
# quoteSummary is not recorded; an empty (200) module set makes Ticker.info rely on the recorded
# v7 quote response, which holds the market cap, trailing P/E and names.
SUMMARY_EMPTY = {"quoteSummary": {"result": [{}], "error": None}}

pytestmark = [
    # yfinance 1.7 calls pandas with inplace=True, deprecated in pandas 3.1: not ours to fix.
    pytest.mark.filterwarnings("ignore:The inplace keyword:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::pandas.errors.Pandas4Warning"),
]


@dataclass
class FakeYahoo:
    """What the local server answers; tests flip ``mode`` and read ``requests``."""

    mode: str = "normal"  # normal | rate_limited | hang_history
    requests: list[tuple[str, str]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)


def _handler(state: FakeYahoo) -> type[BaseHTTPRequestHandler]:
    class Handler(QuietHandler):
        def do_GET(self) -> None:
            host = self.headers.get("X-Original-Host", "")
            parts = urlsplit(self.path)
            query = parse_qs(parts.query)
            state.requests.append((host, self.path))
            if state.mode == "rate_limited":
                self._send(429, b"Too Many Requests\r\n", "text/plain")
                return
            if parts.path == "/v1/test/getcrumb":
                self._send(200, b"local-test-crumb", "text/plain")
                return
            if parts.path.startswith("/v8/finance/chart/"):
                symbol = parts.path.rsplit("/", 1)[-1]
                if state.mode == "hang_history" and "period1" in query:
                    state.release.wait(10)  # far longer than the provider's timeout
                    return
                if symbol == "AAPL":
                    self._json(200, CHART_BODY)
                else:
                    self._json(404, CHART_NOT_FOUND)
                return
            if parts.path.startswith("/v10/finance/quoteSummary/"):
                symbol = parts.path.rsplit("/", 1)[-1]
                found = symbol == "AAPL"
                self._json(200 if found else 404, SUMMARY_EMPTY if found else SUMMARY_NOT_FOUND)
                return
            if parts.path.startswith("/v7/finance/quote"):
                self._json(200, QUOTE_BODY if query.get("symbols") == ["AAPL"] else EMPTY_QUOTE)
                return
            if parts.path.startswith("/ws/fundamentals-timeseries/"):
                # Ticker.info also asks for trailingPegRatio; answer "no series" (no numbers).
                self._json(200, EMPTY_TIMESERIES)
                return
            # fc.yahoo.com / guce.yahoo.com cookie pages: an empty page, no cookie.
            self._send(200, b"<html><body></body></html>", "text/html")

        do_POST = do_GET

    return Handler


@pytest.fixture(scope="module", autouse=True)
def _isolated_yfinance_caches(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    # yfinance keeps time-zone and cookie caches on disk (~/.cache/py-yfinance): use a temp dir.
    previous = yf_cache._TzDBManager.get_location()
    yf.set_tz_cache_location(str(tmp_path_factory.mktemp("yfinance-cache")))
    yield
    yf.set_tz_cache_location(previous)


@pytest.fixture
def fake_yahoo() -> Iterator[tuple[FakeYahoo, int]]:
    state = FakeYahoo()
    server = start_server(_handler(state))
    try:
        yield state, server.server_address[1]
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
        # yfinance holds one process-wide session, crumb and response cache (YfData singleton):
        # forget what this test's server taught it.
        reset_yfinance()


@pytest.fixture
def provider(fake_yahoo: tuple[FakeYahoo, int]) -> YFinanceProvider:
    _, port = fake_yahoo
    return YFinanceProvider(timeout=2.0, session=session_for(port))


# -- bars from the recorded chart response -------------------------------------------------------


def test_is_a_market_data_provider(provider: YFinanceProvider) -> None:
    assert isinstance(provider, MarketDataProvider)
    assert provider.name == "yfinance"
    assert provider.symbols() == []


def test_recorded_chart_response_becomes_contract_bars(
    provider: YFinanceProvider, fake_yahoo: tuple[FakeYahoo, int]
) -> None:
    state, _ = fake_yahoo

    bars = provider.bars(symbol="AAPL", start=date(2020, 8, 31), end=date(2020, 11, 6))

    # the request really went through yfinance to the chart API
    chart_calls = [path for host, path in state.requests if path.startswith("/v8/finance/chart/AAPL")]
    assert any("period1=" in path and "interval=1d" in path for path in chart_calls)
    assert "query2.finance.yahoo.com" in {host for host, _ in state.requests}
    # contract
    assert tuple(bars.columns) == BARS_COLUMNS
    assert all(str(dtype) == "float64" for dtype in bars.dtypes)
    assert bars.index.name == "date"
    assert bars.index.tz is None
    assert bars.index.is_monotonic_increasing
    assert bars.index.is_unique
    assert (bars.index == bars.index.normalize()).all()
    # values: 49 sessions, exchange-local dates, raw close and Yahoo's adjusted close kept apart
    assert len(bars) == 49
    assert bars.index[0] == pd.Timestamp("2020-08-31")
    assert bars.index[-1] == pd.Timestamp("2020-11-06")
    first = bars.iloc[0]
    assert first["open"] == pytest.approx(127.58000183105469)
    assert first["high"] == pytest.approx(131.0)
    assert first["low"] == pytest.approx(126.0)
    assert first["close"] == pytest.approx(129.0399932861328)
    assert first["adj_close"] == pytest.approx(125.82673645019531)
    assert first["volume"] == pytest.approx(225702700.0)


def test_dividend_adjustment_survives_the_mapping(provider: YFinanceProvider) -> None:
    bars = provider.bars(symbol="AAPL", start=date(2020, 8, 31), end=date(2020, 11, 6))
    ratio = bars["adj_close"] / bars["close"]
    # constant before the 2020-11-06 ex-dividend day, a step up on it (Yahoo back-adjustment)
    assert ratio.iloc[:-1].max() - ratio.iloc[:-1].min() < 1e-5
    assert ratio.iloc[-1] > ratio.iloc[-2]
    adjusted = adjusted_ohlc(bars)
    assert adjusted["close"].iloc[-1] == pytest.approx(bars["close"].iloc[-1])


def test_end_filter_never_returns_a_bar_after_end(provider: YFinanceProvider) -> None:
    # the stand-in returns all 49 bars whatever the window: the provider must cut
    bars = provider.bars(symbol="AAPL", start=date(2020, 9, 1), end=date(2020, 10, 4))  # a Sunday
    assert bars.index[0] == pd.Timestamp("2020-09-01")
    assert bars.index[-1] == pd.Timestamp("2020-10-02")
    assert bars.index.max() <= pd.Timestamp("2020-10-04")


def test_start_none_asks_yahoo_for_the_whole_history(
    provider: YFinanceProvider, fake_yahoo: tuple[FakeYahoo, int]
) -> None:
    state, _ = fake_yahoo
    bars = provider.bars(symbol="AAPL", start=None, end=date(2020, 11, 6))
    assert len(bars) == 49
    history_calls = [
        p for _, p in state.requests if p.startswith("/v8/finance/chart/AAPL") and "period1=" in p
    ]
    # period=max → yfinance asks from ~99 years before end
    period1 = int(parse_qs(urlsplit(history_calls[-1]).query)["period1"][0])
    assert period1 < pd.Timestamp("1930-01-01").timestamp()


def test_end_long_after_the_last_bar_is_out_of_range(provider: YFinanceProvider) -> None:
    with pytest.raises(DateOutOfRangeError, match=r"AAPL.*2020-12-01.*\.\.2020-11-06"):
        provider.bars(symbol="AAPL", start=date(2020, 9, 1), end=date(2020, 12, 1))


def test_end_before_first_trade_date_is_out_of_range(provider: YFinanceProvider) -> None:
    # the recorded metadata says AAPL first traded 1980-12-12 (firstTradeDate 345479400)
    with pytest.raises(DateOutOfRangeError, match=r"AAPL.*1980-01-31.*1980-12-12"):
        provider.bars(symbol="AAPL", start=date(1980, 1, 2), end=date(1980, 1, 31))


def test_end_in_the_future_is_refused_before_any_request(
    provider: YFinanceProvider, fake_yahoo: tuple[FakeYahoo, int]
) -> None:
    state, _ = fake_yahoo
    future = date.today() + timedelta(days=2)
    with pytest.raises(DateOutOfRangeError, match=rf"AAPL.*{future.isoformat()}"):
        provider.bars(symbol="AAPL", start=None, end=future)
    assert state.requests == []


def test_window_without_bars_is_no_data(provider: YFinanceProvider) -> None:
    with pytest.raises(NoDataError):
        provider.bars(symbol="AAPL", start=date(2020, 9, 5), end=date(2020, 9, 7))  # Sat-Labor Day


# -- error mapping --------------------------------------------------------------------------------


def test_unknown_symbol_is_symbol_not_found(provider: YFinanceProvider) -> None:
    for _ in range(3):  # yfinance's fallback path changes after two misses per process
        with pytest.raises(SymbolNotFoundError, match="ZZZZ"):
            provider.bars(symbol="ZZZZ", start=date(2020, 9, 1), end=date(2020, 10, 1))


def test_http_429_is_rate_limited(provider: YFinanceProvider, fake_yahoo: tuple[FakeYahoo, int]) -> None:
    state, _ = fake_yahoo
    state.mode = "rate_limited"
    with pytest.raises(RateLimitedError) as excinfo:
        provider.bars(symbol="AAPL", start=date(2020, 9, 1), end=date(2020, 10, 1))
    assert excinfo.value.transient
    assert excinfo.value.code == "RATE_LIMITED"


def test_a_hanging_chart_request_times_out(fake_yahoo: tuple[FakeYahoo, int]) -> None:
    state, port = fake_yahoo
    state.mode = "hang_history"
    provider = YFinanceProvider(timeout=0.5, session=session_for(port))
    with pytest.raises(ProviderTimeoutError) as excinfo:
        provider.bars(symbol="AAPL", start=date(2020, 9, 1), end=date(2020, 10, 1))
    assert excinfo.value.code == "NETWORK_ERROR"
    assert excinfo.value.transient


def test_connection_refused_is_a_connection_error() -> None:
    # a port nobody listens on
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = YFinanceProvider(timeout=2.0, session=session_for(port))
    try:
        with pytest.raises(ProviderConnectionError):
            provider.bars(symbol="AAPL", start=date(2020, 9, 1), end=date(2020, 10, 1))
    finally:
        reset_yfinance()


# -- profile from the recorded quote response ----------------------------------------------------


def test_profile_reads_market_cap_pe_and_name(provider: YFinanceProvider) -> None:
    profile = provider.profile(symbol="AAPL")
    assert profile.market_cap == pytest.approx(3674405863424.0)
    assert profile.pe_ratio == pytest.approx(38.763866)
    assert profile.name == "Apple Inc."
    assert profile.source_ref is not None
    assert "AAPL" in profile.source_ref


def test_profile_of_unknown_symbol_is_symbol_not_found(provider: YFinanceProvider) -> None:
    with pytest.raises(SymbolNotFoundError):
        provider.profile(symbol="ZZZZ")


def test_source_ref_names_yahoo_and_the_symbol(provider: YFinanceProvider) -> None:
    assert provider.source_ref(symbol="BRK.B").startswith("Yahoo Finance chart API v8/finance/chart/BRK-B")
