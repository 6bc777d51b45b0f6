"""Shared bar cache and rate limit for remote providers, on the live Redis."""

from __future__ import annotations

import time
import uuid
from datetime import date
from pathlib import Path

import pytest
import redis

from agents.data.market import shared
from agents.data.market.embedded import EmbeddedProvider
from agents.tools import bars
from agents.tools.catalog import run_tool
from agents.tools.registry import ToolContext
from core.settings import Settings, get_settings
from tests.support.redis_db import redis_url_for_tests


class CountingRemote(EmbeddedProvider):
    """Stands in for a remote vendor (no network here): real embedded bars, counted fetches."""

    remote = True

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.fetches = 0

    def bars(self, **kw):  # type: ignore[no-untyped-def,override]
        self.fetches += 1
        return super().bars(**kw)


@pytest.fixture
def redis_url(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    try:
        url = redis_url_for_tests()  # this test process's own Redis (tests.support.redis_db)
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except (RuntimeError, redis.RedisError) as exc:
        pytest.skip(f"Redis not reachable: {exc}")
    monkeypatch.setenv("FINAGENT_SERVICE_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("FINAGENT_SERVICE_BROKER_URL", url)
    get_settings.cache_clear()
    yield url
    get_settings.cache_clear()


def _clear_local_cache() -> None:
    with bars._cache_lock:
        bars._cache.clear()
        bars._basis_cache.clear()


def test_one_fetch_serves_other_workers_through_redis(redis_url: str) -> None:
    name = f"remote-{uuid.uuid4().hex[:6]}"
    first, second = CountingRemote(name), CountingRemote(name)  # two workers, same vendor
    # IBM: no split after 2012 in the split table, so fetch_bars reads no bars around an ex-date
    # to check the share basis (agents.data.fundamentals.share_basis) and one fetch is the window
    a = bars.fetch_bars(
        provider=first, symbol="IBM", start=date(2012, 1, 3), end=date(2012, 6, 29), settings=get_settings()
    )
    _clear_local_cache()
    b = bars.fetch_bars(
        provider=second, symbol="IBM", start=date(2012, 1, 3), end=date(2012, 6, 29), settings=get_settings()
    )
    assert (first.fetches, second.fetches) == (1, 0)
    assert b.index.equals(a.index)
    assert (b["close"] == a["close"]).all() and (b["adj_close"] == a["adj_close"]).all()
    assert (
        0
        < redis.Redis.from_url(redis_url).ttl(
            shared.cache_key(provider=name, symbol="IBM", start=date(2012, 1, 3), end=date(2012, 6, 29))
        )
        <= Settings().data.bars_cache_ttl
    )


def test_token_bucket_is_shared_and_refills(redis_url: str) -> None:
    name = f"bucket-{uuid.uuid4().hex[:6]}"
    assert shared.take_token(name=name, rate=1000.0, burst=2, redis_url=redis_url) == 0.0
    assert shared.take_token(name=name, rate=1000.0, burst=2, redis_url=redis_url) == 0.0
    slow = f"slow-{uuid.uuid4().hex[:6]}"
    started = time.monotonic()
    assert shared.take_token(name=slow, rate=0.01, burst=1, redis_url=redis_url) == 0.0
    wait = shared.take_token(name=slow, rate=0.01, burst=1, redis_url=redis_url)
    between = time.monotonic() - started
    # one token per 100 s: the next one is 100 s after the first take, less the time between
    # the two calls (however long a loaded machine took for them)
    assert 100 - between - 0.5 <= wait <= 100


def test_exhausted_limit_gives_rate_limited_envelope(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FINAGENT_DATA_PROVIDER_RATE_LIMIT", "0.01")
    monkeypatch.setenv("FINAGENT_DATA_PROVIDER_RATE_BURST", "1")
    get_settings.cache_clear()
    provider = CountingRemote(f"limited-{uuid.uuid4().hex[:6]}")
    ctx = ToolContext(settings=get_settings(), as_of=date(2011, 6, 30), provider=provider)
    ok = run_tool(name="get_history", arguments={"symbol": "IBM", "period": "1y"}, ctx=ctx)
    limited = run_tool(name="get_history", arguments={"symbol": "MSFT", "period": "1y"}, ctx=ctx)
    assert ok.ok
    assert limited.error is not None and limited.error.code.value == "RATE_LIMITED"
    assert limited.retry_hint
    assert provider.fetches == 1  # the refused call never reached the vendor


def test_local_bucket_without_redis() -> None:
    name = f"local-{uuid.uuid4().hex[:6]}"
    assert shared.take_token(name=name, rate=0.01, burst=1, redis_url=None) == 0.0
    assert shared.take_token(name=name, rate=0.01, burst=1, redis_url=None) > 90


# A closed port: nothing listens on 127.0.0.1:1, so Redis fails at once (connection refused).
DOWN = "redis://:s3cret-pw@127.0.0.1:1/0"


def test_redis_down_is_a_transient_network_error_and_a_cache_miss(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FINAGENT_SERVICE_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("FINAGENT_SERVICE_BROKER_URL", DOWN)
    monkeypatch.setenv("FINAGENT_DATA_PROVIDER_RATE_LIMIT", "5")
    get_settings.cache_clear()
    try:
        with pytest.raises(shared.SharedStateUnavailableError) as info:
            shared.take_token(name="x", rate=1.0, burst=1, redis_url=DOWN)
        assert "s3cret" not in str(info.value) and "127.0.0.1" not in str(info.value)
        assert shared.get_cached_bars(redis_url=DOWN, key="k") is None  # a miss, not a crash
        provider = CountingRemote(f"down-{uuid.uuid4().hex[:6]}")
        ctx = ToolContext(settings=get_settings(), as_of=date(2011, 6, 30), provider=provider)
        env = run_tool(name="get_history", arguments={"symbol": "IBM", "period": "1y"}, ctx=ctx)
        assert env.error is not None and env.error.code.value == "NETWORK_ERROR"
        assert provider.fetches == 0  # an unmetered request never goes out
        assert "s3cret" not in str(ctx.rows)
    finally:
        get_settings.cache_clear()


@pytest.mark.parametrize("backend", ["redis", "process"])
def test_take_n_tokens_at_once_and_read_what_is_left(backend: str, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("redis_url") if backend == "redis" else None
    name = f"many-{uuid.uuid4().hex[:6]}"
    slow = {"name": name, "rate": 0.001, "burst": 5, "redis_url": url}  # a token per 1000 s
    assert shared.available_tokens(**slow) == 5.0  # a bucket never used is full
    assert shared.take_token(**slow, n=3) == 0.0
    assert 2.0 <= shared.available_tokens(**slow) < 2.01
    assert shared.available_tokens(**slow) < 2.01  # reading takes nothing
    wait = shared.take_token(**slow, n=3)  # 2 left, 3 wanted: refused, nothing taken
    assert 990 < wait <= 1000
    assert 2.0 <= shared.available_tokens(**slow) < 2.01
    assert shared.take_token(**slow, n=2) == 0.0
    assert shared.available_tokens(**slow) < 0.01
