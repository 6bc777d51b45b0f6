"""Alpaca client and get_stock_price (seed 000) against a local ThreadingHTTPServer."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from pydantic import SecretStr

from agents.providers.alpaca import (
    ALPACA_DATA_BASE_URL,
    ALPACA_SANDBOX_BASE_URL,
    AlpacaMarketDataClient,
    AlpacaNotConfiguredError,
    AlpacaServiceError,
    AlpacaTimeoutError,
    InvalidTickerSymbolError,
    StockInput,
    base_url_for,
    get_stock_price_json,
)
from agents.providers.embedded import EmbeddedProvider
from agents.tools.registry import ToolContext, run_tool
from pipeline.settings import Settings

KEY = "PKTESTKEY0123456789"
SECRET = "sEcReT-abcdefghijklmnopqrstuvwxyz"

# The seed's /snapshots example (seed 000 "API Response Mapping").
SEED_SNAPSHOT = {
    "AAPL": {
        "latestTrade": {"t": 1708312800000000000, "p": 178.52, "s": 100, "x": "V"},
        "latestQuote": {"t": 1708312800000000000, "bp": 178.50, "ap": 178.52},
        "prevDay": {"c": 176.18},
    }
}
# Alpaca's live format: RFC 3339 text with nanoseconds.
LIVE_SNAPSHOT = {
    "MSFT": {
        "latestTrade": {"t": "2024-02-19T15:59:59.123456789Z", "p": 400.0, "s": 10, "x": "V"},
        "prevDay": {"c": 404.5, "o": 1, "h": 1, "l": 1, "v": 1},
    }
}


class _Server:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.slow_seconds = 0.0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                parsed = urlparse(self.path)
                symbols = parse_qs(parsed.query).get("symbols", [""])[0]
                outer.requests.append(
                    {"path": parsed.path, "symbols": symbols, "headers": dict(self.headers)}
                )
                if parsed.path != "/v2/stocks/snapshots":
                    return self._send(404, {"message": "not found"})
                if symbols == "SLOW":
                    time.sleep(outer.slow_seconds)
                    return self._send(200, {})
                status = {"ERR": 500, "BAD": 403, "LIM": 429, "UNPR": 422}.get(symbols)
                if status:
                    return self._send(status, {"message": f"error {status}"})
                body = {**SEED_SNAPSHOT, **LIVE_SNAPSHOT}
                if symbols == "HALF":
                    body = {"HALF": {"latestTrade": {"p": 1.0}}}
                return self._send(200, {k: v for k, v in body.items() if k in symbols.split(",")})

            def _send(self, status: int, body: dict[str, Any]) -> None:
                blob = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(blob)))
                    self.end_headers()
                    self.wfile.write(blob)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v2"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server()
    yield srv
    srv.close()


def _settings(server: _Server, **extra: Any) -> Settings:
    values: dict[str, Any] = {
        "alpaca_api_key": SecretStr(KEY),
        "alpaca_secret_key": SecretStr(SECRET),
        "alpaca_data_url": server.url,
        "tool_timeout": 5.0,
        "alpaca_retry_base": 0.01,
    }
    values.update(extra)
    return Settings(**values)


def _ctx(settings: Settings) -> ToolContext:
    return ToolContext(settings=settings, as_of=datetime.now(UTC).date(), provider=EmbeddedProvider())


def test_seed_snapshot_maps_to_stock_output_with_signed_strings(server: _Server) -> None:
    out = json.loads(asyncio.run(get_stock_price_json("aapl", _settings(server))))
    assert out == {
        "ticker": "AAPL",
        "price": 178.52,
        "currency": "USD",
        "timestamp": "2024-02-19T03:20:00+00:00",
        "change": "+2.34",
        "change_percent": "+1.33%",
    }
    req = server.requests[-1]
    assert req["path"] == "/v2/stocks/snapshots" and req["symbols"] == "AAPL"
    assert req["headers"]["APCA-API-KEY-ID"] == KEY and req["headers"]["APCA-API-SECRET-KEY"] == SECRET
    assert KEY not in json.dumps(out) and SECRET not in json.dumps(out)


def test_rfc3339_timestamp_and_negative_change(server: _Server) -> None:
    out = json.loads(asyncio.run(get_stock_price_json("MSFT", _settings(server))))
    assert out["timestamp"] == "2024-02-19T15:59:59.123456+00:00"
    assert out["change"] == "-4.50" and out["change_percent"] == "-1.11%"


@pytest.mark.parametrize(
    ("ticker", "error"),
    [
        ("ZZZZ", "Invalid ticker: ZZZZ"),
        ("ERR", "Stock service error: 500"),
        ("BAD", "Stock service error: 403"),
        ("UNPR", "Stock service error: 422"),
        ("TOOLONG", "Invalid ticker format. Use 1-5 uppercase letters."),
        ("BRK.B", "Invalid ticker format. Use 1-5 uppercase letters."),
        ("HALF", "Failed to retrieve stock data."),
    ],
)
def test_seed_error_table(server: _Server, ticker: str, error: str) -> None:
    out = json.loads(asyncio.run(get_stock_price_json(ticker, _settings(server))))
    assert out == {"error": error}


def test_http_errors_are_not_retried(server: _Server) -> None:
    asyncio.run(get_stock_price_json("ERR", _settings(server)))
    assert [r["symbols"] for r in server.requests] == ["ERR"]


def test_missing_keys_give_the_not_configured_message(server: _Server) -> None:
    settings = _settings(server, alpaca_api_key=None)
    out = json.loads(asyncio.run(get_stock_price_json("AAPL", settings)))
    assert out == {
        "error": "Stock tool not configured. Set FINAGENT_ALPACA_API_KEY and FINAGENT_ALPACA_SECRET_KEY."
    }
    assert server.requests == []
    with pytest.raises(AlpacaNotConfiguredError):
        AlpacaMarketDataClient(api_key="", secret_key="x")


def test_timeouts_are_retried_after_1_2_4_seconds_then_unavailable(server: _Server) -> None:
    server.slow_seconds = 0.5
    delays: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        delays.append(seconds)

    client = AlpacaMarketDataClient(
        api_key=KEY, secret_key=SECRET, base_url=server.url, timeout=0.1, sleep=fake_sleep
    )
    with pytest.raises(AlpacaTimeoutError, match=re.escape("Stock service unavailable. Please try again.")):
        asyncio.run(client.get_stock_price("SLOW"))
    assert delays == [1.0, 2.0, 4.0]  # seed 000: MAX_RETRIES = 3, INITIAL_RETRY_DELAY_SECONDS = 1.0
    assert client.attempts == 4 and len(server.requests) == 4


def test_a_slow_response_inside_the_timeout_is_served(server: _Server) -> None:
    server.slow_seconds = 0.05
    client = AlpacaMarketDataClient(api_key=KEY, secret_key=SECRET, base_url=server.url, timeout=2.0)
    with pytest.raises(InvalidTickerSymbolError):  # the server answers {} for SLOW
        asyncio.run(client.get_stock_price("SLOW"))
    assert client.attempts == 1


def test_status_errors_carry_the_code(server: _Server) -> None:
    client = AlpacaMarketDataClient(api_key=KEY, secret_key=SECRET, base_url=server.url)
    with pytest.raises(AlpacaServiceError) as info:
        asyncio.run(client.get_stock_price("LIM"))
    assert info.value.status_code == 429
    assert KEY not in repr(client) and SECRET not in repr(client)


def test_base_url_selection(monkeypatch: pytest.MonkeyPatch, clean_settings: None) -> None:
    assert base_url_for(Settings()) == ALPACA_DATA_BASE_URL
    assert base_url_for(Settings(alpaca_use_sandbox=True)) == ALPACA_SANDBOX_BASE_URL
    monkeypatch.setenv("FINAGENT_ALPACA_DATA_URL", "http://127.0.0.1:9/v2")
    assert base_url_for(Settings()) == "http://127.0.0.1:9/v2"
    assert Settings().tool_timeout == 10.0  # seed 000 DEFAULT_TIMEOUT_SECONDS


def test_stock_input_normalises() -> None:
    assert StockInput(ticker=" msft ").ticker == "MSFT"


def test_registered_tool_envelope_and_no_key_in_logs_or_rows(
    server: _Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    ctx = _ctx(_settings(server))
    env = run_tool(name="get_stock_price", arguments={"ticker": "AAPL"}, ctx=ctx)
    assert env.ok and env.data
    assert env.data["change"] == "+2.34" and env.data["change_percent"] == "+1.33%"
    assert env.data["source"].startswith("alpaca:http://127.0.0.1:")
    for name, code in [
        ("ZZZZ", "INVALID_SYMBOL"),
        ("ERR", "NETWORK_ERROR"),
        ("LIM", "RATE_LIMITED"),
        ("BAD", "NOT_CONFIGURED"),
    ]:
        bad = run_tool(name="get_stock_price", arguments={"ticker": name}, ctx=ctx)
        assert bad.error and bad.error.code == code, (name, bad)
    server.slow_seconds = 1.0
    slow_ctx = _ctx(_settings(server, tool_timeout=0.2))
    slow = run_tool(name="get_stock_price", arguments={"ticker": "SLOW"}, ctx=slow_ctx)
    assert slow.error and slow.error.code == "NETWORK_ERROR"
    assert slow.error.message == "Stock service unavailable. Please try again."
    assert len(server.requests) == 1 + 4 + 4  # AAPL, the four errors, SLOW: 1 + 3 retries
    rows = json.dumps(ctx.rows + slow_ctx.rows, default=str)
    for secret in (KEY, SECRET):
        assert secret not in caplog.text and secret not in rows
        assert secret not in json.dumps(env.to_public())


def test_registered_tool_errors_without_network(server: _Server) -> None:
    env = run_tool(
        name="get_stock_price",
        arguments={"ticker": "AAPL"},
        ctx=_ctx(_settings(server, alpaca_secret_key=None)),
    )
    assert (
        env.error and env.error.code == "NOT_CONFIGURED" and "FINAGENT_ALPACA_SECRET_KEY" in env.error.message
    )
    env = run_tool(name="get_stock_price", arguments={"ticker": "abcdef"}, ctx=_ctx(_settings(server)))
    assert env.error and env.error.code == "INVALID_INPUT" and "1-5 uppercase letters" in env.error.message
    past = ToolContext(
        settings=_settings(server), as_of=datetime(2013, 3, 1).date(), provider=EmbeddedProvider()
    )
    env = run_tool(name="get_stock_price", arguments={"ticker": "AAPL"}, ctx=past)
    assert env.error and env.error.code == "DATE_OUT_OF_RANGE"
    assert server.requests == []


def test_tool_works_inside_a_running_event_loop(server: _Server) -> None:
    async def inside() -> Any:
        return run_tool(name="get_stock_price", arguments={"ticker": "AAPL"}, ctx=_ctx(_settings(server)))

    env = asyncio.run(inside())
    assert env.ok and env.data and env.data["price"] == 178.52
