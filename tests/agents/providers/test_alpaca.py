"""Alpaca client against a local ThreadingHTTPServer: mapping, the error table ("Alpaca errors"),
timeouts and retries, the shared rate limit. The registered tool is tested in
``tests/agents/tools/test_alpaca_price.py``."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import redis

from agents.data.market.alpaca import (
    ALPACA_DATA_BASE_URL,
    ALPACA_SANDBOX_BASE_URL,
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
from core.settings import Settings
from tests.agents.providers.alpaca_fake import (
    KEY,
    SECRET,
    TINY_BUCKET,
    FakeAlpaca,
    alpaca_settings,
    assert_no_secrets,
    rate_redis_url,
)

REPO_ROOT = Path(__file__).resolve().parents[3]


def test_seed_snapshot_maps_to_stock_output_with_signed_strings(alpaca_server: FakeAlpaca) -> None:
    out = json.loads(asyncio.run(get_stock_price_json("aapl", alpaca_settings(alpaca_server))))
    assert out == {
        "ticker": "AAPL",
        "price": 178.52,
        "currency": "USD",
        "timestamp": "2024-02-19T03:20:00+00:00",
        "change": "+2.34",
        "change_percent": "+1.33%",
    }
    req = alpaca_server.requests[-1]
    assert req["path"] == "/v2/stocks/snapshots" and req["symbols"] == "AAPL"
    assert req["headers"]["APCA-API-KEY-ID"] == KEY and req["headers"]["APCA-API-SECRET-KEY"] == SECRET
    assert KEY not in json.dumps(out) and SECRET not in json.dumps(out)


def test_rfc3339_timestamp_and_negative_change(alpaca_server: FakeAlpaca) -> None:
    out = json.loads(asyncio.run(get_stock_price_json("MSFT", alpaca_settings(alpaca_server))))
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
def test_seed_error_table(alpaca_server: FakeAlpaca, ticker: str, error: str) -> None:
    out = json.loads(asyncio.run(get_stock_price_json(ticker, alpaca_settings(alpaca_server))))
    assert out == {"error": error}


def test_http_errors_are_not_retried(alpaca_server: FakeAlpaca) -> None:
    asyncio.run(get_stock_price_json("ERR", alpaca_settings(alpaca_server)))
    assert [r["symbols"] for r in alpaca_server.requests] == ["ERR"]


def test_missing_keys_give_the_not_configured_message(alpaca_server: FakeAlpaca) -> None:
    settings = alpaca_settings(alpaca_server, broker_alpaca_api_key=None)
    out = json.loads(asyncio.run(get_stock_price_json("AAPL", settings)))
    assert out == {
        "error": "Stock tool not configured. Set FINAGENT_BROKER_ALPACA_API_KEY and"
        " FINAGENT_BROKER_ALPACA_SECRET_KEY."
    }
    assert alpaca_server.requests == []
    with pytest.raises(AlpacaNotConfiguredError):
        AlpacaMarketDataClient(api_key="", secret_key="x")


def test_timeouts_are_retried_after_1_2_4_seconds_then_unavailable(alpaca_server: FakeAlpaca) -> None:
    alpaca_server.slow_seconds = 0.5
    delays: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        delays.append(seconds)

    client = AlpacaMarketDataClient(
        api_key=KEY, secret_key=SECRET, base_url=alpaca_server.url, timeout=0.1, sleep=fake_sleep
    )
    with pytest.raises(AlpacaTimeoutError, match=re.escape("Stock service unavailable. Please try again.")):
        asyncio.run(client.get_stock_price("SLOW"))
    assert delays == [1.0, 2.0, 4.0]  # MAX_RETRIES = 3, INITIAL_RETRY_DELAY_SECONDS = 1.0
    assert client.attempts == 4 and len(alpaca_server.requests) == 4


def test_a_slow_response_inside_the_timeout_is_served(alpaca_server: FakeAlpaca) -> None:
    alpaca_server.slow_seconds = 0.05
    client = AlpacaMarketDataClient(api_key=KEY, secret_key=SECRET, base_url=alpaca_server.url, timeout=2.0)
    with pytest.raises(InvalidTickerSymbolError):  # the alpaca_server answers {} for SLOW
        asyncio.run(client.get_stock_price("SLOW"))
    assert client.attempts == 1


def test_status_errors_carry_the_code(alpaca_server: FakeAlpaca) -> None:
    client = AlpacaMarketDataClient(api_key=KEY, secret_key=SECRET, base_url=alpaca_server.url)
    with pytest.raises(AlpacaServiceError) as info:
        asyncio.run(client.get_stock_price("LIM"))
    assert info.value.status_code == 429
    assert KEY not in repr(client) and SECRET not in repr(client)


def test_base_url_selection(monkeypatch: pytest.MonkeyPatch, clean_settings: None) -> None:
    assert base_url_for(Settings()) == ALPACA_DATA_BASE_URL
    assert base_url_for(Settings(broker_alpaca_use_sandbox=True)) == ALPACA_SANDBOX_BASE_URL
    monkeypatch.setenv("FINAGENT_BROKER_ALPACA_DATA_URL", "http://127.0.0.1:9/v2")
    assert base_url_for(Settings()) == "http://127.0.0.1:9/v2"
    assert Settings().data.tool_timeout == 10.0  # DEFAULT_TIMEOUT_SECONDS (docs/design.md, "Alpaca retries")


def test_stock_input_normalises() -> None:
    assert StockInput(ticker=" msft ").ticker == "MSFT"


def test_two_processes_share_one_bucket(
    alpaca_server: FakeAlpaca, alpaca_redis: redis.Redis, tmp_path: Path
) -> None:
    settings = alpaca_settings(alpaca_server, service_broker_url=rate_redis_url(), **TINY_BUCKET)
    out = json.loads(asyncio.run(get_stock_price_json("AAPL", settings)))
    assert out["ticker"] == "AAPL"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env.update(
        PYTHONPATH=str(REPO_ROOT),
        FINAGENT_SERVICE_STATE_DIR=str(tmp_path / "state"),
        FINAGENT_SERVICE_BROKER_URL=rate_redis_url(),
        FINAGENT_BROKER_ALPACA_API_KEY=KEY,
        FINAGENT_BROKER_ALPACA_SECRET_KEY=SECRET,
        FINAGENT_BROKER_ALPACA_DATA_URL=alpaca_server.url,
        FINAGENT_BROKER_ALPACA_RATE_PER_MIN="0.6",
        FINAGENT_BROKER_ALPACA_RATE_BURST="1",
    )
    code = (
        "import asyncio, logging\n"
        "logging.basicConfig(level=logging.DEBUG)\n"
        "from agents.data.market.alpaca import get_stock_price_json\n"
        "from core.settings import Settings\n"
        "print(asyncio.run(get_stock_price_json('MSFT', Settings())))\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert child.returncode == 0, child.stderr
    error = json.loads(child.stdout.strip().splitlines()[-1])["error"]
    match = re.fullmatch(r"Stock service rate limit reached; no request sent\. Retry in (\d+\.\d)s\.", error)
    assert match and 80 < float(match.group(1)) <= 100, error
    assert [r["symbols"] for r in alpaca_server.requests] == ["AAPL"]  # the other process sent nothing
    assert_no_secrets(child.stdout, child.stderr)


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


def test_bare_client_limiter_is_called_before_every_attempt(alpaca_server: FakeAlpaca) -> None:
    waits = iter([0.0, 2.5])
    client = AlpacaMarketDataClient(
        api_key=KEY, secret_key=SECRET, base_url=alpaca_server.url, rate_limiter=lambda: next(waits)
    )
    assert asyncio.run(client.get_stock_price("AAPL")).price == 178.52
    with pytest.raises(AlpacaBucketEmptyError) as info:
        asyncio.run(client.get_stock_price("AAPL"))
    assert info.value.retry_after == 2.5 and client.attempts == 0
    assert len(alpaca_server.requests) == 1
