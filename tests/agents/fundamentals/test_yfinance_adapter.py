"""The yfinance fundamentals adapter through the real yfinance code, over HTTP, offline.

``tests.support.yahoo_http`` runs a local Yahoo stand-in and points yfinance's session at it, so
``yfinance.Ticker(symbol).info`` does its whole normal flow (cookie, crumb, quoteSummary with the
modules yfinance asks for, v7 quote, fundamentals-timeseries) and our adapter maps the result.
The bodies are real recorded Yahoo responses for AAPL (quoteSummary of 2025-02-24, v7 quote of
2025-02-17; provenance in ``tests/agents/providers/fixtures/yahoo_info_news/README.md``); the
expected numbers below were read off those files by hand.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from agents.data.fundamentals.yfinance_adapter import yfinance_fundamentals
from agents.data.market.base import (
    DateOutOfRangeError,
    ProviderConnectionError,
    RateLimitedError,
    SymbolNotFoundError,
)
from agents.data.market.embedded import EmbeddedProvider
from agents.tools.catalog import run_tool
from agents.tools.fundamentals import fundamentals_configured
from agents.tools.registry import ToolContext
from core.settings import Settings
from tests.support.yahoo_http import YahooState, yahoo_server

pytestmark = pytest.mark.usefixtures("clean_settings")

RECORDED = date(2025, 2, 24)  # the quoteSummary recording day; the v7 quote is of 2025-02-17


@pytest.fixture
def yahoo(tmp_path: Path) -> Iterator[YahooState]:
    with yahoo_server(tmp_path) as (state, _port):
        yield state


def _ctx(as_of: date) -> ToolContext:
    settings = Settings(data_provider="yfinance", data_fundamentals_dir=None)
    return ToolContext(settings=settings, as_of=as_of, provider=EmbeddedProvider())


def _today() -> ToolContext:
    return _ctx(datetime.now(UTC).date())


def test_recorded_info_maps_to_our_fields(yahoo: YahooState) -> None:
    out = yfinance_fundamentals("AAPL", as_of=RECORDED, today=RECORDED)

    # the real yfinance asked Yahoo for exactly what Ticker.info needs
    summary = [p for m, h, p in yahoo.requests if p.startswith("/v10/finance/quoteSummary/AAPL")]
    assert summary and set(parse_qs(urlsplit(summary[0]).query)["modules"][0].split(",")) == {
        "financialData",
        "quoteType",
        "defaultKeyStatistics",
        "assetProfile",
        "summaryDetail",
    }
    assert any(p.startswith("/v7/finance/quote") and "symbols=AAPL" in p for _, _, p in yahoo.requests)
    assert ("GET", "query1.finance.yahoo.com", "/v1/test/getcrumb") in yahoo.requests
    # v7 quote values win over quoteSummary where both have the key (yfinance's merge order)
    assert out["pe_ratio"] == pytest.approx(38.763866)  # v7 trailingPE (summaryDetail: 38.91442)
    assert out["market_cap"] == pytest.approx(3674405863424)  # v7 marketCap
    assert out["price_to_book"] == pytest.approx(55.114914)  # v7 priceToBook
    # quoteSummary-only keys
    assert out["ev_ebitda"] == pytest.approx(27.169)  # defaultKeyStatistics.enterpriseToEbitda
    assert out["gross_margin"] == pytest.approx(0.46519002)  # financialData.grossMargins
    assert out["current_ratio"] == pytest.approx(0.923)
    assert out["debt_to_equity"] == pytest.approx(1.45)  # financialData.debtToEquity 145 (percent)
    # (totalDebt 96798998528 - totalCash 53774999552) / ebitda 137352003584
    assert out["net_debt_to_ebitda"] == pytest.approx(0.3132)
    assert out["ebitda"] == pytest.approx(137352003584)
    assert out["eps_consensus"] == pytest.approx(8.31)  # defaultKeyStatistics.forwardEps
    assert out["eps_actual"] == pytest.approx(6.31)  # defaultKeyStatistics.trailingEps
    assert out["net_margin"] == pytest.approx(0.24295)  # financialData.profitMargins
    assert out["price_to_sales"] == pytest.approx(9.320489)  # summaryDetail
    assert out["beta"] == pytest.approx(1.2)
    assert out["shares_outstanding"] == 15022100480  # v7 and quoteSummary sharesOutstanding
    # v7 earningsTimestamp 1738272600 = 2025-01-30 (already reported); earningsTimestampStart
    # 1746010740 = 2025-04-30 10:59 UTC is the next, estimated report
    assert out["earnings_date"] == "2025-04-30"
    # nulls, with reasons
    assert out["peg_ratio"] is None  # no trailingPegRatio series, no pegRatio key
    assert out["roic"] is None and "invested-capital" in out["null_reasons"]["roic"]
    assert out["dividend_yield"] is None  # v7 says 0.41 (percent), summaryDetail 0.0041: not guessed
    assert out["timestamp"] == "2025-02-24"
    assert out["field_sources"]["pe_ratio"] == "yfinance:info#AAPL@2025-02-24"
    # (EPS growth and mean surprise come from the earnings calendar only)
    assert set(out["null_reasons"]) == {
        "peg_ratio",
        "roic",
        "dividend_yield",
        "eps_growth_yoy",
        "eps_surprise_mean_4q",
    }


@pytest.mark.parametrize(
    ("as_of", "expected"),
    [
        (date(2025, 1, 28), "2025-01-30"),  # before the report: earningsTimestamp
        (date(2025, 1, 30), "2025-01-30"),  # the report day itself
        (date(2025, 2, 17), "2025-04-30"),  # after it: the next window's start, not the past date
    ],
)
def test_earnings_date_is_the_next_report(yahoo: YahooState, as_of: date, expected: str) -> None:
    assert yfinance_fundamentals("AAPL", as_of=as_of, today=as_of)["earnings_date"] == expected


def test_no_earnings_date_once_every_yahoo_date_is_past(yahoo: YahooState) -> None:
    out = yfinance_fundamentals("AAPL", as_of=date(2025, 5, 6), today=date(2025, 5, 6))
    assert out["earnings_date"] is None
    assert "2025-04-30" in out["null_reasons"]["earnings_date"]


def test_without_the_v7_quote_the_quote_summary_values_are_used(yahoo: YahooState) -> None:
    yahoo.quote_empty = True
    out = yfinance_fundamentals("AAPL", as_of=RECORDED, today=RECORDED)
    assert out["pe_ratio"] == pytest.approx(38.91442)  # summaryDetail.trailingPE
    assert out["market_cap"] == pytest.approx(3688676720640)  # summaryDetail.marketCap
    assert out["price_to_book"] == pytest.approx(55.328976)  # defaultKeyStatistics.priceToBook
    assert out["debt_to_equity"] == pytest.approx(1.45)
    assert out["earnings_date"] is None  # earningsTimestamp* come only from the v7 quote
    assert out["null_reasons"]["earnings_date"] == "not in Yahoo's info for this symbol"


def test_tool_envelope_today_with_an_unknown_symbol(yahoo: YahooState) -> None:
    today = datetime.now(UTC).date()
    settings = Settings(data_provider="yfinance", data_fundamentals_dir=None)
    assert fundamentals_configured(settings)
    env = run_tool(name="get_fundamentals", arguments={"symbols": ["AAPL", "ZZZZ"]}, ctx=_ctx(today))
    assert env.ok and env.data
    a, z = env.data["fundamentals"]
    assert a["pe_ratio"] == pytest.approx(38.763866) and a["debt_to_equity"] == pytest.approx(1.45)
    assert a["timestamp"] == today.isoformat()
    # the recorded report dates are all long past by now: no next earnings date, and it says why
    assert a["earnings_date"] is None and "before as_of" in a["null_reasons"]["earnings_date"]
    # Yahoo answers HTTP 404 "Quote not found" for ZZZZ; yfinance raises; the symbol is unknown
    assert z["error"]["code"] == "INVALID_SYMBOL"
    assert any(p.startswith("/v10/finance/quoteSummary/ZZZZ") for _, _, p in yahoo.requests)


def test_only_unknown_symbols_fail_the_call(yahoo: YahooState) -> None:
    env = run_tool(name="get_fundamentals", arguments={"symbols": ["ZZZZ"]}, ctx=_today())
    assert env.error is not None and env.error.code.value == "INVALID_SYMBOL"
    with pytest.raises(SymbolNotFoundError, match=r"ZZZZ \(HTTP 404\)"):
        yfinance_fundamentals("ZZZZ", as_of=RECORDED, today=RECORDED)


def test_http_429_is_rate_limited(yahoo: YahooState) -> None:
    yahoo.status = 429
    env = run_tool(name="get_fundamentals", arguments={"symbols": ["AAPL"]}, ctx=_today())
    assert env.error is not None and env.error.code.value == "RATE_LIMITED"
    with pytest.raises(RateLimitedError) as excinfo:
        yfinance_fundamentals("AAPL", as_of=RECORDED, today=RECORDED)
    assert excinfo.value.transient


def test_http_500_is_a_network_error_without_the_url(yahoo: YahooState) -> None:
    yahoo.status = 500
    env = run_tool(name="get_fundamentals", arguments={"symbols": ["AAPL"]}, ctx=_today())
    assert env.error is not None and env.error.code.value == "NETWORK_ERROR"
    with pytest.raises(ProviderConnectionError, match=r"^yfinance info for AAPL: HTTP 500$"):
        yfinance_fundamentals("AAPL", as_of=RECORDED, today=RECORDED)


def test_connection_refused_is_a_network_error(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with yahoo_server(tmp_path, port=port):
        env = run_tool(name="get_fundamentals", arguments={"symbols": ["AAPL"]}, ctx=_today())
    assert env.error is not None and env.error.code.value == "NETWORK_ERROR"


def test_a_past_as_of_is_not_answered_with_todays_values(yahoo: YahooState) -> None:
    # Yahoo's info is refused for a past as_of; the earnings calendar answers instead, point in
    # time (AAPL's four quarters reported by 2013-03-01 sum to 1.57 USD on 2025 shares, × 28).
    env = run_tool(name="get_fundamentals", arguments={"symbols": ["AAPL"]}, ctx=_ctx(date(2013, 3, 1)))
    assert env.error is None and env.data is not None
    entry = env.data["fundamentals"][0]
    assert entry["eps_actual"] == pytest.approx(1.57 * 28)
    assert entry["timestamp"] == "2013-03-01"
    assert entry["ev_ebitda"] is None  # Yahoo's current value (27.169) is not used
    with pytest.raises(DateOutOfRangeError):
        yfinance_fundamentals("AAPL", as_of=date(2013, 3, 1))
    assert yahoo.requests == []  # refused before asking Yahoo
    # the calendar ships in a dependency: get_fundamentals has a source without configuration
    assert fundamentals_configured(Settings(data_provider="embedded", data_fundamentals_dir=None))
