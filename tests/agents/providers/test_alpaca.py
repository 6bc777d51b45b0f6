"""Alpaca client and get_stock_price (seed 000) against a local ThreadingHTTPServer."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
import redis
from pydantic import SecretStr

from agents.providers import shared
from agents.providers.alpaca import (
    ALPACA_DATA_BASE_URL,
    ALPACA_SANDBOX_BASE_URL,
    RATE_LIMIT_BUCKET,
    AlpacaBucketEmptyError,
    AlpacaMarketDataClient,
    AlpacaNotConfiguredError,
    AlpacaServiceError,
    AlpacaTimeoutError,
    InvalidTickerSymbolError,
    StockInput,
    base_url_for,
    get_stock_price_json,
    retry_after_seconds,
)
from agents.providers.embedded import EmbeddedProvider
from agents.tools.catalog import run_tool
from agents.tools.registry import ToolContext
from pipeline.core.settings import Settings

REPO_ROOT = Path(__file__).resolve().parents[3]
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
        self.limit_headers: dict[str, dict[str, str]] = {}
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
                if symbols in outer.limit_headers:  # HTTP 429 with rate-limit headers
                    return self._send(429, {"message": "too many requests"}, outer.limit_headers[symbols])
                body = {**SEED_SNAPSHOT, **LIVE_SNAPSHOT}
                if symbols == "HALF":
                    body = {"HALF": {"latestTrade": {"p": 1.0}}}
                return self._send(200, {k: v for k, v in body.items() if k in symbols.split(",")})

            def _send(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                blob = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
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
        # The shared Alpaca bucket is out of the way here; the rate-limit tests below shrink it.
        "alpaca_rate_per_min": 1e9,
        "alpaca_rate_burst": 1000,
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


# --------------------------------------------------------------------------- rate limits

# Redis db 8: no other test uses it (tests use 0, 3, 14, 15); the bucket key is cleaned up.
RATE_REDIS_URL = "redis://127.0.0.1:6379/8"
BUCKET_KEY = f"finagent:ratelimit:{RATE_LIMIT_BUCKET}"
# One token per 100 s: after the first request the next token is ~100 s away.
TINY_BUCKET: dict[str, Any] = {"alpaca_rate_per_min": 0.6, "alpaca_rate_burst": 1}
HINT = re.compile(r"^Retry in (\d+\.\d)s \((.+)\)\.$")


def _hint_seconds(hint: str | None) -> float:
    match = HINT.match(hint or "")
    assert match, hint
    return float(match.group(1))


@pytest.fixture
def rate_redis() -> Iterator[redis.Redis]:
    """Redis db 8 with the Alpaca bucket key removed before and after."""
    client = redis.Redis.from_url(RATE_REDIS_URL, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        pytest.skip(f"Redis not reachable: {exc}")
    client.delete(BUCKET_KEY)
    yield client
    client.delete(BUCKET_KEY)
    client.close()


@pytest.fixture
def local_bucket() -> Iterator[None]:
    """No in-process Alpaca bucket left over from other tests, and none left behind."""
    with shared._local_lock:
        shared._local.pop(RATE_LIMIT_BUCKET, None)
    yield
    with shared._local_lock:
        shared._local.pop(RATE_LIMIT_BUCKET, None)


def _assert_no_secrets(*texts: str) -> None:
    for text in texts:
        assert KEY not in text and SECRET not in text


def test_empty_shared_bucket_returns_rate_limited_without_a_request(
    server: _Server, rate_redis: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    ctx = _ctx(_settings(server, broker_url=RATE_REDIS_URL, **TINY_BUCKET))
    first = run_tool(name="get_stock_price", arguments={"ticker": "AAPL"}, ctx=ctx)
    assert first.ok
    started = time.monotonic()
    second = run_tool(name="get_stock_price", arguments={"ticker": "MSFT"}, ctx=ctx)
    assert time.monotonic() - started < 2.0  # answered at once: no waiting for the token
    assert second.error and second.error.code == "RATE_LIMITED"
    assert "no request sent" in second.error.message
    assert second.retry_hint and "shared Alpaca limit 0.6/min" in second.retry_hint
    assert 90 < _hint_seconds(second.retry_hint) <= 100
    assert [r["symbols"] for r in server.requests] == ["AAPL"]  # the second call sent nothing
    assert 0 < rate_redis.ttl(BUCKET_KEY)  # the bucket lives in the shared Redis
    assert float(rate_redis.hget(BUCKET_KEY, "tokens") or 1) < 1
    row = ctx.rows[-1]
    assert row["error_code"] == "RATE_LIMITED" and row["retry_hint"] == second.retry_hint
    _assert_no_secrets(caplog.text, json.dumps(ctx.rows, default=str), json.dumps(second.to_public()))


def test_rate_limited_alpaca_call_makes_the_stage_retry_later(
    server: _Server, rate_redis: redis.Redis
) -> None:
    from pipeline.core.state import FinancialAgentState
    from pipeline.stages.common import TransientStageError, call_tool

    ctx = _ctx(_settings(server, broker_url=RATE_REDIS_URL, **TINY_BUCKET))
    state = FinancialAgentState(analysis_id="a1", stock_symbol="AAPL")
    call_tool(state=state, ctx=ctx, name="get_stock_price", arguments={"ticker": "AAPL"})
    with pytest.raises(TransientStageError) as info:  # the same path as a yfinance rate limit
        call_tool(state=state, ctx=ctx, name="get_stock_price", arguments={"ticker": "AAPL"})
    assert info.value.code == "RATE_LIMITED"
    assert [h.error_code for h in state.tool_history] == [None, "RATE_LIMITED"]
    assert len(server.requests) == 1


def test_every_timeout_retry_takes_a_token(server: _Server, rate_redis: redis.Redis) -> None:
    server.slow_seconds = 0.5
    settings = _settings(
        server, broker_url=RATE_REDIS_URL, tool_timeout=0.1, alpaca_rate_per_min=0.6, alpaca_rate_burst=2
    )
    env = run_tool(name="get_stock_price", arguments={"ticker": "SLOW"}, ctx=_ctx(settings))
    # Attempt 1 and 2 time out (two tokens); retry 2 finds the bucket empty and sends nothing.
    assert env.error and env.error.code == "RATE_LIMITED"
    assert 90 < _hint_seconds(env.retry_hint) <= 100
    assert [r["symbols"] for r in server.requests] == ["SLOW", "SLOW"]


def test_two_processes_share_one_bucket(server: _Server, rate_redis: redis.Redis, tmp_path: Path) -> None:
    settings = _settings(server, broker_url=RATE_REDIS_URL, **TINY_BUCKET)
    out = json.loads(asyncio.run(get_stock_price_json("AAPL", settings)))
    assert out["ticker"] == "AAPL"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env.update(
        PYTHONPATH=str(REPO_ROOT),
        FINAGENT_STATE_DIR=str(tmp_path / "state"),
        FINAGENT_BROKER_URL=RATE_REDIS_URL,
        FINAGENT_ALPACA_API_KEY=KEY,
        FINAGENT_ALPACA_SECRET_KEY=SECRET,
        FINAGENT_ALPACA_DATA_URL=server.url,
        FINAGENT_ALPACA_RATE_PER_MIN="0.6",
        FINAGENT_ALPACA_RATE_BURST="1",
    )
    code = (
        "import asyncio, logging\n"
        "logging.basicConfig(level=logging.DEBUG)\n"
        "from agents.providers.alpaca import get_stock_price_json\n"
        "from pipeline.core.settings import Settings\n"
        "print(asyncio.run(get_stock_price_json('MSFT', Settings())))\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert child.returncode == 0, child.stderr
    error = json.loads(child.stdout.strip().splitlines()[-1])["error"]
    match = re.fullmatch(r"Stock service rate limit reached; no request sent\. Retry in (\d+\.\d)s\.", error)
    assert match and 80 < float(match.group(1)) <= 100, error
    assert [r["symbols"] for r in server.requests] == ["AAPL"]  # the other process sent nothing
    _assert_no_secrets(child.stdout, child.stderr)


def test_embedded_mode_uses_an_in_process_bucket(server: _Server, local_bucket: None) -> None:
    settings = _settings(server, **TINY_BUCKET)
    assert settings.shared_redis_url is None
    ctx = _ctx(settings)
    assert run_tool(name="get_stock_price", arguments={"ticker": "AAPL"}, ctx=ctx).ok
    env = run_tool(name="get_stock_price", arguments={"ticker": "AAPL"}, ctx=ctx)
    assert env.error and env.error.code == "RATE_LIMITED"
    assert 90 < _hint_seconds(env.retry_hint) <= 100
    assert len(server.requests) == 1


def test_http_429_maps_to_rate_limited_with_the_header_wait(
    server: _Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.limit_headers = {
        "LIMRA": {"Retry-After": "7"},
        "LIMRS": {"X-RateLimit-Reset": str(int(time.time()) + 30), "X-RateLimit-Remaining": "0"},
    }
    ctx = _ctx(_settings(server))
    after = run_tool(name="get_stock_price", arguments={"ticker": "LIMRA"}, ctx=ctx)
    assert after.error and after.error.code == "RATE_LIMITED"
    assert after.error.message == "Stock service error: 429"
    assert after.retry_hint == "Retry in 7.0s (Alpaca HTTP 429)."
    reset = run_tool(name="get_stock_price", arguments={"ticker": "LIMRS"}, ctx=ctx)
    assert reset.error and reset.error.code == "RATE_LIMITED"
    assert 27 <= _hint_seconds(reset.retry_hint) <= 31
    bare = run_tool(name="get_stock_price", arguments={"ticker": "LIM"}, ctx=ctx)
    assert bare.error and bare.error.code == "RATE_LIMITED"
    assert bare.retry_hint == "Rate limit hit; retry after a short wait."  # no header: the default
    assert [r["symbols"] for r in server.requests] == ["LIMRA", "LIMRS", "LIM"]  # 429 is not retried
    assert json.loads(asyncio.run(get_stock_price_json("LIMRA", _settings(server)))) == {
        "error": "Stock service error: 429"  # the seed's JSON error table is unchanged
    }
    _assert_no_secrets(caplog.text, json.dumps(ctx.rows, default=str))


def test_retry_after_seconds_reads_the_headers() -> None:
    now = 1_700_000_000.0
    assert retry_after_seconds(httpx.Headers({"Retry-After": "12"}), now=now) == 12.0
    date_header = {"Retry-After": "Tue, 14 Nov 2023 22:14:40 GMT"}  # now (22:13:20 UTC) + 80 s
    assert retry_after_seconds(httpx.Headers(date_header), now=now) == 80.0
    assert retry_after_seconds(httpx.Headers({"X-RateLimit-Reset": str(int(now) + 45)}), now=now) == 45.0
    both = {"Retry-After": "3", "X-RateLimit-Reset": str(int(now) + 45)}
    assert retry_after_seconds(httpx.Headers(both), now=now) == 3.0  # Retry-After first
    bad_then_reset = {"Retry-After": "soon", "X-RateLimit-Reset": str(int(now) + 5)}
    assert retry_after_seconds(httpx.Headers(bad_then_reset), now=now) == 5.0
    assert retry_after_seconds(httpx.Headers({"X-RateLimit-Reset": str(int(now) - 5)}), now=now) == 0.0
    assert retry_after_seconds(httpx.Headers({"X-RateLimit-Reset": "x"}), now=now) is None
    assert retry_after_seconds(httpx.Headers({}), now=now) is None


def test_bare_client_limiter_is_called_before_every_attempt(server: _Server) -> None:
    waits = iter([0.0, 2.5])
    client = AlpacaMarketDataClient(
        api_key=KEY, secret_key=SECRET, base_url=server.url, rate_limiter=lambda: next(waits)
    )
    assert asyncio.run(client.get_stock_price("AAPL")).price == 178.52
    with pytest.raises(AlpacaBucketEmptyError) as info:
        asyncio.run(client.get_stock_price("AAPL"))
    assert info.value.retry_after == 2.5 and client.attempts == 0
    assert len(server.requests) == 1


def test_shared_redis_down_is_network_error_and_nothing_is_sent(
    server: _Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # nothing listens on port 1: the shared bucket cannot be read, so no request may go out
    ctx = _ctx(_settings(server, broker_url="redis://:pw-hidden@127.0.0.1:1/0"))
    env = run_tool(name="get_stock_price", arguments={"ticker": "AAPL"}, ctx=ctx)
    assert env.error and env.error.code == "NETWORK_ERROR"
    assert "rate limit did not answer" in env.error.message and "pw-hidden" not in env.error.message
    assert server.requests == []
    _assert_no_secrets(caplog.text, json.dumps(ctx.rows, default=str), json.dumps(env.to_public()))
