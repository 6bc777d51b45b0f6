"""``get_stock_price`` (:mod:`agents.tools.alpaca_price`): the Alpaca client's answers
and errors as envelopes, against the local stand-in of ``tests/agents/providers/alpaca_fake.py``."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from datetime import UTC, datetime
from typing import Any

import pytest
import redis

from agents.data.market.alpaca import get_stock_price_json
from agents.data.market.embedded import EmbeddedProvider
from agents.tools.catalog import run_tool
from agents.tools.registry import ToolContext
from core.settings import Settings
from tests.agents.providers.alpaca_fake import (
    BUCKET_KEY,
    KEY,
    SECRET,
    TINY_BUCKET,
    FakeAlpaca,
    alpaca_settings,
    assert_no_secrets,
    hint_seconds,
    rate_redis_url,
)


def _ctx(settings: Settings) -> ToolContext:
    return ToolContext(settings=settings, as_of=datetime.now(UTC).date(), provider=EmbeddedProvider())


def test_registered_tool_envelope_and_no_key_in_logs_or_rows(
    alpaca_server: FakeAlpaca, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    ctx = _ctx(alpaca_settings(alpaca_server))
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
    alpaca_server.slow_seconds = 1.0
    slow_ctx = _ctx(alpaca_settings(alpaca_server, data_tool_timeout=0.2))
    slow = run_tool(name="get_stock_price", arguments={"ticker": "SLOW"}, ctx=slow_ctx)
    assert slow.error and slow.error.code == "NETWORK_ERROR"
    assert slow.error.message == "Stock service unavailable. Please try again."
    assert len(alpaca_server.requests) == 1 + 4 + 4  # AAPL, the four errors, SLOW: 1 + 3 retries
    rows = json.dumps(ctx.rows + slow_ctx.rows, default=str)
    for secret in (KEY, SECRET):
        assert secret not in caplog.text and secret not in rows
        assert secret not in json.dumps(env.to_public())


def test_registered_tool_errors_without_network(alpaca_server: FakeAlpaca) -> None:
    env = run_tool(
        name="get_stock_price",
        arguments={"ticker": "AAPL"},
        ctx=_ctx(alpaca_settings(alpaca_server, broker_alpaca_secret_key=None)),
    )
    assert (
        env.error
        and env.error.code == "NOT_CONFIGURED"
        and "FINAGENT_BROKER_ALPACA_SECRET_KEY" in env.error.message
    )
    env = run_tool(
        name="get_stock_price", arguments={"ticker": "abcdef"}, ctx=_ctx(alpaca_settings(alpaca_server))
    )
    assert env.error and env.error.code == "INVALID_INPUT" and "1-5 uppercase letters" in env.error.message
    past = ToolContext(
        settings=alpaca_settings(alpaca_server),
        as_of=datetime(2013, 3, 1).date(),
        provider=EmbeddedProvider(),
    )
    env = run_tool(name="get_stock_price", arguments={"ticker": "AAPL"}, ctx=past)
    assert env.error and env.error.code == "DATE_OUT_OF_RANGE"
    assert alpaca_server.requests == []


def test_tool_works_inside_a_running_event_loop(alpaca_server: FakeAlpaca) -> None:
    async def inside() -> Any:
        return run_tool(
            name="get_stock_price", arguments={"ticker": "AAPL"}, ctx=_ctx(alpaca_settings(alpaca_server))
        )

    env = asyncio.run(inside())
    assert env.ok and env.data and env.data["price"] == 178.52


def test_empty_shared_bucket_returns_rate_limited_without_a_request(
    alpaca_server: FakeAlpaca, alpaca_redis: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    ctx = _ctx(alpaca_settings(alpaca_server, service_broker_url=rate_redis_url(), **TINY_BUCKET))
    first = run_tool(name="get_stock_price", arguments={"ticker": "AAPL"}, ctx=ctx)
    assert first.ok
    started = time.monotonic()
    second = run_tool(name="get_stock_price", arguments={"ticker": "MSFT"}, ctx=ctx)
    # answered without waiting for the token (0.6 a minute: the next one is ~100 s away); the
    # bound only tells "no wait" from "a 100 s wait", whatever the machine's load
    assert time.monotonic() - started < 30.0
    assert second.error and second.error.code == "RATE_LIMITED"
    assert "no request sent" in second.error.message
    assert second.retry_hint and "shared Alpaca limit 0.6/min" in second.retry_hint
    assert 90 < hint_seconds(second.retry_hint) <= 100
    assert [r["symbols"] for r in alpaca_server.requests] == ["AAPL"]  # the second call sent nothing
    assert 0 < alpaca_redis.ttl(BUCKET_KEY)  # the bucket lives in the shared Redis
    assert float(alpaca_redis.hget(BUCKET_KEY, "tokens") or 1) < 1
    row = ctx.rows[-1]
    assert row["error_code"] == "RATE_LIMITED" and row["retry_hint"] == second.retry_hint
    assert_no_secrets(caplog.text, json.dumps(ctx.rows, default=str), json.dumps(second.to_public()))


def test_rate_limited_alpaca_call_makes_the_stage_retry_later(
    alpaca_server: FakeAlpaca, alpaca_redis: redis.Redis
) -> None:
    from core.state import FinancialAgentState
    from pipeline.stages.common import call_tool
    from pipeline.steps.backoff import TransientStageError

    ctx = _ctx(alpaca_settings(alpaca_server, service_broker_url=rate_redis_url(), **TINY_BUCKET))
    state = FinancialAgentState(analysis_id="a1", stock_symbol="AAPL")
    call_tool(state=state, ctx=ctx, name="get_stock_price", arguments={"ticker": "AAPL"})
    with pytest.raises(TransientStageError) as info:  # the same path as a yfinance rate limit
        call_tool(state=state, ctx=ctx, name="get_stock_price", arguments={"ticker": "AAPL"})
    assert info.value.code == "RATE_LIMITED"
    assert [h.error_code for h in state.tool_history] == [None, "RATE_LIMITED"]
    assert len(alpaca_server.requests) == 1


def test_every_timeout_retry_takes_a_token(alpaca_server: FakeAlpaca, alpaca_redis: redis.Redis) -> None:
    # a wide margin between the timeout and the server's delay: on a loaded machine a 0.1 s
    # timeout could expire before the stand-in had even read the request (one request seen)
    alpaca_server.slow_seconds = 3.0
    settings = alpaca_settings(
        alpaca_server,
        service_broker_url=rate_redis_url(),
        data_tool_timeout=1.0,
        broker_alpaca_rate_per_min=0.6,
        broker_alpaca_rate_burst=2,
    )
    env = run_tool(name="get_stock_price", arguments={"ticker": "SLOW"}, ctx=_ctx(settings))
    # Attempt 1 and 2 time out (two tokens); retry 2 finds the bucket empty and sends nothing.
    assert env.error and env.error.code == "RATE_LIMITED"
    assert 90 < hint_seconds(env.retry_hint) <= 100
    assert [r["symbols"] for r in alpaca_server.requests] == ["SLOW", "SLOW"]


def test_embedded_mode_uses_an_in_process_bucket(
    alpaca_server: FakeAlpaca, alpaca_local_bucket: None
) -> None:
    settings = alpaca_settings(alpaca_server, **TINY_BUCKET)
    assert settings.service.shared_redis_url is None
    ctx = _ctx(settings)
    assert run_tool(name="get_stock_price", arguments={"ticker": "AAPL"}, ctx=ctx).ok
    env = run_tool(name="get_stock_price", arguments={"ticker": "AAPL"}, ctx=ctx)
    assert env.error and env.error.code == "RATE_LIMITED"
    assert 90 < hint_seconds(env.retry_hint) <= 100
    assert len(alpaca_server.requests) == 1


def test_http_429_maps_to_rate_limited_with_the_header_wait(
    alpaca_server: FakeAlpaca, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    alpaca_server.limit_headers = {
        "LIMRA": {"Retry-After": "7"},
        "LIMRS": {"X-RateLimit-Reset": str(int(time.time()) + 30), "X-RateLimit-Remaining": "0"},
    }
    ctx = _ctx(alpaca_settings(alpaca_server))
    after = run_tool(name="get_stock_price", arguments={"ticker": "LIMRA"}, ctx=ctx)
    assert after.error and after.error.code == "RATE_LIMITED"
    assert after.error.message == "Stock service error: 429"
    assert after.retry_hint == "Retry in 7.0s (Alpaca HTTP 429)."
    reset = run_tool(name="get_stock_price", arguments={"ticker": "LIMRS"}, ctx=ctx)
    assert reset.error and reset.error.code == "RATE_LIMITED"
    assert 27 <= hint_seconds(reset.retry_hint) <= 31
    bare = run_tool(name="get_stock_price", arguments={"ticker": "LIM"}, ctx=ctx)
    assert bare.error and bare.error.code == "RATE_LIMITED"
    assert bare.retry_hint == "Rate limit hit; retry after a short wait."  # no header: the default
    assert [r["symbols"] for r in alpaca_server.requests] == ["LIMRA", "LIMRS", "LIM"]  # 429 is not retried
    assert json.loads(asyncio.run(get_stock_price_json("LIMRA", alpaca_settings(alpaca_server)))) == {
        "error": "Stock service error: 429"  # the JSON error texts of "Alpaca errors" are unchanged
    }
    assert_no_secrets(caplog.text, json.dumps(ctx.rows, default=str))


def test_shared_redis_down_is_network_error_and_nothing_is_sent(
    alpaca_server: FakeAlpaca, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # nothing listens on port 1: the shared bucket cannot be read, so no request may go out
    ctx = _ctx(alpaca_settings(alpaca_server, service_broker_url="redis://:pw-hidden@127.0.0.1:1/0"))
    env = run_tool(name="get_stock_price", arguments={"ticker": "AAPL"}, ctx=ctx)
    assert env.error and env.error.code == "NETWORK_ERROR"
    assert "rate limit did not answer" in env.error.message and "pw-hidden" not in env.error.message
    assert alpaca_server.requests == []
    assert_no_secrets(caplog.text, json.dumps(ctx.rows, default=str), json.dumps(env.to_public()))


def test_connection_refused_is_a_retryable_network_error(alpaca_server: FakeAlpaca) -> None:
    import socket

    from agents.tools.envelope import TRANSIENT_CODES, ErrorCode

    # given a port nobody listens on (bound, then closed: the kernel refuses connections to it)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings = alpaca_settings(alpaca_server, broker_alpaca_data_url=f"http://127.0.0.1:{port}/v2")
    env = run_tool(name="get_stock_price", arguments={"ticker": "AAPL"}, ctx=_ctx(settings))
    assert env.error is not None
    assert env.error.code == ErrorCode.NETWORK_ERROR and env.error.code in TRANSIENT_CODES
    assert env.error.message == "Stock service unavailable. Please try again."
    # the JSON function gives its unavailable message, not "Failed to retrieve"
    out = json.loads(asyncio.run(get_stock_price_json("AAPL", settings)))
    assert out == {"error": "Stock service unavailable. Please try again."}
