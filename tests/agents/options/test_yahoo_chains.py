"""Online option chains (``agents.data.options.yahoo``) through the real yfinance code path, against a
local Yahoo stand-in serving a recorded real ``/v7/finance/options/PYPL`` response.

The fixture (``fixtures/yahoo_options_PYPL_2022-11-16.json``, provenance in ``fixtures/README.md``)
was recorded before the open of 2022-11-16: ``regularMarketTime`` is the close of 2022-11-15
(1668546004 = 16:00:04 New York), spot 89.86, nearest expiry 2022-11-18 with 71 puts, of which
10 have a two-sided quote (all in the money: Yahoo had pre-market quotes only for those).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yfinance as yf
from yfinance import cache as yf_cache

from agents.data.market.base import RateLimitedError
from agents.data.market.yfinance_provider import YFinanceProvider
from agents.data.options.chains import ChainNotFoundError
from agents.data.options.yahoo import fetch_chain, quote_day
from agents.tools.catalog import run_tool
from agents.tools.registry import ToolContext
from core.settings import Settings
from tests.support.yahoo_http import QuietHandler, reset_yfinance, session_for, start_server

RECORDED = json.loads((Path(__file__).parent / "fixtures" / "yahoo_options_PYPL_2022-11-16.json").read_text())
BODY: dict[str, Any] = RECORDED["response"]["bodyJson"]
FIRST_EXPIRY_EPOCH = "1668729600"  # 2022-11-18 00:00 UTC, the expiry the recorded body carries
QUOTE_DAY = date(2022, 11, 15)
NO_OPTIONS = {"optionChain": {"result": [], "error": None}}  # Yahoo's answer for a symbol without options


@dataclass
class Stand:
    status: int | None = None
    paths: list[str] = field(default_factory=list)


def _handler(stand: Stand) -> type[QuietHandler]:
    class Handler(QuietHandler):
        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            if parts.path == "/v1/test/getcrumb":
                self._send(200, b"local-test-crumb", "text/plain")
                return
            if not parts.path.startswith("/v7/finance/options/"):
                self._send(200, b"<html><body></body></html>", "text/html")  # cookie pages
                return
            stand.paths.append(self.path)
            if stand.status == 429:
                self._send(429, b"Too Many Requests\r\n", "text/plain")
                return
            symbol = parts.path.rsplit("/", 1)[-1]
            asked = parse_qs(parts.query).get("date", [FIRST_EXPIRY_EPOCH])[0]
            if symbol == "PYPL" and asked == FIRST_EXPIRY_EPOCH:
                self._json(200, BODY)
            else:  # other expiries were not recorded: the tests never ask for them
                self._json(200, NO_OPTIONS)

    return Handler


@pytest.fixture(scope="module", autouse=True)
def _isolated_yfinance_caches(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    previous = yf_cache._TzDBManager.get_location()
    yf.set_tz_cache_location(str(tmp_path_factory.mktemp("yfinance-cache")))
    yield
    yf.set_tz_cache_location(previous)


@pytest.fixture
def stand() -> Iterator[tuple[Stand, YFinanceProvider]]:
    state = Stand()
    server = start_server(_handler(state))
    try:
        yield state, YFinanceProvider(timeout=2.0, session=session_for(server.server_address[1]))
    finally:
        server.shutdown()
        server.server_close()
        reset_yfinance()


def test_quote_day_is_the_new_york_date_of_the_last_regular_trade() -> None:
    # 1668546004 s = 2022-11-15 21:00:04 UTC = 16:00:04 EST: the 2022-11-15 close
    assert quote_day({"regularMarketTime": 1668546004}) == QUOTE_DAY
    assert quote_day({}) is None


def test_recorded_chain_maps_to_quoted_contracts(stand: tuple[Stand, YFinanceProvider]) -> None:
    state, provider = stand
    chain = fetch_chain(provider=provider, symbol="PYPL", as_of=QUOTE_DAY, dte_max=3)
    assert (chain.symbol, chain.quote_date, chain.underlying_price) == ("PYPL", QUOTE_DAY, 89.86)
    puts = chain.puts()
    # the 10 puts of the body with bid > 0 (hand-listed from the fixture), strikes 101 .. 150
    assert [p.strike for p in puts] == [101, 102, 103, 106, 110, 120, 125, 140, 145, 150]
    first = puts[0]
    assert first.contract == "PYPL221118P00101000" and first.expiry == date(2022, 11, 18)
    assert (first.bid, first.ask, first.volume, first.open_interest) == (10.9, 11.6, 1, 29)
    assert first.mid == pytest.approx(11.25) and first.dte(QUOTE_DAY) == 3
    assert first.source_iv == pytest.approx(0.74609, abs=1e-4)  # Yahoo's impliedVolatility
    # one request: the expiry list came with the nearest expiry, the only one within 3 days
    assert [p.split("?")[0] for p in state.paths] == ["/v7/finance/options/PYPL"]


def test_an_earlier_as_of_never_gets_the_later_quote(stand: tuple[Stand, YFinanceProvider]) -> None:
    _, provider = stand
    with pytest.raises(ChainNotFoundError, match=r"quoted 2022-11-15 .* not on as_of 2022-11-14"):
        fetch_chain(provider=provider, symbol="PYPL", as_of=date(2022, 11, 14), dte_max=4)


def test_a_symbol_without_options_is_no_chain(stand: tuple[Stand, YFinanceProvider]) -> None:
    _, provider = stand
    with pytest.raises(ChainNotFoundError, match="lists no options for ZZZZ"):
        fetch_chain(provider=provider, symbol="ZZZZ", as_of=QUOTE_DAY, dte_max=3)


def test_http_429_is_rate_limited(stand: tuple[Stand, YFinanceProvider]) -> None:
    state, provider = stand
    state.status = 429
    with pytest.raises(RateLimitedError):
        fetch_chain(provider=provider, symbol="PYPL", as_of=QUOTE_DAY, dte_max=3)


def _ctx(tmp_path: Path, provider: YFinanceProvider, as_of: date) -> ToolContext:
    # no options folder + the yfinance provider → online chains; DTE horizon 3 keeps the requests
    # to the recorded expiry
    settings = Settings(service_state_dir=tmp_path / "state", options_dte_min=0, options_dte_max=3)
    return ToolContext(settings=settings, as_of=as_of, provider=provider)


def test_get_option_chain_tool_reads_online_and_cites_the_request(
    tmp_path: Path, stand: tuple[Stand, YFinanceProvider]
) -> None:
    _, provider = stand
    ctx = _ctx(tmp_path, provider, QUOTE_DAY)
    env = run_tool(name="get_option_chain", arguments={"symbol": "PYPL", "dte_min": 0, "dte_max": 3}, ctx=ctx)
    assert env.ok and env.data, env.error
    d = env.data
    assert (d["source"], d["quote_date"], d["underlying_price"]) == ("yahoo_online", "2022-11-15", 89.86)
    assert len(d["contracts"]) == 10
    row = d["contracts"][0]
    # spread % = (ask − bid) / mid = 0.70 / 11.25 = 0.0622
    assert (row["contract"], row["mid"], row["spread_pct"]) == ("PYPL221118P00101000", 11.25, 0.0622)
    assert env.source_refs == [env.tool_call_id, "yahoo:v7/finance/options/PYPL@2022-11-15"]


def test_get_option_greeks_compares_our_iv_with_yahoos(
    tmp_path: Path, stand: tuple[Stand, YFinanceProvider]
) -> None:
    _, provider = stand
    ctx = _ctx(tmp_path, provider, QUOTE_DAY)
    env = run_tool(name="get_option_greeks", arguments={"contracts": ["PYPL221118P00110000"]}, ctx=ctx)
    assert env.ok and env.data, env.error
    (row,) = env.data["contracts"]
    # the 110 put: mid (20.10 + 20.60) / 2 = 20.35 against intrinsic 110 − 89.86 = 20.14, 3 DTE:
    # Yahoo says IV 1.3047; both are reported with their difference
    assert row["source_iv"] == pytest.approx(1.3047, abs=1e-4)
    assert row["iv_diff"] == pytest.approx(row["iv"] - row["source_iv"], abs=1e-4)


def test_online_chain_tool_point_in_time_is_no_data(
    tmp_path: Path, stand: tuple[Stand, YFinanceProvider]
) -> None:
    _, provider = stand
    env = run_tool(
        name="get_option_chain",
        arguments={"symbol": "PYPL", "dte_min": 0, "dte_max": 3},
        ctx=_ctx(tmp_path, provider, date(2022, 11, 14)),
    )
    assert env.error is not None and env.error.code == "NO_DATA"
    assert "online chains are quotes of now" in env.error.message


def test_each_further_expiry_within_the_horizon_is_one_request(stand: tuple[Stand, YFinanceProvider]) -> None:
    state, provider = stand
    # 2022-11-15 + 10 days covers the expiries 2022-11-18 and 2022-11-25; the stand has no
    # recording of the second (it answers "no options"), so only the first one's puts remain
    chain = fetch_chain(provider=provider, symbol="PYPL", as_of=QUOTE_DAY, dte_max=10)
    assert {p.expiry for p in chain.puts()} == {date(2022, 11, 18)}
    assert [p for p in state.paths if "date=" in p] == [
        "/v7/finance/options/PYPL?date=1669334400&crumb=local-test-crumb"
    ]
